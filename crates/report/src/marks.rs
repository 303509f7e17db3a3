//! The significance marks of Table 1 and the per-data-set table: in a data set's column, each
//! cell of a backbone against that backbone's k = 1 cell, by the paired two-sided t-test
//! (deterministic, unlike the permutation test) with Holm over the backbone's other k in the
//! column. A data set is tested over its queries (`per_query.json`); a group over its members'
//! values, one pair per data set, since its column shows their unweighted mean.

use std::collections::BTreeMap;

use lsr_data::registry::table_measure;

use crate::results::{CellResult, MatrixResults};
use crate::significance::{Paired, holm};

/// The level the Holm-adjusted p-values are judged at.
pub(crate) const ALPHA: f64 = 0.05;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    Higher,
    Lower,
}

impl Mark {
    pub(crate) fn symbol(self) -> char {
        match self {
            Mark::Higher => '↑',
            Mark::Lower => '↓',
        }
    }
}

/// The tests of one column.
#[derive(Clone, Debug, Default)]
pub(crate) struct ColumnTests {
    /// Per row, whether its cell differs significantly from its backbone's k = 1 cell.
    pub marks: Vec<Option<Mark>>,
    /// The comparisons run.
    pub tested: usize,
    /// The comparisons that could not be run, each saying why.
    pub untested: Vec<String>,
    /// For a group, its number of members: the pairs of each test.
    pub members: Option<usize>,
}

/// The tests of `dataset`'s column (a data set, or a group) in its table measure.
pub(crate) fn column(matrix: &MatrixResults, dataset: &str) -> ColumnTests {
    let cells = &matrix.cells;
    let mut tests = ColumnTests {
        marks: vec![None; cells.len()],
        members: (cells.iter()).find_map(|c| Some(c.metrics.as_ref()?.groups.get(dataset)?.len())),
        ..ColumnTests::default()
    };
    for backbone in matrix.backbones() {
        let rows: Vec<usize> = (0..cells.len())
            .filter(|&row| cells[row].backbone == backbone)
            .collect();
        let Some(&base) = rows.iter().find(|&&row| cells[row].k == 1.0) else {
            continue;
        };
        let mut family = Vec::new();
        for &row in rows.iter().filter(|&&row| row != base) {
            match paired(&cells[base], &cells[row], dataset) {
                Some(Ok(paired)) => family.push((row, paired.t_test())),
                Some(Err(why)) => tests.untested.push(why),
                None => {}
            }
        }
        let adjusted = holm(&family.iter().map(|(_, t)| t.p).collect::<Vec<_>>());
        for ((row, t), p) in family.iter().zip(adjusted) {
            tests.marks[*row] = (p < ALPHA).then_some(if t.difference > 0.0 {
                Mark::Higher
            } else {
                Mark::Lower
            });
        }
        tests.tested += family.len();
    }
    tests
}

/// `cell`'s values paired with its backbone's k = 1 cell's (`base`) in `dataset`'s column:
/// `None` where either shows no value there, an error saying why where the test cannot be run.
fn paired(base: &CellResult, cell: &CellResult, dataset: &str) -> Option<Result<Paired, String>> {
    let measure = table_measure(dataset);
    let shown = |cell: &CellResult| {
        let metrics = cell.metrics.as_ref();
        metrics.and_then(|m| m.mean(dataset, measure)).is_some()
    };
    if !shown(base) || !shown(cell) {
        return None;
    }
    let comparison = format!(
        "{} k={} against k={} on {dataset}",
        cell.backbone, cell.k, base.k
    );
    let values = |cell: &CellResult| -> Option<BTreeMap<String, f64>> {
        let metrics = cell.metrics.as_ref()?;
        if !metrics.groups.contains_key(dataset) {
            return cell.per_query.get(dataset).cloned();
        }
        (metrics.members(dataset).into_iter())
            .map(|member| {
                let value = metrics.datasets.get(member)?.metrics.get(measure)?;
                Some((member.to_string(), *value))
            })
            .collect()
    };
    let Some((a, b)) = values(base).zip(values(cell)) else {
        return Some(Err(format!(
            "{comparison}: no per-query values of {measure}"
        )));
    };
    Some(Paired::by_key(&comparison, &a, &b).map_err(|e| e.to_string()))
}

/// The note under a table whose columns (`label`, tests) were tested: the test, the correction,
/// α, how a group is tested, and what could not be; `None` where no backbone had a cell to
/// compare with its k = 1 cell.
pub(crate) fn note(columns: &[(String, &ColumnTests)]) -> Option<String> {
    if columns
        .iter()
        .all(|(_, t)| t.tested == 0 && t.untested.is_empty())
    {
        return None;
    }
    let mut note = format!(
        "↑/↓: significantly higher/lower than the backbone's k = 1 cell in the column: paired \
         two-sided t-test over the data set's per-query values, Holm–Bonferroni over the \
         backbone's other k in the column, α = {ALPHA}."
    );
    for (label, tests) in columns {
        if let Some(members) = tests.members.filter(|_| tests.tested > 0) {
            note.push_str(&format!(
                " {label}: tested over its {members} data sets' values, one pair per data set, \
                 as the column is their unweighted mean (not over their pooled queries)."
            ));
        }
    }
    let untested: Vec<&str> = (columns.iter())
        .flat_map(|(_, t)| t.untested.iter().map(String::as_str))
        .collect();
    if !untested.is_empty() {
        note.push_str(&format!(" Not tested: {}.", untested.join("; ")));
    }
    Some(note)
}
