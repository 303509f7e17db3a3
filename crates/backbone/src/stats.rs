//! Statistics of the MLM head that tell how large its outputs are before training: the
//! numbers a user reads to choose the rescaling factor k, and the head-norm rule that chooses
//! one from them (`lsr k suggest`).

use burn::prelude::*;
use serde::Serialize;

use lsr_files::KSuggestion;

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

/// The head-norm rule's anchor: the mean row norm of answerdotai/ModernBERT-base's tied decoder,
/// 2.553 (the paper, second-hand: `experiments/mini-models.toml`), divided by 16, the k at which
/// the paper reports ModernBERT's best BEIR-13 nDCG@10. It is the one documented pair of a real
/// head's norm and its best k; nothing here was fitted to the miniature.
pub const ANCHOR_ROW_NORM: f64 = 2.553 / 16.0;
pub const ANCHOR: &str = "ModernBERT-base decoder mean row norm 2.553 / its best k 16";

/// The paper's k grid, the default of `lsr k suggest`.
pub const PAPER_GRID: [f64; 5] = [1.0, 2.0, 4.0, 8.0, 16.0];

/// The head-norm rule: the k of `grid` that brings the decoder's mean row norm nearest to
/// `anchor` on a log scale (the rule assumes a head trains well at the anchor scale, as
/// ModernBERT's does at k = 16), ties to the smaller k. `grid` must be non-empty.
pub fn suggest_k(
    checkpoint: &str,
    row_norm_mean: f64,
    anchor: (f64, &str),
    grid: &[f64],
) -> KSuggestion {
    let exact_k = row_norm_mean / anchor.0;
    let k = lsr_files::probe::nearest_k(grid, exact_k);
    KSuggestion {
        checkpoint: checkpoint.to_string(),
        row_norm_mean,
        reference_row_norm: anchor.0,
        reference: anchor.1.to_string(),
        exact_k,
        grid: grid.to_vec(),
        k,
    }
}

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
            rescaled_k: model.rescaled.as_ref().map(|r| r.k.get()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn k(row_norm: f64, grid: &[f64]) -> f64 {
        suggest_k("c", row_norm, (ANCHOR_ROW_NORM, ANCHOR), grid).k
    }

    #[test]
    fn the_anchor_itself_gets_its_k_and_small_heads_get_none() {
        assert_eq!(k(2.553, &PAPER_GRID), 16.0);
        assert_eq!(k(ANCHOR_ROW_NORM, &PAPER_GRID), 1.0);
        assert_eq!(k(0.01, &PAPER_GRID), 1.0);
        assert_eq!(k(100.0, &PAPER_GRID), 16.0);
    }

    #[test]
    fn the_nearest_k_on_a_log_scale_wins_and_ties_go_to_the_smaller() {
        // log2 3 = 1.58 is nearer 2 = log2 4 than 1 = log2 2; log2 2.5 = 1.32 is nearer 1.
        assert_eq!(k(3.0 * ANCHOR_ROW_NORM, &PAPER_GRID), 4.0);
        assert_eq!(k(2.5 * ANCHOR_ROW_NORM, &PAPER_GRID), 2.0);
        // k = 1 exactly, as far from 0.5 as from 2 on a log scale.
        assert_eq!(suggest_k("c", 1.0, (1.0, "r"), &[2.0, 0.5]).k, 0.5);
        // Any grid, in any order.
        assert_eq!(k(3.0 * ANCHOR_ROW_NORM, &[16.0, 3.0, 1.0]), 3.0);
        let s = suggest_k("c", 1.0, (0.5, "r"), &[1.0, 2.0]);
        assert_eq!((s.exact_k, s.k), (2.0, 2.0));
    }
}
