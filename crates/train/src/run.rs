//! A whole training run of one cell: validate, load and rescale, resume if asked, step through
//! the recipe while logging, checkpointing and watching for collapse, then write the trained
//! model as a Hugging Face checkpoint. `status.json` in the output directory always says where
//! the run stands: running, finished, collapsed (with step and reason) or failed.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::prelude::*;
use lsr_backbone::{Backbone, RescaleMode, parse_device, write_checkpoint};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{self, RunState};
use crate::config::TrainConfig;
use crate::data::{BatchPlan, Batches, TripleSource};
use crate::error::{Result, TrainError};
use crate::log::TrainLog;
use crate::trainer::{StepMetrics, Trainer};

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Finished,
    Collapsed,
    Failed,
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
    /// The trained model as an HF checkpoint (head already rescaled: evaluate it with k = 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
}

impl StatusFile {
    pub fn read(output: &Path) -> Result<Option<Self>> {
        let path = output.join(STATUS);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| TrainError::data(&path, None, e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(TrainError::io(&path, e)),
        }
    }

    fn write(&self, output: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("status serialises");
        write_atomically(&output.join(STATUS), text.as_bytes())
    }
}

const STATUS: &str = "status.json";

/// How a run ended (errors aside).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Finished {
        steps: usize,
        model: PathBuf,
    },
    /// A result, not an error: the paper's collapsed configurations end here.
    Collapsed {
        step: usize,
        reason: String,
    },
}

/// Trains the cell. Without `resume`, an output directory that already holds a run is
/// refused; with it, the run continues from its newest checkpoint (or returns the recorded end
/// of a run that is over).
pub fn train(config: &TrainConfig, resume: bool) -> Result<Outcome> {
    let output = &config.output;
    if let Some(previous) = StatusFile::read(output)? {
        if !resume {
            return Err(TrainError::Config {
                source_name: output.join(STATUS).display().to_string(),
                message: format!(
                    "this output already holds a run ({:?} at step {}); pass --resume to \
                     continue it, or choose another output",
                    previous.status, previous.step
                ),
            });
        }
        match (previous.status, previous.model, previous.reason) {
            (RunStatus::Finished, Some(model), _) => {
                return Ok(Outcome::Finished {
                    steps: previous.step,
                    model,
                });
            }
            (RunStatus::Collapsed, _, reason) => {
                return Ok(Outcome::Collapsed {
                    step: previous.step,
                    reason: reason.unwrap_or_default(),
                });
            }
            _ => {}
        }
    }
    // Everything that can be checked is, before the first file of the run is written.
    let source = Arc::new(TripleSource::open(&config.data)?);
    let recipe = &config.recipe;
    let device = parse_device(config.device.as_deref())?.autodiff();
    let max_length = recipe.query_max_length.max(recipe.document_max_length);
    let backbone = Backbone::load(&config.model.checkpoint, &device, max_length)?;
    let mode = if config.model.untie {
        RescaleMode::Untie
    } else {
        RescaleMode::Shared
    };
    let model = backbone
        .model
        .clone()
        .rescale_mlm_head(config.model.k, mode)?;
    let mut trainer = Trainer::new(model, recipe.clone());
    std::fs::create_dir_all(output).map_err(|e| TrainError::io(output, e))?;
    let config_toml = config.to_toml();
    write_atomically(&output.join(checkpoint::CONFIG), config_toml.as_bytes())?;

    let checkpoints = config.checkpoint_dir();
    let mut state = RunState::default();
    if resume && let Some(latest) = checkpoint::latest(&checkpoints)? {
        state = checkpoint::restore(&latest, &mut trainer)?;
        tracing::info!("resuming from {} (step {})", latest.display(), state.step);
    }
    let mut log = TrainLog::open(&output.join("train.csv"), state.step)?;
    let mut status = StatusFile {
        status: RunStatus::Running,
        step: state.step,
        steps: recipe.steps,
        reason: None,
        model: None,
    };
    status.write(output)?;

    let plan = BatchPlan {
        micro_batch: recipe.batch_size / recipe.accumulation,
        negatives: recipe.negatives,
        seed: recipe.seed,
        query_tokenizer: backbone
            .tokenizer
            .with_max_length(recipe.query_max_length)?,
        document_tokenizer: backbone
            .tokenizer
            .with_max_length(recipe.document_max_length)?,
    };
    let batches = Batches::spawn(source, plan, state.next_micro_batch, recipe.prefetch);
    let progress = Progress::new(recipe.steps, state.step);

    while trainer.step < recipe.steps {
        let micro_batches = match (0..recipe.accumulation)
            .map(|_| batches.next_batch())
            .collect::<Result<Vec<_>>>()
        {
            Ok(micro_batches) => micro_batches,
            Err(error) => {
                status.status = RunStatus::Failed;
                status.reason = Some(error.to_string());
                status.write(output)?;
                return Err(error);
            }
        };
        let metrics = trainer.step(&micro_batches);
        state.step = metrics.step;
        state.next_micro_batch += recipe.accumulation as u64;
        let collapse = collapse(&metrics, &mut state, recipe.collapse_patience);
        if metrics.step.is_multiple_of(recipe.log_every)
            || collapse.is_some()
            || metrics.step == recipe.steps
        {
            log.append(&metrics)?;
        }
        progress.step(&metrics);
        if let Some(reason) = collapse {
            progress.finish(&format!("collapsed at step {}", metrics.step));
            status.status = RunStatus::Collapsed;
            status.step = metrics.step;
            status.reason = Some(reason.clone());
            status.write(output)?;
            return Ok(Outcome::Collapsed {
                step: metrics.step,
                reason,
            });
        }
        if metrics.step.is_multiple_of(recipe.checkpoint_every) || metrics.step == recipe.steps {
            checkpoint::save(
                &checkpoints,
                &trainer,
                &state,
                &config_toml,
                recipe.keep_checkpoints,
            )?;
            status.step = metrics.step;
            status.write(output)?;
        }
    }
    progress.finish("done");

    let model_dir = checkpoints.join("model");
    if model_dir.exists() {
        // Left by a run killed after writing it and before recording it; this run's steps are
        // the same, so its model replaces that one.
        std::fs::remove_dir_all(&model_dir).map_err(|e| TrainError::io(&model_dir, e))?;
    }
    write_checkpoint(
        &trainer.model.valid(),
        &backbone.tensor_names,
        &backbone.checkpoint,
        &model_dir,
    )?;
    status.status = RunStatus::Finished;
    status.step = trainer.step;
    status.model = Some(model_dir.clone());
    status.write(output)?;
    Ok(Outcome::Finished {
        steps: trainer.step,
        model: model_dir,
    })
}

/// Why this step ends the run, if it does: a non-finite loss or gradient, or documents that
/// have been all zero for `patience` consecutive steps (nothing left to retrieve with).
fn collapse(metrics: &StepMetrics, state: &mut RunState, patience: usize) -> Option<String> {
    if !metrics.loss.is_finite() {
        return Some(format!(
            "non-finite loss ({}) at step {}",
            metrics.loss, metrics.step
        ));
    }
    if !metrics.grad_norm.is_finite() {
        return Some(format!(
            "non-finite gradient norm ({}) at step {}",
            metrics.grad_norm, metrics.step
        ));
    }
    if metrics.l0_d == 0.0 {
        state.zero_document_steps += 1;
    } else {
        state.zero_document_steps = 0;
    }
    (state.zero_document_steps >= patience).then(|| {
        format!(
            "all document vectors zero for {patience} consecutive steps (through step {})",
            metrics.step
        )
    })
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| TrainError::io(dir, e))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| TrainError::io(path, e))?;
    file.persist(path)
        .map_err(|e| TrainError::io(path, e.error))?;
    Ok(())
}

/// A progress bar with ETA on a terminal; otherwise a tracing line every 1% of the run.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    every: usize,
}

impl Progress {
    fn new(steps: usize, done: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(steps as u64).with_position(done as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} steps, {elapsed} < {eta} {msg}",
                )
                .expect("a valid template"),
            );
            bar
        });
        Self {
            bar,
            every: (steps / 100).max(1),
        }
    }

    fn step(&self, m: &StepMetrics) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(m.step as u64);
                bar.set_message(format!(
                    "loss {:.4} rank {:.4} L0 q {:.0} d {:.0}",
                    m.loss, m.ranking_loss, m.l0_q, m.l0_d
                ));
            }
            None if m.step.is_multiple_of(self.every) => tracing::info!(
                step = m.step,
                loss = m.loss,
                ranking = m.ranking_loss,
                l0_q = m.l0_q,
                l0_d = m.l0_d,
                seconds = m.seconds,
                "training"
            ),
            None => {}
        }
    }

    fn finish(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_with_message(message.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_zero_documents_collapse_after_the_patience_and_recover_otherwise() {
        let mut state = RunState::default();
        let zero = |step| StepMetrics {
            step,
            loss: 1.0,
            l0_d: 0.0,
            ..StepMetrics::default()
        };
        assert_eq!(collapse(&zero(1), &mut state, 3), None);
        assert_eq!(collapse(&zero(2), &mut state, 3), None);
        let alive = StepMetrics {
            step: 3,
            loss: 1.0,
            l0_d: 5.0,
            ..StepMetrics::default()
        };
        assert_eq!(collapse(&alive, &mut state, 3), None);
        assert_eq!(state.zero_document_steps, 0);
        for step in 4..6 {
            assert_eq!(collapse(&zero(step), &mut state, 3), None);
        }
        let reason = collapse(&zero(6), &mut state, 3).unwrap();
        assert!(reason.contains("all document vectors zero for 3") && reason.contains("step 6"));
        let nan = StepMetrics {
            step: 7,
            loss: f64::NAN,
            ..StepMetrics::default()
        };
        assert!(
            collapse(&nan, &mut state, 3)
                .unwrap()
                .contains("non-finite loss")
        );
    }
}
