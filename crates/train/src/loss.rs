//! The SPLADE training objective on pooled sparse representations.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;

use crate::config::Regularizer;

/// The terms of one batch's loss (each a one-element tensor, on the autodiff graph).
#[derive(Clone, Debug)]
pub struct LossTerms {
    /// `ranking + λ_q·query_regularizer + λ_d·document_flops`.
    pub total: Tensor<1>,
    pub ranking: Tensor<1>,
    pub query_regularizer: Tensor<1>,
    pub document_flops: Tensor<1>,
    /// Scores of each query with its positive, `[B]`, and with its hard negatives, `[B, n]`.
    pub positive_scores: Tensor<1>,
    pub negative_scores: Tensor<2>,
}

/// `queries` `[B, V]`; `documents` `[B·(1+n), V]`: the B positives, then query 0's n
/// negatives, query 1's, … Ranking loss: InfoNCE with temperature 1 over the raw dot products
/// of each query with every positive of the batch and its own n negatives (naver/splade's
/// `InBatchPairwiseNLL` for n = 1). Regularisers: FLOPS `Σ_j (mean_i |w_ij|)²` over all
/// documents of the batch, and FLOPS or L1 over the queries.
pub fn splade_loss(
    queries: Tensor<2>,
    documents: Tensor<2>,
    negatives: usize,
    lambda_q: f64,
    lambda_d: f64,
    query_regularizer: Regularizer,
) -> LossTerms {
    let [batch, vocab] = queries.dims();
    let device = queries.device();
    let positives = documents.clone().slice_dim(0, 0..batch);
    let in_batch = queries.clone().matmul(positives.transpose());
    let mut logits = in_batch.clone();
    let negative_scores = if negatives > 0 {
        let hard = documents
            .clone()
            .slice_dim(0, batch..batch * (1 + negatives))
            .reshape([batch, negatives, vocab]);
        let scores = (queries.clone().unsqueeze_dim::<3>(1) * hard)
            .sum_dim(2)
            .squeeze_dim::<2>(2);
        logits = Tensor::cat(vec![logits, scores.clone()], 1);
        scores
    } else {
        Tensor::zeros([batch, 0], &device)
    };
    let targets = Tensor::<1, Int>::arange(0..batch as i64, &device).unsqueeze_dim::<2>(1);
    let log_probabilities = log_softmax(logits, 1).gather(1, targets.clone());
    let ranking = log_probabilities.mean().neg();
    let positive_scores = in_batch.gather(1, targets).reshape([batch]);

    let query_term = match query_regularizer {
        Regularizer::Flops => flops(queries),
        Regularizer::L1 => queries.abs().sum_dim(1).mean(),
    };
    let document_flops = flops(documents);
    let total = ranking.clone()
        + query_term.clone().mul_scalar(lambda_q)
        + document_flops.clone().mul_scalar(lambda_d);
    LossTerms {
        total,
        ranking,
        query_regularizer: query_term,
        document_flops,
        positive_scores,
        negative_scores,
    }
}

/// `Σ_j (mean_i |w_ij|)²`, the smooth relaxation of the expected number of multiplications.
pub fn flops(representations: Tensor<2>) -> Tensor<1> {
    representations.abs().mean_dim(0).square().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(values: &[f32], shape: [usize; 2]) -> Tensor<2> {
        Tensor::from_data(TensorData::new(values.to_vec(), shape), &Device::flex())
    }

    fn scalar(t: Tensor<1>) -> f64 {
        t.into_scalar::<f32>().to_f64()
    }

    #[test]
    fn matches_a_hand_computed_batch() {
        // Two queries, vocabulary 3; documents: positives p0, p1 then negatives n0, n1.
        let q = tensor(&[1.0, 0.0, 2.0, 0.0, 1.0, 0.0], [2, 3]);
        let d = tensor(
            &[1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 3.0, 0.0, 0.0],
            [4, 3],
        );
        let terms = splade_loss(q, d, 1, 0.5, 0.25, Regularizer::Flops);
        // Query 0 scores: p0 = 3, p1 = 0, n0 = 0. Query 1: p0 = 0, p1 = 2, n1 = 0.
        let nll0 = -(3.0f64 - (3.0f64.exp() + 1.0 + 1.0).ln());
        let nll1 = -(2.0f64 - (1.0 + 2.0f64.exp() + 1.0).ln());
        let ranking = (nll0 + nll1) / 2.0;
        // FLOPS(q): column means 0.5, 0.5, 1 → 0.25 + 0.25 + 1.
        let flops_q = 1.5;
        // FLOPS(d): column means 1, 0.75, 0.25.
        let flops_d = 1.0 + 0.5625 + 0.0625;
        assert!((scalar(terms.ranking) - ranking).abs() < 1e-6);
        assert!((scalar(terms.query_regularizer) - flops_q).abs() < 1e-6);
        assert!((scalar(terms.document_flops) - flops_d).abs() < 1e-6);
        let total = ranking + 0.5 * flops_q + 0.25 * flops_d;
        assert!((scalar(terms.total) - total).abs() < 1e-6);
        let positives: Vec<f32> = terms.positive_scores.into_data().try_into_vec().unwrap();
        assert_eq!(positives, vec![3.0, 2.0]);
    }

    #[test]
    fn l1_sums_terms_and_averages_queries() {
        let q = tensor(&[1.0, 0.0, 2.0, 0.0, 1.0, 0.0], [2, 3]);
        let d = tensor(&[1.0, 0.0, 1.0, 0.0, 2.0, 0.0], [2, 3]);
        let terms = splade_loss(q, d, 0, 1.0, 0.0, Regularizer::L1);
        assert!((scalar(terms.query_regularizer) - 2.0).abs() < 1e-6);
        assert_eq!(terms.negative_scores.dims(), [2, 0]);
    }
}
