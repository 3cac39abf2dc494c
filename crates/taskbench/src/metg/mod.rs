//! `taskbench metg`: measures, compares and plots METG for our systems and any Task Bench
//! program; `taskbench metg analyze` computes METG from existing logs.

pub mod analyze;
mod args;
mod load;
mod noise;
mod output;
mod process;
pub mod sweep;

pub use args::Usage;

use analyze::{analyze_text, metg, points, Analysis, Params, Peak, Stat};
use anyhow::Context;
use args::{usage, AnalyzeArgs, MetgArgs, Parsed};
use output::{Machine, Outcome};
use serde_json::json;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use sweep::{with_iterations, Contender, Sweep, SweepConfig};
use taskbench_core::app::App;
use taskbench_core::graph::KernelType;

/// Our options that take a value (everything else double-dash is a switch).
const TAKES_VALUE: [&str; 15] = [
    "--system",
    "--external",
    "--reps",
    "--runs",
    "--max-iter",
    "--min-iter",
    "--peak",
    "--threshold",
    "--stat",
    "--cores",
    "--worker",
    "--timeout",
    "--noise",
    "--retry-budget",
    "--out",
];

/// Runs `taskbench metg ARGS`. Bad input is returned as a [`Usage`] error.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    if args.first().map(String::as_str) == Some("analyze") {
        let (ours, rest) = args::split(
            &args[1..],
            &[
                "--cores",
                "--nodes",
                "--graphs",
                "--peak",
                "--peak-bytes",
                "--threshold",
                "--stat",
            ],
        );
        let all: Vec<String> = ours.into_iter().chain(rest).collect();
        return match args::parse::<AnalyzeArgs>("taskbench metg analyze", all)? {
            Parsed::Run(a) => analyze_files(&a),
            Parsed::Shown => Ok(()),
        };
    }
    let (ours, graph) = args::split(args, &TAKES_VALUE);
    match args::parse::<MetgArgs>("taskbench metg", ours)? {
        Parsed::Run(m) => run_sweep(&m, graph),
        Parsed::Shown => Ok(()),
    }
}

/// Prints to stdout; a reader that went away (`| head`) does not stop the sweep from saving
/// its files.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

fn analyze_files(a: &AnalyzeArgs) -> anyhow::Result<()> {
    let peak = match (a.peak, a.peak_bytes) {
        (Some(p), _) => Peak::Flops(p),
        (None, Some(b)) => Peak::Bytes(b),
        (None, None) => Peak::Relative,
    };
    let params = Params {
        ngraphs: a.graphs,
        nodes: a.nodes,
        cores: a.cores,
        threshold: a.threshold,
        peak,
        stat: a.stat,
    };
    let mut results = Vec::new();
    let mut unreadable = 0;
    for f in &a.files {
        let (analysis, read_error) = match std::fs::read_to_string(f) {
            Ok(text) => (Some(analyze_text(&text, &params)), None),
            Err(e) => {
                unreadable += 1;
                (None, Some(format!("cannot read {}: {e}", f.display())))
            }
        };
        let metg_us = analysis
            .as_ref()
            .and_then(|x| x.metg.as_ref().ok())
            .map(|m| m * 1e6);
        let why = read_error.clone().or_else(|| {
            analysis
                .as_ref()
                .and_then(|x| x.metg.as_ref().err())
                .map(|e| e.to_string())
        });
        if a.json {
            results.push(json!({
                "file": f.display().to_string(),
                "metg_us": metg_us,
                "peak_flops": if let Peak::Flops(p) = peak { Some(p) } else { None },
                "peak_bytes": if let Peak::Bytes(p) = peak { Some(p) } else { None },
                "threshold": a.threshold,
                "error": why,
                "points": analysis.map(|x| x.points).unwrap_or_default(),
            }));
        } else {
            match (metg_us, why) {
                (Some(us), _) => out!(
                    "{}: METG({:.0}%) = {us:.6} us\n",
                    f.display(),
                    a.threshold * 100.0
                ),
                (None, Some(why)) => out!("{}: METG undefined: {why}\n", f.display()),
                (None, None) => unreachable!(),
            }
        }
    }
    if a.json {
        out!("{}\n", serde_json::to_string_pretty(&results)?);
    }
    if unreadable > 0 {
        anyhow::bail!("{unreadable} of {} files could not be read", a.files.len());
    }
    Ok(())
}

fn contenders(m: &MetgArgs, workers: usize) -> anyhow::Result<Vec<Contender>> {
    let exe = std::env::current_exe()
        .context("locating the taskbench executable")?
        .display()
        .to_string();
    let names: Vec<String> = if m.system.is_empty() && m.external.is_empty() {
        crate::systems::all()
            .iter()
            .map(|s| s.name().to_string())
            .collect()
    } else {
        m.system.clone()
    };
    let mut out: Vec<Contender> = Vec::new();
    for name in names {
        if crate::systems::by_name(&name).is_none() {
            let known: Vec<_> = crate::systems::all().iter().map(|s| s.name()).collect();
            usage!(
                "Invalid option \"--system {name}\": expected one of {}",
                known.join(", ")
            );
        }
        let command = vec![
            exe.clone(),
            "-system".into(),
            name.clone(),
            "-worker".into(),
            workers.to_string(),
        ];
        out.push(Contender { name, command });
    }
    for (k, ext) in m.external.iter().enumerate() {
        let (name, cmd) = match ext.split_once('=') {
            Some((n, c))
                if !n.is_empty()
                    && n.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch)) =>
            {
                (n.to_string(), c)
            }
            _ => (format!("external{}", k + 1), ext.as_str()),
        };
        let Ok(command) = shell_words::split(cmd) else {
            usage!("Invalid option \"--external {ext}\": unbalanced quotes");
        };
        if command.is_empty() {
            usage!("Invalid option \"--external {ext}\": empty command");
        }
        out.push(Contender { name, command });
    }
    // Names key the logs and the plot: two of one name would overwrite each other.
    for (i, c) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.name == c.name) {
            usage!(
                "two contenders are named \"{}\": give each --external its own NAME=",
                c.name
            );
        }
    }
    Ok(out)
}

/// Makes sure `--out` can take the results before anything is measured.
fn prepare_out(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        usage!(
            "Invalid option \"--out {}\": exists and is not a directory",
            dir.display()
        );
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        usage!(
            "Invalid option \"--out {}\": cannot create it: {e}",
            dir.display()
        );
    }
    let probe = dir.join(format!(".taskbench-metg-probe-{}", std::process::id()));
    if let Err(e) = std::fs::write(&probe, b"") {
        usage!(
            "Invalid option \"--out {}\": cannot write there: {e}",
            dir.display()
        );
    }
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// One whole sweep, analysed.
struct RunResult {
    sweep: Sweep,
    peak: f64,
    peak_source: String,
    outcomes: Vec<Outcome>,
}

fn analyse_run(
    m: &MetgArgs,
    cs: &[Contender],
    mut sw: Sweep,
    params: &dyn Fn(Peak) -> Params,
    bytes: bool,
) -> anyhow::Result<RunResult> {
    let rate = |p: &analyze::Point| {
        if bytes {
            p.bytes_per_second
        } else {
            p.flops_per_second
        }
    };
    let best_of = |sw: &Sweep, c: usize| {
        points(&sw.measured[c].runs, &params(Peak::Relative))
            .map(|pts| pts.iter().map(rate).fold(0.0, f64::max))
            .unwrap_or(0.0)
    };
    if m.peak.is_none() {
        // No rate may exceed twice what anything else here reached (a calibration run counts
        // for FLOP/s): such a report is a broken timer, not a fast system.
        let bests: Vec<f64> = (0..cs.len()).map(|c| best_of(&sw, c)).collect();
        let calibration = if bytes {
            0.0
        } else {
            sw.calibration.iter().copied().fold(0.0, f64::max)
        };
        let limit = |c: usize| {
            let others = bests
                .iter()
                .enumerate()
                .filter(|&(o, _)| o != c)
                .map(|(_, &b)| b)
                .fold(calibration, f64::max);
            if others > 0.0 {
                2.0 * others
            } else {
                f64::INFINITY
            }
        };
        let names: Vec<String> = cs.iter().map(|c| c.name.clone()).collect();
        sweep::reject_implausible(&mut sw, &names, bytes, limit);
    }
    let (peak, peak_source) = match m.peak {
        Some(p) => (p, "given with --peak".to_string()),
        None => {
            let mut best = (0.0f64, String::new());
            for (c, con) in cs.iter().enumerate() {
                for p in points(&sw.measured[c].runs, &params(Peak::Relative)).unwrap_or_default() {
                    if rate(&p) > best.0 {
                        best = (
                            rate(&p),
                            format!(
                                "measured: best {} rate of {} at -iter {}",
                                m.stat_name(),
                                con.name,
                                p.iterations
                            ),
                        );
                    }
                }
            }
            best
        }
    };
    let peak_kind = if bytes {
        Peak::Bytes(peak)
    } else {
        Peak::Flops(peak)
    };
    let outcomes = cs
        .iter()
        .zip(&sw.measured)
        .map(|(c, meas)| {
            let analysis = match points(&meas.runs, &params(peak_kind)) {
                Ok(pts) => Analysis {
                    metg: metg(&pts, m.threshold),
                    points: pts,
                },
                Err(e) => Analysis {
                    points: Vec::new(),
                    metg: Err(e),
                },
            };
            let delta = noise::delta(&meas.noise, &sw.calibration);
            let interval = noise::interval(&analysis.points, m.threshold, delta);
            let noisy = noise::noisy_near(
                &analysis.points,
                &meas.noise,
                analysis.metg.as_ref().ok().copied(),
                interval,
            );
            Outcome {
                name: c.name.clone(),
                runs: vec![analysis.metg.as_ref().ok().copied()],
                clean_runs: if noisy { Vec::new() } else { vec![0] },
                analysis,
                error: meas.error.clone(),
                interval,
                noisy,
                single_core: c.command.get(2).is_some_and(|s| s == "serial")
                    && c.command.len() == 5,
            }
        })
        .collect();
    Ok(RunResult {
        sweep: sw,
        peak,
        peak_source,
        outcomes,
    })
}

fn run_sweep(m: &MetgArgs, graph_flags: Vec<String>) -> anyhow::Result<()> {
    if graph_flags.iter().any(|f| f == "-iter") {
        usage!("-iter is set by the sweep; use --max-iter and --min-iter");
    }
    if m.max_iter < m.min_iter {
        usage!(
            "Invalid options \"--min-iter {} --max-iter {}\": need min <= max",
            m.min_iter,
            m.max_iter
        );
    }
    let mut sizes = Vec::new();
    let mut n = m.max_iter;
    while n >= m.min_iter {
        sizes.push(n);
        n /= 2;
    }
    let mut apps = Vec::new();
    for &n in &sizes {
        match App::parse(&with_iterations(&graph_flags, n), &[]) {
            Ok((a, _)) => apps.push(a),
            Err(e) => usage!("{e}"),
        }
    }
    let kinds: Vec<KernelType> = apps[0].graphs.iter().map(|g| g.kernel.kind).collect();
    let bytes = kinds.iter().all(|&k| k == KernelType::MemoryBound);
    if apps[0].totals().flops == 0 && !bytes {
        usage!("METG needs a kernel that does measurable work: -kernel compute_bound, compute_bound2, load_imbalance or memory_bound (got {})", kinds[0]);
    }
    let cores = m.cores.unwrap_or_else(crate::systems::default_workers);
    let workers = m.worker.unwrap_or(cores);
    let contenders = contenders(m, workers)?;
    if let Some(dir) = &m.out {
        prepare_out(dir)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::Relaxed) {
                std::process::exit(130);
            }
            eprintln!(
                "\ninterrupted: finishing with what was measured (Ctrl-C again to quit at once)"
            );
        });
    }
    let names: Vec<&str> = contenders.iter().map(|c| c.name.as_str()).collect();
    eprintln!(
        "METG sweep: {} on {cores} cores, -iter {}..{} by halves, {} reps, {} run(s): {}",
        names.join(", "),
        m.max_iter,
        m.min_iter,
        m.reps,
        m.runs,
        graph_flags.join(" ")
    );
    let exe = std::env::current_exe()
        .context("locating the taskbench executable")?
        .display()
        .to_string();
    let machine_cores = crate::systems::default_workers().to_string();
    let calibration: Vec<String> = [
        exe.as_str(),
        "-system",
        "bsp",
        "-worker",
        &machine_cores,
        "-steps",
        "100",
        "-width",
        &machine_cores,
        "-type",
        "trivial",
        "-kernel",
        "compute_bound",
        "-iter",
        "32768",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let cfg = SweepConfig {
        graph_flags: graph_flags.clone(),
        sizes,
        reps: m.reps,
        threshold: m.threshold,
        peak: m.peak,
        bytes,
        timeout: Duration::from_secs_f64(m.timeout),
        noise: m.noise,
        retry_budget: m.retry_budget,
        calibration: Some(calibration),
    };
    let params = |peak| Params {
        ngraphs: apps[0].graphs.len(),
        nodes: 1.0,
        cores: cores as f64,
        threshold: m.threshold,
        peak,
        stat: m.stat,
    };
    let mut results = Vec::new();
    for r in 0..m.runs {
        if m.runs > 1 {
            eprintln!("== run {} of {}", r + 1, m.runs);
        }
        let sw = sweep::sweep(&contenders, &apps, &cfg, stop.clone());
        results.push(analyse_run(m, &contenders, sw, &params, bytes)?);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if results.iter().all(|r| r.peak <= 0.0) {
        anyhow::bail!("no run succeeded, so no peak could be measured");
    }
    let outcomes = combine(&results);
    let unit = if bytes { "B/s" } else { "FLOP/s" };
    let shown = results.last().expect("at least one run");
    out!("Peak: {:.4e} {unit} ({})\n", shown.peak, shown.peak_source);
    if results.len() > 1 {
        let peaks: Vec<String> = results.iter().map(|r| format!("{:.3e}", r.peak)).collect();
        out!(
            "Peaks of the {} runs: {} {unit}\n",
            results.len(),
            peaks.join(", ")
        );
    }
    out!("{}", output::table(&outcomes, m.threshold));
    let cal: Vec<f64> = results
        .iter()
        .flat_map(|r| r.sweep.calibration.iter().copied())
        .collect();
    let machine_noise = sweep::drift(&cal);
    // Other programs' share of the CPU, the worst whole run.
    let foreign = results
        .iter()
        .filter_map(|r| r.sweep.foreign_load)
        .reduce(f64::max);
    let loaded = foreign.is_some_and(|f| f > m.noise);
    // The whole result is noisy when the machine was loaded by other programs or some
    // system's METG rests only on noisy sizes; the drift of the machine's own speed is shown
    // for judgement (these VMs drift 10-50 % while idle) and enters each METG's interval.
    let noisy = loaded || outcomes.iter().any(|o| o.noisy);
    let load = foreign.map_or("unknown".to_string(), |f| format!("{:.0}%", f * 100.0));
    out!(
        "Machine: other programs used {load} of its CPU time; its speed drifted by {:.0}% (calibration runs, p10 to p90).\n",
        machine_noise * 100.0
    );
    if loaded {
        out!(
            "Noisy: other programs used more than the {:.0}% tolerance of the CPU: this comparison was taken on a loaded machine.\n",
            m.noise * 100.0
        );
    } else if noisy {
        out!("Noisy: some METG above rests only on sizes measured under noise ('*').\n");
    }
    let interrupted = stop.load(Ordering::Relaxed);
    if interrupted {
        out!("(interrupted: results cover what was measured)\n");
    }
    if let Some(dir) = &m.out {
        write_results(
            dir,
            m,
            &contenders,
            &results,
            &outcomes,
            &graph_flags,
            cores,
            workers,
            machine_noise,
            foreign,
            noisy,
            interrupted,
            unit,
        )?;
    }
    if interrupted {
        // Results are saved; the exit status still tells scripts the sweep is incomplete.
        std::process::exit(130);
    }
    Ok(())
}

/// One outcome per contender over all runs: the analysis of the run whose METG is the median
/// (the last run if none has one), with every run's METG. Runs measured under noise near
/// this contender's METG are left out of the median when at least one clean run exists.
fn combine(results: &[RunResult]) -> Vec<Outcome> {
    let n = results[0].outcomes.len();
    let mut combined = Vec::new();
    for c in 0..n {
        let metgs: Vec<Option<f64>> = results.iter().map(|r| r.outcomes[c].runs[0]).collect();
        let clean_runs: Vec<usize> = (0..results.len())
            .filter(|&i| !results[i].outcomes[c].noisy && metgs[i].is_some())
            .collect();
        let mut ok: Vec<(f64, usize)> = metgs
            .iter()
            .enumerate()
            .filter(|&(i, _)| clean_runs.is_empty() || clean_runs.contains(&i))
            .filter_map(|(i, v)| v.map(|v| (v, i)))
            .collect();
        ok.sort_by(|a, b| a.0.total_cmp(&b.0));
        let pick = ok.get(ok.len() / 2).map_or(results.len() - 1, |&(_, i)| i);
        let src = &results[pick].outcomes[c];
        combined.push(Outcome {
            name: src.name.clone(),
            analysis: Analysis {
                points: src.analysis.points.clone(),
                metg: src.analysis.metg.clone(),
            },
            error: src.error.clone(),
            interval: src.interval,
            // Noisy only if no clean run was there to stand in.
            noisy: clean_runs.is_empty() && results.iter().any(|r| r.outcomes[c].noisy),
            runs: if results.len() > 1 {
                metgs
            } else {
                vec![src.runs[0]]
            },
            single_core: src.single_core,
            clean_runs,
        });
    }
    combined
}

#[allow(clippy::too_many_arguments)]
fn write_results(
    dir: &Path,
    m: &MetgArgs,
    contenders: &[Contender],
    results: &[RunResult],
    outcomes: &[Outcome],
    graph_flags: &[String],
    cores: usize,
    workers: usize,
    machine_noise: f64,
    foreign: Option<f64>,
    noisy: bool,
    interrupted: bool,
    unit: &str,
) -> anyhow::Result<()> {
    let log_name = |name: &str, r: usize| {
        if results.len() == 1 {
            format!("{name}.log")
        } else {
            format!("{name}.run{}.log", r + 1)
        }
    };
    for (r, run) in results.iter().enumerate() {
        for (c, meas) in contenders.iter().zip(&run.sweep.measured) {
            std::fs::write(dir.join(log_name(&c.name, r)), meas.logs.concat())?;
        }
    }
    output::write_csv(&dir.join("points.csv"), outcomes)?;
    let last = results.last().expect("at least one run");
    let micros = |x: Option<f64>| x.map(|s| s * 1e6);
    let summary = json!({
        "peak": { "value": last.peak, "unit": unit, "source": last.peak_source },
        "threshold": m.threshold,
        "stat": m.stat,
        "reps": m.reps,
        "runs": results.len(),
        "cores": cores,
        "workers": workers,
        "graph_flags": graph_flags.join(" "),
        "interrupted": interrupted,
        "noise_tolerance": m.noise,
        "noisy": noisy,
        "calibration_drift": machine_noise,
        "foreign_load": foreign,
        "loaded": foreign.is_some_and(|f| f > m.noise),
        "machine": Machine::describe(),
        "systems": contenders.iter().enumerate().map(|(c, con)| {
            let o = &outcomes[c];
            json!({
                "name": con.name,
                "command": shell_words::join(&con.command),
                "metg_us": micros(o.metg()),
                "metg_range_us": o.range().map(|(a, b)| [a * 1e6, b * 1e6]),
                "metg_runs_us": o.runs.iter().map(|v| micros(*v)).collect::<Vec<_>>(),
                "clean_runs": o.clean_runs.iter().map(|i| i + 1).collect::<Vec<_>>(),
                "metg_within_noise_us": [micros(o.interval.0), micros(o.interval.1)],
                "metg_undefined": o.analysis.metg.as_ref().err().map(|e| e.to_string()),
                "noisy": o.noisy,
                "single_core": o.single_core,
                "best_efficiency": o.analysis.points.iter().map(|p| p.efficiency).fold(0.0f64, f64::max),
                "error": o.error,
                "points": o.analysis.points,
                "per_run": results.iter().enumerate().map(|(r, run)| {
                    let meas = &run.sweep.measured[c];
                    json!({
                        "log": log_name(&con.name, r),
                        "peak": run.peak,
                        "metg_us": micros(run.outcomes[c].runs[0]),
                        "stopped_early_below_threshold": meas.stopped_early_below,
                        "error": meas.error,
                        "sizes": meas.noise,
                        "rejected_runs": meas.rejected,
                        "repeat_runs": run.sweep.repeats,
                        "calibration_flops": run.sweep.calibration,
                    })
                }).collect::<Vec<_>>(),
            })
        }).collect::<Vec<_>>(),
    });
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    let title = format!(
        "{} | {} cores, peak {:.3e} {unit}, {} reps ({}), {} run(s)",
        graph_flags.join(" "),
        cores,
        last.peak,
        m.reps,
        m.stat_name(),
        results.len()
    );
    let plots = output::plot(dir, "metg", outcomes, m.threshold, &title)?;
    out!(
        "Wrote {}: raw logs, points.csv, summary.json, {}\n",
        dir.display(),
        plots.join(", ")
    );
    Ok(())
}

impl MetgArgs {
    fn stat_name(&self) -> &'static str {
        match self.stat {
            Stat::Mean => "mean",
            Stat::Median => "median",
            Stat::Min => "min",
        }
    }
}
