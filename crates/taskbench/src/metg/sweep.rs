//! The METG sweep: each contender (one of our systems, or any external Task Bench program) is
//! run as a command with the graph's flags and `-iter N`, sizes descending by powers of two,
//! repetitions and contenders interleaved so machine drift hits all alike. Every report is
//! parsed and checked against the graph it was asked for.
//!
//! Noise is measured while sweeping: before each size a short fixed calibration run shows how
//! fast the machine is right now, and each contender's repetitions at a size show their own
//! spread. A size measured while the machine was slow, or whose repetitions disagree, is run
//! again (within a budget of extra runs) and the quietest attempt kept; one that stays noisy is
//! flagged, never silently used as if it were clean.

use super::analyze::{parse_runs, Run};
use super::load::LoadMeter;
use super::process::{last_lines, run_once};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
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

/// How noisy one contender's size was.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SizeNoise {
    /// `-iter`.
    pub iterations: i64,
    /// Spread ([`spread`]) of the kept repetitions' elapsed times.
    pub spread: f64,
    /// How much slower than its best the calibration run before the kept attempt was.
    pub calibration_drop: f64,
    /// Share of the machine's CPU time other programs used while this size was measured
    /// (read as `metg/load.rs` does), where it could be read.
    pub foreign_load: Option<f64>,
    /// Attempts made (1 + repeats).
    pub attempts: usize,
    /// Whether the kept attempt still exceeds the noise tolerance.
    pub noisy: bool,
}

/// Everything measured for one contender.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Parsed runs, in the order measured.
    pub runs: Vec<Run>,
    /// Each run's full output, in the reference format (for `metg analyze`), parallel to `runs`.
    pub logs: Vec<String>,
    /// Why this contender stopped early with an error, with its command and output.
    pub error: Option<String>,
    /// Whether it stopped because it fell clearly below the threshold.
    pub stopped_early_below: bool,
    /// Noise of each size measured, largest first.
    pub noise: Vec<SizeNoise>,
    /// Runs taken out as implausible, with the reason.
    pub rejected: Vec<String>,
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
    /// Noise tolerance (fraction).
    pub noise: f64,
    /// Extra runs allowed for repeats, as a fraction of the planned runs.
    pub retry_budget: f64,
    /// The calibration command (a fixed compute_bound run of our own), if any.
    pub calibration: Option<Vec<String>>,
    /// A fixed run of empty tasks in lock-step on every core, whose time per step shows the
    /// machine's cross-core latency.
    pub step_probe: Option<Vec<String>>,
}

/// What a sweep measured: per contender, and the machine's calibration rate before each size.
#[derive(Clone, Debug, Default)]
pub struct Sweep {
    /// Per contender, in the order given.
    pub measured: Vec<Measured>,
    /// FLOP/s of every calibration run, in the order taken.
    pub calibration: Vec<f64>,
    /// Seconds per step of the step probe, once per size.
    pub step_seconds: Vec<f64>,
    /// Runs spent repeating noisy sizes.
    pub repeats: usize,
    /// Share of the machine's CPU time other programs used during the whole sweep.
    pub foreign_load: Option<f64>,
}

/// How often, and how long apart, `settle` looks for the machine to be quiet again.
const QUIET_TRIES: usize = 8;
const QUIET_WAIT: Duration = Duration::from_millis(250);

/// Most attempts at one contender's size.
const MAX_ATTEMPTS: usize = 4;

/// Runs shorter than this cannot be timed by any Task Bench program.
pub const MIN_ELAPSED: f64 = 1e-9;

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

/// Parses one report and checks it is the run that was asked for and plausible.
fn check_report(
    stdout: &str,
    expected: &App,
    totals: &Totals,
    iterations: i64,
    cmd: &[String],
) -> Result<Run, String> {
    let shown = shell_words::join(cmd);
    let bad = |why: String| format!("`{shown}` {why}:\n{}", last_lines(stdout, 15));
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
    // NaN is implausible too.
    if run.elapsed.is_nan() || run.elapsed < MIN_ELAPSED {
        return Err(bad(format!(
            "reported an implausible elapsed time of {:e} s (at least 1 ns expected)",
            run.elapsed
        )));
    }
    Ok(*run)
}

/// (max − min) / median of `xs` (0 for fewer than two values); from 5 values on, the single
/// highest and lowest are left out, so one stray run does not make a whole sweep "noisy".
pub fn spread(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    if v.len() >= 5 {
        v = v[1..v.len() - 1].to_vec();
    }
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (v[v.len() - 1] - v[0]) / median
}

/// (p90 − p10) / median of a series of calibration rates: how much the machine's speed moved
/// while measuring, not counting the short bursts that `settle` waited out (each of those
/// leaves one or two low readings).
pub fn drift(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.9) - at(0.1)) / at(0.5)
}

/// One attempt at one contender's size: its runs with their logs.
type Attempt = Vec<(String, Run)>;

struct Sweeper<'a> {
    contenders: &'a [Contender],
    cfg: &'a SweepConfig,
    stop: Arc<AtomicBool>,
    bar: ProgressBar,
    out: Sweep,
    best_calibration: f64,
}

impl Sweeper<'_> {
    /// Runs one of our fixed probe commands and returns its report, if it gave a plausible one.
    fn probe(&self, cmd: &[String]) -> Option<Run> {
        let out = run_once(cmd, self.cfg.timeout, &self.stop).ok()?;
        let run = *parse_runs(&out, 1).ok()?.first()?;
        (run.elapsed >= MIN_ELAPSED).then_some(run)
    }

    /// Runs the calibration command and returns how much slower than the best so far the
    /// machine is now (0 when no calibration is configured or it failed).
    fn calibrate(&mut self) -> f64 {
        let Some(run) = self.cfg.calibration.as_deref().and_then(|c| self.probe(c)) else {
            return 0.0;
        };
        let rate = run.flops as f64 / run.elapsed;
        self.out.calibration.push(rate);
        self.best_calibration = self.best_calibration.max(rate);
        1.0 - rate / self.best_calibration
    }

    /// Runs the step probe and records its time per step. METG of fine-grained systems
    /// follows the machine's cross-core latency, which a compute calibration cannot see and
    /// which moves between sittings on shared machines.
    fn probe_step(&mut self) {
        if let Some(run) = self.cfg.step_probe.as_deref().and_then(|c| self.probe(c)) {
            self.out.step_seconds.push(run.elapsed / run.steps as f64);
        }
    }

    /// Calibrates, and while the machine is clearly slower than its best (a burst of load
    /// from elsewhere), waits a little and calibrates again, a few times at most: measuring
    /// during a burst only wastes runs. Returns the last drop.
    fn settle(&mut self) -> f64 {
        let mut drop = self.calibrate();
        for _ in 0..QUIET_TRIES {
            if drop <= self.cfg.noise || self.stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(QUIET_WAIT);
            drop = self.calibrate();
        }
        drop
    }

    /// Runs contender `c` once at size index `si`.
    fn run(
        &self,
        c: usize,
        si: usize,
        apps: &[App],
        totals: &[Totals],
    ) -> Result<(String, Run), String> {
        let n = self.cfg.sizes[si];
        let mut cmd = self.contenders[c].command.clone();
        cmd.extend(with_iterations(&self.cfg.graph_flags, n));
        let out = run_once(&cmd, self.cfg.timeout, &self.stop)?;
        let run = check_report(&out, &apps[si], &totals[si], n, &cmd)?;
        Ok((out, run))
    }

    /// [`Sweeper::run`], shown on the progress bar as `what` of this size.
    fn run_shown(
        &self,
        c: usize,
        si: usize,
        apps: &[App],
        totals: &[Totals],
        what: &str,
    ) -> Result<(String, Run), String> {
        let (name, n) = (&self.contenders[c].name, self.cfg.sizes[si]);
        self.bar
            .set_message(format!("{name} -iter {n} {what}/{}", self.cfg.reps));
        let result = self.run(c, si, apps, totals);
        self.bar.inc(1);
        result
    }

    fn noise_of(
        &self,
        attempt: &Attempt,
        drop: f64,
        load: Option<f64>,
        n: i64,
        attempts: usize,
    ) -> SizeNoise {
        let elapsed: Vec<f64> = attempt.iter().map(|(_, r)| r.elapsed).collect();
        let spread = spread(&elapsed);
        let tol = self.cfg.noise;
        SizeNoise {
            iterations: n,
            spread,
            calibration_drop: drop,
            foreign_load: load,
            attempts,
            noisy: spread > tol || drop > tol || load.is_some_and(|l| l > tol),
        }
    }

    fn fail(&mut self, c: usize, e: String, active: &mut [bool]) {
        let name = &self.contenders[c].name;
        self.bar
            .suspend(|| tactor_cli::say!("warning: {name}: stopped: {e}"));
        self.out.measured[c].error = Some(e);
        active[c] = false;
    }
}

/// Runs the sweep. `apps[i]` is the graph configuration at `cfg.sizes[i]`, used to check each
/// report. Stops on `stop` (Ctrl-C), keeping what was measured.
pub fn sweep(
    contenders: &[Contender],
    apps: &[App],
    cfg: &SweepConfig,
    stop: Arc<AtomicBool>,
) -> Sweep {
    // What each size's report must say; computed once, not per run.
    let totals: Vec<Totals> = apps.iter().map(App::totals).collect();
    let planned = contenders.len() * cfg.sizes.len() * cfg.reps;
    let bar = ProgressBar::new(planned as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs, about {eta} left  {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut s = Sweeper {
        contenders,
        cfg,
        stop: stop.clone(),
        bar,
        out: Sweep {
            measured: vec![Measured::default(); contenders.len()],
            ..Sweep::default()
        },
        best_calibration: 0.0,
    };
    let whole = LoadMeter::start();
    let budget = (planned as f64 * cfg.retry_budget) as usize;
    let mut active = vec![true; contenders.len()];
    let mut best_rate = cfg.peak.unwrap_or(0.0);
    let mut below = vec![0usize; contenders.len()];
    let rate_of = |r: &Run| if cfg.bytes { r.bytes as f64 } else { r.flops as f64 } / r.elapsed;
    'sizes: for (si, &n) in cfg.sizes.iter().enumerate() {
        let meter = LoadMeter::start();
        let drop = s.settle();
        s.probe_step();
        let mut attempts: Vec<Attempt> = vec![Vec::new(); contenders.len()];
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
                let result = s.run_shown(c, si, apps, &totals, &format!("rep {}", rep + 1));
                match result {
                    Ok(done) => attempts[c].push(done),
                    Err(_) if stop.load(Ordering::Relaxed) => break 'sizes,
                    Err(e) => {
                        s.fail(c, e, &mut active);
                        let left = ((cfg.sizes.len() - si) * cfg.reps - rep - 1) as u64;
                        s.bar
                            .set_length(s.bar.length().unwrap_or(0).saturating_sub(left));
                    }
                }
            }
        }
        // Repeat noisy sizes, keeping the quietest attempt.
        for c in 0..contenders.len() {
            if !active[c] || attempts[c].is_empty() {
                continue;
            }
            let mut kept = std::mem::take(&mut attempts[c]);
            let load = meter.and_then(|m| m.foreign());
            let mut noise = s.noise_of(&kept, drop, load, n, 1);
            // The budget goes where noise can move the METG: sizes whose efficiency is not
            // far above the threshold (far above, noise only lowers a rate that the peak,
            // a maximum, does not depend on).
            let rate = kept.iter().map(|(_, r)| rate_of(r)).sum::<f64>() / kept.len() as f64;
            let decisive = best_rate <= 0.0 || rate < 1.5 * cfg.threshold * best_rate.max(rate);
            while decisive
                && noise.noisy
                && noise.attempts < MAX_ATTEMPTS
                && s.out.repeats + cfg.reps <= budget
            {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let again_meter = LoadMeter::start();
                let again_drop = s.settle();
                s.bar.inc_length(cfg.reps as u64);
                let mut again = Vec::new();
                for rep in 0..cfg.reps {
                    let r = s.run_shown(c, si, apps, &totals, &format!("repeat, rep {}", rep + 1));
                    s.out.repeats += 1;
                    match r {
                        Ok(done) => again.push(done),
                        Err(_) => break,
                    }
                }
                if again.len() < cfg.reps {
                    break; // A failing repeat changes nothing: keep what was measured.
                }
                let attempts_now = noise.attempts + 1;
                let again_load = again_meter.and_then(|m| m.foreign());
                let fresh = s.noise_of(&again, again_drop, again_load, n, attempts_now);
                let score = |x: &SizeNoise| {
                    x.spread
                        .max(x.calibration_drop)
                        .max(x.foreign_load.unwrap_or(0.0))
                };
                if score(&fresh) < score(&noise) {
                    (kept, noise) = (again, fresh);
                } else {
                    noise.attempts = attempts_now;
                }
            }
            let m = &mut s.out.measured[c];
            for (log, run) in kept {
                m.logs.push(log);
                m.runs.push(run);
            }
            m.noise.push(noise);
        }
        // Stop contenders that are clearly below the threshold to save time.
        for c in 0..contenders.len() {
            let rates: Vec<f64> = s.out.measured[c]
                .runs
                .iter()
                .filter(|r| r.iterations == n)
                .map(rate_of)
                .collect();
            if !active[c] || rates.is_empty() {
                continue;
            }
            let mean = rates.iter().sum::<f64>() / rates.len() as f64;
            if cfg.peak.is_none() {
                best_rate = best_rate.max(mean);
            }
            let eff = mean / best_rate;
            below[c] = if eff < cfg.threshold { below[c] + 1 } else { 0 };
            if eff < cfg.threshold / 2.0 || below[c] >= 2 {
                active[c] = false;
                s.out.measured[c].stopped_early_below = true;
                let left = ((cfg.sizes.len() - si - 1) * cfg.reps) as u64;
                s.bar
                    .set_length(s.bar.length().unwrap_or(0).saturating_sub(left));
            }
        }
        if !active.iter().any(|&a| a) {
            break;
        }
    }
    // One closing calibration, so a slowdown during the last size shows too.
    if !stop.load(Ordering::Relaxed) {
        s.calibrate();
    }
    s.bar.finish_and_clear();
    s.out.foreign_load = whole.and_then(|m| m.foreign());
    s.out
}

/// Takes out runs whose rate exceeds `limit(contender)` (2× what anything else on this
/// machine reached), recording why.
pub fn reject_implausible(
    sweep: &mut Sweep,
    names: &[String],
    bytes: bool,
    limit: impl Fn(usize) -> f64,
) {
    for (c, m) in sweep.measured.iter_mut().enumerate() {
        let bound = limit(c);
        let unit = if bytes { "B/s" } else { "FLOP/s" };
        let mut keep = Vec::new();
        for (log, run) in m.logs.drain(..).zip(m.runs.drain(..)) {
            let rate = if bytes {
                run.bytes as f64
            } else {
                run.flops as f64
            } / run.elapsed;
            if rate > bound {
                let why = format!(
                    "{}: run at -iter {} reported {rate:.3e} {unit}, more than twice anything else measured here ({:.3e} {unit}); ignored (give --peak to accept it)",
                    names[c],
                    run.iterations,
                    bound / 2.0
                );
                tactor_cli::say!("warning: {why}");
                m.rejected.push(why);
            } else {
                keep.push((log, run));
            }
        }
        for (log, run) in keep {
            m.logs.push(log);
            m.runs.push(run);
        }
    }
}
