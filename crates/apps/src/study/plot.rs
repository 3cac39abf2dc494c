//! The study's plot: time per iteration against size, log-log, a colour per program and a
//! line style per placement (solid: Tactor untraced, dashed: traced; peers dotted).

use super::{App, Row};
use plotters::prelude::*;
use plotters::style::{Palette, Palette99};
use std::path::Path;

/// Draws `<stem>.svg` and `<stem>.png` in `dir` for `app`'s rows; the files written (none
/// without a font).
pub fn draw(dir: &Path, stem: &str, app: App, rows: &[Row]) -> Result<Vec<String>, String> {
    if !tactor_cli::plot::register_font() {
        return Ok(Vec::new());
    }
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    draw_on(
        SVGBackend::new(&svg, (1000, 620)).into_drawing_area(),
        app,
        rows,
    )?;
    draw_on(
        BitMapBackend::new(&png, (1000, 620)).into_drawing_area(),
        app,
        rows,
    )?;
    Ok(vec![svg.display().to_string(), png.display().to_string()])
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    app: App,
    rows: &[Row],
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing the plot: {e:?}");
    root.fill(&WHITE).map_err(err)?;
    let rows: Vec<&Row> = rows.iter().filter(|r| r.app == app).collect();
    if rows.is_empty() {
        return Ok(());
    }
    let fold =
        |f: fn(f64, f64) -> f64, init, g: fn(&Row) -> f64| rows.iter().map(|r| g(r)).fold(init, f);
    let (x0, x1) = (
        fold(f64::min, f64::INFINITY, |r| r.size as f64),
        fold(f64::max, 0.0, |r| r.size as f64),
    );
    let mut sizes: Vec<f64> = rows.iter().map(|r| r.size as f64).collect();
    sizes.dedup();
    let (y0, y1) = (
        fold(f64::min, f64::INFINITY, |r| r.median_s * 1e6),
        fold(f64::max, 0.0, |r| r.median_s * 1e6),
    );
    let (title, x_desc) = match app {
        App::Stencil => (
            "PRK Stencil (radius 2): time per iteration (dashed: traced; dotted: peers)",
            "grid side n",
        ),
        App::Cg => (
            "CG, 1-D Poisson: time per iteration (dashed: traced; dotted: peers)",
            "unknowns",
        ),
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            // A tick at every size of the study, whether or not a power of ten is in range.
            (x0 / 1.2..x1 * 1.2).log_scale().with_key_points(sizes),
            (y0 / 1.5..y1 * 1.5).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("µs per iteration (median), lower is better")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let mut names: Vec<&str> = rows.iter().map(|r| r.contender.as_str()).collect();
    names.dedup();
    names.sort_unstable();
    names.dedup();
    let programs: Vec<&str> = {
        let mut p: Vec<&str> = names.iter().map(|n| program(n)).collect();
        p.dedup();
        p
    };
    for name in names {
        let at = programs.iter().position(|p| *p == program(name));
        // Palette99's colours that read on white first (its yellow and cyan last).
        const ORDER: [usize; 8] = [3, 0, 1, 5, 4, 7, 2, 6];
        let color = Palette99::pick(ORDER[at.unwrap_or(0) % ORDER.len()]).to_rgba();
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.contender == name)
            .map(|r| (r.size as f64, r.median_s * 1e6))
            .collect();
        let style = color.stroke_width(2);
        let (dash, gap) = if !name.starts_with("tactor") {
            (2, 4)
        } else if name.ends_with("traced") {
            (8, 5)
        } else {
            (1000, 0)
        };
        chart
            .draw_series(DashedLineSeries::new(pts.clone(), dash, gap, style))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                // The line's own pattern, drawn short: one stroke, two, or four dots.
                let seg = |k: i32| {
                    let (on, off) = (dash.min(20), gap);
                    let from = k * (on + off.max(1));
                    let to = (from + on).min(20);
                    let pts = if from < 20 {
                        vec![(from, 0), (to, 0)]
                    } else {
                        vec![]
                    };
                    PathElement::new(pts, style)
                };
                EmptyElement::at((x, y)) + seg(0) + seg(1) + seg(2) + seg(3)
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// The colour key of a contender: Tactor by placement, each peer by itself.
fn program(name: &str) -> &str {
    if let Some(rest) = name.strip_prefix("tactor ") {
        return rest.split(' ').next().unwrap_or(rest);
    }
    name
}
