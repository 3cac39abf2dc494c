//! `taskbench study`: seed 004's experiments at this machine's scale, in one command. Each
//! figure is a series of `taskbench metg` comparisons (the same sweeps, noise checks and
//! files), one per point of its x axis; the study gathers what each measured into one CSV,
//! one JSON and one plot per figure, rewritten after every point so that a stopped study keeps
//! what it measured.
//!
//! - Figure 1: METG against width per core (stencil_1d, compute_bound);
//! - Figure 2: weak scaling over ranks (16 points per worker; more ranks than cores are
//!   oversubscribed, and labelled so);
//! - Figure 3: the `load_imbalance` kernel over imbalance factors, at one task size: each
//!   system's rate against its own balanced one;
//! - Figure 4: `spread` with 1 KiB outputs over the number of dependencies, at one task size;
//! - Figure 5: `all_to_all` with 16 B outputs, METG against width per core.

mod figures;
mod plot;

use crate::metg::Usage;
use anyhow::Context;
use clap::Parser;
use figures::{Figure, Metric, Point};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Options of `taskbench study`.
#[derive(Parser, Debug)]
#[command(
    name = "taskbench study",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TASKBENCH_GIT_REVISION"), ")"),
    about = "Seed 004's experiments at this machine's scale: METG against width per core, weak \
             scaling over ranks, load imbalance, spread and all_to_all; a CSV, a JSON and a plot \
             per figure",
    after_help = "Example: taskbench study --figures 1,3 --system bsp,forkjoin,parfor --out results/study"
)]
pub struct StudyArgs {
    /// Our systems, comma-separated (default: all; see `taskbench --list`).
    #[arg(long, value_delimiter = ',')]
    pub system: Vec<String>,
    /// Another Task Bench program, 'NAME=COMMAND' (repeatable); in figure 2 `{R}` in it is
    /// the rank count (an external without `{R}` is left out of figure 2).
    #[arg(long)]
    pub external: Vec<String>,
    /// Figures to measure, comma-separated (1 to 5).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5", value_parser = clap::value_parser!(u8).range(1..=5))]
    pub figures: Vec<u8>,
    /// Points per core of figures 1 and 5.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub widths: Vec<u32>,
    /// Rank counts of figure 2.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub ranks: Vec<u32>,
    /// Imbalance factors of figure 3 (0 to 2; the first is the balanced reference).
    #[arg(long, value_delimiter = ',', default_value = "0,0.5,1,1.5,2", value_parser = imbalance)]
    pub imbalance: Vec<f64>,
    /// Dependencies per point of figure 4 (`spread`'s radix; at most the width).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub radix: Vec<u32>,
    /// Timesteps of the METG figures (1, 2, 5).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    pub steps: i64,
    /// Timesteps of the one-size figures (3, 4).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    pub fixed_steps: i64,
    /// -iter of the one-size figures (3, 4); the seed used 2^20.
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(i64).range(1..=1 << 30))]
    pub iter: i64,
    /// Repetitions of each size (as `taskbench metg --reps`).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// Whole sweeps per point (as `taskbench metg --runs`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// The launcher of figure 2; `{R}` is replaced by the rank count (`--oversubscribe` is added
    /// to mpirun where the ranks' workers outnumber the cores).
    #[arg(long, default_value = "mpirun -np {R}")]
    pub launcher: String,
    /// Longest a single run may take, in seconds (as `taskbench metg --timeout`).
    #[arg(long, default_value = "600")]
    pub timeout: String,
    /// Folder for the figures and every point's `taskbench metg` results.
    #[arg(long, default_value = "results/study")]
    pub out: PathBuf,
}

fn imbalance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=2.0).contains(&x) => Ok(x),
        _ => Err("must be a number from 0 to 2".into()),
    }
}

/// One system's result at one point of a figure.
#[derive(Serialize, Debug, Clone)]
pub(crate) struct Row {
    /// The figure's number.
    pub figure: u8,
    /// The point's place on the x axis.
    pub x: f64,
    /// The point, in words.
    pub label: String,
    /// The contender (`SYSTEM@R` on ranks).
    pub system: String,
    /// METG (figures 1, 2, 5), in µs; `None` when it is undefined at this point.
    pub metg_us: Option<f64>,
    /// The best efficiency the sweep reached (figures 1, 2, 5) or the efficiency at the one
    /// size (3, 4), against the point's measured peak.
    pub efficiency: Option<f64>,
    /// The rate at the one size against this system's at the figure's first point (figure 3:
    /// against its balanced run).
    pub vs_first: Option<f64>,
    /// Why there is no value, if there is none.
    pub note: Option<String>,
}

/// Runs `taskbench study ARGS`.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let argv = std::iter::once("taskbench study".to_string()).chain(args.iter().cloned());
    let a = match StudyArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            return Err(Usage(
                tactor_cli::args::one_line(&e)
                    .trim_start_matches("error: ")
                    .to_string(),
            )
            .into())
        }
        Err(e) => {
            tactor_cli::out!("{}", e.render());
            return Ok(());
        }
    };
    let cores = crate::systems::default_workers();
    let figures = figures::plan(&a, cores)?;
    std::fs::create_dir_all(&a.out).map_err(|e| {
        Usage(format!(
            "Invalid option \"--out {}\": cannot create it: {e}",
            a.out.display()
        ))
    })?;
    let total: usize = figures.iter().map(|f| f.points.len()).sum();
    let mut done = 0;
    for fig in &figures {
        let (mut rows, mut first) = (Vec::new(), HashMap::new());
        for point in &fig.points {
            done += 1;
            tactor_cli::say!(
                "study: figure {} ({}), {} [{done}/{total}]",
                fig.number,
                fig.title,
                point.label
            );
            let dir = a.out.join(format!("fig{}", fig.number)).join(&point.dir);
            let mut argv = point.metg.clone();
            argv.extend(["--out".to_string(), dir.display().to_string()]);
            argv.extend(point.graph.iter().cloned());
            crate::metg::main(&argv)
                .with_context(|| format!("figure {}, {}", fig.number, point.label))?;
            rows.extend(gather(fig, point, &dir, &mut first)?);
            write(&a.out, fig, &rows)?;
        }
    }
    tactor_cli::out!("study: figures written to {}\n", a.out.display());
    Ok(())
}

/// The rows of one point, read from the `summary.json` its comparison wrote. `first` holds each
/// system's rate at the figure's first point where it had one (the reference of `vs_first`).
fn gather(
    fig: &Figure,
    point: &Point,
    dir: &Path,
    first: &mut HashMap<String, f64>,
) -> anyhow::Result<Vec<Row>> {
    let path = dir.join("summary.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let summary: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let systems = summary["systems"].as_array().cloned().unwrap_or_default();
    Ok(systems
        .iter()
        .map(|s| {
            let system = s["name"].as_str().unwrap_or("?").to_string();
            let points = s["points"].as_array().cloned().unwrap_or_default();
            let at_size = points
                .iter()
                .find(|p| Some(p["iterations"].as_i64().unwrap_or(-1)) == point.iter);
            let (metg_us, efficiency, vs_first) = match fig.metric {
                Metric::Metg => (s["metg_us"].as_f64(), s["best_efficiency"].as_f64(), None),
                Metric::AtSize => {
                    let rate = at_size.and_then(|p| p["flops_per_second"].as_f64());
                    let vs = rate.map(|r| r / *first.entry(system.clone()).or_insert(r));
                    (None, at_size.and_then(|p| p["efficiency"].as_f64()), vs)
                }
            };
            // The figure's value missing: say why (METG undefined, or the contender failed).
            let missing = match fig.metric {
                Metric::Metg => metg_us.is_none(),
                Metric::AtSize => vs_first.is_none(),
            };
            let note = missing.then(|| {
                let why = s["error"].as_str().or(s["metg_undefined"].as_str());
                why.unwrap_or("no result").to_string()
            });
            Row {
                figure: fig.number,
                x: point.x,
                label: point.label.clone(),
                system,
                metg_us,
                efficiency,
                vs_first,
                note,
            }
        })
        .collect())
}

/// Writes one figure's CSV, JSON and plot.
fn write(out: &Path, fig: &Figure, rows: &[Row]) -> anyhow::Result<()> {
    let base = out.join(format!("fig{}", fig.number));
    let mut csv = csv::Writer::from_path(base.with_extension("csv"))?;
    for r in rows {
        csv.serialize(r)?;
    }
    csv.flush()?;
    let json = serde_json::json!({ "figure": fig.number, "title": fig.title, "x": fig.x_label, "rows": rows });
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    plot::draw(&base.with_extension("svg"), fig, rows)
}
