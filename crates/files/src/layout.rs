//! The results layout of one cell, `<results>/<cell>/`, and the state it implies:
//!
//! | file | written by | meaning |
//! |---|---|---|
//! | `config.toml`, `train.csv`, `status.json` | training | see `status` and `lsr-train` |
//! | `cell.json` | the matrix, first | backbone, k, checkpoint and its hub commit, the commit lsr was built from, crate versions, device |
//! | `eval/<dataset>/` | evaluation | vectors, run, metrics, per-query metrics |
//! | `metrics.json` | the matrix, last | every data set's report: the cell is done (or, after a collapse, evaluated) |
//! | `failure.json` | the matrix | the error that stopped the cell (removed when retried) |
//! | `interrupted.json` | the matrix | a stop request ended the cell's evaluation; its corpus shards resume it (removed when it runs again) |

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::status::{RunStatus, StatusFile};

pub const METRICS: &str = "metrics.json";
/// A data set's retrieved documents, in its evaluation directory (TREC run format).
pub const RUN: &str = "run.trec";
pub const FAILURE: &str = "failure.json";
pub const INTERRUPTED: &str = "interrupted.json";
pub const INFO: &str = "cell.json";
pub const MATRIX: &str = "matrix.json";
/// The directory of a cell's evaluation, one subdirectory per data set ([`dataset_dir`]).
pub const EVAL: &str = "eval";

/// The name of the directory a data set's evaluation is written to (`beir/scifact` →
/// `beir_scifact`): by the matrix under `<cell>/eval/`, by `lsr eval` under its `--output`.
pub fn dataset_dir(dataset: &str) -> String {
    dataset.replace('/', "_")
}

/// `<cell>/eval/<data set>/`: where the matrix evaluates a cell on `dataset`.
pub fn eval_dir(cell_dir: &Path, dataset: &str) -> PathBuf {
    cell_dir.join(EVAL).join(dataset_dir(dataset))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellState {
    /// Trained and evaluated.
    Done,
    /// Training started and did not end: running now, or killed (a run resumes it).
    Running,
    /// Training stopped on request with a checkpoint at that step (a run resumes it).
    Interrupted,
    /// Training collapsed: a result, kept, and evaluated at the collapse unless its weights
    /// were not finite.
    Collapsed,
    /// Training or evaluation stopped with an error (a run retries it).
    Failed,
    /// Nothing written yet.
    Missing,
}

impl std::fmt::Display for CellState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = serde_json::to_value(self).expect("a unit variant serialises");
        write!(f, "{}", name.as_str().expect("a string"))
    }
}

/// `cell.json`: what a cell is, and where it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellInfo {
    pub id: String,
    pub backbone: String,
    pub k: f64,
    pub checkpoint: String,
    /// The hub commit `checkpoint` resolved to, for a hub id (pin it with `id@commit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_revision: Option<String>,
    /// The commit lsr was built from (`crate::provenance`), if built in its git checkout.
    pub git_commit: Option<String>,
    /// Whether the sources built differed from `git_commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dirty: Option<bool>,
    pub lsr_version: String,
    pub burn_version: String,
    pub device: String,
}

/// The state of the cell whose results are in `dir`.
pub fn cell_state(dir: &Path) -> Result<CellState> {
    let status = StatusFile::read(dir)?;
    let collapsed = status
        .as_ref()
        .is_some_and(|s| s.status == RunStatus::Collapsed);
    if dir.join(METRICS).exists() {
        return Ok(if collapsed {
            CellState::Collapsed
        } else {
            CellState::Done
        });
    }
    if dir.join(FAILURE).exists() {
        return Ok(CellState::Failed);
    }
    if dir.join(INTERRUPTED).exists() {
        return Ok(CellState::Interrupted);
    }
    Ok(match status {
        None => CellState::Missing,
        // A model to evaluate (what a run does next), or none: the result is the collapse.
        Some(s) if s.status == RunStatus::Collapsed && s.model.is_some() => CellState::Running,
        Some(s) if s.status == RunStatus::Collapsed => CellState::Collapsed,
        Some(s) if s.status == RunStatus::Failed => CellState::Failed,
        Some(s) if s.status == RunStatus::Interrupted => CellState::Interrupted,
        // A finished training run still to be evaluated is in progress.
        Some(_) => CellState::Running,
    })
}
