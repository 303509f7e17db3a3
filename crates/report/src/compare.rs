//! Runs of one matrix side by side (`lsr report A B ... --compare`): each cell's score
//! (`MatrixResults::score`) in every run and, given a run that differs from the first only in
//! its data-order seed (`--noise`), whether each other run shows the first one's pattern within
//! the distance two equally valid runs land apart.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{ReportError, Result};
use crate::results::MatrixResults;
use crate::table::{write_bytes, write_csv};

/// The least tolerance: below it, two scores are the same whatever the seeds say.
const TOLERANCE_FLOOR: f64 = 0.05;
/// A cell scoring below this failed (collapsed or near it).
const FAILED_BELOW: f64 = 0.1;

/// Every run's score of each cell of the first run, in its order.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Column names: the matrix names, or the folders where two names coincide.
    pub runs: Vec<String>,
    pub rows: Vec<Row>,
    /// With a noise run (the last of `runs`): how each other run compares with the first.
    pub pattern: Option<Pattern>,
}

#[derive(Clone, Debug)]
pub struct Row {
    pub backbone: String,
    pub k: f64,
    /// One per run; `None` where the run has no score for the cell.
    pub scores: Vec<Option<f64>>,
}

#[derive(Clone, Debug)]
pub struct Pattern {
    /// The largest |Δ| between the first run and the noise run.
    pub noise: f64,
    pub tolerance: f64,
    /// Per backbone, the best k of each run (`None`: no cell of it scored).
    pub best_k: Vec<(String, Vec<Option<f64>>)>,
    /// For each run between the first and the noise run: why its pattern differs (empty: the
    /// same pattern).
    pub differences: Vec<(String, Vec<String>)>,
}

/// Compares `runs`; the last is the noise run when `noise` is set.
pub fn compare(runs: &[MatrixResults], noise: bool) -> Result<Comparison> {
    let Some(first) = runs.first() else {
        return Err(nothing("no runs"));
    };
    let rows: Vec<Row> = (first.cells.iter())
        .map(|cell| Row {
            backbone: cell.backbone.clone(),
            k: cell.k,
            scores: runs.iter().map(|run| score(run, &cell.id)).collect(),
        })
        .collect();
    let names = column_names(runs);
    let pattern = match noise {
        true => Some(pattern(&rows, &names)?),
        false => None,
    };
    Ok(Comparison {
        runs: names,
        rows,
        pattern,
    })
}

fn score(run: &MatrixResults, id: &str) -> Option<f64> {
    let cell = run.cells.iter().find(|c| c.id == id)?;
    run.score(cell.metrics.as_ref()?)
}

fn column_names(runs: &[MatrixResults]) -> Vec<String> {
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let unique = (1..names.len()).all(|i| !names[..i].contains(&names[i]));
    match unique {
        true => names.iter().map(|n| n.to_string()).collect(),
        false => runs.iter().map(|r| r.dir.display().to_string()).collect(),
    }
}

fn nothing(why: &str) -> ReportError {
    ReportError::Nothing {
        part: "comparison",
        why: why.into(),
    }
}

/// The tolerance from the first and the last (noise) column, then each column between them
/// against the first: every cell within the tolerance, the same cells failed, and each
/// backbone's best k one that the first run scores within the tolerance of its own best.
fn pattern(rows: &[Row], names: &[String]) -> Result<Pattern> {
    let last = names.len() - 1;
    if last < 1 {
        return Err(nothing(
            "--noise needs a run to compare with and a noise run",
        ));
    }
    let deltas: Vec<f64> = rows.iter().filter_map(|r| delta(r, last)).collect();
    let Some(noise) = deltas.iter().copied().reduce(f64::max) else {
        return Err(nothing(
            "the first run and the noise run have no scored cell in common",
        ));
    };
    let tolerance = noise.max(TOLERANCE_FLOOR);
    let backbones = backbones(rows);
    let best_k = (backbones.iter())
        .map(|b| {
            (
                b.clone(),
                (0..=last).map(|run| best_k(rows, b, run)).collect(),
            )
        })
        .collect();
    let differences = (1..last)
        .map(|run| {
            (
                names[run].clone(),
                differences(rows, &backbones, run, tolerance),
            )
        })
        .collect();
    Ok(Pattern {
        noise,
        tolerance,
        best_k,
        differences,
    })
}

/// |Δ| between the first run and `run` for this cell, where both scored it.
fn delta(row: &Row, run: usize) -> Option<f64> {
    Some((row.scores[run]? - row.scores[0]?).abs())
}

fn backbones(rows: &[Row]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for row in rows {
        if !names.contains(&row.backbone) {
            names.push(row.backbone.clone());
        }
    }
    names
}

/// The k of the backbone's best score in `run` (the smaller k on a tie).
fn best_k(rows: &[Row], backbone: &str, run: usize) -> Option<f64> {
    let scored = rows.iter().filter(|r| r.backbone == backbone);
    let scored = scored.filter_map(|r| Some((r.scores[run]?, r.k)));
    scored
        .reduce(
            |best, cell| match cell.0 > best.0 || (cell.0 == best.0 && cell.1 < best.1) {
                true => cell,
                false => best,
            },
        )
        .map(|(_, k)| k)
}

fn differences(rows: &[Row], backbones: &[String], run: usize, tolerance: f64) -> Vec<String> {
    let mut found = Vec::new();
    for row in rows {
        let cell = format!("{} k={}", row.backbone, row.k);
        match (row.scores[0], row.scores[run]) {
            (Some(first), Some(other)) => {
                if (other - first).abs() > tolerance {
                    found.push(format!(
                        "{cell}: |Δ| {:.3} > {tolerance:.3}",
                        (other - first).abs()
                    ));
                }
                if (first < FAILED_BELOW) != (other < FAILED_BELOW) {
                    found.push(format!(
                        "{cell}: {first:.3} against {other:.3}, failed in one run only"
                    ));
                }
            }
            (first, other) if first.is_some() || other.is_some() => {
                found.push(format!("{cell}: scored in one run only"));
            }
            _ => {}
        }
    }
    for backbone in backbones {
        let (Some(own), Some(other)) = (best_k(rows, backbone, 0), best_k(rows, backbone, run))
        else {
            continue;
        };
        let first_at = |k: f64| {
            (rows.iter())
                .find(|r| r.backbone == *backbone && r.k == k)
                .and_then(|r| r.scores[0])
        };
        if let (Some(best), Some(at_other)) = (first_at(own), first_at(other))
            && at_other < best - tolerance
        {
            found.push(format!(
                "{backbone}: best at k={other}, where the first run scores {at_other:.3}, \
                 more than the tolerance below its best {best:.3} (k={own})"
            ));
        }
    }
    found
}

impl Comparison {
    /// The Markdown table (with a noise run, also each run's |Δ| from the first), then the
    /// pattern's verdict where there is a noise run.
    pub fn markdown(&self) -> String {
        let judged = match self.pattern {
            Some(_) => 1..self.runs.len() - 1,
            None => 0..0,
        };
        let mut headers = self.runs.clone();
        headers.extend(judged.clone().map(|run| format!("|Δ| {}", self.runs[run])));
        let mut md = format!("| cell | {} |\n|---|", headers.join(" | "));
        md.push_str(&"---:|".repeat(headers.len()));
        for row in &self.rows {
            let mut cells: Vec<String> = row.scores.iter().map(|s| text(*s)).collect();
            cells.extend(judged.clone().map(|run| text(delta(row, run))));
            write!(
                md,
                "\n| {} k={} | {} |",
                row.backbone,
                row.k,
                cells.join(" | ")
            )
            .unwrap();
        }
        md.push_str("\n\nScore: mean nDCG@10 over the matrix's evaluation sets.");
        if let Some(pattern) = &self.pattern {
            md.push_str(&pattern.markdown(&self.runs));
        }
        md.push('\n');
        md
    }

    /// Writes `compare.md` and `compare.csv` into `out`; returns their paths.
    pub fn write(&self, out: &Path) -> Result<Vec<PathBuf>> {
        let md = write_bytes(&out.join("compare.md"), self.markdown().as_bytes())?;
        let mut columns = vec![
            Column::new(
                "backbone".into(),
                self.rows
                    .iter()
                    .map(|r| r.backbone.as_str())
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "k".into(),
                self.rows.iter().map(|r| r.k).collect::<Vec<_>>(),
            ),
        ];
        for (run, name) in self.runs.iter().enumerate() {
            let scores: Vec<Option<f64>> = self.rows.iter().map(|r| r.scores[run]).collect();
            columns.push(Column::new(name.into(), scores));
        }
        Ok(vec![md, write_csv(&out.join("compare.csv"), columns)?])
    }
}

impl Pattern {
    fn markdown(&self, runs: &[String]) -> String {
        let (first, noise) = (&runs[0], &runs[runs.len() - 1]);
        let mut md = format!(
            " Data-order noise (largest |Δ| between {first} and {noise}): {:.3}; tolerance {:.3} \
             (the noise, at least {TOLERANCE_FLOOR}). Best k per backbone, {}: ",
            self.noise,
            self.tolerance,
            runs.join(" / ")
        );
        let best: Vec<String> = (self.best_k.iter())
            .map(|(b, ks)| {
                format!(
                    "{b} {}",
                    ks.iter().map(|k| text_k(*k)).collect::<Vec<_>>().join("/")
                )
            })
            .collect();
        md.push_str(&best.join(", "));
        md.push('.');
        for (run, differences) in &self.differences {
            match differences.is_empty() {
                true => write!(md, "\n\n{run}: the same pattern as {first}.").unwrap(),
                false => write!(
                    md,
                    "\n\n{run}: not the same pattern as {first}: {}.",
                    differences.join("; ")
                )
                .unwrap(),
            }
        }
        md
    }
}

fn text(score: Option<f64>) -> String {
    score.map_or("–".into(), |s| format!("{s:.3}"))
}

fn text_k(k: Option<f64>) -> String {
    k.map_or("–".into(), |k| format!("{k}"))
}
