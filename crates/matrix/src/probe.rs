//! The probe: before the full runs, the beginning of every cell of each backbone's grid — its
//! own recipe, stopped after a fraction of its steps with a checkpoint and a validation pass
//! there — scored on the matrix's `[validation]` set, never on a test set. The k of the best
//! validation nDCG@10 at that step wins, ties to the smaller k; it is written, beside the
//! head-norm rule's k, to `<results>/probe/<backbone>/probe.json` (`lsr_files::Probe`), from
//! which `lsr matrix run --k-from probe` runs only the chosen cells, each resuming from the
//! probe's checkpoint. The cells not chosen stay interrupted: a full run resumes them too.

use std::path::Path;

use burn::prelude::Device;
use lsr_backbone::{ANCHOR, ANCHOR_ROW_NORM, Backbone, HeadStats, suggest_k};
use lsr_files::{OutputLock, Probe, ProbeRun, StatusFile, TrainCsv};
use lsr_train::Outcome;

use crate::cell::Cell;
use crate::error::{MatrixError, Result};
use crate::spec::Matrix;

/// What became of a probe of one backbone.
#[derive(Debug)]
pub enum ProbeState {
    Done(Probe),
    /// Another process holds it.
    Busy,
    /// A stop request ended one of its runs before its probe step (resumable).
    Interrupted,
}

/// Probes each backbone of `matrix` (or only `backbone`) whose probe has not finished, in
/// matrix order; stops after a run a stop request interrupted.
pub fn run_probes(matrix: &Matrix, backbone: Option<&str>) -> Result<Vec<(String, ProbeState)>> {
    let names = backbones(matrix);
    if let Some(only) = backbone
        && !names.contains(&only)
    {
        return Err(MatrixError::Validation(format!(
            "no backbone `{only}` in {}",
            matrix.path.display()
        )));
    }
    let mut states = Vec::new();
    for name in names
        .into_iter()
        .filter(|n| backbone.is_none_or(|b| b == *n))
    {
        if lsr_files::stop::requested() {
            break;
        }
        let state = probe_backbone(matrix, name)?;
        let stop = matches!(state, ProbeState::Interrupted);
        states.push((name.to_string(), state));
        if stop {
            break;
        }
    }
    Ok(states)
}

fn probe_backbone(matrix: &Matrix, backbone: &str) -> Result<ProbeState> {
    let locks = matrix.results.join(".locks");
    let Ok(_lock) = OutputLock::try_acquire(&locks, &format!("probe-{backbone}.lock"))? else {
        return Ok(ProbeState::Busy);
    };
    if let Some(probe) = Probe::read(&matrix.results, backbone)? {
        if probe.fraction != matrix.probe_fraction {
            return Err(MatrixError::Validation(format!(
                "{}: made with fraction {}, the matrix now asks for {}; delete that directory \
                 to probe again",
                Probe::dir(&matrix.results, backbone).display(),
                probe.fraction,
                matrix.probe_fraction
            )));
        }
        return Ok(ProbeState::Done(probe));
    }
    let cells: Vec<&Cell> = matrix
        .cells
        .iter()
        .filter(|c| c.backbone == backbone)
        .collect();
    let mut runs = Vec::new();
    for cell in &cells {
        validation_set(matrix, cell)?;
        // The cell's own lock, as `run_cells` takes it: the probe trains the cell itself.
        let Ok(_cell_lock) = OutputLock::try_acquire(&locks, &format!("{}.lock", cell.id))? else {
            return Ok(ProbeState::Busy);
        };
        let stop_at = probe_step(matrix, cell);
        let log = cell.dir().join(TrainCsv::FILE);
        let mut score = validation_at(&log, stop_at)?;
        if score.is_none() && logged_past(&log, stop_at)? {
            return Err(MatrixError::Validation(format!(
                "{}: the cell has trained past step {stop_at} without a validation pass there, \
                 which its probe scores; choose a fraction that stops at a validation step, or \
                 rerun the cell with --force",
                cell.dir().display()
            )));
        }
        if score.is_none() {
            eprintln!("== probe {} (its first {stop_at} steps)", cell.id);
            let outcome = crate::validation::train_until(&cell.config, true, stop_at)?;
            if let Outcome::Interrupted { step } = outcome
                && step < stop_at
            {
                return Ok(ProbeState::Interrupted);
            }
            score = validation_at(&log, stop_at)?;
        }
        let status = StatusFile::read(cell.dir())?.ok_or_else(|| {
            MatrixError::Validation(format!("{}: no status.json", cell.dir().display()))
        })?;
        runs.push(ProbeRun {
            k: cell.k(),
            steps: stop_at,
            status: status.status,
            ndcg_at_10: score,
        });
    }
    let checkpoint = &cells[0].config.model.checkpoint;
    let stats = HeadStats::compute(&Backbone::load(checkpoint, &Device::flex(), 128)?)?;
    let grid: Vec<f64> = cells.iter().map(|c| c.k()).collect();
    let reference = (ANCHOR_ROW_NORM, ANCHOR);
    let probe = Probe {
        backbone: backbone.to_string(),
        fraction: matrix.probe_fraction,
        full_steps: cells[0].config.recipe.steps,
        dataset: validation_set(matrix, cells[0])?,
        chosen_k: choose(&runs),
        norm_rule: suggest_k(checkpoint, stats.row_norm_mean, reference, &grid),
        runs,
    };
    probe.write(&matrix.results)?;
    Ok(ProbeState::Done(probe))
}

/// The matrix's backbones, in order (its cells are grouped by backbone).
fn backbones(matrix: &Matrix) -> Vec<&str> {
    let mut names: Vec<&str> = matrix.cells.iter().map(|c| c.backbone.as_str()).collect();
    names.dedup();
    names
}

/// The validation nDCG@10 that `train.csv` (if any) logged at `step`.
fn validation_at(log: &Path, step: usize) -> Result<Option<f64>> {
    if !log.exists() {
        return Ok(None);
    }
    Ok(TrainCsv::read(log)?.validation_at(step))
}

/// Whether `train.csv` (if any) has a row after `step`.
fn logged_past(log: &Path, step: usize) -> Result<bool> {
    if !log.exists() {
        return Ok(false);
    }
    let rows = TrainCsv::read(log)?.rows;
    Ok(rows.last().is_some_and(|row| row[0] > step as f64))
}

/// The step a cell's probe stops after: the matrix's fraction of its steps, at least one.
pub fn probe_step(matrix: &Matrix, cell: &Cell) -> usize {
    let steps = cell.config.recipe.steps;
    ((steps as f64 * matrix.probe_fraction).round() as usize).clamp(1, steps)
}

fn validation_set(matrix: &Matrix, cell: &Cell) -> Result<String> {
    match &cell.config.validation {
        Some(v) => Ok(v.dataset.clone()),
        None => Err(MatrixError::Spec {
            path: matrix.path.clone(),
            line: None,
            message: "the probe scores its runs on the [validation] set; the matrix has none"
                .into(),
        }),
    }
}

/// The k of the best score, ties to the smaller k; runs without a score lose to any with one,
/// and with no score at all the smallest k (no rescaling to speak of) is chosen.
pub fn choose(runs: &[ProbeRun]) -> f64 {
    let key = |r: &ProbeRun| r.ndcg_at_10.unwrap_or(f64::NEG_INFINITY);
    runs.iter()
        .fold(None::<&ProbeRun>, |best, run| match best {
            Some(b) if key(b) > key(run) || (key(b) == key(run) && b.k < run.k) => Some(b),
            _ => Some(run),
        })
        .map_or(f64::NAN, |r| r.k)
}

/// The cells `lsr matrix run --k-from probe` runs: each backbone's chosen k, an error naming
/// the backbones not probed yet.
pub fn chosen_cells(matrix: &Matrix) -> Result<Vec<&Cell>> {
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    for cell in &matrix.cells {
        match Probe::read(&matrix.results, &cell.backbone)? {
            Some(probe) if probe.chosen_k == cell.k() => chosen.push(cell),
            Some(_) => {}
            None if !missing.contains(&cell.backbone) => missing.push(cell.backbone.clone()),
            None => {}
        }
    }
    if !missing.is_empty() {
        return Err(MatrixError::Validation(format!(
            "no finished probe for {} in {}; run `lsr matrix probe {}` first",
            missing.join(", "),
            matrix.results.join("probe").display(),
            matrix.path.display()
        )));
    }
    Ok(chosen)
}

/// Every probe of `matrix` that has finished, by backbone.
pub fn finished(matrix: &Matrix) -> Result<Vec<Probe>> {
    let names = backbones(matrix);
    let mut probes = Vec::new();
    for name in names {
        probes.extend(Probe::read(&matrix.results, name)?);
    }
    Ok(probes)
}

#[cfg(test)]
mod tests {
    use lsr_files::RunStatus;

    use super::*;

    fn run(k: f64, score: Option<f64>) -> ProbeRun {
        ProbeRun {
            k,
            steps: 1,
            status: RunStatus::Finished,
            ndcg_at_10: score,
        }
    }

    #[test]
    fn the_best_score_wins_ties_go_to_the_smaller_k_and_no_score_loses() {
        let runs = [
            run(1.0, Some(0.2)),
            run(4.0, Some(0.5)),
            run(16.0, Some(0.4)),
        ];
        assert_eq!(choose(&runs), 4.0);
        let tied = [
            run(16.0, Some(0.5)),
            run(2.0, Some(0.5)),
            run(8.0, Some(0.5)),
        ];
        assert_eq!(choose(&tied), 2.0);
        let unscored = [run(1.0, None), run(2.0, Some(0.0)), run(4.0, None)];
        assert_eq!(choose(&unscored), 2.0);
        assert_eq!(choose(&[run(8.0, None), run(2.0, None)]), 2.0);
    }
}
