//! `taskbench metg`: measures, compares and plots METG for our systems and any Task Bench
//! program; `taskbench metg analyze` computes METG from existing logs.

pub mod analyze;
mod output;
pub mod sweep;

use analyze::{analyze_text, metg, points, Analysis, Params, Peak, Stat};
use anyhow::{bail, Context};
use clap::Parser;
use output::{Machine, Outcome};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use sweep::{with_iterations, Contender, SweepConfig};
use taskbench_core::app::App;
use taskbench_core::graph::KernelType;

/// Options of `taskbench metg` (Task Bench flags, single-dash, are passed through to the runs).
#[derive(Parser, Debug)]
#[command(
    name = "taskbench metg",
    about = "Sweep -iter down by powers of two for each system and compute METG (minimum effective task granularity)",
    after_help = "Task Bench flags (single dash, e.g. -steps 1000 -width 2 -type stencil_1d -kernel compute_bound) \
                  describe the graphs; -iter is set by the sweep.\n\
                  Example: taskbench metg --system serial,bsp --external 'ref=mpirun -np 2 ./nonblock' -steps 1000 \
                  -width 2 -type stencil_1d -kernel compute_bound --out results/metg"
)]
struct MetgArgs {
    /// Our systems to measure, comma-separated (default: all; see `taskbench --list`).
    #[arg(long, value_delimiter = ',')]
    system: Vec<String>,
    /// Another Task Bench program, as a shell command ('NAME=COMMAND' names it); repeatable.
    #[arg(long)]
    external: Vec<String>,
    /// Repetitions of each size.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Largest -iter of the sweep.
    #[arg(long, default_value_t = 65536)]
    max_iter: i64,
    /// Smallest -iter of the sweep.
    #[arg(long, default_value_t = 1)]
    min_iter: i64,
    /// Peak FLOP/s (or B/s for memory_bound) of the machine; measured when not given.
    #[arg(long)]
    peak: Option<f64>,
    /// Efficiency threshold.
    #[arg(long, default_value_t = 0.5)]
    threshold: f64,
    /// Statistic over repetitions.
    #[arg(long, value_enum, default_value_t = Stat::Mean)]
    stat: Stat,
    /// Cores of the machine (task granularity = elapsed × cores / tasks); default: all.
    #[arg(long)]
    cores: Option<usize>,
    /// Worker threads for our systems (default: --cores).
    #[arg(long)]
    worker: Option<usize>,
    /// Longest a single run may take, in seconds.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Directory for raw logs, CSV, JSON summary and plots.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Options of `taskbench metg analyze`.
#[derive(Parser, Debug)]
#[command(
    name = "taskbench metg analyze",
    about = "METG from Task Bench logs, as the reference scripts/chart_metg.py computes it"
)]
struct AnalyzeArgs {
    /// Log files, each holding the runs of one sweep (reports concatenated).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Cores per node the runs used.
    #[arg(long)]
    cores: f64,
    /// Nodes the runs used.
    #[arg(long, default_value_t = 1.0)]
    nodes: f64,
    /// Graphs per run (-and).
    #[arg(long, default_value_t = 1)]
    graphs: usize,
    /// Peak FLOP/s per node (without a peak, efficiency is relative to the largest size).
    #[arg(long, conflicts_with = "peak_bytes")]
    peak: Option<f64>,
    /// Peak B/s per node, for memory_bound logs.
    #[arg(long)]
    peak_bytes: Option<f64>,
    /// Efficiency threshold.
    #[arg(long, default_value_t = 0.5)]
    threshold: f64,
    /// Statistic over repetitions.
    #[arg(long, value_enum, default_value_t = Stat::Mean)]
    stat: Stat,
    /// Print a JSON array, one object per file.
    #[arg(long)]
    json: bool,
}

/// Runs `taskbench metg ARGS`.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    if args.first().map(String::as_str) == Some("analyze") {
        let a = AnalyzeArgs::try_parse_from(
            std::iter::once("taskbench metg analyze".to_string()).chain(args[1..].iter().cloned()),
        )
        .unwrap_or_else(|e| e.exit());
        return analyze_files(&a);
    }
    // Double-dash options are ours; everything else is Task Bench flags for the runs.
    let takes_value = [
        "--system",
        "--external",
        "--reps",
        "--max-iter",
        "--min-iter",
        "--peak",
        "--threshold",
        "--stat",
        "--cores",
        "--worker",
        "--timeout",
        "--out",
    ];
    let (mut ours, mut graph) = (vec!["taskbench metg".to_string()], Vec::new());
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with("--") {
            ours.push(a.clone());
            if takes_value.contains(&a.as_str()) && i + 1 < args.len() {
                i += 1;
                ours.push(args[i].clone());
            }
        } else {
            graph.push(a.clone());
        }
        i += 1;
    }
    let m = MetgArgs::try_parse_from(ours).unwrap_or_else(|e| e.exit());
    run_sweep(&m, graph)
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
                (Some(us), _) => println!(
                    "{}: METG({:.0}%) = {us:.6} us",
                    f.display(),
                    a.threshold * 100.0
                ),
                (None, Some(why)) => println!("{}: METG undefined: {why}", f.display()),
                (None, None) => unreachable!(),
            }
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    if unreadable > 0 {
        bail!("{unreadable} of {} files could not be read", a.files.len());
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
    let mut out = Vec::new();
    for name in names {
        if crate::systems::by_name(&name).is_none() {
            let known: Vec<_> = crate::systems::all().iter().map(|s| s.name()).collect();
            bail!(
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
        let command = shell_words::split(cmd)
            .with_context(|| format!("Invalid option \"--external {ext}\""))?;
        if command.is_empty() {
            bail!("Invalid option \"--external {ext}\": empty command");
        }
        out.push(Contender { name, command });
    }
    Ok(out)
}

fn run_sweep(m: &MetgArgs, graph_flags: Vec<String>) -> anyhow::Result<()> {
    if m.graph_flags_have_iter(&graph_flags) {
        bail!("-iter is set by the sweep; use --max-iter and --min-iter");
    }
    if m.min_iter < 1 || m.max_iter < m.min_iter {
        bail!(
            "Invalid options \"--min-iter {} --max-iter {}\": need 1 <= min <= max",
            m.min_iter,
            m.max_iter
        );
    }
    if m.reps == 0 {
        bail!("Invalid option \"--reps 0\": must be > 0");
    }
    if !(m.threshold > 0.0 && m.threshold < 1.5) {
        bail!(
            "Invalid option \"--threshold {}\": must be in (0, 1.5)",
            m.threshold
        );
    }
    let mut sizes = Vec::new();
    let mut n = m.max_iter;
    while n >= m.min_iter {
        sizes.push(n);
        n /= 2;
    }
    let apps = sizes
        .iter()
        .map(|&n| App::parse(&with_iterations(&graph_flags, n), &[]).map(|(a, _)| a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let kinds: Vec<KernelType> = apps[0].graphs.iter().map(|g| g.kernel.kind).collect();
    let bytes = kinds.iter().all(|&k| k == KernelType::MemoryBound);
    if apps[0].totals().flops == 0 && !bytes {
        bail!("METG needs a kernel that does measurable work: -kernel compute_bound, compute_bound2, load_imbalance or memory_bound (got {})", kinds[0]);
    }
    let cores = m.cores.unwrap_or_else(crate::systems::default_workers);
    let workers = m.worker.unwrap_or(cores);
    let contenders = contenders(m, workers)?;
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
    eprintln!(
        "METG sweep: {} on {} cores, -iter {}..{} by halves, {} reps: {}",
        contenders
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        cores,
        m.max_iter,
        m.min_iter,
        m.reps,
        graph_flags.join(" ")
    );
    let cfg = SweepConfig {
        graph_flags: graph_flags.clone(),
        sizes,
        reps: m.reps,
        threshold: m.threshold,
        peak: m.peak,
        bytes,
        timeout: Duration::from_secs_f64(m.timeout),
    };
    let measured = sweep::sweep(&contenders, &apps, &cfg, stop.clone());
    let params = |peak| Params {
        ngraphs: apps[0].graphs.len(),
        nodes: 1.0,
        cores: cores as f64,
        threshold: m.threshold,
        peak,
        stat: m.stat,
    };
    // The peak: given, or the best rate any contender reached at any size (per the statistic).
    let (peak_value, peak_source) = match m.peak {
        Some(p) => (p, "given with --peak".to_string()),
        None => {
            let mut best = (0.0f64, String::new());
            for (c, meas) in contenders.iter().zip(&measured) {
                if let Ok(pts) = points(&meas.runs, &params(Peak::Relative)) {
                    for p in pts {
                        let rate = if bytes {
                            p.bytes_per_second
                        } else {
                            p.flops_per_second
                        };
                        if rate > best.0 {
                            best = (
                                rate,
                                format!(
                                    "measured: best {} rate of {} at -iter {}",
                                    m.stat_name(),
                                    c.name,
                                    p.iterations
                                ),
                            );
                        }
                    }
                }
            }
            best
        }
    };
    if peak_value <= 0.0 {
        bail!("no run succeeded, so no peak could be measured");
    }
    let peak = if bytes {
        Peak::Bytes(peak_value)
    } else {
        Peak::Flops(peak_value)
    };
    let outcomes: Vec<Outcome> = contenders
        .iter()
        .zip(&measured)
        .map(|(c, meas)| {
            let analysis = match points(&meas.runs, &params(peak)) {
                Ok(pts) => {
                    let metg = metg(&pts, m.threshold);
                    Analysis { points: pts, metg }
                }
                Err(e) => Analysis {
                    points: Vec::new(),
                    metg: Err(e),
                },
            };
            Outcome {
                name: c.name.clone(),
                analysis,
                error: meas.error.clone(),
            }
        })
        .collect();
    let unit = if bytes { "B/s" } else { "FLOP/s" };
    println!("Peak: {peak_value:.4e} {unit} ({peak_source})");
    print!("{}", output::table(&outcomes, m.threshold));
    if stop.load(Ordering::Relaxed) {
        println!("(interrupted: results cover what was measured)");
    }
    if let Some(dir) = &m.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (c, meas) in contenders.iter().zip(&measured) {
            std::fs::write(dir.join(format!("{}.log", c.name)), &meas.log)?;
        }
        output::write_csv(&dir.join("points.csv"), &outcomes)?;
        let summary = json!({
            "peak": { "value": peak_value, "unit": unit, "source": peak_source },
            "threshold": m.threshold,
            "stat": m.stat,
            "reps": m.reps,
            "cores": cores,
            "workers": workers,
            "graph_flags": graph_flags.join(" "),
            "interrupted": stop.load(Ordering::Relaxed),
            "machine": Machine::describe(),
            "systems": contenders.iter().zip(&outcomes).zip(&measured).map(|((c, o), meas)| json!({
                "name": c.name,
                "command": shell_words::join(&c.command),
                "metg_us": o.analysis.metg.as_ref().ok().map(|s| s * 1e6),
                "metg_undefined": o.analysis.metg.as_ref().err().map(|e| e.to_string()),
                "best_efficiency": o.analysis.points.iter().map(|p| p.efficiency).fold(0.0f64, f64::max),
                "error": meas.error,
                "stopped_early_below_threshold": meas.stopped_early_below,
                "log": format!("{}.log", c.name),
                "points": o.analysis.points,
            })).collect::<Vec<_>>(),
        });
        std::fs::write(
            dir.join("summary.json"),
            serde_json::to_string_pretty(&summary)?,
        )?;
        let title = format!("Task Bench METG: {}", graph_flags.join(" "));
        let plots = output::plot(dir, "metg", &outcomes, m.threshold, &title)?;
        println!(
            "Wrote {}: raw logs, points.csv, summary.json, {}",
            dir.display(),
            plots.join(", ")
        );
    }
    if stop.load(Ordering::Relaxed) {
        // Results are saved; the exit status still tells scripts the sweep is incomplete.
        std::process::exit(130);
    }
    Ok(())
}

impl MetgArgs {
    fn graph_flags_have_iter(&self, flags: &[String]) -> bool {
        flags.iter().any(|f| f == "-iter")
    }

    fn stat_name(&self) -> &'static str {
        match self.stat {
            Stat::Mean => "mean",
            Stat::Median => "median",
            Stat::Min => "min",
        }
    }
}
