//! `lsr matrix verify`: what a matrix's results must satisfy however often its runs were killed
//! and restarted, read through the stages' own readers. Each cell's training log holds its
//! steps once each and in order, and its TensorBoard log the same steps; a cell still in training has logged no further than one
//! checkpoint interval past its last checkpoint, which is all a kill makes it redo; and, against
//! the results of the same matrix run undisturbed (`--against`), every cell that finished there
//! logged the same steps here, to byte-identical weights and runs and equal measures.

use std::path::{Path, PathBuf};

use lsr_files::layout::EVAL;
use lsr_files::tensorboard;
use lsr_files::{CellMetrics, CellState, TrainCsv};
use lsr_train::TrainConfig;
use lsr_train::checkpoint::{self, CONFIG};

use crate::cell::Cell;
use crate::error::{MatrixError, Result};
use crate::spec::Matrix;

/// What `verify` found.
#[derive(Debug, Default)]
pub struct Verification {
    /// Cells with a training log.
    pub started: usize,
    /// Steps logged past the last checkpoint, over the cells still in training: what resuming
    /// them redoes.
    pub to_redo: usize,
    /// Cells compared with the reference.
    pub compared: usize,
    /// Each broken promise, naming the cell and the file.
    pub problems: Vec<String>,
}

/// Checks every cell of `matrix`, and against the results folder `against` if given.
pub fn verify(matrix: &Matrix, against: Option<&Path>) -> Result<Verification> {
    let mut found = Verification::default();
    for cell in &matrix.cells {
        let Some(steps) = logged_steps(cell, &mut found)? else {
            continue;
        };
        found.started += 1;
        let state = cell.state()?;
        if matches!(state, CellState::Running | CellState::Interrupted) {
            check_redo(cell, &steps, &mut found)?;
        }
        check_tensorboard(cell, &steps, state == CellState::Running, &mut found)?;
        if let Some(reference) = against {
            compare(cell, &steps, &reference.join(&cell.id), &mut found)?;
        }
    }
    Ok(found)
}

/// The steps of the cell's `train.csv` (none where training has not started); steps logged out
/// of order, twice, or skipping a multiple of `log_every` are problems.
fn logged_steps(cell: &Cell, found: &mut Verification) -> Result<Option<Vec<usize>>> {
    let path = cell.dir().join(TrainCsv::FILE);
    if !path.exists() {
        return Ok(None);
    }
    let steps: Vec<usize> = (TrainCsv::read(&path)?.require("step")?.iter())
        .map(|&s| s as usize)
        .collect();
    let every = cell.config.recipe.log_every;
    let mut previous = 0;
    for (row, &step) in steps.iter().enumerate() {
        let skipped = (previous / every + 1) * every;
        if step <= previous || step > skipped {
            found.problems.push(format!(
                "{}: line {} logs step {step} after step {previous} (every {every} steps are logged, each once)",
                path.display(),
                row + 2
            ));
        }
        previous = step;
    }
    Ok(Some(steps))
}

/// The cell's TensorBoard log (where it has one: lsr before it wrote none) holds the steps of
/// its `train.csv`, each once and in order; a run killed between the two writes of a step
/// (`running`) may lack that last step there.
fn check_tensorboard(
    cell: &Cell,
    steps: &[usize],
    killed: bool,
    found: &mut Verification,
) -> Result<()> {
    let run = tensorboard::read_run(cell.dir())?;
    let tag = lsr_train::log::tensorboard_tag("loss").expect("a logged column");
    let Some(logged) = run.scalars.get(&tag) else {
        return Ok(());
    };
    let logged: Vec<usize> = logged.iter().map(|&(step, _)| step as usize).collect();
    let cut = killed && logged.len() + 1 == steps.len();
    if logged != steps && !(cut && logged == steps[..logged.len()]) {
        let at = logged.iter().zip(steps).take_while(|(a, b)| a == b).count();
        found.problems.push(format!(
            "{}: the TensorBoard log's {tag} holds {} steps, train.csv {}; they part at entry \
             {} (step {:?} there, {:?} in train.csv)",
            cell.dir().display(),
            logged.len(),
            steps.len(),
            at + 1,
            logged.get(at),
            steps.get(at)
        ));
    }
    Ok(())
}

fn check_redo(cell: &Cell, steps: &[usize], found: &mut Verification) -> Result<()> {
    let checkpoints = cell.checkpoint_dir();
    let last = checkpoint::latest_step(&checkpoints)?.unwrap_or(0);
    let logged = steps.last().copied().unwrap_or(0);
    let every = cell.config.recipe.checkpoint_every;
    if logged.saturating_sub(last) > every {
        found.problems.push(format!(
            "{}: step {logged} logged, but the last checkpoint in {} is at step {last}, more \
             than checkpoint_every = {every} before it",
            cell.id,
            checkpoints.display()
        ));
    }
    found.to_redo += logged.saturating_sub(last);
    Ok(())
}

/// The cell against the same cell of the reference results, where that one finished.
fn compare(cell: &Cell, steps: &[usize], reference: &Path, found: &mut Verification) -> Result<()> {
    let Some(expected) = CellMetrics::read(reference)? else {
        return Ok(());
    };
    found.compared += 1;
    let mut differ = |what: String| found.problems.push(format!("{}: {what}", cell.id));
    let log = reference.join(TrainCsv::FILE);
    let reference_steps = TrainCsv::read(&log)?.require("step")?;
    if steps.len() != reference_steps.len() {
        differ(format!(
            "{} steps logged, the reference {}",
            steps.len(),
            reference_steps.len()
        ));
    }
    match CellMetrics::read(cell.dir())? {
        Some(metrics) if metrics != expected => {
            differ("measures differ from the reference's".into())
        }
        Some(_) => {}
        None => differ("not evaluated, where the reference is".into()),
    }
    let model = Path::new("model").join("model.safetensors");
    let reference_model = reference_checkpoints(reference)?.join(&model);
    let mut pairs = vec![(cell.checkpoint_dir().join(&model), reference_model)];
    pairs.extend(runs(reference)?.into_iter().map(|run| {
        let inside = run.strip_prefix(reference).expect("under the reference");
        (cell.dir().join(inside), run)
    }));
    for (ours, theirs) in pairs {
        if !same_bytes(&ours, &theirs)? {
            differ(format!(
                "{} differs from {}",
                ours.display(),
                theirs.display()
            ));
        }
    }
    Ok(())
}

/// Where the reference cell kept its checkpoints, as its training recorded them.
fn reference_checkpoints(reference: &Path) -> Result<PathBuf> {
    Ok(TrainConfig::load(&reference.join(CONFIG), &[])?.checkpoint_dir())
}

/// `eval/<dataset>/run.trec` of every evaluated data set of the cell in `dir`.
fn runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let eval = dir.join(EVAL);
    let entries = std::fs::read_dir(&eval).map_err(|e| MatrixError::io(&eval, e))?;
    let mut runs = Vec::new();
    for entry in entries {
        let run = entry
            .map_err(|e| MatrixError::io(&eval, e))?
            .path()
            .join(lsr_files::layout::RUN);
        if run.is_file() {
            runs.push(run);
        }
    }
    runs.sort();
    Ok(runs)
}

fn same_bytes(ours: &Path, theirs: &Path) -> Result<bool> {
    let theirs = std::fs::read(theirs).map_err(|e| MatrixError::io(theirs, e))?;
    match std::fs::read(ours) {
        Ok(ours) => Ok(ours == theirs),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(MatrixError::io(ours, e)),
    }
}
