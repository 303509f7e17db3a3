//! A matrix's results read back: the expanded matrix (`matrix.json`), and per cell its state,
//! metrics, per-query values and training log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{ReportError, Result};
use lsr_data::registry::table_measure;
use lsr_files::layout::eval_dir;
use lsr_files::{CellMetrics, PaperResult, PerQuery};
use lsr_files::{CellState, CollapseRule, MatrixSummary, StatusFile, TrainCsv, cell_state};

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
    /// Data set → query → value of the data set's table measure, for the evaluated data sets
    /// whose `per_query.json` has it (none in results written before evaluation wrote one).
    pub per_query: BTreeMap<String, BTreeMap<String, f64>>,
    pub log: Option<LossLog>,
    /// For a collapsed cell, the rule that ended its training (`status.json`).
    pub collapse_rule: Option<CollapseRule>,
}

impl CellResult {
    /// The state as the tables print it: a collapse with the rule that fired (training, for a
    /// status written before validation had its own rule).
    pub fn status_text(&self) -> String {
        match (self.state, self.collapse_rule) {
            (CellState::Collapsed, Some(CollapseRule::Validation)) => {
                "collapsed (validation)".into()
            }
            (CellState::Collapsed, _) => "collapsed (training)".into(),
            (state, _) => state.to_string(),
        }
    }
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
        let Some(matrix) = MatrixSummary::read(dir)? else {
            return Err(ReportError::NoResults {
                dir: dir.to_path_buf(),
                how: how_to_run(dir),
            });
        };
        let mut cells = Vec::new();
        for entry in matrix.cells {
            let cell_dir = dir.join(&entry.id);
            let log_path = cell_dir.join(TrainCsv::FILE);
            let log = if log_path.exists() {
                Some(LossLog::read(&log_path)?)
            } else {
                None
            };
            let state = cell_state(&cell_dir)?;
            let collapse_rule = match state {
                CellState::Collapsed => StatusFile::read(&cell_dir)?.and_then(|s| s.collapse_rule),
                _ => None,
            };
            let metrics = CellMetrics::read(&cell_dir)?;
            cells.push(CellResult {
                state,
                per_query: per_query(&cell_dir, metrics.as_ref())?,
                metrics,
                collapse_rule,
                id: entry.id,
                backbone: entry.backbone,
                k: entry.k,
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

    /// A cell's score wherever runs or k are compared: its mean nDCG@10 over the matrix's
    /// evaluation sets (a group counting once, as the mean of its members).
    pub fn score(&self, metrics: &CellMetrics) -> Option<f64> {
        let scores: Option<Vec<f64>> = (self.datasets.iter())
            .map(|set| metrics.mean(set, "ndcg@10"))
            .collect();
        scores
            .filter(|s| !s.is_empty())
            .map(|s| s.iter().sum::<f64>() / s.len() as f64)
    }

    pub fn paper_value(&self, backbone: &str, k: f64, dataset: &str) -> Option<f64> {
        self.paper
            .iter()
            .find(|p| p.backbone == backbone && p.k == k && p.dataset == dataset)
            .map(|p| p.value)
    }
}

/// Per evaluated data set of the cell in `cell_dir`, every query's value of the data set's table
/// measure, where its `per_query.json` holds them.
fn per_query(
    cell_dir: &Path,
    metrics: Option<&CellMetrics>,
) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
    let mut values = BTreeMap::new();
    for dataset in metrics.into_iter().flat_map(|m| m.datasets.keys()) {
        let file = PerQuery::read(&eval_dir(cell_dir, dataset))?;
        if let Some(measure) = file.and_then(|f| f.measure(table_measure(dataset))) {
            values.insert(dataset.clone(), measure);
        }
    }
    Ok(values)
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

impl LossLog {
    /// The columns of `train.csv` the figures draw.
    fn read(path: &Path) -> Result<Self> {
        let log = TrainCsv::read(path)?;
        let step = log.require("step")?;
        let validation = match log.column("val_ndcg@10") {
            Some(scores) => (step.iter().copied().zip(scores))
                .filter(|(_, v)| v.is_finite())
                .collect(),
            None => Vec::new(),
        };
        Ok(Self {
            loss: log.require("loss")?,
            ranking_loss: log.require("ranking_loss")?,
            step,
            validation,
        })
    }
}
