//! Training checkpoints: `<dir>/step-00000100/` with the model and optimiser records (burnpack),
//! the run's position (`state.json`), its resolved config, and last the size and SHA-256 of each
//! (`checksums.json`, `lsr_files::digest`). Each is written into a `.partial` directory and
//! renamed into place, so a directory named `step-N` is always complete; the newest `keep` are
//! kept. A checkpoint is checked against its checksums before it is read: a resume passes over
//! (and removes) one damaged since it was written for the newest intact one before it, saying
//! so, and any other read of a damaged one is refused.

use std::path::{Path, PathBuf};

use burn::module::Module;
use lsr_backbone::{Backbone, MaskedLm};
use lsr_files::digest::Checked;
use lsr_splade::{ModelCard, write_sentence_transformers};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::error::{Result, TrainError};
use crate::legacy::{self, Joined};
use crate::optimizer::FlatAdamW;
use crate::trainer::Trainer;

/// Where the run stands after a step; with the records, enough to continue exactly.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RunState {
    /// Optimiser steps taken.
    pub step: usize,
    /// The next micro-batch to read (the data cursor; the data order is a function of the seed).
    pub next_micro_batch: u64,
    /// Consecutive steps whose documents were all zero (for collapse detection).
    pub zero_document_steps: usize,
    /// Consecutive steps whose queries or documents were dense (for the warning).
    #[serde(default)]
    pub dense_steps: usize,
    /// The best validation pass so far.
    #[serde(default)]
    pub best_validation: Option<crate::validation::BestValidation>,
    /// The consecutive validation passes so far without any term (for collapse detection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_validation: Option<DeadPasses>,
}

/// Consecutive validation passes whose queries or documents had no term: since which step.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeadPasses {
    pub from_step: usize,
    pub passes: usize,
}

const MODEL: &str = "model.bpk";
const OPTIMIZER: &str = "optimizer.bpk";
const STATE: &str = "state.json";
pub const CONFIG: &str = "config.toml";

/// Writes a checkpoint of `trainer` at `state.step` and prunes all but the newest `keep`.
pub fn save(
    dir: &Path,
    trainer: &Trainer,
    state: &RunState,
    config_toml: &str,
    keep: usize,
) -> Result<PathBuf> {
    let target = dir.join(format!("step-{:08}", state.step));
    let record_error =
        |path: PathBuf, e: burn::store::RecordError| TrainError::checkpoint(path, e.to_string());
    lsr_files::write_directory(&target, |staging| -> Result<()> {
        trainer
            .model
            .clone()
            .save_file(staging.join(MODEL))
            .map_err(|e| record_error(staging.join(MODEL), e))?;
        trainer.optimizer.save(&staging.join(OPTIMIZER))?;
        let state_json = serde_json::to_string_pretty(state).expect("state serialises");
        let write =
            |name: &str, text: &str| lsr_files::write_bytes(&staging.join(name), text.as_bytes());
        write(STATE, &state_json)?;
        write(CONFIG, config_toml)?;
        Ok(lsr_files::digest::record(
            staging,
            &[MODEL, OPTIMIZER, STATE, CONFIG],
        )?)
    })?;
    for old in complete(dir)?.iter().rev().skip(keep) {
        std::fs::remove_dir_all(&old.1).map_err(|e| TrainError::io(&old.1, e))?;
    }
    Ok(target)
}

/// Complete checkpoints in `dir`, oldest first.
fn complete(dir: &Path) -> Result<Vec<(usize, PathBuf)>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| TrainError::io(dir, e))?;
        let name = entry.file_name();
        if let Some(step) = name
            .to_str()
            .and_then(|n| n.strip_prefix("step-"))
            .and_then(|n| n.parse().ok())
        {
            found.push((step, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// The newest complete checkpoint in `dir` that is intact, if any: newer ones damaged since they
/// were written are removed, with a warning naming what is wrong with each and the steps the
/// run takes again.
pub fn latest_intact(dir: &Path) -> Result<Option<PathBuf>> {
    let mut checkpoints = complete(dir)?;
    let mut damaged = Vec::new();
    while let Some((step, path)) = checkpoints.pop() {
        match check(&path)? {
            Ok(()) => {
                say_damaged(&damaged, step);
                return Ok(Some(path));
            }
            Err(found) => {
                std::fs::remove_dir_all(&path).map_err(|e| TrainError::io(&path, e))?;
                damaged.push((step, path, found));
            }
        }
    }
    say_damaged(&damaged, 0);
    Ok(None)
}

/// Warns of the damaged checkpoints removed (step, path, what is wrong; newest first), and that
/// the run goes back to step `from`.
fn say_damaged(damaged: &[(usize, PathBuf, String)], from: usize) {
    let Some((newest, _, _)) = damaged.first() else {
        return;
    };
    for (_, path, found) in damaged {
        tracing::warn!(
            "{}: damaged since it was written ({found}); removed",
            path.display()
        );
    }
    let to = match from {
        0 => "no intact checkpoint is left: the run starts again from step 0".to_string(),
        step => format!("resuming from step {step}, the newest intact checkpoint"),
    };
    tracing::warn!("{to}, and steps {}–{newest} are trained again", from + 1);
}

/// Checkpoint `path` against its checksums: `Err` with what is wrong, file by file, if it was
/// damaged since it was written. One written before lsr recorded checksums is read unchecked,
/// with a warning.
fn check(path: &Path) -> Result<std::result::Result<(), String>> {
    Ok(match lsr_files::digest::check(path)? {
        Checked::Intact => Ok(()),
        Checked::Damaged(found) => Err(found.join("; ")),
        Checked::Unrecorded => {
            tracing::warn!(
                "{}: records no checksums (written by an older lsr), so nothing checks that it \
                 is as written",
                path.display()
            );
            Ok(())
        }
    })
}

/// Refuses checkpoint `path` if it was damaged since it was written.
fn intact(path: &Path) -> Result<()> {
    check(path)?.map_err(|found| {
        TrainError::checkpoint(
            path,
            format!("damaged since it was written ({found}); use another checkpoint"),
        )
    })
}

/// The step of the newest complete checkpoint in `dir`, if any.
pub fn latest_step(dir: &Path) -> Result<Option<usize>> {
    Ok(complete(dir)?.pop().map(|(step, _)| step))
}

/// The checkpoint a user names: a checkpoint directory, or `step-20` for `step-00000020`.
/// Anything else is an error listing the checkpoints there are (in `path` itself when it is a
/// checkpoints directory, else beside it).
pub fn find(path: &Path) -> Result<PathBuf> {
    if path.join(CONFIG).is_file() {
        return Ok(path.to_path_buf());
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    let step = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("step-"))
        .and_then(|n| n.parse::<usize>().ok());
    if let Some(step) = step {
        let padded = parent.join(format!("step-{step:08}"));
        if padded.join(CONFIG).is_file() {
            return Ok(padded);
        }
    }
    let dir = if path.is_dir() && !complete(path)?.is_empty() {
        path
    } else {
        parent
    };
    let names: Vec<String> = complete(dir)?
        .iter()
        .filter_map(|(_, p)| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let there = if names.is_empty() {
        format!("{} holds none", lsr_files::resolved(dir))
    } else {
        format!("those in {}: {}", dir.display(), names.join(", "))
    };
    Err(TrainError::checkpoint(
        path,
        format!("not a training checkpoint (a `step-N` directory with {CONFIG}); {there}"),
    ))
}

/// The trained weights of checkpoint `path` applied to `model` (the same backbone, rescaled the
/// same way); refused if the checkpoint was damaged since it was written. Only the tests restore
/// a model this way (feature `testing`); a resumed run restores its whole state.
#[cfg(feature = "testing")]
pub fn restore_model(path: &Path, model: MaskedLm) -> Result<MaskedLm> {
    intact(path)?;
    Ok(load_model(path, model)?.0)
}

/// `model` with the weights of checkpoint `path`; with the parameters its record held in parts
/// (`legacy`), whose optimiser state is joined the same way.
fn load_model(path: &Path, model: MaskedLm) -> Result<(MaskedLm, Vec<Joined>)> {
    let file = path.join(MODEL);
    let (record, joined) = legacy::read_model(&file)?;
    let model = (model.try_load_record(record))
        .map_err(|e| TrainError::checkpoint(&file, e.to_string()))?;
    Ok((model, joined))
}

/// Restores model and optimiser of `trainer` from checkpoint `path` (refused if damaged since it
/// was written); returns its run state.
/// burn puts the optimiser state on its implicit default device (moved to the parameters' at
/// the next step): the host in `lsr`, see `lsr_compute::device::pin_implicit_default_to_host`.
pub fn restore(path: &Path, trainer: &mut Trainer) -> Result<RunState> {
    intact(path)?;
    let state = read_state(path)?;
    let (model, joined) = load_model(path, trainer.model.clone())?;
    let restored = FlatAdamW::load(&path.join(OPTIMIZER), model, &trainer.recipe, &joined)?;
    trainer.restore(restored, state.step);
    Ok(state)
}

/// Writes checkpoint `path` (a `step-N` directory, as [`find`] takes it) as a Hugging Face
/// checkpoint in `out`: the backbone named by its config, rescaled as trained, with the
/// checkpoint's weights.
pub fn export(path: &Path, out: &Path, device: &burn::prelude::Device) -> Result<()> {
    let path = &find(path)?;
    intact(path)?;
    let config = crate::config::TrainConfig::load(&path.join(CONFIG), &[])?;
    let recipe = &config.recipe;
    let max_length = recipe.query_max_length.max(recipe.document_max_length);
    let (backbone, model) = config
        .model
        .load_rescaled(device, max_length, recipe.dropout)?;
    let (model, _) = load_model(path, model)?;
    let state = read_state(path)?;
    export_model(&model, &backbone, &config, state.step, out)
}

/// The run state a checkpoint records.
fn read_state(path: &Path) -> Result<RunState> {
    let state_path = path.join(STATE);
    let text = std::fs::read(&state_path).map_err(|e| TrainError::io(&state_path, e))?;
    serde_json::from_slice(&text).map_err(|e| TrainError::checkpoint(&state_path, e.to_string()))
}

/// Writes a trained `model` as a Hugging Face checkpoint in `out` that sentence-transformers
/// loads as a SPLADE `SparseEncoder`, with its model card (what was trained, from what, how).
pub fn export_model(
    model: &MaskedLm,
    backbone: &Backbone,
    config: &TrainConfig,
    steps: usize,
    out: &Path,
) -> Result<()> {
    let recipe = &config.recipe;
    let dims = &backbone.config.dims;
    let max_length = recipe
        .query_max_length
        .max(recipe.document_max_length)
        .min(dims.max_positions);
    let built = lsr_files::built_from();
    let card = ModelCard {
        base_model: config.model.checkpoint.clone(),
        base_revision: backbone.checkpoint.revision.clone(),
        family: backbone.config.family().to_string(),
        k: config.model.k.get(),
        rescale: if config.model.untie {
            "untied copy"
        } else {
            "shared matrix"
        }
        .into(),
        steps,
        training_data: to_toml(&config.data).trim().replace('\n', ", "),
        recipe: to_toml(&config.recipe),
        max_length,
        cell: None,
        lsr_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: built.as_ref().map(|b| b.commit.clone()),
        git_dirty: built.map(|b| b.dirty),
        metrics: Default::default(),
    };
    lsr_backbone::write_checkpoint_with(
        model,
        &backbone.tensor_names,
        &backbone.checkpoint,
        out,
        |dir| {
            write_sentence_transformers(dir, dims.vocab_size, max_length)?;
            Ok(card.write(dir)?)
        },
    )?;
    Ok(())
}

fn to_toml(value: &impl Serialize) -> String {
    toml::to_string(value).expect("configs serialise as TOML")
}
