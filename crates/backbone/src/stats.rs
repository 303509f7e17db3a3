//! Statistics of the MLM head that tell how large its outputs are before training: the
//! numbers a user reads to choose the rescaling factor k.

use burn::prelude::*;
use serde::Serialize;

use crate::error::Result;
use crate::model::Backbone;

/// Texts whose logits give the probe's logit scale. Plain English, so every family's
/// tokenizer produces ordinary tokens.
pub const PROBE_TEXTS: [&str; 4] = [
    "what is the capital of france",
    "The quick brown fox jumps over the lazy dog.",
    "sparse retrieval represents queries and documents as weighted bags of terms",
    "how long does it take to boil an egg",
];

#[derive(Clone, Debug, Serialize)]
pub struct HeadStats {
    pub checkpoint: String,
    pub family: String,
    pub tied: bool,
    pub vocab: usize,
    pub dim: usize,
    /// Per-row L2 norm of the decoder matrix `[vocab, dim]`.
    pub row_norm_mean: f64,
    pub row_norm_min: f64,
    pub row_norm_max: f64,
    pub frobenius_norm: f64,
    pub bias_mean: f64,
    pub bias_std: f64,
    /// Over the non-padding tokens of the probe batch and the whole vocabulary.
    pub logit_mean: f64,
    pub logit_std: f64,
    pub logit_max: f64,
    /// Mean over probe texts of the largest SPLADE weight `max_t log(1 + relu(logit))`.
    pub probe_max_weight: f64,
    /// The k lsr divided this head by, as the checkpoint records it (an lsr export).
    pub rescaled_k: Option<f64>,
}

impl HeadStats {
    pub fn compute(backbone: &Backbone) -> Result<Self> {
        let model = &backbone.model;
        let decoder = model.decoder_matrix();
        let [vocab, dim] = decoder.dims();
        let row_norms = values(decoder.clone().square().sum_dim(1).sqrt());
        let frobenius = values(decoder.square().sum())
            .first()
            .copied()
            .unwrap_or(0.0)
            .sqrt();
        let bias = match &model.head.bias {
            Some(bias) => values(bias.val()),
            None => vec![0.0; vocab],
        };
        let (bias_mean, bias_std) = mean_std(&bias);

        let batch = backbone.tokenizer.encode_batch(&PROBE_TEXTS)?;
        let device = model.device();
        let (ids, mask) = batch.to_tensors(&device);
        let logits = values(model.forward(ids, mask));
        let mut token_logits = Vec::new();
        let mut max_weights = Vec::new();
        for b in 0..batch.batch {
            let mut best = 0.0f64;
            for t in 0..batch.len {
                if batch.mask[b * batch.len + t] == 1 {
                    let row = &logits[(b * batch.len + t) * vocab..][..vocab];
                    token_logits.extend_from_slice(row);
                    let top = row.iter().copied().fold(f64::MIN, f64::max);
                    best = best.max(top.max(0.0).ln_1p());
                }
            }
            max_weights.push(best);
        }
        let (logit_mean, logit_std) = mean_std(&token_logits);
        Ok(Self {
            checkpoint: backbone.checkpoint.name.clone(),
            family: backbone.config.family().to_string(),
            tied: model.is_tied(),
            vocab,
            dim,
            row_norm_mean: mean_std(&row_norms).0,
            row_norm_min: row_norms.iter().copied().fold(f64::INFINITY, f64::min),
            row_norm_max: row_norms.iter().copied().fold(0.0, f64::max),
            frobenius_norm: frobenius,
            bias_mean,
            bias_std,
            logit_mean,
            logit_std,
            logit_max: token_logits.iter().copied().fold(f64::MIN, f64::max),
            probe_max_weight: mean_std(&max_weights).0,
            rescaled_k: model.rescaled.as_ref().map(|r| r.k),
        })
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data()
        .convert::<f64>()
        .try_into_vec::<f64>()
        .expect("f64 after convert")
}

fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}
