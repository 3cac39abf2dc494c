//! The options of `taskbench metg` and `taskbench metg analyze`: every value is checked where
//! it is parsed, and every mistake is one line that names the option and the value.

use super::analyze::Stat;
use clap::error::ErrorKind;
use clap::Parser;
use std::path::PathBuf;

/// Bad input to `taskbench metg`: the command exits with status 2, like `taskbench` itself.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// `Err(Usage)` with a formatted message.
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::metg::Usage(format!($($arg)*))))
    };
}
pub(crate) use usage;

fn number(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number".to_string())?;
    if x.is_finite() {
        Ok(x)
    } else {
        Err("expected a finite number".into())
    }
}

/// A finite number > 0.
fn positive(s: &str) -> Result<f64, String> {
    match number(s)? {
        x if x > 0.0 => Ok(x),
        _ => Err("must be > 0".into()),
    }
}

/// Seconds for `--timeout`: positive, and at most a year (a `Duration` must hold it).
fn seconds(s: &str) -> Result<f64, String> {
    match positive(s)? {
        x if x <= 366.0 * 86400.0 => Ok(x),
        _ => Err("must be at most 31622400 seconds (a year)".into()),
    }
}

/// An efficiency threshold in (0, 1.5), the range the reference analysis accepts.
fn threshold(s: &str) -> Result<f64, String> {
    match number(s)? {
        x if x > 0.0 && x < 1.5 => Ok(x),
        _ => Err("must be > 0 and < 1.5".into()),
    }
}

/// An integer of at least 1.
fn count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("must be an integer >= 1".into()),
    }
}

/// Most repetitions or whole sweeps one `metg` may ask for: beyond this a sweep would run
/// for weeks, and the plans sized by them only grow.
const MAX_REPEATS: usize = 10_000;

/// A count of repetitions or runs: 1 to [`MAX_REPEATS`].
fn repeats(s: &str) -> Result<usize, String> {
    match count(s)? {
        n if n <= MAX_REPEATS => Ok(n),
        _ => Err(format!("must be at most {MAX_REPEATS}")),
    }
}

/// An `-iter` bound: an integer from 1 to 2^62.
fn iterations(s: &str) -> Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (1..=1 << 62).contains(&n) => Ok(n),
        _ => Err("must be an integer from 1 to 4611686018427387904".into()),
    }
}

/// A worker count for our systems.
fn workers(s: &str) -> Result<usize, String> {
    match count(s)? {
        n if n <= crate::systems::MAX_WORKERS => Ok(n),
        _ => Err(format!("must be at most {}", crate::systems::MAX_WORKERS)),
    }
}

/// A fraction in [0, 1).
fn fraction(s: &str) -> Result<f64, String> {
    match number(s)? {
        x if (0.0..1.0).contains(&x) => Ok(x),
        _ => Err("must be >= 0 and < 1".into()),
    }
}

/// Options of `taskbench metg` (Task Bench flags, single-dash, are passed through to the runs).
#[derive(Parser, Debug)]
#[command(
    name = "taskbench metg",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TASKBENCH_GIT_REVISION"), ")"),
    about = "Sweep -iter down by powers of two for each system and compute METG (minimum effective task granularity)",
    after_help = "Task Bench flags (single dash, e.g. -steps 1000 -width 2 -type stencil_1d -kernel compute_bound) \
                  describe the graphs; -iter is set by the sweep. Lower METG is better.\n\
                  Example: taskbench metg --system serial,bsp --external 'ref=mpirun -np 2 ./nonblock' -steps 1000 \
                  -width 2 -type stencil_1d -kernel compute_bound --runs 3 --out results/metg"
)]
pub struct MetgArgs {
    /// Our systems to measure, comma-separated (default: all; see `taskbench --list`).
    #[arg(long, value_delimiter = ',')]
    pub system: Vec<String>,
    /// Another Task Bench program, as a shell command ('NAME=COMMAND' names it; `@` in NAME
    /// marks it as run on ranks, e.g. 'nonblock@2=mpirun -np 2 ./nonblock'); repeatable.
    #[arg(long)]
    pub external: Vec<String>,
    /// Repetitions of each size.
    #[arg(long, default_value_t = 5, value_parser = repeats)]
    pub reps: usize,
    /// Whole sweeps to run; the table gives each system's median METG over them and the range.
    #[arg(long, default_value_t = 1, value_parser = repeats)]
    pub runs: usize,
    /// Largest -iter of the sweep.
    #[arg(long, default_value_t = 65536, value_parser = iterations)]
    pub max_iter: i64,
    /// Smallest -iter of the sweep.
    #[arg(long, default_value_t = 1, value_parser = iterations)]
    pub min_iter: i64,
    /// Peak FLOP/s (or B/s for memory_bound) of the machine; measured when not given.
    #[arg(long, value_parser = positive)]
    pub peak: Option<f64>,
    /// Efficiency threshold.
    #[arg(long, default_value_t = 0.5, value_parser = threshold)]
    pub threshold: f64,
    /// Statistic over repetitions.
    #[arg(long, value_enum, default_value_t = Stat::Mean)]
    pub stat: Stat,
    /// Cores of the machine (task granularity = elapsed × cores / tasks); default: all.
    #[arg(long, value_parser = workers)]
    pub cores: Option<usize>,
    /// Worker threads for our systems (default: --cores); with --ranks, shared among the
    /// ranks (at least one each).
    #[arg(long, value_parser = workers)]
    pub worker: Option<usize>,
    /// Also run each of our systems that runs on ranks on R ranks (named SYSTEM@R), started
    /// by --launcher, beside its single-process run.
    #[arg(long, value_parser = workers)]
    pub ranks: Option<usize>,
    /// The launcher prefix for --ranks; `{R}` is replaced by the rank count.
    #[arg(long, default_value = "mpirun -np {R}")]
    pub launcher: String,
    /// Longest a single run may take, in seconds.
    #[arg(long, default_value_t = 600.0, value_parser = seconds)]
    pub timeout: f64,
    /// Noise tolerance: a size whose repetitions spread by more than this fraction of their
    /// median, or that was measured while a calibration run was this much slower than its
    /// best, is noisy (repeated, then flagged).
    #[arg(long, default_value_t = 0.1, value_parser = fraction)]
    pub noise: f64,
    /// Extra runs allowed for repeating noisy sizes, as a fraction of the planned runs.
    #[arg(long, default_value_t = 0.5, value_parser = fraction)]
    pub retry_budget: f64,
    /// Directory for raw logs, CSV, JSON summary and plots (checked before the first run).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `taskbench metg analyze`.
#[derive(Parser, Debug)]
#[command(
    name = "taskbench metg analyze",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TASKBENCH_GIT_REVISION"), ")"),
    about = "METG from Task Bench logs, as the reference scripts/chart_metg.py computes it"
)]
pub struct AnalyzeArgs {
    /// Log files, each holding the runs of one sweep (reports concatenated).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Cores per node the runs used.
    #[arg(long, value_parser = positive)]
    pub cores: f64,
    /// Nodes the runs used.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    pub nodes: f64,
    /// Graphs per run (-and).
    #[arg(long, default_value_t = 1, value_parser = repeats)]
    pub graphs: usize,
    /// Peak FLOP/s per node (without a peak, efficiency is relative to the largest size).
    #[arg(long, conflicts_with = "peak_bytes", value_parser = positive)]
    pub peak: Option<f64>,
    /// Peak B/s per node, for memory_bound logs.
    #[arg(long, value_parser = positive)]
    pub peak_bytes: Option<f64>,
    /// Efficiency threshold.
    #[arg(long, default_value_t = 0.5, value_parser = threshold)]
    pub threshold: f64,
    /// Statistic over repetitions.
    #[arg(long, value_enum, default_value_t = Stat::Mean)]
    pub stat: Stat,
    /// Print a JSON array, one object per file.
    #[arg(long)]
    pub json: bool,
}

/// What parsing found: options to act on, or help/version text already printed.
pub enum Parsed<T> {
    /// Options to run with.
    Run(T),
    /// `--help` or `--version` was printed; nothing else to do.
    Shown,
}

/// Parses `args` (without a program name) with clap, turning its errors into one-line
/// [`Usage`] errors and printing help and version to stdout.
pub fn parse<T: Parser>(name: &str, args: Vec<String>) -> anyhow::Result<Parsed<T>> {
    match T::try_parse_from(std::iter::once(name.to_string()).chain(args)) {
        Ok(t) => Ok(Parsed::Run(t)),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            tactor_cli::out!("{}", e.render());
            Ok(Parsed::Shown)
        }
        Err(e) => {
            let line = tactor_cli::args::one_line(&e);
            let first = line.strip_prefix("error: ").unwrap_or(&line);
            usage!(
                "{first} (see taskbench {} --help)",
                &name["taskbench ".len()..]
            )
        }
    }
}

/// Splits `taskbench metg` arguments into our double-dash options, each joined with its value
/// as `--name=value` (so a value like `-1` or `nan` reaches the option's check instead of
/// reading as a flag), and the single-dash Task Bench flags of the graphs.
pub fn split(args: &[String], takes_value: &[&str]) -> (Vec<String>, Vec<String>) {
    let (mut ours, mut graph) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with("--") {
            if takes_value.contains(&a.as_str()) && i + 1 < args.len() {
                i += 1;
                ours.push(format!("{a}={}", args[i]));
            } else {
                ours.push(a.clone());
            }
        } else if a == "-h" {
            ours.push("--help".into());
        } else if a == "-V" {
            ours.push("--version".into());
        } else {
            graph.push(a.clone());
        }
        i += 1;
    }
    (ours, graph)
}
