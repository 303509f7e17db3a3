//! A training run's `status.json`: where the run stands (running, interrupted, finished,
//! collapsed with step and reason, failed), written by training and read by the matrix and the
//! report.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Result, read_json, write_json};

pub const STATUS: &str = "status.json";

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    /// Stopped on request at a step boundary, with a checkpoint there; a resume continues it.
    Interrupted,
    Finished,
    Collapsed,
    Failed,
}

/// Which rule ended a collapsed run.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CollapseRule {
    /// The training batches: a non-finite loss or gradient, or documents without any term for
    /// `recipe.collapse_patience` consecutive steps. A status without a rule is this one, the
    /// only rule before validation had its own.
    Training,
    /// The validation passes: queries or documents without any term in
    /// `validation.collapse_passes` consecutive passes (the collapse is at the first of them).
    Validation,
}

/// `status.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StatusFile {
    pub status: RunStatus,
    /// Steps taken when this was written.
    pub step: usize,
    pub steps: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a collapsed run, the rule that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collapse_rule: Option<CollapseRule>,
    /// The trained model as an HF checkpoint (head already rescaled: evaluate it with k = 1);
    /// for a collapsed run, the model at the collapse (none if its weights are not finite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// Something the run did that a reader should know, though it went on (vectors that grew
    /// towards the whole vocabulary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The best validation pass so far, with a run that validates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_validation: Option<BestStep>,
}

/// The step of the best validation pass, its nDCG@10 and, if kept, its model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BestStep {
    pub step: usize,
    pub ndcg_at_10: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
}

impl StatusFile {
    /// The status in run directory `output`, `None` if the run has not started.
    pub fn read(output: &Path) -> Result<Option<Self>> {
        read_json(&output.join(STATUS))
    }

    pub fn write(&self, output: &Path) -> Result<()> {
        write_json(&output.join(STATUS), self)
    }
}
