//! `tradeoff.png` / `tradeoff.svg`: the effectiveness/efficiency trade-off, the mean nDCG@10 of
//! the trade-off set against FLOPs (log x): one marker per cell, its colour the backbone's and
//! its shape the k's, each backbone's best k ringed, the cells with 0 FLOPs named under it.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::legend::{Legend, draw_legend, marker};
use super::{FAMILY, Figure, colour, log_minor_lines, write};
use crate::error::Result;
use crate::results::MatrixResults;
use lsr_data::registry::table_measure;

/// Labels on the log FLOPs axis.
const X_LABELS: usize = 12;

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<LogCoord<f64>, RangedCoordf64>>;

/// `tradeoff.png` / `tradeoff.svg`.
pub fn tradeoff(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let unplaced = without_flops(matrix);
    if !unplaced.is_empty() {
        tracing::warn!(
            "the trade-off figure has no place for cells with 0 FLOPs on its log axis; it names \
             them under the plot: {}",
            unplaced.join(", ")
        );
    }
    write(&Tradeoff { matrix }, out)
}

struct Tradeoff<'a> {
    matrix: &'a MatrixResults,
}

impl Figure for Tradeoff<'_> {
    const STEM: &'static str = "tradeoff";

    fn size(&self) -> (u32, u32) {
        (900, 620)
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        let matrix = self.matrix;
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = draw_note(root, &note_lines(&without_flops(matrix)))?;
        // The legend beside the plot, where it hides no point.
        let (root, legend) = root.split_horizontally(760);
        let backbones = matrix.backbones();
        let all: Vec<(f64, f64, f64)> = backbones
            .iter()
            .flat_map(|b| tradeoff_points(matrix, b))
            .collect();
        let mut chart = draw_axes(matrix, &root, &all)?;
        let mut ks: Vec<f64> = all.iter().map(|p| p.0).collect();
        ks.sort_by(f64::total_cmp);
        ks.dedup();
        for (i, backbone) in backbones.iter().enumerate() {
            draw_points(
                &mut chart,
                &tradeoff_points(matrix, backbone),
                colour(i),
                &ks,
            )?;
        }
        let entries = backbones
            .iter()
            .enumerate()
            .map(|(i, b)| (b.to_string(), Legend::Backbone(colour(i))))
            .chain(
                ks.iter()
                    .enumerate()
                    .map(|(shape, k)| (format!("k = {k}"), Legend::K(shape))),
            )
            .chain(std::iter::once(("best k".to_string(), Legend::Best)));
        draw_legend(&legend, entries)
    }
}

/// Writes `lines` at the bottom of `root`; returns the area above them.
fn draw_note<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    lines: &[String],
) -> Result<DrawingArea<DB, Shift>, String> {
    let height = root.dim_in_pixel().1 as i32;
    let (root, note) = root.split_vertically(height - 20 * lines.len() as i32);
    for (row, line) in lines.iter().enumerate() {
        let font = (FAMILY, 13).into_font().color(&BLACK);
        note.draw_text(line, &font, (14, 20 * row as i32))
            .map_err(|e| e.to_string())?;
    }
    Ok(root)
}

/// The chart, its axes spanning `points` (k, FLOPs, score) with a margin, drawn.
fn draw_axes<'a, DB: DrawingBackend>(
    matrix: &MatrixResults,
    root: &'a DrawingArea<DB, Shift>,
    points: &[(f64, f64, f64)],
) -> Result<Chart<'a, DB>, String> {
    let ((x_low, x_high), (y_low, y_high)) = axis_ranges(points);
    let set = &matrix.tradeoff;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: {set} {} vs FLOPs", matrix.name, table_measure(set)),
            (FAMILY, 20),
        )
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(60)
        .build_cartesian_2d((x_low..x_high).log_scale(), y_low..y_high)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(X_LABELS)
        .x_max_light_lines(log_minor_lines(X_LABELS))
        .x_label_formatter(&|x| tick(*x))
        .x_desc("FLOPs (expected multiplications per query–document pair, log scale)")
        .y_desc(format!("mean {}", table_measure(set)))
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(chart)
}

/// The FLOPs and score ranges of `points` with a margin; defaults where there are none.
fn axis_ranges(points: &[(f64, f64, f64)]) -> ((f64, f64), (f64, f64)) {
    let span = |value: fn(&(f64, f64, f64)) -> f64| {
        points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(value(p)), hi.max(value(p)))
            })
    };
    let (x_low, x_high) = span(|p| p.1);
    let (y_low, y_high) = span(|p| p.2);
    let x = if x_low.is_finite() {
        (x_low / 1.6, x_high * 1.6)
    } else {
        (0.1, 10.0)
    };
    let y = if y_low.is_finite() {
        let pad = ((y_high - y_low) * 0.15).max(0.02);
        // Below 0 a little, so that cells at 0 sit above the axis, not on it.
        ((y_low - pad).max(-0.04), (y_high + pad).min(1.0))
    } else {
        (0.0, 1.0)
    };
    (x, y)
}

/// One backbone's points in its colour, each in the marker of its k (its place in `ks`), the
/// best ringed.
fn draw_points<DB: DrawingBackend>(
    chart: &mut Chart<DB>,
    points: &[(f64, f64, f64)],
    colour: RGBColor,
    ks: &[f64],
) -> Result<(), String> {
    if points.is_empty() {
        return Ok(());
    }
    let shape_of = |k: f64| ks.iter().position(|&x| x == k).unwrap_or(0);
    chart
        .draw_series(points.iter().map(|p| {
            EmptyElement::at((p.1, p.2)) + Polygon::new(marker(shape_of(p.0)), colour.filled())
        }))
        .map_err(|e| e.to_string())?;
    let best = points.iter().max_by(|a, b| a.2.total_cmp(&b.2));
    chart
        .draw_series(best.map(|p| Circle::new((p.1, p.2), 10, BLACK.stroke_width(2))))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A log-axis tick with the digits it needs.
fn tick(x: f64) -> String {
    match x {
        x if x >= 100.0 => format!("{x:.0}"),
        x if x >= 1.0 => format!("{x:.1}"),
        x => format!("{x:.3}"),
    }
}

/// The evaluated cells a log FLOPs axis has no place for (0 FLOPs: every query or document
/// vector empty), as `id (measure value)`, named on the figure instead of vanishing from it.
fn without_flops(matrix: &MatrixResults) -> Vec<String> {
    let set = &matrix.tradeoff;
    let measure = table_measure(set);
    matrix
        .cells
        .iter()
        .filter_map(|c| {
            let metrics = c.metrics.as_ref()?;
            let flops = metrics.mean_of(set, |d| Some(d.sparsity.flops))?;
            let effectiveness = metrics.mean(set, measure)?;
            (flops <= 0.0).then(|| format!("{} ({measure} {effectiveness:.3})", c.id))
        })
        .collect()
}

/// (k, FLOPs, nDCG@10) of a backbone's done cells with FLOPs > 0, in k order.
fn tradeoff_points(matrix: &MatrixResults, backbone: &str) -> Vec<(f64, f64, f64)> {
    let set = &matrix.tradeoff;
    let mut points: Vec<(f64, f64, f64)> = matrix
        .cells
        .iter()
        .filter(|c| c.backbone == backbone)
        .filter_map(|c| {
            let metrics = c.metrics.as_ref()?;
            let flops = metrics.mean_of(set, |d| Some(d.sparsity.flops))?;
            let effectiveness = metrics.mean(set, table_measure(set))?;
            (flops > 0.0).then_some((c.k, flops, effectiveness))
        })
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// The note under the trade-off figure naming the cells it cannot place, in lines that fit
/// its width; none if there are none.
fn note_lines(cells: &[String]) -> Vec<String> {
    if cells.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["Not drawn (0 FLOPs has no place on a log axis):".to_string()];
    for (i, cell) in cells.iter().enumerate() {
        let item = if i + 1 < cells.len() {
            format!("{cell},")
        } else {
            cell.clone()
        };
        let last = lines.last_mut().expect("one line at least");
        if last.chars().count() + item.chars().count() > 110 {
            lines.push(format!("    {item}"));
        } else {
            last.push(' ');
            last.push_str(&item);
        }
    }
    lines
}
