//! `losses.png` / `losses.svg`: one panel per backbone, one colour per k, total loss solid and
//! ranking loss dashed, log y; a collapsed run ends in a cross, and its legend entry names the
//! rule that fired (training or validation).

use std::path::{Path, PathBuf};

use lsr_files::CellState;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::{FAMILY, Figure, colour, log_minor_lines, panel_grid, write};
use crate::error::Result;
use crate::results::{CellResult, LossLog, MatrixResults};

/// Labels on the log loss axis: under ten, so that plotters labels only its powers of ten (at
/// ten or more, an axis under two decades wide gets a label at each of 1…9 × 10^k, crowded at
/// the top of the decade).
const Y_LABELS: usize = 9;

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;

/// `losses.png` / `losses.svg`.
pub fn loss_curves(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let (rows, cols, size) = panel_grid(matrix);
    write(
        &Losses {
            matrix,
            rows,
            cols,
            size,
        },
        out,
    )
}

struct Losses<'a> {
    matrix: &'a MatrixResults,
    rows: usize,
    cols: usize,
    size: (u32, u32),
}

impl Figure for Losses<'_> {
    const STEM: &'static str = "losses";

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let title = format!(
            "{}: training loss (solid total, dashed ranking)",
            self.matrix.name
        );
        let root = root
            .titled(&title, (FAMILY, 20))
            .map_err(|e| e.to_string())?;
        let panels = root.split_evenly((self.rows, self.cols));
        for (backbone, panel) in self.matrix.backbones().into_iter().zip(panels) {
            let cells: Vec<_> = self
                .matrix
                .cells
                .iter()
                .filter(|c| c.backbone == backbone)
                .collect();
            draw_panel(&panel, backbone, &cells)?;
        }
        Ok(())
    }
}

/// A loss worth a point on a log axis.
fn positive(v: &f64) -> bool {
    v.is_finite() && *v > 0.0
}

/// One backbone's panel: its cells' curves over the steps and losses they span.
fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    backbone: &str,
    cells: &[&CellResult],
) -> Result<(), String> {
    let steps = cells
        .iter()
        .filter_map(|c| c.log.as_ref()?.step.last().copied())
        .fold(1.0, f64::max);
    let (low, high) = loss_range(cells);
    let mut chart = ChartBuilder::on(panel)
        .caption(backbone, (FAMILY, 18))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..steps, (low..high).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .y_labels(Y_LABELS)
        .y_max_light_lines(log_minor_lines(Y_LABELS))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("step")
        .y_desc("loss")
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, cell) in cells.iter().enumerate() {
        if let Some(log) = &cell.log {
            draw_cell(&mut chart, i, cell, log, high)?;
        }
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(|e| e.to_string())
}

/// The y range of the panel: its positive losses with a margin, from just under the power of
/// ten below them (so that the axis has labels: plotters labels a log axis from the first power
/// of ten in it up, and one that holds none has no label; starting at the power itself, rounding
/// can put that first one a decade higher), or 0.01–10 if there are none.
fn loss_range(cells: &[&CellResult]) -> (f64, f64) {
    let (low, high) = cells
        .iter()
        .filter_map(|c| c.log.as_ref())
        .flat_map(|l| l.loss.iter().chain(&l.ranking_loss).copied())
        .filter(positive)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if low.is_finite() {
        (0.9 * 10f64.powf(low.log10().floor()), high * 1.25)
    } else {
        (0.01, 10.0)
    }
}

/// The `i`-th cell's total loss (labelled), its ranking loss and, if it collapsed, a cross at
/// its last total loss (or at the top of the panel, `high`, if it has none).
fn draw_cell<DB: DrawingBackend>(
    chart: &mut Chart<DB>,
    i: usize,
    cell: &CellResult,
    log: &LossLog,
    high: f64,
) -> Result<(), String> {
    let points = |values: &[f64]| -> Vec<(f64, f64)> {
        let pairs = log.step.iter().copied().zip(values.iter().copied());
        pairs.filter(|(_, v)| positive(v)).collect()
    };
    let total = points(&log.loss);
    let collapsed = cell.state == CellState::Collapsed;
    let colour_i = colour(i);
    chart
        .draw_series(LineSeries::new(total.clone(), colour_i.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(label(cell))
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour_i.stroke_width(2))
        });
    let ranking = points(&log.ranking_loss);
    let thin = colour_i.stroke_width(1);
    chart
        .draw_series(DashedLineSeries::new(ranking, 5, 4, thin))
        .map_err(|e| e.to_string())?;
    if collapsed {
        let last_step = log.step.last().copied().unwrap_or(0.0);
        let end = total.last().copied().unwrap_or((last_step, high / 1.25));
        let cross = Cross::new(end, 7, colour_i.stroke_width(3));
        chart
            .draw_series(std::iter::once(cross))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A cell's entry in the panel's legend: its k and, if it collapsed, the rule that fired.
fn label(cell: &CellResult) -> String {
    match cell.state {
        CellState::Collapsed => format!("k={}, {}", cell.k, cell.status_text()),
        _ => format!("k={}", cell.k),
    }
}
