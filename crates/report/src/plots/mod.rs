//! Figures, one file per figure, each written as PNG and SVG by the one writer here (`write`):
//! loss curves and validation curves (`losses`, `validation`), the effectiveness/efficiency
//! trade-off (`tradeoff`) and how k is chosen (`k_choice`); the legend drawn beside a plot and
//! the markers of k are shared (`legend`). Text is drawn with a bundled font, so that no system
//! fonts are needed.

mod k_choice;
mod legend;
mod losses;
mod tradeoff;
mod validation;

pub use k_choice::k_choice;
pub use losses::loss_curves;
pub use tradeoff::tradeoff;
pub use validation::validation_curves;

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::error::{ReportError, Result};
use crate::results::MatrixResults;

/// DejaVu Sans (Bitstream Vera licence, `assets/DejaVuSans-LICENSE`), so text renders on
/// machines without fonts.
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

/// Colour-blind-safe categorical palette (Okabe–Ito), then plotters' palette.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// The most minor grid lines per label a log axis with `labels` labels may ask plotters for.
/// Plotters spaces a log axis's minor lines evenly within each decade, as many as the labels
/// times this limit allow: a hundred or more on an axis under two decades wide make lines at
/// every tenth (1.1, 1.2, … 9.9), which crowd into a grey band at the top of the decade; under a
/// hundred, it draws them at 2, 3, … 9 of each decade, as log paper has them.
fn log_minor_lines(labels: usize) -> usize {
    99 / labels.max(1)
}

/// A figure: drawn the same way on the PNG and the SVG backend.
trait Figure {
    /// The file name without its extension.
    const STEM: &'static str;
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Writes `figure` to `<out>/<stem>.png` and `.svg`, each atomically.
fn write<F: Figure>(figure: &F, out: &Path) -> Result<Vec<PathBuf>> {
    register();
    let size = figure.size();
    let png = out.join(format!("{}.png", F::STEM));
    let svg = out.join(format!("{}.svg", F::STEM));
    lsr_files::write_through_path(&png, |tmp| {
        present(
            figure,
            &png,
            BitMapBackend::new(tmp, size).into_drawing_area(),
        )
    })?;
    lsr_files::write_through_path(&svg, |tmp| {
        present(figure, &svg, SVGBackend::new(tmp, size).into_drawing_area())
    })?;
    Ok(vec![png, svg])
}

/// Draws `figure` on `root` and writes it out; errors name `path`, the file it becomes.
fn present<DB: DrawingBackend>(
    figure: &impl Figure,
    path: &Path,
    root: DrawingArea<DB, Shift>,
) -> Result<()> {
    let fail = |message: String| ReportError::Plot {
        path: path.to_path_buf(),
        message,
    };
    figure.draw(root.clone()).map_err(fail)?;
    root.present().map_err(|e| fail(e.to_string()))
}

fn register() {
    static FONT_ONCE: Once = Once::new();
    FONT_ONCE.call_once(|| {
        if register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            tracing::warn!("the bundled font could not be registered");
        }
    });
}

/// One panel per backbone, at most four to a row: `(rows, columns, image size)`.
fn panel_grid(matrix: &MatrixResults) -> (usize, usize, (u32, u32)) {
    let backbones = matrix.backbones().len();
    let cols = backbones.clamp(1, 4);
    let rows = backbones.div_ceil(cols).max(1);
    (rows, cols, (420 * cols as u32, 340 * rows as u32))
}
