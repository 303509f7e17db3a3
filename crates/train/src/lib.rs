//! SPLADE training. A cell config (backbone checkpoint, rescale factor k, recipe, data, output
//! directory) becomes a trained model: the backbone is loaded and its MLM head divided by k once,
//! before the optimiser sees it; batches of MS MARCO-style triplets are read and tokenised off the
//! training thread; each step minimises InfoNCE over in-batch positives and hard negatives and/or
//! distillation from a teacher's scores (MarginMSE, KL-Div), plus the FLOPS regularisers of
//! queries and documents (quadratic λ warm-up), with an explicit AdamW, a linear warm-up/decay
//! schedule, optional global-norm clipping, and micro-batches by gradient accumulation or
//! gradient caching (the loss over the whole batch in the memory of one micro-batch). Every
//! step is logged to CSV; checkpoints are atomic and a run resumes from the newest one; a NaN loss
//! or all-zero documents end the run as a recorded collapse, which is one of the paper's results.
//! A `[validation]` set is scored every N steps through a caller's [`Validator`]. SIGTERM or
//! SIGUSR1 (once [`lsr_files::stop::stop_on_signals`] is called) ends a run at the next step boundary
//! with a checkpoint, as interrupted.

pub mod checkpoint;
pub mod config;
pub mod data;
pub mod error;
pub mod legacy;
pub mod log;
pub mod loss;
pub mod optimizer;
pub mod reference;
pub mod run;
pub mod schedule;
pub mod settings;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trainer;
pub mod validation;

pub use config::{Batching, DataConfig, Distillation, ModelSpec, Recipe, Regularizer, TrainConfig};
pub use error::{Result, TrainError};
pub use loss::{LossTerms, splade_loss};
pub use run::{Outcome, train, train_validated, train_validated_until};
pub use trainer::{StepMetrics, Trainer};
pub use validation::{BestValidation, ValidationConfig, ValidationScores, Validator};
