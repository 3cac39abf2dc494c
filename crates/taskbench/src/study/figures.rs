//! The study's figures: for each, the `taskbench metg` comparison behind every point of its
//! x axis.

use super::StudyArgs;
use crate::metg::Usage;

/// What a figure shows per system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// METG from a sweep of task sizes.
    Metg,
    /// The efficiency at one task size.
    AtSize,
}

/// One figure: its points and how to read them.
pub struct Figure {
    pub number: u8,
    pub title: &'static str,
    pub x_label: &'static str,
    pub metric: Metric,
    pub points: Vec<Point>,
}

/// One point of a figure's x axis: a whole comparison.
pub struct Point {
    pub x: f64,
    pub label: String,
    /// Its folder under the figure's.
    pub dir: String,
    /// `taskbench metg` options.
    pub metg: Vec<String>,
    /// Task Bench flags of the graph.
    pub graph: Vec<String>,
    /// The one task size of an `AtSize` figure.
    pub iter: Option<i64>,
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The figures `a` asks for on a machine of `cores` cores.
pub fn plan(a: &StudyArgs, cores: usize) -> Result<Vec<Figure>, Usage> {
    let mut systems = a.system.clone();
    if systems.is_empty() {
        systems = crate::systems::all()
            .iter()
            .map(|s| s.name().to_string())
            .collect();
    }
    if let Some(bad) = systems
        .iter()
        .find(|s| crate::systems::by_name(s).is_none())
    {
        return Err(Usage(format!(
            "Invalid option \"--system {bad}\": see taskbench --list"
        )));
    }
    let common = |externals: &[String]| {
        let mut v = words(&format!(
            "--reps {} --runs {} --timeout {}",
            a.reps, a.runs, a.timeout
        ));
        v.extend(["--system".to_string(), systems.join(",")]);
        for e in externals {
            v.extend(["--external".to_string(), e.clone()]);
        }
        v
    };
    let all_ext = common(&a.external);
    let per_core_16 = 16 * cores;
    let mut figures = Vec::new();
    for &n in &a.figures {
        let fig = match n {
            1 | 5 => {
                let (ty, title) = if n == 1 {
                    (
                        "-type stencil_1d",
                        "METG against width per core, stencil_1d",
                    )
                } else {
                    (
                        "-type all_to_all -output 16",
                        "METG against width per core, all_to_all, 16 B outputs",
                    )
                };
                let points = a.widths.iter().map(|&w| Point {
                    x: f64::from(w),
                    label: format!("{w} per core"),
                    dir: format!("w{w}"),
                    metg: all_ext.clone(),
                    graph: words(&format!(
                        "-steps {} -width {} {ty} -kernel compute_bound",
                        a.steps,
                        w as usize * cores
                    )),
                    iter: None,
                });
                Figure {
                    number: n,
                    title,
                    x_label: "points per core",
                    metric: Metric::Metg,
                    points: points.collect(),
                }
            }
            2 => {
                let mut points = Vec::new();
                for &r in &a.ranks {
                    let r = r as usize;
                    let per_rank = (cores / r).max(1);
                    let over = r * per_rank > cores;
                    let width = 16 * r * per_rank;
                    let externals: Vec<String> = (a.external.iter())
                        .filter(|e| e.contains("{R}"))
                        .map(|e| e.replace("{R}", &r.to_string()))
                        .collect();
                    let mut metg = common(&externals);
                    if r > 1 {
                        let mut launcher = a.launcher.clone();
                        if over
                            && launcher.starts_with("mpirun")
                            && !launcher.contains("--oversubscribe")
                        {
                            launcher = launcher.replacen("mpirun", "mpirun --oversubscribe", 1);
                        }
                        metg.extend([
                            "--ranks".into(),
                            r.to_string(),
                            "--launcher".into(),
                            launcher,
                        ]);
                        metg.extend(["--worker".into(), (r * per_rank).to_string()]);
                    }
                    points.push(Point {
                        x: r as f64,
                        label: format!(
                            "{r} rank(s) × {per_rank} worker(s){}",
                            if over { ", oversubscribed" } else { "" }
                        ),
                        dir: format!("r{r}"),
                        metg,
                        graph: words(&format!(
                            "-steps {} -width {width} -type stencil_1d -kernel compute_bound",
                            a.steps
                        )),
                        iter: None,
                    });
                }
                Figure {
                    number: 2,
                    title: "weak scaling over ranks, stencil_1d, 16 points per worker",
                    x_label: "ranks",
                    metric: Metric::Metg,
                    points,
                }
            }
            3 => Figure {
                number: 3,
                title: "load_imbalance, stencil_1d, 16 points per core",
                x_label: "imbalance factor",
                metric: Metric::AtSize,
                points: (a.imbalance.iter())
                    .map(|&f| {
                        let graph =
                            format!("-type stencil_1d -kernel load_imbalance -imbalance {f}");
                        one_size(
                            a,
                            per_core_16,
                            &all_ext,
                            f,
                            format!("imbalance {f}"),
                            format!("i{f}"),
                            &graph,
                        )
                    })
                    .collect(),
            },
            4 => {
                if let Some(r) = a.radix.iter().find(|&&r| r as usize > per_core_16) {
                    return Err(Usage(format!(
                        "Invalid option \"--radix {r}\": figure 4's width is {per_core_16} (16 per core) and a point cannot depend on more"
                    )));
                }
                Figure {
                    number: 4,
                    title: "spread, 1 KiB outputs, 16 points per core",
                    x_label: "dependencies per point",
                    metric: Metric::AtSize,
                    points: (a.radix.iter())
                        .map(|&r| {
                            let graph = format!(
                                "-type spread -radix {r} -output 1024 -kernel compute_bound"
                            );
                            one_size(
                                a,
                                per_core_16,
                                &all_ext,
                                f64::from(r),
                                format!("{r} dependencies"),
                                format!("d{r}"),
                                &graph,
                            )
                        })
                        .collect(),
                }
            }
            _ => unreachable!("clap keeps --figures within 1..=5"),
        };
        figures.push(fig);
    }
    Ok(figures)
}

/// A point of a one-size figure: `width` points (16 per core) of `graph` (type and kernel flags) at
/// `a.iter` iterations, `a.fixed_steps` timesteps.
fn one_size(
    a: &StudyArgs,
    width: usize,
    common: &[String],
    x: f64,
    label: String,
    dir: String,
    graph: &str,
) -> Point {
    let mut metg = common.to_vec();
    metg.extend(words(&format!("--max-iter {0} --min-iter {0}", a.iter)));
    Point {
        x,
        label,
        dir,
        metg,
        graph: words(&format!(
            "-steps {} -width {} {graph}",
            a.fixed_steps, width
        )),
        iter: Some(a.iter),
    }
}
