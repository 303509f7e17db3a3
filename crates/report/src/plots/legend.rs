//! The legend drawn beside a plot (trade-off, choice of k), and the marker of each k.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::FAMILY;

/// An entry of a legend drawn beside a plot: its marker.
pub(super) enum Legend {
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
pub(super) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: impl Iterator<Item = (String, Legend)>,
) -> Result<(), String> {
    for (row, (text, entry)) in entries.enumerate() {
        let at = (14, 60 + 24 * row as i32);
        draw_marker(area, entry, at).map_err(|e| e.to_string())?;
        let font = (FAMILY, 14).into_font().color(&BLACK);
        area.draw_text(&text, &font, (at.0 + 18, at.1 - 8))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The marker of `entry`, centred on `(x, y)`.
fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entry: Legend,
    (x, y): (i32, i32),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let grey = RGBColor(90, 90, 90);
    let line = |style: ShapeStyle| PathElement::new(vec![(x - 9, y), (x + 9, y)], style);
    match entry {
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
    }
}

/// The outline of the `shape`-th k's marker, in pixels around the point: circle, triangle,
/// square, diamond, inverted triangle, hexagon.
pub(super) fn marker(shape: usize) -> Vec<(i32, i32)> {
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
