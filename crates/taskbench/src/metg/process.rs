//! Running one contender's command: in a process group of its own, so that a timeout or an
//! interrupt kills the whole job (a launcher such as `mpirun` or a wrapper script and every
//! process under it), with both output pipes drained and decoded even when not UTF-8.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The last `lines` lines of `s`.
pub fn last_lines(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// The process groups of the contenders running now, for [`end_all`].
static RUNNING: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<libc::pid_t>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends `signal` to every process of group `pid`.
fn signal_group(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; `pid` is our child's, which leads its own group
    // (process_group(0)), so no unrelated process is signalled.
    unsafe {
        libc::killpg(pid, signal);
    }
}

/// Ends every process of the child's group (the child leads it), ignoring a group that is
/// already gone. SIGTERM first: a launcher such as `mpirun` then ends the ranks it started,
/// which may sit outside its group and would otherwise outlive it by seconds; SIGKILL for
/// whatever is left after a grace period.
fn end_group(child: &mut Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    if matches!(child.try_wait(), Ok(None)) {
        signal_group(pid, libc::SIGTERM);
        let start = Instant::now();
        while matches!(child.try_wait(), Ok(None)) && start.elapsed() < GRACE {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    signal_group(pid, libc::SIGKILL);
    let _ = child.wait();
}

/// How long a contender's launcher gets to end its processes after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);

/// Kills every contender's process group at once: the driver is quitting.
pub fn end_all() {
    for &pid in running().iter() {
        signal_group(pid, libc::SIGTERM);
    }
    std::thread::sleep(Duration::from_millis(200));
    for &pid in running().iter() {
        signal_group(pid, libc::SIGKILL);
    }
}

/// Runs `cmd` to completion (or timeout, or until `stop` is set) and returns its stdout, or
/// a description of the failure with the command and the tail of its output. Whatever the
/// outcome, no process of its group is left behind.
pub fn run_once(cmd: &[String], timeout: Duration, stop: &AtomicBool) -> Result<String, String> {
    let shown = shell_words::join(cmd);
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("`{shown}` could not start: {e}"))?;
    let group = libc::pid_t::try_from(child.id()).unwrap_or(0);
    running().push(group);
    // Drain both pipes on threads so a chatty child cannot block on a full pipe. Bytes, not
    // text: one stray byte must not lose a report.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::Builder::new()
            .name("metg-drain".into())
            .spawn(move || {
                let mut v = Vec::new();
                let _ = r.read_to_end(&mut v);
                v
            })
    };
    let drains = drain(Box::new(child.stdout.take().expect("piped")))
        .and_then(|out| Ok((out, drain(Box::new(child.stderr.take().expect("piped")))?)));
    let (out, err) = match drains {
        Ok(both) => both,
        Err(e) => {
            // Under a tight thread or address-space limit: end the child, say why.
            end_group(&mut child);
            running().retain(|&p| p != group);
            return Err(format!(
                "`{shown}`: could not start a thread to read its output: {e}"
            ));
        }
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => {
                end_group(&mut child);
                running().retain(|&p| p != group);
                return Err(format!("`{shown}`: {e}"));
            }
        }
        if stop.load(Ordering::Relaxed) || start.elapsed() > timeout {
            end_group(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // Children the command left running would hold the pipes open (and the machine busy).
    signal_group(group, libc::SIGKILL);
    running().retain(|&p| p != group);
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        let bytes = h.join().unwrap_or_default();
        match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    };
    let (stdout, stderr) = (text(out), text(err));
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!(
            "`{shown}` failed ({s}):\n{}",
            last_lines(&(stdout + &stderr), 15)
        )),
        None if stop.load(Ordering::Relaxed) => Err(format!("`{shown}` interrupted")),
        None => Err(format!(
            "`{shown}` timed out after {} s:\n{}",
            timeout.as_secs_f64(),
            last_lines(&(stdout + &stderr), 15)
        )),
    }
}
