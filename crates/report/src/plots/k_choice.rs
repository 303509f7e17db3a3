//! `k-choice.png` / `k-choice.svg`: how k is chosen, each grid's best k and the probe's against
//! the head norm, the head-norm rule drawn over them; from `kchoice`'s rows.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::legend::{Legend, draw_legend};
use super::{FAMILY, Figure, colour, write};
use crate::error::Result;
use crate::kchoice::KChoiceRow;

/// Both axes in log2, so that the ticks fall on powers of two (the grid's k).
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// `k-choice.png` / `k-choice.svg` of `rows` (at least one).
pub fn k_choice(rows: &[KChoiceRow], out: &Path) -> Result<Vec<PathBuf>> {
    write(&KChoice { rows }, out)
}

struct KChoice<'a> {
    rows: &'a [KChoiceRow],
}

/// The norm range drawn, and the rule's reference norm and grid.
struct Axes {
    low: f64,
    high: f64,
    reference: f64,
    grid: Vec<f64>,
}

impl Figure for KChoice<'_> {
    const STEM: &'static str = "k-choice";

    fn size(&self) -> (u32, u32) {
        (900, 560)
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        let rows = self.rows;
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (root, legend) = root.split_horizontally(700);
        let reference = rows[0].reference_row_norm;
        let norms = rows.iter().map(|r| r.row_norm_mean).chain([reference]);
        let (low, high) = norms.fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(x), h.max(x)));
        let axes = Axes {
            low,
            high,
            reference,
            grid: rows[0].grid.iter().map(|g| g.0).collect(),
        };
        let mut chart = draw_axes(&root, &axes)?;
        draw_rule(&mut chart, &axes)?;
        let mut backbones: Vec<&str> = Vec::new();
        for row in rows {
            if !backbones.contains(&row.backbone.as_str()) {
                backbones.push(&row.backbone);
            }
        }
        draw_rows(&mut chart, rows, &backbones)?;
        let entries = backbones
            .iter()
            .enumerate()
            .map(|(i, b)| (b.to_string(), Legend::Backbone(colour(i))))
            .chain([
                ("grid's best k".to_string(), Legend::Dot),
                ("probe's k".to_string(), Legend::Square),
                ("head-norm rule".to_string(), Legend::Line),
                (format!("norm / {reference:.3}"), Legend::Thin),
            ]);
        draw_legend(&legend, entries)
    }
}

impl Axes {
    /// The k axis: the grid with a margin, in log2.
    fn k_range(&self) -> (f64, f64) {
        let last = self.grid[self.grid.len() - 1];
        (self.grid[0].log2() - 0.6, last.log2() + 0.6)
    }
}

fn draw_axes<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    axes: &Axes,
) -> Result<Chart<'a, DB>, String> {
    let (k_low, k_high) = axes.k_range();
    let norms = (axes.low / 1.4).log2()..(axes.high * 1.4).log2();
    let mut chart = ChartBuilder::on(root)
        .caption("Best k against the head's norm", (FAMILY, 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(50)
        .build_cartesian_2d(norms, k_low..k_high)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(8)
        .y_labels(8)
        .light_line_style(RGBColor(238, 238, 238))
        .x_label_formatter(&|x| power_of_two(*x))
        .y_label_formatter(&|y| power_of_two(*y))
        .x_desc("mean decoder row norm at initialisation (log scale)")
        .y_desc("k (log scale)")
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(chart)
}

/// The rule over the drawn norms: exact (norm / reference, thin and dashed) and rounded to the
/// grid (thick).
fn draw_rule<DB: DrawingBackend>(chart: &mut Chart<DB>, axes: &Axes) -> Result<(), String> {
    let (from, to) = (axes.low / 1.4, axes.high * 1.4);
    let xs: Vec<f64> = (0..=200)
        .map(|i| from * (to / from).powf(i as f64 / 200.0))
        .collect();
    let (k_low, k_high) = axes.k_range();
    let exact = xs
        .iter()
        .map(|&x| (x.log2(), (x / axes.reference).log2()))
        .filter(|p| (k_low..k_high).contains(&p.1));
    let grey = RGBColor(130, 130, 130);
    chart
        .draw_series(DashedLineSeries::new(exact, 5, 4, grey.stroke_width(1)))
        .map_err(|e| e.to_string())?;
    let rounded = xs.iter().map(|&x| {
        let k = lsr_files::probe::nearest_k(&axes.grid, x / axes.reference);
        (x.log2(), k.log2())
    });
    chart
        .draw_series(LineSeries::new(rounded, BLACK.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Each row's best k (dot) and probe's k (square) in its backbone's colour; rows at one norm
/// (seeds, backbones sharing a norm) side by side, not on top of each other.
fn draw_rows<DB: DrawingBackend>(
    chart: &mut Chart<DB>,
    rows: &[KChoiceRow],
    backbones: &[&str],
) -> Result<(), String> {
    for (i, row) in rows.iter().enumerate() {
        let same: Vec<usize> = (0..rows.len())
            .filter(|&j| rows[j].row_norm_mean == row.row_norm_mean)
            .collect();
        let slot = same.iter().position(|&j| j == i).unwrap_or(0) as f64;
        let x = row.row_norm_mean.log2() + 0.05 * (slot - (same.len() as f64 - 1.0) / 2.0);
        let backbone = backbones.iter().position(|b| *b == row.backbone);
        let c = colour(backbone.unwrap_or(0));
        chart
            .draw_series([Circle::new((x, row.best_k.log2()), 6, c.filled())])
            .map_err(|e| e.to_string())?;
        let square = [(-5, -5), (5, 5)];
        chart
            .draw_series([EmptyElement::at((x, row.probe_k.log2()))
                + Rectangle::new(square, c.stroke_width(2))])
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The label of a log2 tick: 2^y where y is a whole number, none between.
fn power_of_two(y: f64) -> String {
    if (y - y.round()).abs() > 1e-9 {
        return String::new();
    }
    let value = y.round().exp2();
    if value >= 1.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}
