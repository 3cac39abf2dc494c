//! METG results: the terminal table, the CSV of every point, the JSON summary with the
//! machine's description, and the efficiency-vs-granularity plot (PNG and SVG).

use super::analyze::{Analysis, Point};
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One contender's result.
pub struct Outcome {
    /// Its name.
    pub name: String,
    /// The analysis of its runs (of the run closest to the median, with `--runs`).
    pub analysis: Analysis,
    /// Why it stopped early, if it failed.
    pub error: Option<String>,
    /// Granularities (seconds) at which the curve crosses the threshold lowered and raised by
    /// the measured noise: the METG is only known to lie in between.
    pub interval: (Option<f64>, Option<f64>),
    /// Whether sizes near its METG were measured under noise.
    pub noisy: bool,
    /// METG (seconds) of every whole run, with `--runs`.
    pub runs: Vec<Option<f64>>,
    /// Whether it uses one core (its efficiency against the machine's peak is capped).
    pub single_core: bool,
    /// Runs (0-based) measured without noise near its METG; the median is taken over these
    /// when there are any.
    pub clean_runs: Vec<usize>,
}

impl Outcome {
    /// The METG to report: that of `analysis`, which with `--runs` is the run whose METG is
    /// the median over the clean runs (over all when none is clean), chosen by `combine`.
    pub fn metg(&self) -> Option<f64> {
        self.analysis.metg.as_ref().ok().copied()
    }

    /// Smallest and largest METG over runs.
    pub fn range(&self) -> Option<(f64, f64)> {
        let ok: Vec<f64> = self.runs.iter().flatten().copied().collect();
        let lo = ok.iter().copied().reduce(f64::min)?;
        Some((lo, ok.iter().copied().fold(lo, f64::max)))
    }
}

/// Where and on what the sweep ran.
#[derive(Serialize, Clone, Debug)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Operating system and kernel.
    pub os: String,
    /// The compiler that built taskbench.
    pub compiler: String,
    /// Git revision taskbench was built from (`-modified` for uncommitted changes).
    pub git_revision: String,
}

fn command_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Machine {
    /// Describes this machine.
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        let pretty = release
            .lines()
            .find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = command_line("uname", &["-r"]).unwrap_or_default();
        Machine {
            cpu,
            cores: crate::systems::default_workers(),
            os: format!("{pretty} (Linux {kernel})"),
            compiler: env!("TASKBENCH_RUSTC_VERSION").to_string(),
            git_revision: env!("TASKBENCH_GIT_REVISION").to_string(),
        }
    }
}

fn micros(seconds: f64) -> String {
    let us = seconds * 1e6;
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

fn opt_micros(x: Option<f64>) -> String {
    x.map_or("-".into(), micros)
}

/// The terminal table: METG with the interval the noise allows, its spread over runs, the
/// best efficiency and the efficiency at a few sizes per contender; one-core systems apart.
pub fn table(outcomes: &[Outcome], threshold: f64) -> String {
    let mut sizes: Vec<i64> = outcomes
        .iter()
        .flat_map(|o| o.analysis.points.iter().map(|p| p.iterations))
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    // A few sizes spread over the sweep: every third power of two from the largest.
    let shown: Vec<i64> = sizes.iter().step_by(3).copied().take(5).collect();
    let runs = outcomes.iter().map(|o| o.runs.len()).max().unwrap_or(1);
    let mut s = String::new();
    let name_w = outcomes
        .iter()
        .map(|o| o.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = write!(
        s,
        "{:<name_w$}  {:>15}  {:>17}",
        "system",
        format!("METG({:.0}%) µs", threshold * 100.0),
        "within noise µs"
    );
    if runs > 1 {
        let _ = write!(s, "  {:>28}", format!("range over {runs} runs, clean"));
    }
    let _ = write!(s, "  {:>12}", "peak reached");
    for n in &shown {
        let _ = write!(s, "  {:>9}", format!("eff@{n}"));
    }
    s.push('\n');
    let row = |s: &mut String, o: &Outcome| {
        let pts = &o.analysis.points;
        let best = pts.iter().map(|p| p.efficiency).fold(0.0f64, f64::max);
        let metg = match (o.metg(), &o.error) {
            (Some(m), _) => format!("{}{}", micros(m), if o.noisy { " *" } else { "  " }),
            (None, Some(_)) if pts.is_empty() => "failed  ".into(),
            (None, _) => "-  ".into(),
        };
        let interval = match o.interval {
            (None, None) => "-".into(),
            (a, b) => format!("[{}, {}]", opt_micros(a), opt_micros(b)),
        };
        let _ = write!(s, "{:<name_w$}  {:>15}  {:>17}", o.name, metg, interval);
        if runs > 1 {
            let range = o.range().map_or("-".into(), |(a, b)| {
                format!(
                    "[{}, {}] {}/{}",
                    micros(a),
                    micros(b),
                    o.clean_runs.len(),
                    o.runs.len()
                )
            });
            let _ = write!(s, "  {range:>28}");
        }
        let _ = write!(s, "  {:>11.1}%", best * 100.0);
        for n in &shown {
            match pts.iter().find(|p| p.iterations == *n) {
                Some(p) => {
                    let _ = write!(s, "  {:>8.1}%", p.efficiency * 100.0);
                }
                None => {
                    let _ = write!(s, "  {:>9}", "-");
                }
            }
        }
        s.push('\n');
    };
    for o in outcomes.iter().filter(|o| !o.single_core) {
        row(&mut s, o);
    }
    if outcomes.iter().any(|o| o.single_core) {
        let _ = writeln!(
            s,
            "one core (not comparable: against the whole machine's peak it cannot pass 1/cores efficiency):"
        );
        for o in outcomes.iter().filter(|o| o.single_core) {
            row(&mut s, o);
        }
    }
    let _ = writeln!(
        s,
        "Lower METG is better. '-': no METG (reason below). 'within noise': granularities where the curve is within the measured noise of {:.0}%.",
        threshold * 100.0
    );
    if runs > 1 {
        let _ = writeln!(s, "With several runs, METG is the median over the clean runs (those without noise near the METG), or over all when none is clean.");
    }
    if outcomes.iter().any(|o| o.noisy) {
        let _ = writeln!(s, "'*': sizes near this METG were measured under noise even after repeats; trust it less.");
    }
    for o in outcomes {
        if let Err(why) = &o.analysis.metg {
            let _ = writeln!(s, "  {}: METG undefined: {why}", o.name);
        }
        if let Some(e) = &o.error {
            let _ = writeln!(
                s,
                "  {}: stopped by an error: {}",
                o.name,
                e.lines().next().unwrap_or("")
            );
        }
    }
    s
}

/// Writes every point of every contender as CSV.
pub fn write_csv(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record([
        "system",
        "iterations",
        "reps",
        "elapsed_s",
        "elapsed_std_s",
        "elapsed_min_s",
        "elapsed_max_s",
        "tasks",
        "flops",
        "bytes",
        "flops_per_second",
        "bytes_per_second",
        "granularity_us",
        "efficiency",
    ])?;
    for o in outcomes {
        for p in &o.analysis.points {
            w.write_record([
                o.name.clone(),
                p.iterations.to_string(),
                p.reps.to_string(),
                format!("{:e}", p.elapsed),
                format!("{:e}", p.elapsed_std),
                format!("{:e}", p.elapsed_min),
                format!("{:e}", p.elapsed_max),
                p.tasks.to_string(),
                p.flops.to_string(),
                p.bytes.to_string(),
                format!("{:e}", p.flops_per_second),
                format!("{:e}", p.bytes_per_second),
                format!("{:.6}", p.granularity * 1e6),
                format!("{:.6}", p.efficiency),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Our systems' colours, the same in every plot and each its own; other names get one of
/// `OTHERS` (lighter, so an external never looks like one of ours) chosen by a hash of the
/// name, so a contender keeps its colour from plot to plot too. A system on ranks (`S@R`)
/// takes its system's colour and a dashed line.
const FIXED: [(&str, RGBColor); 11] = [
    ("compiled", RGBColor(31, 119, 180)),
    ("tasks", RGBColor(214, 39, 40)),
    ("bsp", RGBColor(44, 160, 44)),
    ("serial", RGBColor(127, 127, 127)),
    ("implicit", RGBColor(148, 103, 189)),
    ("traced", RGBColor(255, 127, 14)),
    ("auto", RGBColor(140, 86, 75)),
    ("forkjoin", RGBColor(0, 0, 0)),
    ("parfor", RGBColor(188, 189, 34)),
    ("futures", RGBColor(23, 190, 207)),
    ("futures-barrier", RGBColor(227, 119, 194)),
];
const OTHERS: [RGBColor; 6] = [
    RGBColor(174, 199, 232),
    RGBColor(255, 152, 150),
    RGBColor(152, 223, 138),
    RGBColor(197, 176, 213),
    RGBColor(255, 187, 120),
    RGBColor(196, 156, 148),
];

/// The colour of the contender called `name`.
pub fn color_of(name: &str) -> RGBColor {
    let name = name.split_once('@').map_or(name, |(base, _)| base);
    if let Some((_, c)) = FIXED.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    // FNV-1a: stable across runs and builds, unlike the standard hasher.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    OTHERS[(h % OTHERS.len() as u64) as usize]
}

fn decade_label(x: &f64) -> String {
    if *x >= 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    outcomes: &[Outcome],
    threshold: f64,
    title: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e}");
    root.fill(&WHITE).map_err(err)?;
    let pts: Vec<&Point> = outcomes.iter().flat_map(|o| &o.analysis.points).collect();
    let gx: Vec<f64> = pts
        .iter()
        .map(|p| p.granularity * 1e6)
        .filter(|g| *g > 0.0 && g.is_finite())
        .collect();
    let (lo, hi) = gx
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &g| (a.min(g), b.max(g)));
    let (lo, hi) = if lo.is_finite() {
        (lo / 1.5, hi * 1.5)
    } else {
        (0.1, 1000.0)
    };
    // A label at every decade, a light grid line at 2..9 of each.
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let decades: Vec<f64> = (first..=last)
        .map(|e| 10f64.powi(e))
        .filter(|x| (lo..=hi).contains(x))
        .collect();
    let minor: Vec<f64> = (first..=last)
        .flat_map(|e| (2..10).map(move |k| f64::from(k) * 10f64.powi(e)))
        .filter(|x| (lo..=hi).contains(x))
        .collect();
    let ymax = pts
        .iter()
        .map(|p| p.efficiency * p.elapsed / p.elapsed_min.max(1e-300))
        .filter(|y| y.is_finite())
        .fold(1.05f64, f64::max)
        .min(2.0)
        * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 15))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (lo..hi)
                .log_scale()
                .with_key_points(decades)
                .with_light_points(minor),
            0.0..ymax,
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("task granularity (µs, log scale)")
        .y_desc("efficiency (fraction of peak)")
        .x_label_formatter(&decade_label)
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.2))
        .draw()
        .map_err(err)?;
    let thr_style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(lo, threshold), (hi, threshold)],
            6,
            4,
            thr_style,
        ))
        .map_err(err)?
        .label(format!("{:.0}% efficiency", threshold * 100.0))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], thr_style));
    for o in outcomes {
        let color = color_of(&o.name);
        let mut line: Vec<&Point> = o
            .analysis
            .points
            .iter()
            .filter(|p| p.granularity > 0.0)
            .collect();
        // Joined in granularity order: sizes are swept largest first, but a noisy size can
        // land out of order, and a line must not zig-zag back.
        line.sort_by(|a, b| a.granularity.total_cmp(&b.granularity));
        let xy: Vec<(f64, f64)> = line
            .iter()
            .map(|p| (p.granularity * 1e6, p.efficiency))
            .collect();
        let label = match (o.metg(), o.noisy) {
            (Some(m), false) => format!("{} (METG {} µs)", o.name, micros(m)),
            (Some(m), true) => format!("{} (METG {} µs, noisy)", o.name, micros(m)),
            (None, _) => format!("{} (METG undefined)", o.name),
        };
        // On ranks: dashed, and a legend of two strokes with a gap.
        let ranks = o.name.contains('@');
        let drawn = if ranks {
            let dashes = DashedLineSeries::new(xy.clone(), 8, 5, color.stroke_width(2));
            chart.draw_series(dashes).map_err(err)?
        } else {
            let line = LineSeries::new(xy.clone(), color.stroke_width(2));
            chart.draw_series(line).map_err(err)?
        };
        let gap = if ranks { 5 } else { 0 };
        drawn.label(label).legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (8, 0)], color.stroke_width(2))
                + PathElement::new(vec![(8 + gap, 0), (20, 0)], color.stroke_width(2))
        });
        chart
            .draw_series(
                xy.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(err)?;
        // Error bars: the efficiency of the slowest and the fastest repetition.
        chart
            .draw_series(line.iter().map(|p| {
                let x = p.granularity * 1e6;
                let at = |e: f64| (p.efficiency * p.elapsed / e).min(ymax);
                ErrorBar::new_vertical(
                    x,
                    at(p.elapsed_max),
                    p.efficiency,
                    at(p.elapsed_min),
                    color.mix(0.7).stroke_width(1),
                    6,
                )
            }))
            .map_err(err)?;
        if let Some(m) = o.metg() {
            let at = (m * 1e6, threshold);
            chart
                .draw_series(std::iter::once(TriangleMarker::new(at, 9, color.filled())))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(at.0, 0.0), (at.0, threshold)],
                    color.mix(0.5).stroke_width(1),
                )))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Draws the plot as `<stem>.svg` and `<stem>.png`. Both backends lay text out with a
/// TrueType font from the system; without one no plot is drawn and a warning says why.
/// Returns the files written.
pub fn plot(
    dir: &Path,
    stem: &str,
    outcomes: &[Outcome],
    threshold: f64,
    title: &str,
) -> anyhow::Result<Vec<String>> {
    if !tactor_cli::plot::register_font() {
        tactor_cli::say!(
            "warning: no TrueType font found (apt-get install fonts-dejavu-core); plots skipped"
        );
        return Ok(Vec::new());
    }
    let svg = dir.join(format!("{stem}.svg"));
    draw(
        SVGBackend::new(&svg, (1100, 650)).into_drawing_area(),
        outcomes,
        threshold,
        title,
    )?;
    let png = dir.join(format!("{stem}.png"));
    draw(
        BitMapBackend::new(&png, (1100, 650)).into_drawing_area(),
        outcomes,
        threshold,
        title,
    )?;
    Ok(vec![svg.display().to_string(), png.display().to_string()])
}
