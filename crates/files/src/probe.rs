//! `<results>/probe/<backbone>/probe.json`: the k chosen for one backbone before its full
//! runs, by the beginnings of the cells of its grid (the probe) and by the head-norm rule,
//! written by the matrix's probe and read by `lsr matrix run --k-from probe` and the report.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::status::RunStatus;
use crate::{Result, read_json, write_json};

pub const PROBE_DIR: &str = "probe";
pub const PROBE: &str = "probe.json";

/// `probe.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    pub backbone: String,
    /// The share of its recipe's steps after which each cell was stopped and scored.
    pub fraction: f64,
    pub full_steps: usize,
    /// The set the runs are scored on (the matrix's `[validation]`), never a test set.
    pub dataset: String,
    /// Every k of the backbone's grid, in grid order.
    pub runs: Vec<ProbeRun>,
    /// The k of the best validation nDCG@10, ties to the smaller k.
    pub chosen_k: f64,
    /// What the head-norm rule (`lsr k suggest`) picks from the same grid, for comparison.
    pub norm_rule: KSuggestion,
}

/// The beginning of one cell.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProbeRun {
    pub k: f64,
    /// The step it was stopped and scored at.
    pub steps: usize,
    /// The cell's run when the probe read it (`interrupted` where the probe stopped it).
    pub status: RunStatus,
    /// The validation pass at `steps`; `None` if there was none (a collapse before) or it was
    /// not finite.
    pub ndcg_at_10: Option<f64>,
}

/// The head-norm rule's k for one checkpoint: the grid's k that brings the decoder's mean row
/// norm nearest (on a log scale) to the reference norm.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KSuggestion {
    pub checkpoint: String,
    pub row_norm_mean: f64,
    pub reference_row_norm: f64,
    /// Where the reference comes from.
    pub reference: String,
    /// `row_norm_mean / reference_row_norm`, the k before rounding to the grid.
    pub exact_k: f64,
    pub grid: Vec<f64>,
    pub k: f64,
}

/// The head-norm rule's rounding: the k of `grid` nearest `exact` on a log scale, ties to the
/// smaller k. `grid` must be non-empty.
pub fn nearest_k(grid: &[f64], exact: f64) -> f64 {
    let distance = |k: f64| (exact.ln() - k.ln()).abs();
    grid.iter()
        .copied()
        .fold(None, |best: Option<f64>, k| match best {
            Some(b) if distance(b) < distance(k) || (distance(b) == distance(k) && b < k) => {
                Some(b)
            }
            _ => Some(k),
        })
        .expect("a non-empty grid")
}

impl Probe {
    /// `<results>/probe/<backbone>/`.
    pub fn dir(results: &Path, backbone: &str) -> PathBuf {
        results.join(PROBE_DIR).join(backbone)
    }

    /// The probe of `backbone` in `results`, `None` if it has not finished.
    pub fn read(results: &Path, backbone: &str) -> Result<Option<Self>> {
        read_json(&Self::dir(results, backbone).join(PROBE))
    }

    pub fn write(&self, results: &Path) -> Result<()> {
        write_json(&Self::dir(results, &self.backbone).join(PROBE), self)
    }
}
