//! What whole sweeps give: each run analysed (peak, plausibility, METG, noise interval), the
//! runs combined per contender, and the files written under `--out`.

use super::analyze::{metg, points, Analysis, Params, Peak};
use super::args::MetgArgs;
use super::noise;
use super::output::{self, Machine, Outcome};
use super::sweep::{self, Contender, Sweep};
use serde_json::json;
use std::path::Path;

/// One whole sweep, analysed.
pub(super) struct RunResult {
    pub(super) sweep: Sweep,
    pub(super) peak: f64,
    pub(super) peak_source: String,
    pub(super) outcomes: Vec<Outcome>,
}

pub(super) fn analyse_run(
    m: &MetgArgs,
    cs: &[Contender],
    mut sw: Sweep,
    params: &dyn Fn(Peak) -> Params,
    bytes: bool,
) -> anyhow::Result<RunResult> {
    let rate = |p: &super::analyze::Point| {
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

/// One outcome per contender over all runs: the analysis of the run whose METG is the median
/// (the last run if none has one), with every run's METG. Runs measured under noise near
/// this contender's METG are left out of the median when at least one clean run exists.
pub(super) fn combine(results: &[RunResult]) -> Vec<Outcome> {
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
pub(super) fn write_results(
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
    step: Option<f64>,
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
        "step_probe_ns": step.map(|s| s * 1e9),
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
                        "step_probe_ns": step_ns(&run.sweep),
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

/// The step probe's times of a sweep, in ns.
fn step_ns(sweep: &Sweep) -> Vec<f64> {
    sweep.step_seconds.iter().map(|s| s * 1e9).collect()
}
