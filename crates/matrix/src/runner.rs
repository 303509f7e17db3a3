//! Running cells: train (resuming whatever is there), evaluate the trained model, record.

use std::path::Path;

use lsr_backbone::{Backbone, Checkpoint, RescaleMode, Scale};
use lsr_compute::parse_device;
use lsr_data::Dataset;
use lsr_eval::EvalError;
use lsr_eval::Measure;
use lsr_eval::pipeline::{DatasetReport, evaluate_dataset};
use lsr_splade::{ModelCard, SpladeEncoder};
use lsr_train::Outcome;
use serde::Serialize;

use lsr_files::layout::{EVAL, FAILURE, INFO, INTERRUPTED, eval_dir};
use lsr_files::{CellEntry, CellInfo, CellState, MatrixSummary, OutputLock, built_from};

use crate::cell::Cell;
use crate::error::{MatrixError, Result};

use crate::spec::{EvalSpec, Matrix};

/// burn's exact version, as pinned in the workspace manifest.
const BURN_VERSION: &str = "0.22.1";

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Only this cell.
    pub cell: Option<String>,
    /// Delete and rerun cells that are done or collapsed.
    pub force: bool,
    /// Only each backbone's k chosen by its probe (`crate::probe`).
    pub k_from_probe: bool,
}

/// `<cell>/metrics.json`: evaluation's full report per data set.
type CellMetrics = lsr_files::CellMetrics<DatasetReport>;

/// Runs the cells that are not done (or only `options.cell`), in matrix order; a collapsed or
/// failed cell is recorded and the next one runs. A stop request ([`lsr_files::stop`]) ends the
/// cell in training at its next step, or in evaluation after the batch of documents in
/// progress (interrupted either way), and starts no further cell. Returns each run
/// cell's final state.
pub fn run_cells(matrix: &Matrix, options: &RunOptions) -> Result<Vec<(String, CellState)>> {
    write_summary(matrix)?;
    let mut states = Vec::new();
    let locks = locks_dir(matrix);
    for cell in selected(matrix, options)? {
        if lsr_files::stop::requested() {
            break;
        }
        // Two matrix runs over one matrix split its cells: a cell another run holds is skipped.
        // The lock notes the device, which `lsr matrix status` shows beside a running cell.
        let device = matrix.device.as_deref().unwrap_or("the default device");
        let _lock = match OutputLock::try_acquire_noting(&locks, &lock_name(cell), device)? {
            Ok(lock) => lock,
            Err(holder) => {
                let by = holder
                    .map(|pid| format!(" (pid {pid})"))
                    .unwrap_or_default();
                eprintln!("== {}: another process{by} is running it, skipped", cell.id);
                continue;
            }
        };
        let state = cell.state()?;
        if matches!(state, CellState::Done | CellState::Collapsed) {
            if !options.force {
                tracing::info!("{}: {state}, skipped", cell.id);
                continue;
            }
            for dir in [cell.dir().to_path_buf(), cell.checkpoint_dir()] {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(|e| MatrixError::io(&dir, e))?;
                }
            }
        }
        let failure = cell.dir().join(FAILURE);
        for record in [&failure, &cell.dir().join(INTERRUPTED)] {
            if record.exists() {
                std::fs::remove_file(record).map_err(|e| MatrixError::io(record, e))?;
            }
        }
        eprintln!("== {} ({state})", cell.id);
        let state = match run_cell(matrix, cell) {
            Ok(state) => state,
            // Stopped between batches of its corpus: the complete shards resume it.
            Err(MatrixError::Eval(stopped @ EvalError::Interrupted { .. })) => {
                let record = serde_json::json!({ "cell": cell.id, "stopped": stopped.to_string() });
                write_json(&cell.dir().join(INTERRUPTED), &record)?;
                CellState::Interrupted
            }
            Err(error) => {
                eprintln!("{}: failed: {error}", cell.id);
                let record = serde_json::json!({ "cell": cell.id, "error": error.to_string() });
                write_json(&failure, &record)?;
                CellState::Failed
            }
        };
        eprintln!("== {}: {state}", cell.id);
        states.push((cell.id.clone(), state));
        if state == CellState::Interrupted {
            break;
        }
    }
    Ok(states)
}

/// The cells `options` asks for, in matrix order: one, those the probes chose, or all.
pub(crate) fn selected<'m>(matrix: &'m Matrix, options: &RunOptions) -> Result<Vec<&'m Cell>> {
    match (&options.cell, options.k_from_probe) {
        (Some(id), false) => Ok(vec![matrix.cell(id)?]),
        (None, false) => Ok(matrix.cells.iter().collect()),
        (None, true) => crate::probe::chosen_cells(matrix),
        (Some(_), true) => {
            let message = "a cell and --k-from probe exclude each other".into();
            Err(MatrixError::Validation(message))
        }
    }
}

impl Matrix {
    /// The live process running `cell` (from any `lsr matrix run`, here or elsewhere) and the
    /// device it noted, read without taking the cell's lock.
    pub fn running(&self, cell: &Cell) -> Option<lsr_files::lock::Holder> {
        lsr_files::lock::live_holder(&locks_dir(self), &lock_name(cell))
    }
}

/// Where the cells' locks are: one per cell, held by the process running it.
pub(crate) fn locks_dir(matrix: &Matrix) -> std::path::PathBuf {
    matrix.results.join(".locks")
}

pub(crate) fn lock_name(cell: &Cell) -> String {
    format!("{}.lock", cell.id)
}

fn run_cell(matrix: &Matrix, cell: &Cell) -> Result<CellState> {
    std::fs::create_dir_all(cell.dir()).map_err(|e| MatrixError::io(cell.dir(), e))?;
    let device = parse_device(matrix.device.as_deref())?;
    let checkpoint = &cell.config.model.checkpoint;
    let revision = Checkpoint::resolve(checkpoint)?.revision;
    check_same_revision(cell, revision.as_deref())?;
    let built = built_from();
    let info = CellInfo {
        id: cell.id.clone(),
        backbone: cell.backbone.clone(),
        k: cell.k(),
        checkpoint: checkpoint.clone(),
        checkpoint_revision: revision,
        git_dirty: built.as_ref().map(|b| b.dirty),
        git_commit: built.map(|b| b.commit),
        lsr_version: env!("CARGO_PKG_VERSION").into(),
        burn_version: BURN_VERSION.into(),
        device: format!("{device:?}"),
    };
    write_json(&cell.dir().join(INFO), &info)?;
    // A collapsed cell is evaluated too, at the collapse (the paper reports such numbers),
    // unless its weights were not finite.
    let (model, state) = match crate::validation::train(&cell.config, true)? {
        Outcome::Collapsed { model: None, .. } => return Ok(CellState::Collapsed),
        Outcome::Collapsed {
            model: Some(model), ..
        } => (model, CellState::Collapsed),
        Outcome::Finished { model, .. } => (model, CellState::Done),
        Outcome::Interrupted { .. } => return Ok(CellState::Interrupted),
    };
    let metrics = evaluate(&matrix.eval, &model, &device, cell.dir())?;
    record_in_card(&model, &cell.id, &metrics)?;
    metrics.write(cell.dir())?;
    lsr_eval::shards::remove_shards(&cell.dir().join(EVAL))?;
    Ok(state)
}

/// Adds the cell and its measures to the exported model's card.
fn record_in_card(model: &Path, cell: &str, metrics: &CellMetrics) -> Result<()> {
    let Some(mut card) = ModelCard::read(model).map_err(|e| MatrixError::io(model, e))? else {
        return Ok(());
    };
    card.cell = Some(cell.to_string());
    card.metrics = metrics
        .datasets
        .iter()
        .map(|(dataset, report)| (dataset.clone(), report.summary.metrics.clone()))
        .collect();
    Ok(card.write(model)?)
}

/// A cell resumed on a hub checkpoint that has moved since it started would mix two models.
fn check_same_revision(cell: &Cell, now: Option<&str>) -> Result<()> {
    let path = cell.dir().join(INFO);
    let then = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<CellInfo>(&bytes).ok())
        .and_then(|info| info.checkpoint_revision);
    match (then, now) {
        (Some(then), Some(now)) if then != now => Err(MatrixError::Spec {
            message: format!(
                "the cell started on {} at commit {then}, which now resolves to {now}; pin the \
                 commit (`checkpoint = \"<id>@{then}\"`) or rerun the cell with --force",
                cell.config.model.checkpoint
            ),
            path,
            line: None,
        }),
        _ => Ok(()),
    }
}

/// Evaluates the trained model (its head already rescaled, so k = 1) on every data set, each
/// into its directory under the cell's `eval/`.
fn evaluate(
    spec: &EvalSpec,
    model: &Path,
    device: &burn::prelude::Device,
    cell_dir: &Path,
) -> Result<CellMetrics> {
    let measures = Measure::parse_all(&spec.measures)?;
    let model_name = model.to_str().unwrap_or_default();
    spec.precision.usable_on(device)?;
    let mut backbone = Backbone::load(model_name, device, spec.longest())?;
    backbone.model = backbone.model.with_precision(spec.precision);
    let encoder = SpladeEncoder::new(backbone, Scale::ONE, RescaleMode::Shared)?;
    let mut metrics = CellMetrics::default();
    for name in &spec.datasets {
        let members = Dataset::resolve(name, &spec.data_root)?;
        if members.len() > 1 || members.iter().any(|d| &d.name != name) {
            metrics.groups.insert(
                name.clone(),
                members.iter().map(|d| d.name.clone()).collect(),
            );
        }
        for dataset in members {
            let dir = eval_dir(cell_dir, &dataset.name);
            let settings = spec.settings(&dataset.name, &measures);
            let report = evaluate_dataset(&encoder, &dataset, &settings, &dir)?;
            metrics.datasets.insert(dataset.name.clone(), report);
        }
    }
    Ok(metrics)
}

pub(crate) fn write_summary(matrix: &Matrix) -> Result<()> {
    let summary = MatrixSummary {
        format: lsr_files::results::FORMAT,
        name: matrix.name.clone(),
        note: matrix.note.clone(),
        cells: (matrix.cells.iter())
            .map(|c| CellEntry {
                id: c.id.clone(),
                backbone: c.backbone.clone(),
                k: c.k(),
            })
            .collect(),
        datasets: matrix.eval.datasets.clone(),
        tradeoff: matrix.eval.tradeoff.clone(),
        paper: matrix.paper.clone(),
        variant: matrix.variant.arguments(),
    };
    Ok(summary.write(&matrix.results)?)
}

pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    Ok(lsr_files::write_json(path, value)?)
}
