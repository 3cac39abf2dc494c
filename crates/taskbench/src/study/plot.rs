//! One plot per figure, readable with many systems: a colour per system (the same as in
//! `taskbench metg`'s plots) and a line style per placement — solid in one process, dashed on
//! ranks (`SYSTEM@R`).

use super::figures::{Figure, Metric};
use super::Row;
use crate::metg::output::color_of;
use plotters::prelude::*;
use std::path::Path;
use tactor_cli::plot::register_font;

/// A system's name without its placement, and whether it ran on ranks.
fn placement(name: &str) -> (&str, bool) {
    match name.split_once('@') {
        Some((base, _)) => (base, true),
        None => (name, false),
    }
}

/// A tick label without floating-point noise (0.30000000000000004 is 0.3).
fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The value a figure plots for a row.
fn value(fig: &Figure, r: &Row) -> Option<f64> {
    match fig.metric {
        Metric::Metg => r.metg_us,
        Metric::AtSize => r.vs_first,
    }
}

/// Draws `<base>.svg` and `<base>.png` (`path` is the SVG's); without a font, draws nothing.
pub fn draw(path: &Path, fig: &Figure, rows: &[Row]) -> anyhow::Result<()> {
    if !register_font() {
        return Ok(());
    }
    draw_on(
        SVGBackend::new(path, (1000, 620)).into_drawing_area(),
        fig,
        rows,
    )?;
    let png = path.with_extension("png");
    draw_on(
        BitMapBackend::new(&png, (1000, 620)).into_drawing_area(),
        fig,
        rows,
    )
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    fig: &Figure,
    rows: &[Row],
) -> anyhow::Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| {
        anyhow::anyhow!("drawing figure {}: {e:?}", fig.number)
    };
    root.fill(&WHITE).map_err(err)?;
    let xs: Vec<f64> = rows.iter().map(|r| r.x).collect();
    let ys: Vec<f64> = rows.iter().filter_map(|r| value(fig, r)).collect();
    let (x0, x1) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(0.0, f64::max),
    );
    let y1 = ys.iter().copied().fold(0.0, f64::max).max(1e-3);
    let y0 = ys.iter().copied().fold(f64::INFINITY, f64::min).min(y1);
    let caption = format!("Figure {}: {}", fig.number, fig.title);
    let y_desc = match fig.metric {
        Metric::Metg => "METG (µs), lower is better",
        Metric::AtSize => "rate against the system's first point",
    };
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(caption, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    // Widths, ranks and dependencies double from point to point: a log axis spaces them evenly.
    let log_x = fig.number != 3 && x0 > 0.0;
    let systems = {
        let mut s: Vec<&str> = rows.iter().map(|r| r.system.as_str()).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    macro_rules! series {
        ($chart:expr) => {{
            let chart = &mut $chart;
            chart
                .configure_mesh()
                .x_desc(fig.x_label)
                .y_desc(y_desc)
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .draw()
                .map_err(err)?;
            for name in &systems {
                let (base, ranks) = placement(name);
                let color = color_of(base);
                let pts: Vec<(f64, f64)> = (rows.iter())
                    .filter(|r| r.system == *name)
                    .filter_map(|r| value(fig, r).map(|v| (r.x, v)))
                    .collect();
                let style = color.stroke_width(2);
                let drawn = if ranks {
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                        .map_err(err)?
                } else {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), style))
                        .map_err(err)?
                };
                // Two strokes with a gap for a placement on ranks, one for a process.
                let gap = if ranks { 5 } else { 0 };
                drawn.label(*name).legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (8, 0)], color.stroke_width(2))
                        + PathElement::new(vec![(8 + gap, 0), (20, 0)], color.stroke_width(2))
                });
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(err)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(err)?;
        }};
    }
    let (xr, yr) = (x0.min(x1)..x1.max(x0 + 1e-9), (y0 * 0.8)..(y1 * 1.25));
    match (log_x, fig.metric) {
        (true, Metric::Metg) => series!(builder
            .build_cartesian_2d(xr.log_scale(), yr.log_scale())
            .map_err(err)?),
        (true, Metric::AtSize) => series!(builder
            .build_cartesian_2d(xr.log_scale(), 0.0..y1 * 1.1)
            .map_err(err)?),
        (false, Metric::Metg) => series!(builder
            .build_cartesian_2d(xr, yr.log_scale())
            .map_err(err)?),
        (false, Metric::AtSize) => {
            series!(builder.build_cartesian_2d(xr, 0.0..y1 * 1.1).map_err(err)?)
        }
    }
    root.present().map_err(err)?;
    Ok(())
}
