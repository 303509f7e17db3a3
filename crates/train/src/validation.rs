//! Validation during training: what a `[validation]` section asks for, the scores a pass
//! returns, and the seam through which the caller scores the model. Training does not evaluate
//! (`lsr-eval` does): the caller supplies a [`Validator`] (`lsr_matrix::validation`).

use std::path::PathBuf;

use lsr_backbone::MaskedLm;
use serde::{Deserialize, Serialize};

/// `[validation]` of a cell: a small data set scored every `every` steps and after the last.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ValidationConfig {
    /// A data set by name (`nanobeir/nfcorpus`, `beir/synth-b`) under `data_root`; not one of
    /// the sets the cell is evaluated on, or the choice of the best step leaks into them.
    pub dataset: String,
    pub data_root: PathBuf,
    /// Steps between two passes.
    pub every: usize,
    #[serde(default = "default_max_length")]
    pub query_max_length: usize,
    #[serde(default = "default_max_length")]
    pub document_max_length: usize,
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Keep the model of the best pass as `<checkpoints>/best` (an HF checkpoint).
    #[serde(default)]
    pub keep_best: bool,
    /// Consecutive passes whose queries or documents have no term at all that mark the run
    /// collapsed, at the first of them: training batches keep a few terms under dropout while
    /// the model in eval mode has none (0: this rule is off).
    #[serde(default = "default_collapse_passes")]
    pub collapse_passes: usize,
}

fn default_collapse_passes() -> usize {
    3
}

fn default_max_length() -> usize {
    256
}

fn default_batch_size() -> usize {
    64
}

/// What one pass measured: nDCG@10 (the score the best step is chosen by), mean L0 of queries
/// and documents, FLOPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationScores {
    pub ndcg_at_10: f64,
    pub l0_q: f64,
    pub l0_d: f64,
    pub flops: f64,
}

/// The best pass so far: its step and scores.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BestValidation {
    pub step: usize,
    pub scores: ValidationScores,
}

/// Scores a model (on the device it encodes on, no dropout) on the validation set.
pub trait Validator {
    /// The scores of `model`, or what went wrong, in words.
    fn validate(&mut self, model: MaskedLm) -> Result<ValidationScores, String>;
}
