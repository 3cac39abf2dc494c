//! The METG sweep: each contender (one of our systems, or any external Task Bench program) is
//! run as a command with the graph's flags and `-iter N`, sizes descending by powers of two,
//! repetitions and contenders interleaved so machine drift hits all alike. Every report is
//! parsed and checked against the graph it was asked for.

use super::analyze::{parse_runs, Run};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use taskbench_core::app::App;
use taskbench_core::report::Totals;

/// Something to measure: a name and the command that runs it (Task Bench flags are appended).
#[derive(Clone, Debug)]
pub struct Contender {
    /// Shown in tables and plots.
    pub name: String,
    /// Program and its own arguments.
    pub command: Vec<String>,
}

/// Everything measured for one contender.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Parsed runs, in the order measured.
    pub runs: Vec<Run>,
    /// Every run's full output, in the reference format (for `metg analyze`).
    pub log: String,
    /// Why this contender stopped early with an error, with its command and output.
    pub error: Option<String>,
    /// Whether it stopped because it fell clearly below the threshold.
    pub stopped_early_below: bool,
}

/// Sweep settings.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Task Bench flags of the graphs, without `-iter`.
    pub graph_flags: Vec<String>,
    /// Sizes to run, largest first.
    pub sizes: Vec<i64>,
    /// Repetitions of each size.
    pub reps: usize,
    /// Efficiency threshold, for stopping contenders early.
    pub threshold: f64,
    /// A fixed peak, or `None` to use the best rate seen so far.
    pub peak: Option<f64>,
    /// Whether rates are bytes (memory_bound) rather than FLOPs.
    pub bytes: bool,
    /// Longest one run may take.
    pub timeout: Duration,
}

/// The graph flags with `-iter n` added to every graph (after its other flags, so it wins).
pub fn with_iterations(flags: &[String], n: i64) -> Vec<String> {
    let mut out = Vec::new();
    for part in flags.split(|f| f == "-and") {
        if !out.is_empty() {
            out.push("-and".to_string());
        }
        out.extend(part.iter().cloned());
        out.extend(["-iter".to_string(), n.to_string()]);
    }
    out
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Runs one command to completion (or timeout, or interrupt) and returns its stdout, or a
/// description of the failure with the command and its output.
fn run_once(cmd: &[String], timeout: Duration, stop: &AtomicBool) -> Result<String, String> {
    let shown = shell_words::join(cmd);
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{shown}` could not start: {e}"))?;
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("`{shown}`: {e}"))? {
            break Some(status);
        }
        if stop.load(Ordering::Relaxed) || start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let (stdout, stderr) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!(
            "`{shown}` failed ({s}):\n{}",
            tail(&(stdout + &stderr), 15)
        )),
        None if stop.load(Ordering::Relaxed) => Err(format!("`{shown}` interrupted")),
        None => Err(format!(
            "`{shown}` timed out after {:.0} s:\n{}",
            timeout.as_secs_f64(),
            tail(&(stdout + &stderr), 15)
        )),
    }
}

/// Parses one report and checks it is the run that was asked for.
fn check_report(
    stdout: &str,
    expected: &App,
    totals: &Totals,
    iterations: i64,
    cmd: &[String],
) -> Result<Run, String> {
    let shown = shell_words::join(cmd);
    let bad = |why: String| format!("`{shown}` {why}:\n{}", tail(stdout, 15));
    let runs = parse_runs(stdout, expected.graphs.len())
        .map_err(|e| bad(format!("printed no usable Task Bench report ({e})")))?;
    let [run] = runs.as_slice() else {
        return Err(bad(format!("printed {} reports, expected one", runs.len())));
    };
    let g = &expected.graphs[0];
    let wanted = (
        iterations,
        g.timesteps,
        g.max_width,
        totals.tasks,
        totals.flops,
        totals.bytes,
    );
    let got = (
        run.iterations,
        run.steps,
        run.width,
        run.tasks,
        run.flops,
        run.bytes,
    );
    if wanted != got {
        return Err(bad(format!(
            "reported another graph: (iterations, steps, width, tasks, FLOPs, bytes) = {got:?}, expected {wanted:?}"
        )));
    }
    Ok(*run)
}

/// Runs the sweep. `apps[i]` is the graph configuration at `cfg.sizes[i]`, used to check each
/// report. Stops on `stop` (Ctrl-C), keeping what was measured.
pub fn sweep(
    contenders: &[Contender],
    apps: &[App],
    cfg: &SweepConfig,
    stop: Arc<AtomicBool>,
) -> Vec<Measured> {
    // What each size's report must say; computed once, not per run.
    let totals: Vec<Totals> = apps.iter().map(App::totals).collect();
    let mut measured = vec![Measured::default(); contenders.len()];
    let mut active = vec![true; contenders.len()];
    let total = (contenders.len() * cfg.sizes.len() * cfg.reps) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs, about {eta} left  {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut best_rate = cfg.peak.unwrap_or(0.0);
    let mut below = vec![0usize; contenders.len()];
    'sizes: for (si, &n) in cfg.sizes.iter().enumerate() {
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        for rep in 0..cfg.reps {
            // Rotate the order each repetition so no contender always runs first.
            for k in 0..contenders.len() {
                let c = (k + rep + si) % contenders.len();
                if !active[c] {
                    continue;
                }
                if stop.load(Ordering::Relaxed) {
                    break 'sizes;
                }
                let who = &contenders[c];
                bar.set_message(format!(
                    "{} -iter {n} rep {}/{}",
                    who.name,
                    rep + 1,
                    cfg.reps
                ));
                let mut cmd = who.command.clone();
                cmd.extend(with_iterations(&cfg.graph_flags, n));
                let result = run_once(&cmd, cfg.timeout, &stop).and_then(|out| {
                    let run = check_report(&out, &apps[si], &totals[si], n, &cmd)?;
                    Ok((out, run))
                });
                bar.inc(1);
                match result {
                    Ok((out, run)) => {
                        let m = &mut measured[c];
                        m.log.push_str(&out);
                        m.runs.push(run);
                        let rate = if cfg.bytes {
                            run.bytes as f64
                        } else {
                            run.flops as f64
                        } / run.elapsed;
                        rates[c].push(rate);
                    }
                    Err(e) if stop.load(Ordering::Relaxed) => {
                        let _ = e;
                        break 'sizes;
                    }
                    Err(e) => {
                        bar.suspend(|| eprintln!("warning: {}: stopped: {e}", who.name));
                        measured[c].error = Some(e);
                        active[c] = false;
                        bar.set_length(
                            bar.length().unwrap_or(0).saturating_sub(
                                ((cfg.sizes.len() - si) * cfg.reps - rep - 1) as u64,
                            ),
                        );
                    }
                }
            }
        }
        // Stop contenders that are clearly below the threshold to save time.
        for c in 0..contenders.len() {
            if !active[c] || rates[c].is_empty() {
                continue;
            }
            let mean = rates[c].iter().sum::<f64>() / rates[c].len() as f64;
            if cfg.peak.is_none() {
                best_rate = best_rate.max(mean);
            }
            let eff = mean / best_rate;
            below[c] = if eff < cfg.threshold { below[c] + 1 } else { 0 };
            if eff < cfg.threshold / 2.0 || below[c] >= 2 {
                active[c] = false;
                measured[c].stopped_early_below = true;
                let left = ((cfg.sizes.len() - si - 1) * cfg.reps) as u64;
                bar.set_length(bar.length().unwrap_or(0).saturating_sub(left));
            }
        }
        if !active.iter().any(|&a| a) {
            break;
        }
    }
    bar.finish_and_clear();
    measured
}
