//! The table (median and spread per row and implementation, Tactor's ratios) and the files.

use crate::chains::Sample;
use std::fmt::Write;
use std::path::Path;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The value a row reports for one sample: µs per hop for latency rows, millions of messages
/// per second for the rate rows.
fn value(s: &Sample) -> f64 {
    if s.kind == "rate" {
        (s.chains * s.steps) as f64 / s.seconds / 1e6
    } else {
        s.seconds / s.steps as f64 * 1e6
    }
}

/// Median and spread of `implementation` on the row of `like`.
fn stats(all: &[Sample], like: &Sample, implementation: &str) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = all
        .iter()
        .filter(|s| {
            s.implementation == implementation
                && s.kind == like.kind
                && s.chains == like.chains
                && s.bytes == like.bytes
        })
        .map(value)
        .collect();
    if v.is_empty() {
        return None;
    }
    let m = median(&mut v);
    Some((m, v[0], v[v.len() - 1]))
}

pub fn table(all: &[Sample]) -> String {
    let mut s = String::new();
    let reps = all.iter().map(|x| x.rep).max().map_or(0, |r| r + 1);
    let _ = writeln!(
        s,
        "Chains of tasks alternating between 2 ranks (seed 002); median of {reps} alternated repetitions, [min, max]."
    );
    let _ = writeln!(
        s,
        "latency: µs per hop (lower is better); rate: million messages/s (higher is better)."
    );
    let _ = writeln!(
        s,
        "{:<8} {:>7} {:>6} {:>7} | {:>24} | {:>24} | {:>24} | {:>9} {:>9}",
        "row", "bytes", "chains", "steps", "raw MPI", "parcelport", "tactor", "vs raw", "vs parcel"
    );
    let mut seen = Vec::new();
    for x in all {
        let key = (x.kind, x.bytes, x.chains);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let cell = |name: &str| match stats(all, x, name) {
            Some((m, lo, hi)) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
            None => "-".into(),
        };
        let m = |name: &str| stats(all, x, name).map_or(f64::NAN, |t| t.0);
        // Ratios say how many times better Tactor is (>1 is better), for either metric.
        let better = |other: &str| {
            if x.kind == "rate" {
                m("tactor") / m(other)
            } else {
                m(other) / m("tactor")
            }
        };
        let _ = writeln!(
            s,
            "{:<8} {:>7} {:>6} {:>7} | {:>24} | {:>24} | {:>24} | {:>8.2}x {:>8.2}x",
            x.kind,
            x.bytes,
            x.chains,
            x.steps,
            cell("raw"),
            cell("parcelport"),
            cell("tactor"),
            better("raw"),
            better("parcelport")
        );
    }
    s.push_str("'vs raw', 'vs parcel': how many times better tactor is (above 1: better).\n");
    s
}

pub fn write(dir: &Path, all: &[Sample]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_path(dir.join("results.csv"))?;
    for x in all {
        w.serialize(x)?;
    }
    w.flush()?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(all)? + "\n",
    )?;
    Ok(())
}
