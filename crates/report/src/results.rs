//! A matrix's results read back: the expanded matrix (`matrix.json`), and per cell its state,
//! metrics and training log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{ReportError, Result};
use lsr_files::layout::{MATRIX, METRICS};
use lsr_files::{CellState, cell_state};

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

#[derive(Clone, Debug, Deserialize)]
struct MatrixFile {
    name: String,
    #[serde(default)]
    note: Option<String>,
    cells: Vec<CellEntry>,
    datasets: Vec<String>,
    tradeoff: String,
    paper: Vec<PaperResult>,
}

#[derive(Clone, Debug, Deserialize)]
struct CellEntry {
    id: String,
    backbone: String,
    k: f64,
}

/// The measures and sparsity of one data set (a subset of `lsr-eval`'s `DatasetReport`).
#[derive(Clone, Debug, Deserialize)]
pub struct DatasetMetrics {
    pub metrics: BTreeMap<String, f64>,
    pub sparsity: Sparsity,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Sparsity {
    pub flops: f64,
    pub mean_query_l0: f64,
    pub mean_doc_l0: f64,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CellMetrics {
    pub datasets: BTreeMap<String, DatasetMetrics>,
    /// Group name → member data sets.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// Training log columns used by the plots.
#[derive(Clone, Debug, Default)]
pub struct LossLog {
    pub step: Vec<f64>,
    pub loss: Vec<f64>,
    pub ranking_loss: Vec<f64>,
    /// `(step, nDCG@10)` of the validation passes (none in a run without `[validation]`).
    pub validation: Vec<(f64, f64)>,
}

#[derive(Clone, Debug)]
pub struct CellResult {
    pub id: String,
    pub backbone: String,
    pub k: f64,
    pub state: CellState,
    pub metrics: Option<CellMetrics>,
    pub log: Option<LossLog>,
}

#[derive(Clone, Debug)]
pub struct MatrixResults {
    pub dir: PathBuf,
    pub name: String,
    /// The matrix file's `note`, printed above Table 1.
    pub note: Option<String>,
    pub datasets: Vec<String>,
    pub tradeoff: String,
    pub paper: Vec<PaperResult>,
    pub cells: Vec<CellResult>,
}

impl MatrixResults {
    /// Reads `<dir>/matrix.json` and every cell's directory (absent files: a cell not run yet).
    pub fn read(dir: &Path) -> Result<Self> {
        if !dir.join(MATRIX).exists() {
            return Err(ReportError::NoResults {
                dir: dir.to_path_buf(),
                how: how_to_run(dir),
            });
        }
        let matrix: MatrixFile = read_json(&dir.join(MATRIX))?;
        let mut cells = Vec::new();
        for entry in matrix.cells {
            let cell_dir = dir.join(&entry.id);
            let metrics_path = cell_dir.join(METRICS);
            let metrics = if metrics_path.exists() {
                Some(read_json(&metrics_path)?)
            } else {
                None
            };
            let log_path = cell_dir.join("train.csv");
            let log = if log_path.exists() {
                Some(read_log(&log_path)?)
            } else {
                None
            };
            cells.push(CellResult {
                state: cell_state(&cell_dir)?,
                id: entry.id,
                backbone: entry.backbone,
                k: entry.k,
                metrics,
                log,
            });
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            name: matrix.name,
            note: matrix.note,
            datasets: matrix.datasets,
            tradeoff: matrix.tradeoff,
            paper: matrix.paper,
            cells,
        })
    }

    /// Backbones in matrix order.
    pub fn backbones(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for cell in &self.cells {
            if !names.contains(&cell.backbone.as_str()) {
                names.push(&cell.backbone);
            }
        }
        names
    }

    pub fn paper_value(&self, backbone: &str, k: f64, dataset: &str) -> Option<f64> {
        self.paper
            .iter()
            .find(|p| p.backbone == backbone && p.k == k && p.dataset == dataset)
            .map(|p| p.value)
    }
}

impl CellMetrics {
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

    pub fn mean_of(
        &self,
        name: &str,
        value: impl Fn(&DatasetMetrics) -> Option<f64>,
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

/// The command that fills `dir`: the committed matrix of its name where there is one
/// (`experiments/<name>.toml` under the working directory), never a file that does not exist.
pub(crate) fn how_to_run(dir: &Path) -> String {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    let file = name.map(|name| (Path::new("experiments").join(format!("{name}.toml")), name));
    match file {
        Some((file, name)) if file.is_file() => format!(
            "`lsr matrix run {}` (or `just reproduce {name}`) produces them",
            file.display()
        ),
        _ => format!(
            "`lsr matrix run FILE` produces them, FILE being the matrix whose `results` is {}",
            lsr_files::resolved(dir)
        ),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| ReportError::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| ReportError::parse(path, e))
}

/// `train.csv` through polars: the step, loss and ranking-loss columns.
fn read_log(path: &Path) -> Result<LossLog> {
    let frame = CsvReadOptions::default()
        .with_has_header(true)
        .try_into_reader_with_file_path(Some(path.to_path_buf()))
        .and_then(|reader| reader.finish())
        .map_err(|e| ReportError::parse(path, e))?;
    let column = |name: &str| -> Result<Vec<f64>> {
        let series = frame
            .column(name)
            .and_then(|c| c.cast(&DataType::Float64))
            .map_err(|e| ReportError::parse(path, format!("column `{name}`: {e}")))?;
        let values = series.f64().map_err(|e| ReportError::parse(path, e))?;
        Ok(values.iter().map(|v| v.unwrap_or(f64::NAN)).collect())
    };
    let step = column("step")?;
    let validation = match frame.column("val_ndcg@10") {
        Ok(_) => step
            .iter()
            .copied()
            .zip(column("val_ndcg@10")?)
            .filter(|(_, v)| v.is_finite())
            .collect(),
        Err(_) => Vec::new(),
    };
    Ok(LossLog {
        loss: column("loss")?,
        ranking_loss: column("ranking_loss")?,
        step,
        validation,
    })
}
