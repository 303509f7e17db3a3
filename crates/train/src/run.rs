//! A whole training run of one cell: validate, load and rescale, resume if asked, step through
//! the recipe while logging, checkpointing and watching for collapse, then write the trained
//! model as a Hugging Face checkpoint. `status.json` in the output directory always says where
//! the run stands: running, finished, collapsed (with step, reason and the model at the
//! collapse, if its weights are finite), interrupted (stopped on request with a checkpoint at
//! that step) or failed, and any warning about the run.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::prelude::*;
use lsr_backbone::Backbone;
use lsr_compute::parse_device;
use lsr_files::lock::TRAIN_LOCK;
use lsr_files::status::BestStep;
use lsr_files::status::STATUS;
use lsr_files::{CollapseRule, OutputLock, RunStatus, StatusFile};

use crate::checkpoint::{self, DeadPasses, RunState};
use crate::config::TrainConfig;
use crate::data::{BatchPlan, Batches, TrainBatch, TripleSource};
use crate::error::{Result, TrainError};
use crate::log::{Throughput, TrainLog};
use crate::trainer::{StepMetrics, Trainer, weights_finite};
use crate::validation::{BestValidation, ValidationScores, Validator};

/// How a run ended (errors aside).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Finished {
        steps: usize,
        model: PathBuf,
    },
    /// A result, not an error: the paper's collapsed configurations end here, with the model
    /// at the collapse to evaluate (none if its weights are not finite).
    Collapsed {
        step: usize,
        reason: String,
        model: Option<PathBuf>,
    },
    /// Stopped on request ([`lsr_files::stop`]) after `step`, with a checkpoint there: `--resume`
    /// continues it to the weights an uninterrupted run would have reached.
    Interrupted {
        step: usize,
    },
}

/// Trains the cell. Without `resume`, an output directory that already holds a run is
/// refused; with it, the run continues from its newest checkpoint (or returns the recorded end
/// of a run that is over). A cell with `[validation]` needs [`train_validated`].
pub fn train(config: &TrainConfig, resume: bool) -> Result<Outcome> {
    if let Some(validation) = &config.validation {
        return Err(TrainError::config(
            config.output.join(checkpoint::CONFIG).display().to_string(),
            format!(
                "[validation] on {} needs a validator (`lsr train` and `lsr matrix run` \
                 provide one)",
                validation.dataset
            ),
        ));
    }
    train_validated(config, resume, None)
}

/// As [`train`], scoring the `[validation]` set through `validator` every `every` steps. The
/// output is locked for the whole run: a second process on it is refused, naming this one. A
/// stop requested while it trains ends it after the current step.
pub fn train_validated<'a>(
    config: &'a TrainConfig,
    resume: bool,
    validator: Option<&'a mut dyn Validator>,
) -> Result<Outcome> {
    train_validated_until(config, resume, validator, config.recipe.steps)
}

/// Held while a run trains: burn's random generator, which draws the dropout masks, is one per
/// process and seeded before each micro-batch, so two runs training at once in one process (tests
/// on parallel threads) would draw each other's masks, and neither would be reproducible.
static TRAINING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// As [`train_validated`], ending after step `stop_at` (if below the recipe's steps) as a stop
/// request ends a run: validated and checkpointed at that step, `Outcome::Interrupted`, so that
/// a resume continues it to the run it is the beginning of (the probe of `lsr-matrix`).
pub fn train_validated_until<'a>(
    config: &'a TrainConfig,
    resume: bool,
    validator: Option<&'a mut dyn Validator>,
    stop_at: usize,
) -> Result<Outcome> {
    let output = &config.output;
    let new_output = !output.exists();
    let _lock = OutputLock::acquire(output, TRAIN_LOCK)?;
    let _training = TRAINING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(ended) = recorded_end(output, resume)? {
        return Ok(ended);
    }
    let mut run = match Run::start(config, resume, validator) {
        Ok(run) => run,
        Err(error) => {
            // A run that cannot start leaves nothing behind, not even its lock.
            if new_output {
                std::fs::remove_dir_all(output).map_err(|e| TrainError::io(output, e))?;
            }
            return Err(error);
        }
    };
    run.stop_at = stop_at.min(config.recipe.steps);
    while run.trainer.step < config.recipe.steps {
        if run.trainer.step >= run.stop_at {
            return run.interrupt();
        }
        if let Some(collapsed) = run.step()? {
            return Ok(collapsed);
        }
        if lsr_files::stop::requested() && run.trainer.step < config.recipe.steps {
            return run.interrupt();
        }
    }
    run.finish()
}

/// How the run already in `output` ended, if it did; a run there is an error unless `resume`.
fn recorded_end(output: &Path, resume: bool) -> Result<Option<Outcome>> {
    let Some(previous) = StatusFile::read(output)? else {
        return Ok(None);
    };
    if !resume {
        return Err(TrainError::config(
            output.join(STATUS).display().to_string(),
            format!(
                "this output already holds a run ({:?} at step {}); pass --resume to \
                 continue it, or choose another output",
                previous.status, previous.step
            ),
        ));
    }
    Ok(match (previous.status, previous.model, previous.reason) {
        (RunStatus::Finished, Some(model), _) => Some(Outcome::Finished {
            steps: previous.step,
            model,
        }),
        (RunStatus::Collapsed, model, reason) => Some(Outcome::Collapsed {
            step: previous.step,
            reason: reason.unwrap_or_default(),
            model,
        }),
        _ => None,
    })
}

/// A run in progress: what its steps read and write.
struct Run<'a> {
    config: &'a TrainConfig,
    validator: Option<&'a mut dyn Validator>,
    config_toml: String,
    backbone: Backbone,
    trainer: Trainer,
    state: RunState,
    log: TrainLog,
    /// What the steps since the last logged one processed, for the throughput.
    throughput: Throughput,
    status: StatusFile,
    batches: Batches,
    progress: Progress,
    /// The step of the newest checkpoint on disk.
    checkpointed: usize,
    /// The step after which this process ends the run (validated, checkpointed, interrupted).
    stop_at: usize,
}

impl<'a> Run<'a> {
    /// Checks all that can be checked before the first file of the run is written (data,
    /// device, backbone, k), then writes the config, resumes if asked, and opens log and status.
    fn start(
        config: &'a TrainConfig,
        resume: bool,
        validator: Option<&'a mut dyn Validator>,
    ) -> Result<Self> {
        let (output, recipe) = (&config.output, &config.recipe);
        let source = Arc::new(TripleSource::open(&config.data)?);
        let device = parse_device(config.device.as_deref())?.autodiff();
        let max_length = recipe.query_max_length.max(recipe.document_max_length);
        let (backbone, model) = config
            .model
            .load_rescaled(&device, max_length, recipe.dropout)?;
        let mut trainer = Trainer::new(model, recipe.clone());
        std::fs::create_dir_all(output).map_err(|e| TrainError::io(output, e))?;
        let config_toml = config.to_toml();
        lsr_files::write_bytes(&output.join(checkpoint::CONFIG), config_toml.as_bytes())?;

        let mut state = RunState::default();
        if resume && let Some(latest) = checkpoint::latest_intact(&config.checkpoint_dir())? {
            state = checkpoint::restore(&latest, &mut trainer)?;
            tracing::info!("resuming from {} (step {})", latest.display(), state.step);
        }
        let log = TrainLog::open(output, state.step, &config_toml)?;
        // A warning and a best pass from the steps before the checkpoint still hold.
        let previous = match resume {
            true => StatusFile::read(output)?,
            false => None,
        };
        let best_validation = state.best_validation.map(|best| BestStep {
            step: best.step,
            ndcg_at_10: best.scores.ndcg_at_10,
            model: previous
                .as_ref()
                .and_then(|p| p.best_validation.as_ref()?.model.clone()),
        });
        let status = StatusFile {
            status: RunStatus::Running,
            step: state.step,
            steps: recipe.steps,
            reason: None,
            collapse_rule: None,
            model: None,
            warning: previous.and_then(|p| p.warning),
            best_validation,
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
        Ok(Self {
            config,
            validator,
            config_toml,
            backbone,
            trainer,
            progress: Progress::new(recipe.steps, state.step),
            checkpointed: state.step,
            stop_at: recipe.steps,
            state,
            log,
            throughput: Throughput::default(),
            status,
            batches,
        })
    }

    /// One optimiser step with its logging, collapse watch and checkpoint; the outcome if the
    /// run collapsed.
    fn step(&mut self) -> Result<Option<Outcome>> {
        let recipe = &self.config.recipe;
        let started = std::time::Instant::now();
        let micro_batches = self.next_batches()?;
        let logged = self.logs(self.trainer.step + 1);
        let mut metrics = self.trainer.step(&micro_batches, logged);
        self.throughput.steps += 1;
        self.throughput.time += started.elapsed();
        self.throughput.tokens += (micro_batches.iter())
            .flat_map(|batch| [&batch.queries.mask, &batch.documents.mask])
            .map(|mask| mask.iter().map(|&m| u64::from(m)).sum::<u64>())
            .sum::<u64>();
        self.state.step = metrics.step;
        self.state.next_micro_batch += recipe.accumulation as u64;
        self.watch_density(&mut metrics)?;
        let mut collapse = collapse(&metrics, &mut self.state, recipe.collapse_patience)
            .map(|reason| (CollapseRule::Training, metrics.step, reason));
        let last = metrics.step == recipe.steps;
        if collapse.is_none() {
            let stopping = metrics.step == self.stop_at;
            self.validate(&mut metrics, last || stopping)?;
            let passes = self
                .config
                .validation
                .as_ref()
                .map_or(0, |v| v.collapse_passes);
            let scores = metrics.validation.as_ref();
            collapse = validation_collapse(scores, metrics.step, &mut self.state, passes)
                .map(|(step, reason)| (CollapseRule::Validation, step, reason));
        }
        let validated = metrics.validation.is_some();
        if metrics.step.is_multiple_of(recipe.log_every) || collapse.is_some() || last || validated
        {
            self.log.append(&metrics, &mut self.throughput)?;
        }
        self.progress.step(&metrics);
        if let Some((rule, step, reason)) = collapse {
            let model = match weights_finite(&self.trainer.model) {
                true => Some(self.export("model")?),
                false => None,
            };
            self.status.status = RunStatus::Collapsed;
            self.status.step = step;
            self.status.reason = Some(reason.clone());
            self.status.collapse_rule = Some(rule);
            self.status.model = model.clone();
            self.status.write(&self.config.output)?;
            return Ok(Some(Outcome::Collapsed {
                step,
                reason,
                model,
            }));
        }
        if metrics.step.is_multiple_of(recipe.checkpoint_every) || last {
            self.checkpoint()?;
        }
        Ok(None)
    }

    /// Whether `step` is logged whatever happens in it: every `log_every`, the last, and one
    /// validated (a collapse is logged too, but cannot be foreseen).
    fn logs(&self, step: usize) -> bool {
        let recipe = &self.config.recipe;
        let validated = (self.config.validation.as_ref())
            .is_some_and(|v| self.validator.is_some() && step.is_multiple_of(v.every));
        step.is_multiple_of(recipe.log_every)
            || step == recipe.steps
            || step == self.stop_at
            || validated
    }

    /// Writes a checkpoint of the run as it is now and records its step.
    fn checkpoint(&mut self) -> Result<()> {
        let dir = self.config.checkpoint_dir();
        let keep = self.config.recipe.keep_checkpoints;
        checkpoint::save(&dir, &self.trainer, &self.state, &self.config_toml, keep)?;
        self.checkpointed = self.state.step;
        self.status.step = self.state.step;
        Ok(self.status.write(&self.config.output)?)
    }

    /// Ends the run on a stop request: a checkpoint at this step (unless there is one), and
    /// the status says interrupted.
    fn interrupt(mut self) -> Result<Outcome> {
        let step = self.state.step;
        if self.checkpointed != step {
            self.checkpoint()?;
        }
        self.status.status = RunStatus::Interrupted;
        self.status.write(&self.config.output)?;
        Ok(Outcome::Interrupted { step })
    }

    /// The micro-batches of the next step; a data error is recorded as the run's failure.
    fn next_batches(&mut self) -> Result<Vec<TrainBatch>> {
        let accumulation = self.config.recipe.accumulation;
        let batches: Result<Vec<_>> = (0..accumulation)
            .map(|_| self.batches.next_batch())
            .collect();
        batches.or_else(|error| {
            self.status.status = RunStatus::Failed;
            self.status.reason = Some(error.to_string());
            self.status.write(&self.config.output)?;
            Err(error)
        })
    }

    /// Counts dense steps into `metrics` and records the warning when they reach the recipe's
    /// patience (the run goes on: dense vectors are slow and suspicious, not broken).
    fn watch_density(&mut self, metrics: &mut StepMetrics) -> Result<()> {
        let recipe = &self.config.recipe;
        let limit = recipe.dense_fraction * self.backbone.config.dims.vocab_size as f64;
        let dense = metrics.l0_q.max(metrics.l0_d) > limit;
        self.state.dense_steps = if dense { self.state.dense_steps + 1 } else { 0 };
        metrics.dense_steps = self.state.dense_steps;
        if self.state.dense_steps == recipe.dense_patience {
            let warning = format!(
                "mean L0 above {} of the vocabulary ({limit:.0} terms) for {} consecutive steps \
                 through step {}",
                recipe.dense_fraction, recipe.dense_patience, metrics.step
            );
            tracing::warn!("{warning}");
            self.status.warning = Some(warning);
            self.status.write(&self.config.output)?;
        }
        Ok(())
    }

    /// Scores the validation set after a step where one is due (every `every` steps and the
    /// last), recording the best pass (the first of equal scores) and keeping its model if asked.
    fn validate(&mut self, metrics: &mut StepMetrics, last: bool) -> Result<()> {
        let (Some(spec), Some(validator)) = (&self.config.validation, self.validator.as_mut())
        else {
            return Ok(());
        };
        if !(metrics.step.is_multiple_of(spec.every) || last) {
            return Ok(());
        }
        let scores = validator
            .validate(self.trainer.model.valid())
            .map_err(|message| TrainError::Validation {
                dataset: spec.dataset.clone(),
                step: metrics.step,
                message,
            })?;
        metrics.validation = Some(scores);
        let best = self.state.best_validation;
        if best.is_some_and(|b| b.scores.ndcg_at_10 >= scores.ndcg_at_10) {
            return Ok(());
        }
        let keep = spec.keep_best;
        self.state.best_validation = Some(BestValidation {
            step: metrics.step,
            scores,
        });
        self.status.best_validation = Some(BestStep {
            step: metrics.step,
            ndcg_at_10: scores.ndcg_at_10,
            model: if keep {
                Some(self.export("best")?)
            } else {
                None
            },
        });
        Ok(self.status.write(&self.config.output)?)
    }

    /// Writes the model as it is now as a Hugging Face checkpoint, `<checkpoints>/<name>`.
    fn export(&self, name: &str) -> Result<PathBuf> {
        let model_dir = self.config.checkpoint_dir().join(name);
        if model_dir.exists() {
            // `model`: left by a run killed after writing it and before recording it, whose
            // steps this run takes again. `best`: a pass this one has beaten.
            std::fs::remove_dir_all(&model_dir).map_err(|e| TrainError::io(&model_dir, e))?;
        }
        let model = self.trainer.model.valid();
        checkpoint::export_model(
            &model,
            &self.backbone,
            self.config,
            self.state.step,
            &model_dir,
        )?;
        Ok(model_dir)
    }

    /// Writes the trained model as a Hugging Face checkpoint and records the run as finished.
    fn finish(mut self) -> Result<Outcome> {
        let model_dir = self.export("model")?;
        self.status.status = RunStatus::Finished;
        self.status.step = self.trainer.step;
        self.status.model = Some(model_dir.clone());
        self.status.write(&self.config.output)?;
        Ok(Outcome::Finished {
            steps: self.trainer.step,
            model: model_dir,
        })
    }
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

/// Whether the validation passes end the run: `passes` consecutive ones (0: never) in which the
/// queries or the documents had no term at all. The collapse is at the first of them; returns
/// its step and the reason.
fn validation_collapse(
    scores: Option<&ValidationScores>,
    step: usize,
    state: &mut RunState,
    passes: usize,
) -> Option<(usize, String)> {
    let scores = scores?;
    if scores.l0_q > 0.0 && scores.l0_d > 0.0 {
        state.dead_validation = None;
        return None;
    }
    let dead = state.dead_validation.get_or_insert(DeadPasses {
        from_step: step,
        passes: 0,
    });
    dead.passes += 1;
    (passes > 0 && dead.passes >= passes).then(|| {
        let from = dead.from_step;
        let reason = format!(
            "validation queries or documents without any term in {passes} consecutive passes, \
             from step {from} (through step {step})"
        );
        (from, reason)
    })
}

/// A progress bar with ETA on a terminal; otherwise a tracing line (info, shown by default)
/// every 1% of the run.
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
}

/// The bar is cleared however the run ends (finished, interrupted, collapsed, failed): a bar
/// left drawn keeps the cursor at the end of its line, padded to the terminal's width, and the
/// next line printed runs into it wherever the terminal does not wrap there.
impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
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

    #[test]
    fn dead_validation_passes_collapse_at_the_first_of_them_and_a_live_one_resets() {
        let scores = |l0_q, l0_d| ValidationScores {
            ndcg_at_10: 0.0,
            l0_q,
            l0_d,
            flops: 0.0,
        };
        let mut state = RunState::default();
        let dead = scores(3.0, 0.0);
        assert_eq!(validation_collapse(Some(&dead), 50, &mut state, 2), None);
        assert_eq!(validation_collapse(None, 60, &mut state, 2), None);
        let live = scores(3.0, 4.0);
        assert_eq!(validation_collapse(Some(&live), 100, &mut state, 2), None);
        assert_eq!(state.dead_validation, None);
        let no_queries = scores(0.0, 4.0);
        assert_eq!(
            validation_collapse(Some(&no_queries), 150, &mut state, 2),
            None
        );
        let (step, reason) = validation_collapse(Some(&dead), 200, &mut state, 2).unwrap();
        assert_eq!(step, 150);
        assert!(reason.contains("2 consecutive passes") && reason.contains("from step 150"));
        let mut off = RunState::default();
        for step in [50, 100, 150] {
            assert_eq!(validation_collapse(Some(&dead), step, &mut off, 0), None);
        }
    }
}
