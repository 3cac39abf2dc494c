//! METG results: the terminal table, the CSV of every point, the JSON summary with the
//! machine's description, and the efficiency-vs-granularity plot (PNG and SVG).

use super::analyze::{Analysis, Point};
use plotters::prelude::*;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One contender's result.
pub struct Outcome {
    /// Its name.
    pub name: String,
    /// The analysis of its runs.
    pub analysis: Analysis,
    /// Why it stopped early, if it failed.
    pub error: Option<String>,
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
    /// Git revision of the checkout, if any (with `-dirty` for uncommitted changes).
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
        let git = command_line("git", &["rev-parse", "--short=12", "HEAD"]).map(|rev| {
            let dirty = command_line("git", &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev}-dirty")
            } else {
                rev
            }
        });
        Machine {
            cpu,
            cores: crate::systems::default_workers(),
            os: format!("{pretty} (Linux {kernel})"),
            compiler: env!("TASKBENCH_RUSTC_VERSION").to_string(),
            git_revision: git.unwrap_or_else(|| "unknown".into()),
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

/// The terminal table: METG, best efficiency and efficiency at a few sizes per contender.
pub fn table(outcomes: &[Outcome], threshold: f64) -> String {
    let mut sizes: Vec<i64> = outcomes
        .iter()
        .flat_map(|o| o.analysis.points.iter().map(|p| p.iterations))
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    // A few sizes spread over the sweep: every fourth power of two from the largest.
    let shown: Vec<i64> = sizes.iter().step_by(3).copied().take(5).collect();
    let mut s = String::new();
    let name_w = outcomes
        .iter()
        .map(|o| o.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = write!(
        s,
        "{:<name_w$}  {:>14}  {:>14}",
        "system",
        "peak reached",
        format!("METG({:.0}%) µs", threshold * 100.0)
    );
    for n in &shown {
        let _ = write!(s, "  {:>9}", format!("eff@{n}"));
    }
    s.push('\n');
    for o in outcomes {
        let pts = &o.analysis.points;
        let best = pts.iter().map(|p| p.efficiency).fold(0.0f64, f64::max);
        let metg = match (&o.analysis.metg, &o.error) {
            (Ok(m), _) => micros(*m),
            (Err(_), Some(_)) if pts.is_empty() => "failed".into(),
            (Err(_), _) => "undefined".into(),
        };
        let _ = write!(
            s,
            "{:<name_w$}  {:>13.1}%  {:>14}",
            o.name,
            best * 100.0,
            metg
        );
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

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    outcomes: &[Outcome],
    threshold: f64,
    title: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let pts: Vec<&Point> = outcomes.iter().flat_map(|o| &o.analysis.points).collect();
    let gx: Vec<f64> = pts
        .iter()
        .map(|p| p.granularity * 1e6)
        .filter(|g| *g > 0.0)
        .collect();
    let (lo, hi) = gx
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &g| (a.min(g), b.max(g)));
    let (lo, hi) = if lo.is_finite() {
        (lo / 1.5, hi * 1.5)
    } else {
        (0.1, 1000.0)
    };
    let ymax = pts.iter().map(|p| p.efficiency).fold(1.05f64, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..ymax)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("task granularity (µs, log scale)")
        .y_desc("efficiency (fraction of peak)")
        .x_label_formatter(&|x| format!("{x}"))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let thr_style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(lo, threshold), (hi, threshold)],
            6,
            4,
            thr_style,
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .label(format!("{:.0}% efficiency", threshold * 100.0))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], thr_style));
    for (i, o) in outcomes.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let line: Vec<(f64, f64)> = o
            .analysis
            .points
            .iter()
            .map(|p| (p.granularity * 1e6, p.efficiency))
            .collect();
        let label = match &o.analysis.metg {
            Ok(m) => format!("{} (METG {} µs)", o.name, micros(*m)),
            Err(_) => format!("{} (METG undefined)", o.name),
        };
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                line.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Ok(m) = o.analysis.metg {
            let at = (m * 1e6, threshold);
            chart
                .draw_series(std::iter::once(TriangleMarker::new(at, 9, color.filled())))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(at.0, 0.0), (at.0, threshold)],
                    color.mix(0.5).stroke_width(1),
                )))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Registers a TrueType font for the PNG backend, from the usual system locations.
fn register_font() -> bool {
    use std::sync::OnceLock;
    static DONE: OnceLock<bool> = OnceLock::new();
    *DONE.get_or_init(|| {
        let candidates = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        ];
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
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
    if !register_font() {
        eprintln!(
            "warning: no TrueType font found (apt-get install fonts-dejavu-core); plots skipped"
        );
        return Ok(Vec::new());
    }
    let svg = dir.join(format!("{stem}.svg"));
    draw(
        SVGBackend::new(&svg, (900, 600)).into_drawing_area(),
        outcomes,
        threshold,
        title,
    )?;
    let png = dir.join(format!("{stem}.png"));
    draw(
        BitMapBackend::new(&png, (900, 600)).into_drawing_area(),
        outcomes,
        threshold,
        title,
    )?;
    Ok(vec![svg.display().to_string(), png.display().to_string()])
}
