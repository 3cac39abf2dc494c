//! `taskbench metg`: measures, compares and plots METG for our systems and any Task Bench
//! program; `taskbench metg analyze` computes METG from existing logs.

/// Prints to stdout; a reader that went away (`| head`) does not stop the sweep from saving
/// its files.
macro_rules! out {
    ($($arg:tt)*) => { tactor_cli::out!($($arg)*) };
}

pub mod analyze;
mod args;
mod compare;
mod load;
mod noise;
pub(crate) mod output;
mod process;
mod results;
pub mod sweep;

pub use args::Usage;

use analyze::{analyze_text, Params, Peak};
use args::{AnalyzeArgs, MetgArgs, Parsed};
use serde_json::json;

/// Our options that take a value (everything else double-dash is a switch).
const TAKES_VALUE: [&str; 17] = [
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
    "--ranks",
    "--launcher",
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
        Parsed::Run(m) => compare::run_sweep(&m, graph),
        Parsed::Shown => Ok(()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_option_with_a_value_is_split_as_one() {
        // An option missing from TAKES_VALUE would lose its value to the graph flags.
        for arg in MetgArgs::command().get_arguments() {
            let (Some(long), true) = (arg.get_long(), arg.get_action().takes_values()) else {
                continue;
            };
            let flag = format!("--{long}");
            assert!(TAKES_VALUE.contains(&flag.as_str()), "{flag} missing");
        }
    }
}
