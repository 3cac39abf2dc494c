//! Running one contender's command: in a process group of its own, so that a timeout or an
//! interrupt kills the whole job (a launcher such as `mpirun` or a wrapper script and every
//! process under it), with both output pipes drained and decoded even when not UTF-8.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The last `lines` lines of `s`.
pub fn last_lines(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Kills every process of the child's group (the child leads it), ignoring a group that is
/// already gone.
fn kill_group(child: &Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: killpg only sends a signal; `pid` is our child's, which leads its own group
        // (process_group(0)), so no unrelated process is signalled.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
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
    // Drain both pipes on threads so a chatty child cannot block on a full pipe. Bytes, not
    // text: one stray byte must not lose a report.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => {
                kill_group(&child);
                let _ = child.wait();
                return Err(format!("`{shown}`: {e}"));
            }
        }
        if stop.load(Ordering::Relaxed) || start.elapsed() > timeout {
            kill_group(&child);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // Children the command left running would hold the pipes open (and the machine busy).
    kill_group(&child);
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
