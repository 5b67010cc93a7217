//! The log-log plot of throughput against writer threads, one line per peer (SVG).

use std::path::Path;

use plotters::coord::combinators::{BindKeyPoints, IntoLogRange};
use plotters::prelude::*;

/// One line of the plot: a peer's name and its (writers, adds per second) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes the plot to `path`; `cores` marks the host's core count on the x axis.
pub fn throughput(path: &Path, series: &[Series], cores: usize) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let all = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if !(lo > 0.0 && hi >= lo) {
        return Err(err(&"no positive throughput to plot"));
    }
    let xs: Vec<f64> = series[0].points.iter().map(|p| p.0).collect();
    let (x_lo, x_hi) = (xs[0], xs[xs.len() - 1]);

    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    // The legend goes to the right of the chart, where it cannot hide a line.
    let (plot_area, legend_area) = root.split_horizontally(760);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(
            format!("Adds per second, all writers together ({cores} cores; log-log)"),
            ("sans-serif", 24),
        )
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (x_lo * 0.9..x_hi * 1.1)
                .log_scale()
                .with_key_points(xs.clone()),
            (lo / 1.5..hi * 1.5)
                .log_scale()
                .with_key_points(y_keys(lo / 1.5, hi * 1.5)),
        )
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("writer threads (each on its own simulated CPU for pcpu-counter)")
        .y_desc("adds per second")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}M", y / 1e6))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    let cores = cores as f64;
    chart
        .draw_series(LineSeries::new(
            [(cores, lo / 1.5), (cores, hi * 1.5)],
            ShapeStyle::from(&BLACK.mix(0.3)).stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if i == 0 { 3 } else { 2 };
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(width),
            ))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| err(&e))?;
    }
    let entries = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), COLORS[i % COLORS.len()].stroke_width(3)))
        .chain([("host core count", BLACK.mix(0.3).stroke_width(1))]);
    for (i, (name, style)) in entries.enumerate() {
        let y = 80 + 28 * i as i32;
        legend_area
            .draw(&PathElement::new([(10, y), (40, y)], style))
            .map_err(|e| err(&e))?;
        legend_area
            .draw(&Text::new(
                name.to_string(),
                (48, y - 8),
                ("sans-serif", 15).into_font(),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// The y axis labels: 1, 2 and 5 times each power of ten inside `lo..hi`.
fn y_keys(lo: f64, hi: f64) -> Vec<f64> {
    (0..=12)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|y| (lo..=hi).contains(y))
        .collect()
}
