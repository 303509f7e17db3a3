//! `validation.png` / `validation.svg`, if any cell validated: one panel per backbone, nDCG@10
//! of each pass against the step, one colour per k, the best pass circled.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::{FAMILY, Figure, colour, panel_grid, write};
use crate::error::Result;
use crate::results::MatrixResults;

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// `validation.png` / `validation.svg`; nothing if no cell validated.
pub fn validation_curves(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let validated =
        |c: &crate::results::CellResult| c.log.as_ref().is_some_and(|l| !l.validation.is_empty());
    if !matrix.cells.iter().any(validated) {
        return Ok(Vec::new());
    }
    let (rows, cols, size) = panel_grid(matrix);
    write(
        &Validation {
            matrix,
            rows,
            cols,
            size,
        },
        out,
    )
}

struct Validation<'a> {
    matrix: &'a MatrixResults,
    rows: usize,
    cols: usize,
    size: (u32, u32),
}

impl Figure for Validation<'_> {
    const STEM: &'static str = "validation";

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let title = format!("{}: validation nDCG@10 during training", self.matrix.name);
        let root = root
            .titled(&title, (FAMILY, 20))
            .map_err(|e| e.to_string())?;
        let panels = root.split_evenly((self.rows, self.cols));
        for (backbone, panel) in self.matrix.backbones().into_iter().zip(panels) {
            let curves: Vec<(f64, &[(f64, f64)])> = self
                .matrix
                .cells
                .iter()
                .filter(|c| c.backbone == backbone)
                .filter_map(|c| Some((c.k, c.log.as_ref()?.validation.as_slice())))
                .collect();
            draw_panel(&panel, backbone, &curves)?;
        }
        Ok(())
    }
}

/// One backbone's panel: `(k, passes)` of each of its cells.
fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    backbone: &str,
    curves: &[(f64, &[(f64, f64)])],
) -> Result<(), String> {
    let steps = curves
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(panel)
        .caption(backbone, (FAMILY, 18))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..steps, 0.0..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("step")
        .y_desc("nDCG@10")
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (k, points)) in curves.iter().enumerate() {
        draw_curve(&mut chart, colour(i), *k, points)?;
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| e.to_string())
}

/// One cell's passes, labelled with its k, and its best pass circled.
fn draw_curve<DB: DrawingBackend>(
    chart: &mut Chart<DB>,
    colour: RGBColor,
    k: f64,
    points: &[(f64, f64)],
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new(points.to_vec(), colour.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(format!("k={k}"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
    // The first of equal scores, as training records it.
    let best = points
        .iter()
        .copied()
        .reduce(|b, p| if p.1 > b.1 { p } else { b });
    chart
        .draw_series(best.map(|p| Circle::new(p, 5, colour.stroke_width(2))))
        .map_err(|e| e.to_string())?;
    Ok(())
}
