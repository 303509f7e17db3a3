//! How well k can be chosen without the full grid: for each run of a matrix (seeds) and each
//! backbone with a finished probe and a fully evaluated grid, the k of the head-norm rule, of
//! the probe and of "no rescaling" against the grid's best cell — the regret (score lost) and
//! the training steps spent relative to the grid — as `k-choice.md` and `k-choice.csv`. The runs
//! come already read (`MatrixResults`); of its own it reads only their probes, and the figure
//! is drawn from its rows by `plots::k_choice`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use lsr_files::{CellState, Probe};
use polars::prelude::*;

use crate::error::{ReportError, Result};
use crate::results::MatrixResults;
use crate::table::{write_bytes, write_csv};

/// One backbone in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct KChoiceRow {
    /// The run's matrix name (one per seed).
    pub run: String,
    pub backbone: String,
    pub row_norm_mean: f64,
    /// The rule's k before rounding to the grid.
    pub exact_k: f64,
    pub reference_row_norm: f64,
    /// `(k, score)` of every cell of the grid, in k order.
    pub grid: Vec<(f64, f64)>,
    pub best_k: f64,
    pub rule_k: f64,
    pub probe_k: f64,
    /// The training steps the probe's choice costs, in full runs: the beginning of every cell,
    /// then the rest of the chosen one.
    pub probe_runs: f64,
}

/// A way of choosing k, summarised over every row.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub method: &'static str,
    pub agree: usize,
    pub rows: usize,
    pub mean_regret: f64,
    pub max_regret: f64,
    /// Training steps spent over the full grid's, averaged over the rows.
    pub compute: f64,
}

impl KChoiceRow {
    pub fn score(&self, k: f64) -> f64 {
        self.grid
            .iter()
            .find(|(x, _)| *x == k)
            .map_or(f64::NAN, |(_, s)| *s)
    }

    pub fn regret(&self, k: f64) -> f64 {
        self.score(self.best_k) - self.score(k)
    }
}

/// The rows of one run: backbones whose probe finished and whose every cell was evaluated (a
/// cell that collapsed with weights too broken to evaluate scores 0), with each cell's mean
/// nDCG@10 over the matrix's evaluation sets; the others are left out, by name in the second
/// list.
pub fn rows(matrix: &MatrixResults) -> Result<(Vec<KChoiceRow>, Vec<String>)> {
    let mut rows = Vec::new();
    let mut left_out = Vec::new();
    for backbone in matrix.backbones() {
        let Some(probe) = Probe::read(&matrix.dir, backbone)? else {
            left_out.push(format!("{}/{backbone}: no probe", matrix.name));
            continue;
        };
        match grid(matrix, backbone) {
            Ok(grid) if !grid.is_empty() => rows.push(row(matrix, backbone, &probe, grid)),
            Ok(_) => {}
            Err(unfinished) => left_out.push(unfinished),
        }
    }
    Ok((rows, left_out))
}

/// `(k, score)` of each of the backbone's cells, in k order; the first cell without a score,
/// by name and state, if there is one.
fn grid(matrix: &MatrixResults, backbone: &str) -> Result<Vec<(f64, f64)>, String> {
    let mut grid = Vec::new();
    for cell in matrix.cells.iter().filter(|c| c.backbone == backbone) {
        let score = match (&cell.metrics, cell.state) {
            (Some(metrics), _) => matrix.score(metrics),
            (None, CellState::Collapsed) => Some(0.0),
            (None, _) => None,
        };
        match score {
            Some(score) => grid.push((cell.k, score)),
            None => return Err(format!("{}/{}: {}", matrix.name, cell.id, cell.state)),
        }
    }
    grid.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(grid)
}

/// The row of a backbone with a finished probe and a non-empty `grid`.
fn row(matrix: &MatrixResults, backbone: &str, probe: &Probe, grid: Vec<(f64, f64)>) -> KChoiceRow {
    let best_k = grid
        .iter()
        .fold(
            grid[0],
            |best, &cell| if cell.1 > best.1 { cell } else { best },
        )
        .0;
    let chosen = probe.runs.iter().find(|r| r.k == probe.chosen_k);
    let rest = probe.full_steps - chosen.map_or(0, |r| r.steps.min(probe.full_steps));
    let probe_steps: usize = probe.runs.iter().map(|r| r.steps).sum::<usize>() + rest;
    KChoiceRow {
        run: matrix.name.clone(),
        backbone: backbone.to_string(),
        row_norm_mean: probe.norm_rule.row_norm_mean,
        exact_k: probe.norm_rule.exact_k,
        reference_row_norm: probe.norm_rule.reference_row_norm,
        grid,
        best_k,
        rule_k: probe.norm_rule.k,
        probe_k: probe.chosen_k,
        probe_runs: probe_steps as f64 / probe.full_steps.max(1) as f64,
    }
}

/// Agreement, regret and compute of the rule, the probe and the grid's smallest k over `rows`.
/// Compute counts training steps: the rule trains one cell, the probe the beginning of every
/// cell and the rest of the chosen one, the smallest k one cell.
pub fn summarise(rows: &[KChoiceRow]) -> Vec<Summary> {
    type Pick = fn(&KChoiceRow) -> (f64, f64);
    let methods: [(&'static str, Pick); 3] = [
        ("head-norm rule", |r| (r.rule_k, 1.0)),
        ("probe", |r| (r.probe_k, r.probe_runs)),
        ("smallest k (k = 1: no rescaling)", |r| (r.grid[0].0, 1.0)),
    ];
    methods
        .iter()
        .map(|(method, pick)| {
            let regrets: Vec<f64> = rows.iter().map(|r| r.regret(pick(r).0)).collect();
            let n = rows.len().max(1) as f64;
            Summary {
                method,
                agree: rows.iter().filter(|r| pick(r).0 == r.best_k).count(),
                rows: rows.len(),
                mean_regret: regrets.iter().sum::<f64>() / n,
                max_regret: regrets.iter().copied().fold(0.0, f64::max),
                compute: rows
                    .iter()
                    .map(|r| pick(r).1 / r.grid.len() as f64)
                    .sum::<f64>()
                    / n,
            }
        })
        .collect()
}

/// The rows of every run, what they sum up to and what was left out.
#[derive(Clone, Debug, PartialEq)]
pub struct KChoice {
    pub rows: Vec<KChoiceRow>,
    pub summary: Vec<Summary>,
    pub left_out: Vec<String>,
}

/// The choice of k over `runs` (one matrix under several seeds); refuses
/// (`ReportError::Nothing`) when no backbone of any run has a row, rather than a table of zeros.
pub fn choose(runs: &[MatrixResults]) -> Result<KChoice> {
    let mut all = Vec::new();
    let mut left_out = Vec::new();
    for run in runs {
        let (rows, missing) = rows(run)?;
        all.extend(rows);
        left_out.extend(missing);
    }
    if all.is_empty() {
        let dirs: Vec<String> = runs.iter().map(|r| r.dir.display().to_string()).collect();
        let mut why = format!(
            "no backbone has both a finished probe (`lsr matrix probe`) and a fully evaluated \
             grid (`lsr matrix run`) in {}",
            dirs.join(", ")
        );
        if !left_out.is_empty() {
            why += &format!(" (left out: {})", left_out.join("; "));
        }
        return Err(ReportError::Nothing {
            part: "k-choice",
            why,
        });
    }
    Ok(KChoice {
        summary: summarise(&all),
        rows: all,
        left_out,
    })
}

/// Writes `k-choice.md` and `k-choice.csv` of `choice` into `out`.
pub fn write_tables(choice: &KChoice, out: &Path) -> Result<Vec<PathBuf>> {
    let md = markdown(&choice.rows, &choice.summary, &choice.left_out);
    Ok(vec![
        write_bytes(&out.join("k-choice.md"), md.as_bytes())?,
        write_csv(&out.join("k-choice.csv"), frame(&choice.rows))?,
    ])
}

fn markdown(rows: &[KChoiceRow], summary: &[Summary], left_out: &[String]) -> String {
    let mut md = String::from(
        "Choosing k without the full grid. Score: mean nDCG@10 over the matrix's evaluation \
         sets; regret: the best cell's score minus the chosen cell's; compute: training steps \
         spent over the full grid's.\n\n\
         | method | picks the grid's best k | mean regret | max regret | compute |\n\
         |---|---|---|---|---|\n",
    );
    for s in summary {
        let _ = writeln!(
            md,
            "| {} | {}/{} | {:.3} | {:.3} | {:.2} |",
            s.method, s.agree, s.rows, s.mean_regret, s.max_regret, s.compute
        );
    }
    md.push_str(
        "\n| run | backbone | row norm | rule k (exact) | probe k | best k | best | regret rule | \
         regret probe |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {:.3} | {} ({:.2}) | {} | {} | {:.3} | {:.3} | {:.3} |",
            r.run,
            r.backbone,
            r.row_norm_mean,
            r.rule_k,
            r.exact_k,
            r.probe_k,
            r.best_k,
            r.score(r.best_k),
            r.regret(r.rule_k),
            r.regret(r.probe_k)
        );
    }
    if !left_out.is_empty() {
        let _ = writeln!(md, "\nLeft out (not finished): {}.", left_out.join("; "));
    }
    md
}

fn frame(rows: &[KChoiceRow]) -> Vec<Column> {
    let text = |f: fn(&KChoiceRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
    let number = |f: fn(&KChoiceRow) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
    vec![
        Column::new("run".into(), text(|r| r.run.clone())),
        Column::new("backbone".into(), text(|r| r.backbone.clone())),
        Column::new("row_norm_mean".into(), number(|r| r.row_norm_mean)),
        Column::new("rule_exact_k".into(), number(|r| r.exact_k)),
        Column::new("rule_k".into(), number(|r| r.rule_k)),
        Column::new("probe_k".into(), number(|r| r.probe_k)),
        Column::new("best_k".into(), number(|r| r.best_k)),
        Column::new("best_ndcg@10".into(), number(|r| r.score(r.best_k))),
        Column::new("regret_rule".into(), number(|r| r.regret(r.rule_k))),
        Column::new("regret_probe".into(), number(|r| r.regret(r.probe_k))),
        Column::new("probe_runs".into(), number(|r| r.probe_runs)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(grid: &[(f64, f64)], rule_k: f64, probe_k: f64) -> KChoiceRow {
        KChoiceRow {
            run: "s".into(),
            backbone: "b".into(),
            row_norm_mean: 1.0,
            exact_k: 6.0,
            reference_row_norm: 0.16,
            grid: grid.to_vec(),
            best_k: grid
                .iter()
                .fold(grid[0], |b, &c| if c.1 > b.1 { c } else { b })
                .0,
            rule_k,
            probe_k,
            probe_runs: 1.5,
        }
    }

    #[test]
    fn regret_agreement_and_compute_are_counted_per_method() {
        let grid = [(1.0, 0.2), (4.0, 0.5), (16.0, 0.4)];
        let rows = [row(&grid, 4.0, 16.0), row(&grid, 16.0, 4.0)];
        let summary = summarise(&rows);
        let by = |m: &str| summary.iter().find(|s| s.method == m).unwrap().clone();
        let rule = by("head-norm rule");
        assert_eq!((rule.agree, rule.rows), (1, 2));
        assert!((rule.mean_regret - 0.05).abs() < 1e-12);
        assert!((rule.max_regret - 0.1).abs() < 1e-12);
        assert!((rule.compute - 1.0 / 3.0).abs() < 1e-12);
        let probe = by("probe");
        assert_eq!(probe.agree, 1);
        assert!((probe.compute - 1.5 / 3.0).abs() < 1e-12);
        let none = by("smallest k (k = 1: no rescaling)");
        assert_eq!(none.agree, 0);
        assert!((none.mean_regret - 0.3).abs() < 1e-12);
    }
}
