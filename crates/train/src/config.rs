//! A training cell's configuration: which backbone and k, the recipe, the data, where results
//! go. Read from TOML (unknown keys are errors, reported with their line), overridable field by
//! field (`recipe.lr=1e-5`), validated as a whole before anything is loaded.

use std::path::{Path, PathBuf};

use burn::prelude::Device;
use lsr_backbone::{Backbone, MaskedLm, RescaleMode, Scale};
use lsr_compute::Precision;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainError};
use crate::schedule::Warmup;
use crate::validation::ValidationConfig;

/// A whole cell: model, recipe, data, output.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    pub model: ModelSpec,
    #[serde(default)]
    pub recipe: Recipe,
    pub data: DataConfig,
    /// The cell's results: resolved config, `train.csv`, TensorBoard event files, `status.json`.
    pub output: PathBuf,
    /// Where checkpoints go (they are large); default `<output>/checkpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<PathBuf>,
    /// `flex`, `wgpu[:N]` or `cuda[:N]`; default: `$LSR_DEVICE`, else the best backend that starts here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Checkpoint directory or Hugging Face id.
    pub checkpoint: String,
    /// The MLM-head decoder is divided by k once, before training.
    pub k: Scale,
    /// With a tied decoder, divide an untied copy instead of the shared matrix (ablation).
    #[serde(default)]
    pub untie: bool,
}

impl ModelSpec {
    /// The backbone this spec names (texts truncated to `max_length` tokens, dropout as its
    /// config says unless `dropout` is false) and its model with the head divided by k: the one
    /// place a run's model is rescaled.
    pub fn load_rescaled(
        &self,
        device: &Device,
        max_length: usize,
        dropout: bool,
    ) -> Result<(Backbone, MaskedLm)> {
        let backbone = Backbone::load_with_dropout(&self.checkpoint, device, max_length, dropout)?;
        let mode = RescaleMode::untie_if(self.untie);
        let model = backbone.model.clone().rescale_mlm_head(self.k, mode)?;
        Ok((backbone, model))
    }
}

/// Every hyperparameter of a run. The defaults are our reading of naver/splade's SPLADE-max
/// recipe (`../shared/reference/splade-and-eval.md` §3); where the paper is silent the values
/// are our choice and say so in `experiments/*.toml`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Recipe {
    /// Optimiser steps.
    pub steps: usize,
    /// Queries per optimiser step (each with one positive and `negatives` hard negatives).
    pub batch_size: usize,
    /// The batch is computed in this many micro-batches, as `batching` says.
    pub accumulation: usize,
    /// How the micro-batches make one step: `accumulation` sums their gradients, each
    /// micro-batch's loss with its own in-batch negatives and FLOPS; `cached` (gradient caching)
    /// computes the loss over the whole batch from every micro-batch's representations, so that
    /// in-batch negatives and FLOPS span all `batch_size` queries in the memory of one
    /// micro-batch (and the representations).
    pub batching: Batching,
    /// Hard negatives per query.
    pub negatives: usize,
    /// Rank each query against the other queries' positives too (naver/splade's
    /// `InBatchPairwiseNLL`); `false`: against its own negatives only (`PairwiseNLL`).
    pub in_batch_negatives: bool,
    /// Texts are cut to these lengths and padded to the longest of the batch.
    pub query_max_length: usize,
    pub document_max_length: usize,
    pub lr: f64,
    /// Where the learning-rate warm-up starts (transformers' schedule: at 0).
    pub lr_warmup: Warmup,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub warmup_steps: usize,
    pub lambda_q: f64,
    pub lambda_d: f64,
    /// Steps of the quadratic λ warm-up (T).
    pub lambda_warmup_steps: usize,
    pub query_regularizer: Regularizer,
    /// Which documents the document FLOPS averages over.
    pub document_flops: DocumentFlops,
    /// The contrastive loss's weight in the ranking loss (0: distillation alone; train.csv
    /// still logs it, over the candidates `in_batch_negatives` says).
    pub contrastive_weight: f64,
    /// Distillation from the teacher's scores of each query's positive and negatives (a `[data]`
    /// format with scores), added to the ranking loss with its weight: `[recipe.distillation]`.
    pub distillation: Distillation,
    /// Train with the dropout the backbone's config declares (transformers' `model.train()`,
    /// as naver/splade); `false`: none.
    pub dropout: bool,
    /// Clip the global gradient norm (over all parameters, like
    /// `torch.nn.utils.clip_grad_norm_`) to this value; none by default, as naver/splade.
    pub max_grad_norm: Option<f64>,
    /// Seeds the data order.
    pub seed: u64,
    /// Log every N steps (the row averages nothing: it is that step's values).
    pub log_every: usize,
    pub checkpoint_every: usize,
    /// Checkpoints kept on disk (the newest ones).
    pub keep_checkpoints: usize,
    /// Consecutive steps with all-zero document vectors that count as a collapse.
    pub collapse_patience: usize,
    /// Mean query or document L0 above this fraction of the vocabulary makes a step dense;
    /// `dense_patience` consecutive dense steps are a warning (`status.json`), not a stop.
    pub dense_fraction: f64,
    pub dense_patience: usize,
    /// Batches tokenised ahead of the training thread.
    pub prefetch: usize,
    /// `f32`, or `bf16-mixed`: bf16 matrix products and activations with f32 master weights,
    /// AdamW state, LayerNorm statistics, softmax, SPLADE weights and loss (`bf16`, an encoding
    /// precision, is refused).
    pub precision: Precision,
}

impl Default for Recipe {
    fn default() -> Self {
        Self {
            steps: 150_000,
            batch_size: 128,
            accumulation: 1,
            batching: Batching::Accumulation,
            negatives: 1,
            in_batch_negatives: true,
            query_max_length: 256,
            document_max_length: 256,
            lr: 2e-5,
            lr_warmup: Warmup::FromZero,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-6,
            weight_decay: 0.01,
            warmup_steps: 6000,
            lambda_q: 3e-4,
            lambda_d: 1e-4,
            lambda_warmup_steps: 50_000,
            query_regularizer: Regularizer::Flops,
            document_flops: DocumentFlops::PositivesNegatives,
            contrastive_weight: 1.0,
            distillation: Distillation::None {},
            dropout: true,
            max_grad_norm: None,
            seed: 123,
            log_every: 1,
            checkpoint_every: 10_000,
            keep_checkpoints: 2,
            collapse_patience: 100,
            dense_fraction: 0.5,
            dense_patience: 100,
            prefetch: 4,
            precision: Precision::F32,
        }
    }
}

/// The query-side sparsity regulariser.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Regularizer {
    /// `Σ_j (mean_i |w_ij|)²`.
    Flops,
    /// `mean_i Σ_j |w_ij|`.
    L1,
}

/// The documents a batch's document FLOPS is computed over.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DocumentFlops {
    /// `(FLOPS(positives) + FLOPS(hard negatives)) / 2` (naver/splade).
    PositivesNegatives,
    /// FLOPS over all documents of the batch at once (sentence-transformers).
    All,
}

/// How a step's micro-batches are combined.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// Gradient accumulation: each micro-batch's loss on its own (its in-batch negatives, its
    /// FLOPS), their gradients averaged.
    Accumulation,
    /// Gradient caching (GradCache): every micro-batch's representations without the graph,
    /// the loss over the whole batch and its gradient with respect to them, then each
    /// micro-batch again with the graph, its dropout replayed, back-propagating that gradient.
    Cached,
}

/// The distillation loss over each query's positive and negatives, from the teacher's scores,
/// with the parameters that loss takes and no other: in TOML a table whose `loss` names it,
/// `[recipe.distillation]` `loss = "kl-div"`, `weight = 0.5`, `temperature = 2.0`. A key the
/// loss does not take (`temperature` under MarginMSE, `weight` under none) is an error naming it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "loss", rename_all = "kebab-case", deny_unknown_fields)]
#[serde(
    expecting = "a table whose `loss` is \"none\", \"margin-mse\" (with `weight`) or \"kl-div\" \
                 (with `weight`, `temperature`), e.g. { loss = \"margin-mse\", weight = 1.0 }"
)]
pub enum Distillation {
    /// The contrastive loss alone. (A variant with fields, if none: serde lets a unit variant
    /// of a tagged enum take any key.)
    None {},
    /// `mean_{i,j} ((s⁺_i − s⁻_ij) − (t⁺_i − t⁻_ij))²` over the B queries and their n negatives:
    /// naver/splade's `DistilMarginMSE` (n = 1), sentence-transformers' `MarginMSELoss`.
    MarginMse {
        /// The loss's weight in the ranking loss.
        #[serde(default = "one")]
        weight: f64,
    },
    /// `T² · mean_i KL(softmax(t_i/T) ‖ softmax(s_i/T))` over each query's positive and n
    /// negatives: naver/splade's `DistilKLLoss` and its HF trainer's `kldiv` (T = 1),
    /// sentence-transformers' `DistillKLDivLoss`.
    KlDiv {
        #[serde(default = "one")]
        weight: f64,
        /// T: both score lists divided by T, the loss multiplied by T² (sentence-transformers'
        /// `DistillKLDivLoss`); naver/splade's is 1.
        #[serde(default = "one")]
        temperature: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl Distillation {
    /// Whether there is a distillation loss (and so a need for the teacher's scores).
    pub fn distils(&self) -> bool {
        *self != Self::None {}
    }

    /// The loss's weight in the ranking loss; 0 without one.
    pub fn weight(&self) -> f64 {
        match *self {
            Self::None {} => 0.0,
            Self::MarginMse { weight } | Self::KlDiv { weight, .. } => weight,
        }
    }
}

/// Training triplets in one of the MS MARCO forms.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, tag = "format", rename_all = "kebab-case")]
pub enum DataConfig {
    /// `triples.train.small.tsv`: query, positive, negative text per line.
    Triples { triples: PathBuf },
    /// `qidpidtriples.train.full.2.tsv` (qid, positive pid, negative pid) with
    /// `queries.train.tsv` and `collection.tsv` (id, text).
    IdTriples {
        triples: PathBuf,
        queries: PathBuf,
        collection: PathBuf,
    },
    /// One `{"query": ..., "positive": ..., "negatives": [...]}` object per line.
    Jsonl { triples: PathBuf },
    /// naver/splade's distillation triplets: `query, positive, negative, s⁺, s⁻` (texts and the
    /// teacher's two scores) per line; one negative.
    DistilTriples { triples: PathBuf },
    /// naver/splade's teacher scores, a pickle `{qid: {pid: score}}` (gzipped when it ends in
    /// `.gz`: the sentence-transformers cross-encoder file), each query's positives from
    /// `qrels` (TREC format, `qrels.train.tsv`), texts from `queries` and `collection`;
    /// `negatives` drawn per example from the scored passages that are not positives.
    PickleScores {
        scores: PathBuf,
        qrels: PathBuf,
        queries: PathBuf,
        collection: PathBuf,
    },
    /// sentence-transformers' parquet `query_id, positive_id, negative_id, score` (score: the
    /// teacher's margin), a file or a directory of them; the rows of a query and positive are
    /// its scored candidates, `negatives` drawn from them per example.
    ParquetMargins {
        scores: PathBuf,
        queries: PathBuf,
        collection: PathBuf,
    },
}

impl DataConfig {
    /// The files training reads.
    pub fn files(&self) -> Vec<&Path> {
        match self {
            Self::Triples { triples }
            | Self::Jsonl { triples }
            | Self::DistilTriples { triples } => {
                vec![triples]
            }
            Self::IdTriples {
                triples,
                queries,
                collection,
            } => vec![triples, queries, collection],
            Self::PickleScores {
                scores,
                qrels,
                queries,
                collection,
            } => vec![scores, qrels, queries, collection],
            Self::ParquetMargins {
                scores,
                queries,
                collection,
            } => vec![scores, queries, collection],
        }
    }

    /// Whether the data carries a teacher's scores (what distillation needs).
    pub fn has_teacher(&self) -> bool {
        matches!(
            self,
            Self::DistilTriples { .. } | Self::PickleScores { .. } | Self::ParquetMargins { .. }
        )
    }

    /// Whether each example can have any number of negatives (one per line otherwise).
    fn any_negatives(&self) -> bool {
        matches!(
            self,
            Self::Jsonl { .. } | Self::PickleScores { .. } | Self::ParquetMargins { .. }
        )
    }
}

impl TrainConfig {
    /// Reads `path`, applies `overrides` (`--set`: `crate::settings`), deserialises and
    /// validates.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TrainError::io(path, e))?;
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| TrainError::config(&name, e.to_string()))?;
        if overrides.is_empty() {
            // Deserialising the text itself keeps line numbers in the errors.
            let config: Self =
                toml::from_str(&text).map_err(|e| TrainError::config(&name, e.to_string()))?;
            return config.validated(&name);
        }
        for assignment in overrides {
            crate::settings::set(&mut table, assignment).map_err(|message| {
                TrainError::config("--set", format!("`{assignment}`: {message}"))
            })?;
        }
        let config: Self =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
                TrainError::Config {
                    source_name: format!("{name} with --set {}", overrides.join(" ")),
                    field: Some(e.path().to_string()),
                    message: e.inner().to_string(),
                }
            })?;
        config.validated(&name)
    }

    /// The config as TOML, every value spelled out (what a cell's results record).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a config serialises")
    }

    pub fn checkpoint_dir(&self) -> PathBuf {
        self.checkpoints
            .clone()
            .unwrap_or_else(|| self.output.join("checkpoints"))
    }

    /// Checks every value a run depends on; training never starts on an invalid config.
    pub fn validated(self, source_name: &str) -> Result<Self> {
        let checked = (self.check_counts())
            .and_then(|()| check_numbers(&self.recipe))
            .and_then(|()| self.check_negatives())
            .and_then(|()| self.check_objective());
        match checked {
            Ok(()) => Ok(self),
            Err((field, message)) => Err(TrainError::Config {
                source_name: source_name.to_string(),
                field: Some(field.to_string()),
                message,
            }),
        }
    }

    /// Counts of at least one, the accumulation dividing the batch, the warm-up within the steps.
    fn check_counts(&self) -> Checked {
        let r = &self.recipe;
        let mut at_least_one = vec![
            ("recipe.steps", r.steps),
            ("recipe.batch_size", r.batch_size),
            ("recipe.accumulation", r.accumulation),
            ("recipe.query_max_length", r.query_max_length),
            ("recipe.document_max_length", r.document_max_length),
            ("recipe.log_every", r.log_every),
            ("recipe.checkpoint_every", r.checkpoint_every),
            ("recipe.keep_checkpoints", r.keep_checkpoints),
            ("recipe.collapse_patience", r.collapse_patience),
            ("recipe.dense_patience", r.dense_patience),
            ("recipe.prefetch", r.prefetch),
        ];
        if let Some(v) = &self.validation {
            at_least_one.extend([
                ("validation.every", v.every),
                ("validation.batch_size", v.batch_size),
                ("validation.query_max_length", v.query_max_length),
                ("validation.document_max_length", v.document_max_length),
            ]);
        }
        if let Some((field, _)) = at_least_one.into_iter().find(|(_, value)| *value == 0) {
            return Err((field, "must be at least 1, got 0".into()));
        }
        if !r.batch_size.is_multiple_of(r.accumulation) {
            let message = format!(
                "must divide batch_size {}, got {}",
                r.batch_size, r.accumulation
            );
            return Err(("recipe.accumulation", message));
        }
        if r.warmup_steps > r.steps {
            let message = format!("must not exceed steps {}, got {}", r.steps, r.warmup_steps);
            return Err(("recipe.warmup_steps", message));
        }
        Ok(())
    }

    /// What each query is ranked against: hard negatives where nothing else is, one per line
    /// in MS MARCO's triple files.
    fn check_negatives(&self) -> Checked {
        let r = &self.recipe;
        if r.negatives == 0 && (r.batch_size / r.accumulation < 2 || !r.in_batch_negatives) {
            let message = "a query without in-batch negatives (in_batch_negatives = false, or a \
                           micro-batch of one) needs hard negatives to rank against";
            return Err(("recipe.negatives", message.into()));
        }
        if r.negatives == 0 && r.document_flops == DocumentFlops::PositivesNegatives {
            let message =
                "\"positives-negatives\" needs hard negatives; use \"all\" with negatives = 0";
            return Err(("recipe.document_flops", message.into()));
        }
        if r.negatives != 1 && !self.data.any_negatives() {
            let message = format!(
                "MS MARCO triple files have one negative per line; use the jsonl format or \
                 scored candidates (pickle-scores, parquet-margins) for {} negatives",
                r.negatives
            );
            return Err(("recipe.negatives", message));
        }
        Ok(())
    }

    /// Something to learn from: the contrastive loss, or distillation from data with scores.
    fn check_objective(&self) -> Checked {
        let r = &self.recipe;
        if r.precision == Precision::Bf16 {
            let message = "bf16 (bf16 operands in a CPU BLAS's products) is for encoding and \
                           evaluation; training takes f32 or bf16-mixed";
            return Err(("recipe.precision", message.into()));
        }
        if !r.distillation.distils() && r.contrastive_weight == 0.0 {
            let message = "with contrastive_weight = 0 the ranking loss is distillation alone; \
                           choose [recipe.distillation] loss = \"margin-mse\" or \"kl-div\"";
            return Err(("recipe.distillation.loss", message.into()));
        }
        if r.distillation.distils() && !self.data.has_teacher() {
            let message = "distillation needs a teacher's scores: [data] format \
                           \"distil-triples\", \"pickle-scores\" or \"parquet-margins\"";
            return Err(("recipe.distillation.loss", message.into()));
        }
        if r.distillation.distils() && r.negatives == 0 {
            let message = "distillation compares each positive with its negatives; needs ≥ 1";
            return Err(("recipe.negatives", message.into()));
        }
        Ok(())
    }
}

/// A setting's field and what is wrong with it.
type Checked = std::result::Result<(), (&'static str, String)>;

/// The recipe's real numbers within their ranges.
fn check_numbers(r: &Recipe) -> Checked {
    for (field, value) in [("recipe.lr", r.lr), ("recipe.eps", r.eps)] {
        if !value.is_finite() || value <= 0.0 {
            return Err((field, format!("must be finite and > 0, got {value}")));
        }
    }
    if let Distillation::KlDiv { temperature, .. } = r.distillation
        && (!temperature.is_finite() || temperature <= 0.0)
    {
        let message = format!("must be finite and > 0, got {temperature}");
        return Err(("recipe.distillation.temperature", message));
    }
    let non_negative = [
        ("recipe.contrastive_weight", r.contrastive_weight),
        ("recipe.distillation.weight", r.distillation.weight()),
        ("recipe.weight_decay", r.weight_decay),
        ("recipe.lambda_q", r.lambda_q),
        ("recipe.lambda_d", r.lambda_d),
    ];
    for (field, value) in non_negative {
        if !value.is_finite() || value < 0.0 {
            return Err((field, format!("must be finite and ≥ 0, got {value}")));
        }
    }
    if !(r.dense_fraction > 0.0 && r.dense_fraction <= 1.0) {
        let message = format!("must be in (0, 1], got {}", r.dense_fraction);
        return Err(("recipe.dense_fraction", message));
    }
    for (field, value) in [("recipe.beta1", r.beta1), ("recipe.beta2", r.beta2)] {
        if !(0.0..1.0).contains(&value) {
            return Err((field, format!("must be in [0, 1), got {value}")));
        }
    }
    if let Some(norm) = r.max_grad_norm
        && (!norm.is_finite() || norm <= 0.0)
    {
        return Err((
            "recipe.max_grad_norm",
            format!("must be finite and > 0, got {norm}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CELL: &str = r#"
output = "results/test/bert-k1"

[model]
checkpoint = "data/fixtures/bert"
k = 1.0

[data]
format = "triples"
triples = "triples.tsv"

[recipe]
steps = 10
batch_size = 4
warmup_steps = 2
"#;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn reads_a_cell_with_recipe_defaults_and_overrides() {
        let file = write(CELL);
        let config = TrainConfig::load(file.path(), &[]).unwrap();
        assert_eq!(config.recipe.steps, 10);
        assert_eq!(config.recipe.eps, 1e-6);
        let overridden = TrainConfig::load(
            file.path(),
            &[
                "recipe.lr=1e-3".into(),
                "model.k=16".into(),
                "device=flex".into(),
            ],
        )
        .unwrap();
        assert_eq!(overridden.recipe.lr, 1e-3);
        assert_eq!(overridden.model.k.get(), 16.0);
        assert_eq!(overridden.device.as_deref(), Some("flex"));
        // The resolved TOML reads back to the same config.
        let again: TrainConfig = toml::from_str(&overridden.to_toml()).unwrap();
        assert_eq!(again, overridden);
    }

    #[test]
    fn teacher_formats_take_any_negatives_and_distillation() {
        let file = write(&CELL.replace(
            "format = \"triples\"\ntriples = \"triples.tsv\"",
            "format = \"pickle-scores\"\nscores = \"s.pkl.gz\"\nqrels = \"q.tsv\"\n\
             queries = \"queries.tsv\"\ncollection = \"c.tsv\"",
        ));
        let sets = [
            "recipe.negatives=4",
            "recipe.distillation.loss=margin-mse",
            "recipe.contrastive_weight=0",
        ];
        let config = TrainConfig::load(file.path(), &sets.map(String::from)).unwrap();
        assert_eq!(
            config.recipe.distillation,
            Distillation::MarginMse { weight: 1.0 }
        );
        assert_eq!(config.data.files().len(), 4);
        let none = [
            "recipe.distillation.loss=kl-div",
            "recipe.negatives=0",
            "recipe.document_flops=all",
        ]
        .map(String::from);
        let message = TrainConfig::load(file.path(), &none)
            .unwrap_err()
            .to_string();
        assert!(message.contains("recipe.negatives"), "{message}");
    }

    /// A distillation key the loss does not take is an error naming it, in a file (with its
    /// line) and through --set; a loss's keys default as naver/splade's.
    #[test]
    fn distillation_keys_that_do_not_apply_are_refused() {
        let teacher = CELL.replace(
            "format = \"triples\"\ntriples = \"triples.tsv\"",
            "format = \"distil-triples\"\ntriples = \"t.tsv\"",
        );
        let with = |table: &str| write(&format!("{teacher}\n[recipe.distillation]\n{table}\n"));
        let file = with("loss = \"margin-mse\"\ntemperature = 2.0");
        let message = TrainConfig::load(file.path(), &[]).unwrap_err().to_string();
        assert!(
            message.contains("temperature") && message.contains("line 17"),
            "{message}"
        );
        let file = with("loss = \"none\"\nweight = 0.5");
        let message = TrainConfig::load(file.path(), &[]).unwrap_err().to_string();
        assert!(message.contains("weight"), "{message}");
        let file = with("loss = \"kl-div\"");
        let config = TrainConfig::load(file.path(), &[]).unwrap();
        let expected = Distillation::KlDiv {
            weight: 1.0,
            temperature: 1.0,
        };
        assert_eq!(config.recipe.distillation, expected);
        let sets = ["recipe.distillation.loss=margin-mse".into()];
        let switched = TrainConfig::load(file.path(), &sets).unwrap();
        let margin_mse = Distillation::MarginMse { weight: 1.0 };
        assert_eq!(switched.recipe.distillation, margin_mse);
        let file = with("loss = \"kl-div\"\ntemperature = 2.0");
        let message = TrainConfig::load(file.path(), &sets)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("recipe.distillation") && message.contains("temperature"),
            "{message}"
        );
    }

    #[test]
    fn unknown_keys_name_their_line() {
        let file = write(&CELL.replace("warmup_steps = 2", "warmup_step = 2"));
        let message = TrainConfig::load(file.path(), &[]).unwrap_err().to_string();
        assert!(
            message.contains("warmup_step") && message.contains("line 15"),
            "{message}"
        );
    }

    #[test]
    fn out_of_range_values_name_the_field() {
        let file = write(CELL);
        for (assignment, field) in [
            ("recipe.batch_size=0", "recipe.batch_size"),
            ("recipe.lr=-1e-5", "recipe.lr"),
            ("model.k=0", "model.k"),
            ("model.k=-2", "model.k"),
            ("recipe.beta2=1.0", "recipe.beta2"),
            ("recipe.warmup_steps=11", "recipe.warmup_steps"),
            ("recipe.accumulation=3", "recipe.accumulation"),
            ("recipe.negatives=4", "recipe.negatives"),
            ("recipe.max_grad_norm=0", "recipe.max_grad_norm"),
            (
                "recipe.distillation={loss=\"kl-div\",temperature=0}",
                "recipe.distillation.temperature",
            ),
            (
                "recipe.distillation={loss=\"margin-mse\",weight=-1}",
                "recipe.distillation.weight",
            ),
            ("recipe.contrastive_weight=nan", "recipe.contrastive_weight"),
            // Triples carry no teacher scores.
            (
                "recipe.distillation.loss=kl-div",
                "recipe.distillation.loss",
            ),
            ("recipe.contrastive_weight=0", "recipe.distillation.loss"),
            ("recipe.batching=gradcache", "recipe.batching"),
        ] {
            let message = TrainConfig::load(file.path(), &[assignment.into()])
                .unwrap_err()
                .to_string();
            assert!(message.contains(field), "{assignment}: {message}");
        }
        let cached = TrainConfig::load(
            file.path(),
            &[
                "recipe.batching=cached".into(),
                "recipe.accumulation=2".into(),
            ],
        )
        .unwrap();
        assert_eq!(cached.recipe.batching, Batching::Cached);
        let typed = TrainConfig::load(file.path(), &["recipe.steps=ten".into()]).unwrap_err();
        assert!(typed.to_string().contains("recipe.steps"), "{typed}");
        let malformed = TrainConfig::load(file.path(), &["recipe.steps".into()]).unwrap_err();
        assert!(malformed.to_string().contains("KEY=VALUE"), "{malformed}");
    }
}
