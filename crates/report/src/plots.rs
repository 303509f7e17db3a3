//! Figures, each as PNG and SVG: loss curves (one panel per backbone, one colour per k, total
//! loss solid and ranking loss dashed, log y; a collapsed run ends in a cross), beside them the
//! validation nDCG@10 of the cells that validated (the best pass of each marked), and the
//! effectiveness/efficiency trade-off (mean nDCG@10 of the trade-off set against FLOPs, log x:
//! one marker per cell, its colour the backbone's and its shape the k's, each backbone's best k
//! ringed, the cells with 0 FLOPs named under it), and how k is chosen (each grid's best k and the probe's against the head norm, the
//! head-norm rule drawn over them).

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::error::{ReportError, Result};
use crate::kchoice::KChoiceRow;
use crate::results::MatrixResults;
use lsr_data::registry::table_measure;
use lsr_files::CellState;

/// DejaVu Sans (Bitstream Vera licence, `assets/DejaVuSans-LICENSE`), so text renders on
/// machines without fonts.
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
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

fn register() {
    static FONT_ONCE: Once = Once::new();
    FONT_ONCE.call_once(|| {
        if register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            tracing::warn!("the bundled font could not be registered");
        }
    });
}

/// Draws `draw` into `<out>/<stem>.png` and `.svg`.
fn both_formats(
    out: &Path,
    stem: &str,
    size: (u32, u32),
    draw: impl Fn(DrawingArea<BitMapBackend, Shift>) -> Result<(), String> + Copy,
    draw_svg: impl Fn(DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> Result<Vec<PathBuf>> {
    register();
    let png = out.join(format!("{stem}.png"));
    let svg = out.join(format!("{stem}.svg"));
    let fail = |path: &Path, message: String| ReportError::Plot {
        path: path.to_path_buf(),
        message,
    };
    lsr_files::write_through_path(&png, |tmp| {
        let root = BitMapBackend::new(tmp, size).into_drawing_area();
        draw(root.clone()).map_err(|m| fail(&png, m))?;
        root.present().map_err(|e| fail(&png, e.to_string()))
    })?;
    lsr_files::write_through_path(&svg, |tmp| {
        let root = SVGBackend::new(tmp, size).into_drawing_area();
        draw_svg(root.clone()).map_err(|m| fail(&svg, m))?;
        root.present().map_err(|e| fail(&svg, e.to_string()))
    })?;
    Ok(vec![png, svg])
}

/// One panel per backbone, at most four to a row: `(rows, columns, image size)`.
fn panel_grid(matrix: &MatrixResults) -> (usize, usize, (u32, u32)) {
    let backbones = matrix.backbones().len();
    let cols = backbones.clamp(1, 4);
    let rows = backbones.div_ceil(cols).max(1);
    (rows, cols, (420 * cols as u32, 340 * rows as u32))
}

/// `losses.png` / `losses.svg`.
pub fn loss_curves(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let (rows, cols, size) = panel_grid(matrix);
    both_formats(
        out,
        "losses",
        size,
        |root| draw_losses(matrix, root, rows, cols),
        |root| draw_losses(matrix, root, rows, cols),
    )
}

fn draw_losses<DB: DrawingBackend>(
    matrix: &MatrixResults,
    root: DrawingArea<DB, Shift>,
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!(
        "{}: training loss (solid total, dashed ranking)",
        matrix.name
    );
    let root = root
        .titled(&title, (FAMILY, 20))
        .map_err(|e| e.to_string())?;
    let panels = root.split_evenly((rows, cols));
    for (backbone, panel) in matrix.backbones().into_iter().zip(panels) {
        let cells: Vec<_> = matrix
            .cells
            .iter()
            .filter(|c| c.backbone == backbone)
            .collect();
        let positive = |v: &f64| v.is_finite() && *v > 0.0;
        let all: Vec<f64> = cells
            .iter()
            .filter_map(|c| c.log.as_ref())
            .flat_map(|l| l.loss.iter().chain(&l.ranking_loss).copied())
            .filter(positive)
            .collect();
        let steps = cells
            .iter()
            .filter_map(|c| c.log.as_ref()?.step.last().copied())
            .fold(1.0, f64::max);
        let (low, high) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        let (low, high) = if low.is_finite() {
            (low * 0.8, high * 1.25)
        } else {
            (0.01, 10.0)
        };
        let mut chart = ChartBuilder::on(&panel)
            .caption(backbone, (FAMILY, 18))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(52)
            .build_cartesian_2d(0.0..steps, (low..high).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc("step")
            .y_desc("loss")
            .label_style((FAMILY, 12))
            .axis_desc_style((FAMILY, 13))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, cell) in cells.iter().enumerate() {
            let Some(log) = &cell.log else { continue };
            let style = colour(i).stroke_width(2);
            let total: Vec<(f64, f64)> = log
                .step
                .iter()
                .copied()
                .zip(log.loss.iter().copied())
                .filter(|(_, v)| positive(v))
                .collect();
            let ranking: Vec<(f64, f64)> = log
                .step
                .iter()
                .copied()
                .zip(log.ranking_loss.iter().copied())
                .filter(|(_, v)| positive(v))
                .collect();
            let collapsed = cell.state == CellState::Collapsed;
            let label = if collapsed {
                format!("k={} (collapsed)", cell.k)
            } else {
                format!("k={}", cell.k)
            };
            let colour_i = colour(i);
            chart
                .draw_series(LineSeries::new(total.clone(), style))
                .map_err(|e| e.to_string())?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour_i.stroke_width(2))
                });
            chart
                .draw_series(DashedLineSeries::new(
                    ranking,
                    5,
                    4,
                    colour(i).stroke_width(1),
                ))
                .map_err(|e| e.to_string())?;
            if collapsed {
                let end = total
                    .last()
                    .copied()
                    .unwrap_or((log.step.last().copied().unwrap_or(0.0), high / 1.25));
                chart
                    .draw_series(std::iter::once(Cross::new(
                        end,
                        7,
                        colour(i).stroke_width(3),
                    )))
                    .map_err(|e| e.to_string())?;
            }
        }
        chart
            .configure_series_labels()
            .label_font((FAMILY, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerLeft)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `validation.png` / `validation.svg`, if any cell validated: one panel per backbone, nDCG@10
/// of each pass against the step, one colour per k, the best pass circled.
pub fn validation_curves(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let validated =
        |c: &&crate::results::CellResult| c.log.as_ref().is_some_and(|l| !l.validation.is_empty());
    if !matrix.cells.iter().any(|c| validated(&c)) {
        return Ok(Vec::new());
    }
    let (rows, cols, size) = panel_grid(matrix);
    both_formats(
        out,
        "validation",
        size,
        |root| draw_validation(matrix, root, rows, cols),
        |root| draw_validation(matrix, root, rows, cols),
    )
}

fn draw_validation<DB: DrawingBackend>(
    matrix: &MatrixResults,
    root: DrawingArea<DB, Shift>,
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!("{}: validation nDCG@10 during training", matrix.name);
    let root = root
        .titled(&title, (FAMILY, 20))
        .map_err(|e| e.to_string())?;
    for (backbone, panel) in matrix
        .backbones()
        .into_iter()
        .zip(root.split_evenly((rows, cols)))
    {
        let curves: Vec<(f64, &[(f64, f64)])> = matrix
            .cells
            .iter()
            .filter(|c| c.backbone == backbone)
            .filter_map(|c| Some((c.k, c.log.as_ref()?.validation.as_slice())))
            .collect();
        let steps = curves
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.0))
            .fold(1.0, f64::max);
        let mut chart = ChartBuilder::on(&panel)
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
            let colour_i = colour(i);
            chart
                .draw_series(LineSeries::new(points.to_vec(), colour_i.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(format!("k={k}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour_i.stroke_width(2))
                });
            // The first of equal scores, as training records it.
            let best = points
                .iter()
                .copied()
                .reduce(|b, p| if p.1 > b.1 { p } else { b });
            chart
                .draw_series(best.map(|p| Circle::new(p, 5, colour_i.stroke_width(2))))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .label_font((FAMILY, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| e.to_string())?;
    }
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
    both_formats(
        out,
        "tradeoff",
        (900, 620),
        |root| draw_tradeoff(matrix, root),
        |root| draw_tradeoff(matrix, root),
    )
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

fn draw_tradeoff<DB: DrawingBackend>(
    matrix: &MatrixResults,
    root: DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let unplaced = note_lines(&without_flops(matrix));
    let height = root.dim_in_pixel().1 as i32;
    let (root, note) = root.split_vertically(height - 20 * unplaced.len() as i32);
    for (row, line) in unplaced.iter().enumerate() {
        let font = (FAMILY, 13).into_font().color(&BLACK);
        note.draw_text(line, &font, (14, 20 * row as i32))
            .map_err(|e| e.to_string())?;
    }
    // The legend beside the plot, where it hides no point.
    let (root, legend) = root.split_horizontally(760);
    let backbones = matrix.backbones();
    let all: Vec<(f64, f64, f64)> = backbones
        .iter()
        .flat_map(|b| tradeoff_points(matrix, b))
        .collect();
    let (x_low, x_high) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
    let (y_low, y_high) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.2), hi.max(p.2))
        });
    let (x_low, x_high) = if x_low.is_finite() {
        (x_low / 1.6, x_high * 1.6)
    } else {
        (0.1, 10.0)
    };
    let (y_low, y_high) = if y_low.is_finite() {
        let pad = ((y_high - y_low) * 0.15).max(0.02);
        // Below 0 a little, so that cells at 0 sit above the axis, not on it.
        ((y_low - pad).max(-0.04), (y_high + pad).min(1.0))
    } else {
        (0.0, 1.0)
    };
    let set = &matrix.tradeoff;
    let mut chart = ChartBuilder::on(&root)
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
        .x_labels(12)
        .x_label_formatter(&|x| tick(*x))
        .x_desc("FLOPs (expected multiplications per query–document pair, log scale)")
        .y_desc(format!("mean {}", table_measure(set)))
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(|e| e.to_string())?;
    let mut ks: Vec<f64> = all.iter().map(|p| p.0).collect();
    ks.sort_by(f64::total_cmp);
    ks.dedup();
    let shape_of = |k: f64| ks.iter().position(|&x| x == k).unwrap_or(0);
    for (i, backbone) in backbones.iter().enumerate() {
        let points = tradeoff_points(matrix, backbone);
        if points.is_empty() {
            continue;
        }
        let c = colour(i);
        chart
            .draw_series(points.iter().map(|p| {
                EmptyElement::at((p.1, p.2)) + Polygon::new(marker(shape_of(p.0)), c.filled())
            }))
            .map_err(|e| e.to_string())?;
        // Each backbone's best k, ringed.
        let best = points.iter().max_by(|a, b| a.2.total_cmp(&b.2));
        chart
            .draw_series(best.map(|p| Circle::new((p.1, p.2), 10, BLACK.stroke_width(2))))
            .map_err(|e| e.to_string())?;
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

/// An entry of a legend drawn beside a plot: its marker.
enum Legend {
    /// A backbone's colour.
    Backbone(RGBColor),
    /// The `shape`-th k's marker.
    K(usize),
    /// The ring around a best point.
    Best,
    /// A grey dot, a grey square, a thick line, a thin grey line.
    Dot,
    Square,
    Line,
    Thin,
}

/// One row per entry, marker then text, from the top of `area`.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: impl Iterator<Item = (String, Legend)>,
) -> Result<(), String> {
    let grey = RGBColor(90, 90, 90);
    for (row, (text, entry)) in entries.enumerate() {
        let (x, y) = (14, 60 + 24 * row as i32);
        let line = |style: ShapeStyle| PathElement::new(vec![(x - 9, y), (x + 9, y)], style);
        let drawn = match entry {
            Legend::Backbone(c) => area.draw(&Circle::new((x, y), 6, c.filled())),
            Legend::K(shape) => {
                area.draw(&(EmptyElement::at((x, y)) + Polygon::new(marker(shape), grey.filled())))
            }
            Legend::Best => area.draw(&Circle::new((x, y), 10, BLACK.stroke_width(2))),
            Legend::Dot => area.draw(&Circle::new((x, y), 6, grey.filled())),
            Legend::Square => area.draw(&Rectangle::new(
                [(x - 5, y - 5), (x + 5, y + 5)],
                grey.stroke_width(2),
            )),
            Legend::Line => area.draw(&line(BLACK.stroke_width(2))),
            Legend::Thin => area.draw(&line(RGBColor(130, 130, 130).stroke_width(1))),
        };
        drawn.map_err(|e| e.to_string())?;
        let font = (FAMILY, 14).into_font().color(&BLACK);
        area.draw_text(&text, &font, (x + 18, y - 8))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `k-choice.png` / `k-choice.svg`.
pub fn k_choice(rows: &[KChoiceRow], out: &Path) -> Result<Vec<PathBuf>> {
    both_formats(
        out,
        "k-choice",
        (900, 560),
        |root| draw_k_choice(rows, root),
        |root| draw_k_choice(rows, root),
    )
}

fn draw_k_choice<DB: DrawingBackend>(
    rows: &[KChoiceRow],
    root: DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (root, legend) = root.split_horizontally(700);
    let reference = rows[0].reference_row_norm;
    let grid: Vec<f64> = rows[0].grid.iter().map(|g| g.0).collect();
    let norms = rows.iter().map(|r| r.row_norm_mean).chain([reference]);
    let (low, high) = norms.fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(x), h.max(x)));
    // Both axes in log2, so that the ticks fall on powers of two (the grid's k).
    let (k_low, k_high) = (grid[0].log2() - 0.6, grid[grid.len() - 1].log2() + 0.6);
    let mut chart = ChartBuilder::on(&root)
        .caption("Best k against the head's norm", (FAMILY, 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(50)
        .build_cartesian_2d((low / 1.4).log2()..(high * 1.4).log2(), k_low..k_high)
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
    let xs: Vec<f64> = (0..=200)
        .map(|i| (low / 1.4) * (high * 1.4 / (low / 1.4)).powf(i as f64 / 200.0))
        .collect();
    let exact = xs
        .iter()
        .map(|&x| (x.log2(), (x / reference).log2()))
        .filter(|p| (k_low..k_high).contains(&p.1));
    let grey = RGBColor(130, 130, 130);
    chart
        .draw_series(DashedLineSeries::new(exact, 5, 4, grey.stroke_width(1)))
        .map_err(|e| e.to_string())?;
    let rounded = xs.iter().map(|&x| {
        (
            x.log2(),
            lsr_files::probe::nearest_k(&grid, x / reference).log2(),
        )
    });
    chart
        .draw_series(LineSeries::new(rounded, BLACK.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    let mut backbones: Vec<&str> = Vec::new();
    for row in rows {
        if !backbones.contains(&row.backbone.as_str()) {
            backbones.push(&row.backbone);
        }
    }
    // Rows at one norm (seeds, backbones sharing a norm) side by side, not on top of each other.
    for (i, row) in rows.iter().enumerate() {
        let same: Vec<usize> = (0..rows.len())
            .filter(|&j| rows[j].row_norm_mean == row.row_norm_mean)
            .collect();
        let slot = same.iter().position(|&j| j == i).unwrap_or(0) as f64;
        let x = row.row_norm_mean.log2() + 0.05 * (slot - (same.len() as f64 - 1.0) / 2.0);
        let c = colour(
            backbones
                .iter()
                .position(|b| *b == row.backbone)
                .unwrap_or(0),
        );
        chart
            .draw_series([Circle::new((x, row.best_k.log2()), 6, c.filled())])
            .map_err(|e| e.to_string())?;
        let square = [(-5, -5), (5, 5)];
        chart
            .draw_series([EmptyElement::at((x, row.probe_k.log2()))
                + Rectangle::new(square, c.stroke_width(2))])
            .map_err(|e| e.to_string())?;
    }
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

/// The outline of the `shape`-th k's marker, in pixels around the point: circle, triangle,
/// square, diamond, inverted triangle, hexagon.
fn marker(shape: usize) -> Vec<(i32, i32)> {
    let polygon = |corners: usize, radius: f64, turn: f64| -> Vec<(i32, i32)> {
        (0..corners)
            .map(|i| {
                let angle = turn + std::f64::consts::TAU * i as f64 / corners as f64;
                (
                    (radius * angle.cos()).round() as i32,
                    (radius * angle.sin()).round() as i32,
                )
            })
            .collect()
    };
    let up = -std::f64::consts::FRAC_PI_2;
    match shape % 6 {
        0 => polygon(16, 5.5, 0.0),
        1 => polygon(3, 7.5, up),
        2 => polygon(4, 7.0, std::f64::consts::FRAC_PI_4),
        3 => polygon(4, 7.5, 0.0),
        4 => polygon(3, 7.5, -up),
        _ => polygon(6, 6.5, 0.0),
    }
}
