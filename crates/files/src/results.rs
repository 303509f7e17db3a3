//! What a matrix's results directory holds for its readers, as one set of types shared by the
//! writers (training, evaluation, the matrix) and the readers (the report, the probe, the CLI):
//! the expanded matrix (`matrix.json`) with the paper's numbers, a cell's metrics per data set
//! (`metrics.json`), every query's measures on a data set (`per_query.json`), and a run's
//! training log (`train.csv`), each read with errors naming the file (and the line) that does
//! not fit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::layout::{MATRIX, METRICS};
use crate::{FileError, Result, read_json, write_json};

/// The results format this lsr writes and reads. A `matrix.json` without `format` was written
/// before it was recorded, in this same format.
pub const FORMAT: u32 = 1;

/// `results/<matrix>/matrix.json`: the expanded matrix, written before its first cell runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixSummary {
    #[serde(default = "first_format")]
    pub format: u32,
    pub name: String,
    /// The matrix file's `note`, printed above Table 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub cells: Vec<CellEntry>,
    /// The evaluated data sets and groups, in the matrix's order.
    pub datasets: Vec<String>,
    /// The data set (or group) of the nDCG-against-FLOPs figure.
    pub tradeoff: String,
    pub paper: Vec<PaperResult>,
    /// The `--set` and `--results` arguments that changed the matrix file for this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variant: Vec<String>,
}

fn first_format() -> u32 {
    1
}

/// One cell of the expanded matrix: its directory name, backbone and k.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellEntry {
    pub id: String,
    pub backbone: String,
    pub k: f64,
}

/// A number the paper reports, printed beside ours (`[[paper]]` of a matrix file).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PaperResult {
    pub backbone: String,
    pub k: f64,
    /// A data set or group name of the matrix's evaluation sets.
    pub dataset: String,
    pub measure: String,
    pub value: f64,
}

impl MatrixSummary {
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| FileError::io(dir, e))?;
        write_json(&dir.join(MATRIX), self)
    }

    /// `<dir>/matrix.json`, or `None` where no matrix has run there. A format this lsr does not
    /// know (a newer lsr's) is refused, naming both.
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(MATRIX);
        let Some(summary) = read_json::<Self>(&path)? else {
            return Ok(None);
        };
        if summary.format > FORMAT {
            return Err(FileError::Parse {
                path,
                message: format!(
                    "results format {} was written by a newer lsr; this one reads format {FORMAT} \
                     and older: use the lsr that wrote them",
                    summary.format
                ),
            });
        }
        Ok(Some(summary))
    }
}

/// `<cell>/metrics.json`: every evaluated data set's report, and the groups (`beir-13`) with
/// their members, for group means. The matrix writes it with evaluation's full report per data
/// set (`D`); readers take the part every report has, [`DatasetSummary`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellMetrics<D = DatasetSummary> {
    pub datasets: BTreeMap<String, D>,
    /// Group name → member data sets.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// What every data set's report in `metrics.json` holds: the mean of each measure and the
/// sparsity of the encoded collection (evaluation's report flattens it in after `dataset`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    pub metrics: BTreeMap<String, f64>,
    pub sparsity: Sparsity,
}

/// Sparsity as the SPLADE papers report it: FLOPs `Σ_j p_q(j)·p_d(j)` and the mean number of
/// non-zero terms of queries and documents, over `num_queries` and `num_docs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sparsity {
    pub flops: f64,
    pub mean_query_l0: f64,
    pub mean_doc_l0: f64,
    pub num_queries: usize,
    pub num_docs: usize,
}

impl<D> Default for CellMetrics<D> {
    fn default() -> Self {
        Self {
            datasets: BTreeMap::new(),
            groups: BTreeMap::new(),
        }
    }
}

impl<D: Serialize> CellMetrics<D> {
    pub fn write(&self, cell_dir: &Path) -> Result<()> {
        write_json(&cell_dir.join(METRICS), self)
    }
}

impl CellMetrics {
    /// `<cell_dir>/metrics.json`, or `None` where the cell has not been evaluated.
    pub fn read(cell_dir: &Path) -> Result<Option<Self>> {
        read_json(&cell_dir.join(METRICS))
    }

    /// The data sets `name` stands for: a group's members, or itself.
    pub fn members<'a>(&'a self, name: &'a str) -> Vec<&'a str> {
        match self.groups.get(name) {
            Some(members) => members.iter().map(String::as_str).collect(),
            None => vec![name],
        }
    }

    /// `measure` on data set `name`, averaged over its members if it is a group.
    pub fn mean(&self, name: &str, measure: &str) -> Option<f64> {
        self.mean_of(name, |d| d.metrics.get(measure).copied())
    }

    /// `value` of data set `name`, averaged over its members if it is a group; `None` unless
    /// every member has one.
    pub fn mean_of(
        &self,
        name: &str,
        value: impl Fn(&DatasetSummary) -> Option<f64>,
    ) -> Option<f64> {
        let values: Option<Vec<f64>> = self
            .members(name)
            .iter()
            .map(|member| self.datasets.get(*member).and_then(&value))
            .collect();
        values
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// `per_query.json` in a data set's evaluation directory (`<cell>/eval/<data set>/`, or `lsr
/// eval --output`'s): every evaluated query's value of every measure, the values whose means
/// `metrics.json` holds. Evaluation writes it; the report's significance tests read it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PerQuery {
    /// Query id → measure name → value.
    pub queries: BTreeMap<String, BTreeMap<String, f64>>,
}

impl PerQuery {
    /// The file's name in a data set's evaluation directory.
    pub const FILE: &'static str = "per_query.json";

    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join(Self::FILE), self)
    }

    /// `<dir>/per_query.json`, or `None` where evaluation wrote none (results from before it
    /// did).
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        read_json(&dir.join(Self::FILE))
    }

    /// Query id → value of `measure`; `None` unless every query has one.
    pub fn measure(&self, measure: &str) -> Option<BTreeMap<String, f64>> {
        (self.queries.iter())
            .map(|(query, values)| Some((query.clone(), *values.get(measure)?)))
            .collect()
    }
}

/// A run's `train.csv` read back: its column names and one row of numbers per logged step
/// (validation columns are NaN on steps without a pass).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainCsv {
    pub path: PathBuf,
    pub header: Vec<String>,
    pub rows: Vec<Vec<f64>>,
}

impl TrainCsv {
    /// The file name of the log in a run's directory.
    pub const FILE: &'static str = "train.csv";

    /// Reads `path`, naming the line that is not a row of numbers as wide as the header. A
    /// last line without its newline (a kill mid-write) is dropped, as training's resume does.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| FileError::io(path, e))?;
        let complete = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        let mut lines = complete.lines();
        let header: Vec<String> = match lines.next() {
            Some(line) => line.split(',').map(String::from).collect(),
            None => Vec::new(),
        };
        let mut rows = Vec::new();
        for (number, line) in lines.enumerate() {
            let bad = |message: String| FileError::Parse {
                path: path.to_path_buf(),
                message: format!("line {}: {message}", number + 2),
            };
            let row = line
                .split(',')
                .map(|v| v.parse::<f64>())
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| bad(format!("{e} in `{line}`")))?;
            if row.len() != header.len() {
                let (got, want) = (row.len(), header.len());
                return Err(bad(format!(
                    "{got} values, the header names {want} columns"
                )));
            }
            rows.push(row);
        }
        Ok(Self {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    /// The values of column `name`, or `None` if the log has no such column.
    pub fn column(&self, name: &str) -> Option<Vec<f64>> {
        let at = self.header.iter().position(|h| h == name)?;
        Some(self.rows.iter().map(|row| row[at]).collect())
    }

    /// Column `name`, or an error naming the file and the column.
    pub fn require(&self, name: &str) -> Result<Vec<f64>> {
        self.column(name).ok_or_else(|| FileError::Parse {
            path: self.path.clone(),
            message: format!("no column `{name}`"),
        })
    }

    /// The validation nDCG@10 logged at `step`, if a pass was taken then.
    pub fn validation_at(&self, step: usize) -> Option<f64> {
        let steps = self.column("step")?;
        let scores = self.column("val_ndcg@10")?;
        steps
            .iter()
            .zip(scores)
            .find(|(s, _)| **s == step as f64)
            .map(|(_, score)| score)
            .filter(|score| score.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TrainCsv::FILE);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_training_log_reads_its_columns_and_validation_passes() {
        let (_dir, path) = log("step,loss,val_ndcg@10\n1,2.5,NaN\n2,1.25,0.5\n3,1,NaN\n");
        let log = TrainCsv::read(&path).unwrap();
        assert_eq!(log.require("loss").unwrap(), [2.5, 1.25, 1.0]);
        assert_eq!(log.validation_at(2), Some(0.5));
        assert_eq!(log.validation_at(1), None);
        assert!(log.column("lr").is_none());
        let error = log.require("lr").unwrap_err().to_string();
        assert!(
            error.contains("train.csv") && error.contains("`lr`"),
            "{error}"
        );
    }

    #[test]
    fn a_bad_row_is_named_by_its_line_and_a_cut_last_row_is_dropped() {
        let (_dir, path) = log("step,loss\n1,2.5\n2,x\n");
        let error = TrainCsv::read(&path).unwrap_err().to_string();
        assert!(error.contains("line 3"), "{error}");
        let (_dir, path) = log("step,loss\n1,2.5\n2\n");
        let error = TrainCsv::read(&path).unwrap_err().to_string();
        assert!(
            error.contains("line 3") && error.contains("2 columns"),
            "{error}"
        );
        let (_dir, path) = log("step,loss\n1,2.5\n2,1.");
        assert_eq!(TrainCsv::read(&path).unwrap().rows, [vec![1.0, 2.5]]);
    }

    #[test]
    fn per_query_values_are_read_back_by_measure_and_absent_files_are_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(PerQuery::read(dir.path()).unwrap(), None);
        let text = r#"{"q1": {"ndcg@10": 0.5, "mrr@10": 1.0}, "q2": {"ndcg@10": 0.0}}"#;
        std::fs::write(dir.path().join(PerQuery::FILE), text).unwrap();
        let read = PerQuery::read(dir.path()).unwrap().unwrap();
        let ndcg = read.measure("ndcg@10").unwrap();
        assert_eq!(
            ndcg,
            BTreeMap::from([("q1".into(), 0.5), ("q2".into(), 0.0)])
        );
        assert_eq!(read.measure("mrr@10"), None, "q2 has no mrr@10");
        read.write(dir.path()).unwrap();
        assert_eq!(PerQuery::read(dir.path()).unwrap().unwrap(), read);
    }

    #[test]
    fn results_of_a_newer_format_are_refused_and_unversioned_ones_are_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let unversioned =
            r#"{"name": "m", "cells": [], "datasets": [], "tradeoff": "t", "paper": []}"#;
        std::fs::write(dir.path().join(MATRIX), unversioned).unwrap();
        assert_eq!(MatrixSummary::read(dir.path()).unwrap().unwrap().format, 1);
        let newer = unversioned.replace("{", "{\"format\": 99, ");
        std::fs::write(dir.path().join(MATRIX), newer).unwrap();
        let error = MatrixSummary::read(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("matrix.json") && error.contains("format 99"),
            "{error}"
        );
    }
}
