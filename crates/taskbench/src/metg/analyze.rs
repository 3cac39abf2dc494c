//! METG from Task Bench reports (SPEC §6), computed exactly as the reference
//! `scripts/chart_metg.py` does, with a clear reason instead of an assertion where it has none.
//!
//! Runs are read from logs in the reference output format (any number of runs concatenated),
//! grouped by iteration count, reduced to one statistic per size, and the smallest task
//! granularity whose efficiency is still at or above the threshold is interpolated linearly
//! with the next smaller size.

use serde::Serialize;
use std::fmt;

/// One Task Bench run read from a report.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Run {
    /// `Elapsed Time` in seconds.
    pub elapsed: f64,
    /// `Iterations` of the first graph.
    pub iterations: i64,
    /// `Time Steps` of the first graph.
    pub steps: i64,
    /// `Max Width` of the first graph.
    pub width: i64,
    /// `Output Bytes` of the first graph.
    pub output: i64,
    /// `Total Tasks`.
    pub tasks: i64,
    /// `Total FLOPs`.
    pub flops: i64,
    /// `Total Bytes`.
    pub bytes: i64,
}

/// How repetitions of one size are reduced to one elapsed time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    /// The mean (the reference's choice).
    Mean,
    /// The median.
    Median,
    /// The minimum.
    Min,
}

/// What efficiency is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Peak {
    /// Peak FLOP/s per node.
    Flops(f64),
    /// Peak B/s per node.
    Bytes(f64),
    /// Relative to the largest size (the reference's fallback without a peak).
    Relative,
}

/// Parameters of the analysis, as the reference script takes them.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Graphs per run (`-and`): per-graph lines appear this many times per report.
    pub ngraphs: usize,
    /// Nodes the runs used.
    pub nodes: f64,
    /// Cores per node.
    pub cores: f64,
    /// Efficiency threshold (0.5 for METG(50%)).
    pub threshold: f64,
    /// The peak efficiency is measured against.
    pub peak: Peak,
    /// Reduction of repetitions.
    pub stat: Stat,
}

/// One problem size after reducing its repetitions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// `-iter`.
    pub iterations: i64,
    /// Repetitions measured.
    pub reps: usize,
    /// The chosen statistic of the elapsed times, seconds.
    pub elapsed: f64,
    /// Standard deviation of the elapsed times (population, like numpy.std).
    pub elapsed_std: f64,
    /// Smallest and largest elapsed time.
    pub elapsed_min: f64,
    /// Largest elapsed time.
    pub elapsed_max: f64,
    /// Total tasks per run.
    pub tasks: i64,
    /// FLOPs per run.
    pub flops: i64,
    /// Bytes per run.
    pub bytes: i64,
    /// FLOP/s at the chosen elapsed time.
    pub flops_per_second: f64,
    /// B/s at the chosen elapsed time.
    pub bytes_per_second: f64,
    /// Task granularity: elapsed × nodes × cores / tasks, seconds.
    pub granularity: f64,
    /// Rate over peak.
    pub efficiency: f64,
}

/// Why METG is not defined for a set of runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Undefined {
    /// The logs hold no report.
    Empty,
    /// The logs are not consistent (the reference's consistency assertions).
    Inconsistent(String),
    /// Some run took no measurable time.
    ZeroElapsed {
        /// The `-iter` of that run.
        iterations: i64,
    },
    /// No size reaches the threshold.
    NeverReaches {
        /// The best efficiency measured.
        best: f64,
    },
    /// Every size is at or above the threshold: smaller sizes are needed.
    NeverFallsBelow {
        /// The worst efficiency measured.
        worst: f64,
    },
    /// Efficiency above 150%: the peak or the timing is wrong.
    Suspicious {
        /// The efficiency found.
        efficiency: f64,
        /// At this `-iter`.
        iterations: i64,
    },
    /// The smallest efficient size has no smaller size after it.
    NoPointAfter,
    /// The size after the smallest efficient one has fewer repetitions (a truncated run).
    FewerReps {
        /// The `-iter` of the truncated size.
        iterations: i64,
    },
}

impl fmt::Display for Undefined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undefined::Empty => write!(f, "the logs hold no Task Bench report"),
            Undefined::Inconsistent(why) => write!(f, "the logs are inconsistent: {why}"),
            Undefined::ZeroElapsed { iterations } => {
                write!(f, "a run at -iter {iterations} reports an elapsed time of 0: no rate can be computed")
            }
            Undefined::NeverReaches { best } => {
                write!(f, "never reaches the threshold (best efficiency {:.1}%)", best * 100.0)
            }
            Undefined::NeverFallsBelow { worst } => write!(
                f,
                "never falls below the threshold (lowest efficiency {:.1}%): sweep smaller sizes",
                worst * 100.0
            ),
            Undefined::Suspicious { efficiency, iterations } => write!(
                f,
                "efficiency {:.0}% at -iter {iterations} is above 150%: is the peak right, was the run timed correctly?",
                efficiency * 100.0
            ),
            Undefined::NoPointAfter => write!(f, "no smaller size follows the last one above the threshold"),
            Undefined::FewerReps { iterations } => write!(
                f,
                "the size after the last one above the threshold (-iter {iterations}) has fewer repetitions: the run may have been truncated"
            ),
        }
    }
}

/// The analysis of one set of runs.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// Sizes, largest first.
    pub points: Vec<Point>,
    /// METG in seconds of task granularity, or why it is undefined.
    pub metg: Result<f64, Undefined>,
}

/// Per-run numbers from logs in the reference output format. Each column is collected over
/// the whole text, as the reference does, then per-graph columns are reduced to the first graph.
pub fn parse_runs(text: &str, ngraphs: usize) -> Result<Vec<Run>, Undefined> {
    let mut cols: [Vec<f64>; 8] = Default::default();
    // Column order: elapsed, iterations, output, steps, tasks, flops, bytes, width.
    for line in text.lines() {
        let l = line.trim_start();
        let field = |prefix: &str, suffix: &str| {
            l.strip_prefix(prefix).and_then(|r| r.strip_suffix(suffix))
        };
        let hits = [
            (0, field("Elapsed Time ", " seconds"), true),
            (1, field("Iterations: ", ""), false),
            (2, field("Output Bytes: ", ""), false),
            (3, field("Time Steps: ", ""), false),
            (4, field("Total Tasks ", ""), false),
            (5, field("Total FLOPs ", ""), false),
            (6, field("Total Bytes ", ""), false),
            (7, field("Max Width: ", ""), false),
        ];
        for (col, value, float) in hits {
            let Some(v) = value else { continue };
            let ok = if float {
                !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || ".e+-".contains(c))
            } else {
                !v.is_empty() && v.chars().all(|c| c.is_ascii_digit())
            };
            if let (true, Ok(x)) = (ok, v.parse::<f64>()) {
                cols[col].push(x);
            }
        }
    }
    if cols[4].is_empty() {
        return Err(Undefined::Empty);
    }
    let g = ngraphs.max(1);
    for &c in &[1usize, 2, 3, 7] {
        if cols[c].len() % g != 0 {
            return Err(Undefined::Inconsistent(format!(
                "{} per-graph lines are not a multiple of {g} graphs",
                cols[c].len()
            )));
        }
        if cols[c].chunks(g).any(|ch| ch.iter().any(|&v| v != ch[0])) {
            return Err(Undefined::Inconsistent(
                "the graphs of one run are not identical".into(),
            ));
        }
        cols[c] = cols[c].iter().step_by(g).copied().collect();
    }
    let n = cols[0].len();
    if cols.iter().any(|c| c.len() != n) {
        let counts: Vec<usize> = cols.iter().map(Vec::len).collect();
        return Err(Undefined::Inconsistent(format!(
            "columns are uneven (counts {counts:?}): a report is incomplete"
        )));
    }
    Ok((0..n)
        .map(|i| Run {
            elapsed: cols[0][i],
            iterations: cols[1][i] as i64,
            output: cols[2][i] as i64,
            steps: cols[3][i] as i64,
            tasks: cols[4][i] as i64,
            flops: cols[5][i] as i64,
            bytes: cols[6][i] as i64,
            width: cols[7][i] as i64,
        })
        .collect())
}

fn reduce(elapsed: &mut [f64], stat: Stat) -> f64 {
    elapsed.sort_by(f64::total_cmp);
    let n = elapsed.len();
    match stat {
        Stat::Mean => elapsed.iter().sum::<f64>() / n as f64,
        Stat::Min => elapsed[0],
        Stat::Median if n % 2 == 1 => elapsed[n / 2],
        Stat::Median => (elapsed[n / 2 - 1] + elapsed[n / 2]) / 2.0,
    }
}

/// Groups runs by size and computes each size's rate, granularity and efficiency.
pub fn points(runs: &[Run], p: &Params) -> Result<Vec<Point>, Undefined> {
    if runs.is_empty() {
        return Err(Undefined::Empty);
    }
    let first = runs[0];
    for (what, same) in [
        ("time steps", runs.iter().all(|r| r.steps == first.steps)),
        ("widths", runs.iter().all(|r| r.width == first.width)),
        ("task counts", runs.iter().all(|r| r.tasks == first.tasks)),
    ] {
        if !same {
            return Err(Undefined::Inconsistent(format!(
                "{what} differ between runs"
            )));
        }
    }
    let mut sizes: Vec<i64> = runs.iter().map(|r| r.iterations).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    let mut out = Vec::new();
    for &iterations in &sizes {
        let group: Vec<&Run> = runs.iter().filter(|r| r.iterations == iterations).collect();
        if group
            .iter()
            .any(|r| r.flops != group[0].flops || r.bytes != group[0].bytes)
        {
            return Err(Undefined::Inconsistent(format!(
                "FLOPs or bytes differ between runs at -iter {iterations}"
            )));
        }
        let mut el: Vec<f64> = group.iter().map(|r| r.elapsed).collect();
        if el.iter().any(|&e| e <= 0.0) {
            return Err(Undefined::ZeroElapsed { iterations });
        }
        let n = el.len() as f64;
        let mean = el.iter().sum::<f64>() / n;
        let std = (el.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / n).sqrt();
        let elapsed = reduce(&mut el, p.stat);
        let (flops, bytes, tasks) = (group[0].flops, group[0].bytes, group[0].tasks);
        out.push(Point {
            iterations,
            reps: group.len(),
            elapsed,
            elapsed_std: std,
            elapsed_min: el[0],
            elapsed_max: el[el.len() - 1],
            tasks,
            flops,
            bytes,
            flops_per_second: flops as f64 / elapsed,
            bytes_per_second: bytes as f64 / elapsed,
            granularity: elapsed / tasks as f64 * p.nodes * p.cores,
            efficiency: 0.0,
        });
    }
    let (top_elapsed, top_iter) = (out[0].elapsed, out[0].iterations as f64);
    for pt in &mut out {
        pt.efficiency = match p.peak {
            Peak::Flops(peak) => pt.flops_per_second / p.nodes / peak,
            Peak::Bytes(peak) => pt.bytes_per_second / p.nodes / peak,
            Peak::Relative => top_elapsed / (pt.elapsed * (top_iter / pt.iterations as f64)),
        };
    }
    Ok(out)
}

/// METG of the given sizes (largest first), as the reference computes it.
pub fn metg(points: &[Point], threshold: f64) -> Result<f64, Undefined> {
    let best = points
        .iter()
        .map(|p| p.efficiency)
        .fold(f64::NEG_INFINITY, f64::max);
    let worst = points
        .iter()
        .map(|p| p.efficiency)
        .fold(f64::INFINITY, f64::min);
    if points.is_empty() {
        return Err(Undefined::Empty);
    }
    if best < threshold {
        return Err(Undefined::NeverReaches { best });
    }
    if worst >= threshold {
        return Err(Undefined::NeverFallsBelow { worst });
    }
    if let Some(p) = points.iter().find(|p| p.efficiency >= 1.5) {
        return Err(Undefined::Suspicious {
            efficiency: p.efficiency,
            iterations: p.iterations,
        });
    }
    // The first of the smallest granularities among the efficient sizes, like Python's min().
    let (i, _) = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.efficiency >= threshold)
        .fold(None, |acc: Option<(usize, f64)>, (i, p)| match acc {
            Some((_, g)) if g <= p.granularity => acc,
            _ => Some((i, p.granularity)),
        })
        .expect("some size reaches the threshold");
    let Some(next) = points.get(i + 1) else {
        return Err(Undefined::NoPointAfter);
    };
    let cur = &points[i];
    if next.reps < cur.reps {
        return Err(Undefined::FewerReps {
            iterations: next.iterations,
        });
    }
    if next.granularity >= cur.granularity {
        return Ok(cur.granularity);
    }
    Ok(interp(
        threshold,
        (next.efficiency, next.granularity),
        (cur.efficiency, cur.granularity),
    ))
}

/// numpy.interp over two points `(x0, y0)`, `(x1, y1)` with `x0 < x1`: clamps outside, and
/// uses numpy's slope form inside so results agree to the last bit.
fn interp(x: f64, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) -> f64 {
    if x <= x0 {
        return y0;
    }
    if x >= x1 {
        return y1;
    }
    let slope = (y1 - y0) / (x1 - x0);
    slope * (x - x0) + y0
}

/// Parses, groups and analyses the runs in `text`.
pub fn analyze_text(text: &str, p: &Params) -> Analysis {
    match parse_runs(text, p.ngraphs).and_then(|runs| points(&runs, p)) {
        Ok(points) => {
            let metg = metg(&points, p.threshold);
            Analysis { points, metg }
        }
        Err(e) => Analysis {
            points: Vec::new(),
            metg: Err(e),
        },
    }
}
