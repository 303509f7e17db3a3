//! The validator a cell's `[validation]` asks for: the model being trained, encoded and scored
//! on one named data set by `lsr-eval`'s pipeline (nDCG@10 over every judged query, FLOPs and
//! L0), each pass in a scratch directory; and training with it where a cell asks.

use burn::prelude::Device;
use lsr_backbone::{Backbone, MaskedLm, RescaleMode, Scale};
use lsr_data::Dataset;
use lsr_eval::Measure;
use lsr_eval::pipeline::{EvalSettings, evaluate_dataset};
use lsr_splade::SpladeEncoder;
use lsr_train::{Outcome, TrainConfig, ValidationConfig, ValidationScores, Validator};

use crate::error::{MatrixError, Result};

/// Retrieval depth of a pass: nDCG@10 needs no more.
const TOP_K: usize = 100;

/// Trains `config`, validating as its `[validation]` says (if it has one).
pub fn train(config: &TrainConfig, resume: bool) -> Result<Outcome> {
    train_until(config, resume, config.recipe.steps)
}

/// As [`train`], ending the run after step `stop_at` with a checkpoint and a validation pass
/// there (`lsr_train::train_validated_until`).
pub fn train_until(config: &TrainConfig, resume: bool, stop_at: usize) -> Result<Outcome> {
    let mut validator = DatasetValidator::open(config)?;
    let validator = validator.as_mut().map(|v| v as &mut dyn Validator);
    Ok(lsr_train::train_validated_until(
        config, resume, validator, stop_at,
    )?)
}

/// The one data set `[validation]` names, with its files under its data root.
pub fn validation_set(spec: &ValidationConfig) -> Result<Dataset> {
    let mut sets = Dataset::resolve(&spec.dataset, &spec.data_root)?;
    if sets.len() != 1 {
        return Err(MatrixError::Validation(format!(
            "validation.dataset `{}` is a group of {} sets; name one",
            spec.dataset,
            sets.len()
        )));
    }
    Ok(sets.remove(0))
}

pub struct DatasetValidator {
    /// The checkpoint's tokenizer and an encoder whose model each pass replaces.
    encoder: SpladeEncoder,
    dataset: Dataset,
    settings: EvalSettings,
}

impl DatasetValidator {
    /// The validator of `config`'s `[validation]`; the data set must be one set, present. The
    /// checkpoint is read on the host, for its tokenizer: each pass encodes with the model it
    /// is given, on that model's device, so the training device never holds a second copy.
    pub fn open(config: &TrainConfig) -> Result<Option<Self>> {
        let Some(spec) = &config.validation else {
            return Ok(None);
        };
        let dataset = validation_set(spec)?;
        let max_length = spec.query_max_length.max(spec.document_max_length);
        let backbone = Backbone::load(&config.model.checkpoint, &Device::flex(), max_length)?;
        Ok(Some(Self {
            encoder: SpladeEncoder::new(backbone, Scale::ONE, RescaleMode::Shared)?,
            dataset,
            settings: EvalSettings {
                batch_size: spec.batch_size,
                query_max_length: spec.query_max_length,
                document_max_length: spec.document_max_length,
                top_k: TOP_K,
                measures: Measure::parse_all(&["ndcg@10".to_string()])?,
                complete: true,
                quantize: None,
                // A pass is short, and a stop request is for the training loop to answer.
                shard_documents: None,
            },
        }))
    }
}

impl Validator for DatasetValidator {
    fn validate(&mut self, model: MaskedLm) -> std::result::Result<ValidationScores, String> {
        self.encoder.backbone.model = model;
        let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
        let report = evaluate_dataset(&self.encoder, &self.dataset, &self.settings, scratch.path())
            .map_err(|e| e.to_string())?;
        Ok(ValidationScores {
            // `+ 0.0`: a negative zero (no relevant document found) reads as 0.
            ndcg_at_10: report
                .summary
                .metrics
                .get("ndcg@10")
                .map_or(f64::NAN, |v| v + 0.0),
            l0_q: report.summary.sparsity.mean_query_l0,
            l0_d: report.summary.sparsity.mean_doc_l0,
            flops: report.summary.sparsity.flops,
        })
    }
}
