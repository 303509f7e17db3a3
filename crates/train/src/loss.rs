//! The SPLADE training objective on pooled sparse representations: the contrastive loss,
//! distillation from a teacher's scores (MarginMSE, KL-Div), and the FLOPS regularisers.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;

use crate::config::{Distillation, DocumentFlops, Recipe, Regularizer};

/// The terms of one batch's loss (each a one-element tensor, on the autodiff graph).
#[derive(Clone, Debug)]
pub struct LossTerms {
    /// `ranking + λ_q·query_regularizer + λ_d·document_flops`.
    pub total: Tensor<1>,
    /// `contrastive_weight·contrastive + distillation.weight·distillation`.
    pub ranking: Tensor<1>,
    pub contrastive: Tensor<1>,
    /// Zero without distillation.
    pub distillation: Tensor<1>,
    pub query_regularizer: Tensor<1>,
    pub document_flops: Tensor<1>,
    /// Scores of each query with its positive, `[B]`, and with its hard negatives, `[B, n]`.
    pub positive_scores: Tensor<1>,
    pub negative_scores: Tensor<2>,
}

/// `queries` `[B, V]`; `documents` `[B·(1+n), V]`: the B positives, then query 0's n
/// negatives, query 1's, … `teacher` `[B, 1+n]`: the teacher's scores of each query's positive
/// and negatives, in that order (needed when the recipe distils). Contrastive loss: InfoNCE
/// with temperature 1 over the raw dot products of each query with its positive, its own n
/// negatives and, with `in_batch_negatives`, the other queries' positives (naver/splade's
/// `InBatchPairwiseNLL`; without: `PairwiseNLL`). Distillation: [`Distillation::loss`] over each
/// query's own positive and negatives. Regularisers, weighted by `lambdas` (q, d): FLOPS
/// `Σ_j (mean_i |w_ij|)²` over the documents as `document_flops` says, and FLOPS or L1 over the
/// queries.
pub fn splade_loss(
    queries: Tensor<2>,
    documents: Tensor<2>,
    teacher: Option<Tensor<2>>,
    recipe: &Recipe,
    (lambda_q, lambda_d): (f64, f64),
) -> LossTerms {
    let [batch, vocab] = queries.dims();
    let n = recipe.negatives;
    let positives = documents.clone().slice_dim(0, 0..batch);
    let negatives = documents.clone().slice_dim(0, batch..batch * (1 + n));
    let negative_scores = if n > 0 {
        (queries.clone().unsqueeze_dim::<3>(1) * negatives.clone().reshape([batch, n, vocab]))
            .sum_dim(2)
            .squeeze_dim::<2>(2)
    } else {
        Tensor::zeros([batch, 0], &queries.device())
    };
    let (positive_scores, contrastive) = ranking_loss(
        queries.clone(),
        positives.clone(),
        negative_scores.clone(),
        recipe.in_batch_negatives,
    );
    let student = Tensor::cat(
        vec![
            positive_scores.clone().unsqueeze_dim(1),
            negative_scores.clone(),
        ],
        1,
    );
    let distillation = recipe.distillation.loss(student, teacher);
    let ranking = contrastive.clone().mul_scalar(recipe.contrastive_weight)
        + distillation
            .clone()
            .mul_scalar(recipe.distillation.weight());
    let query_term = match recipe.query_regularizer {
        Regularizer::Flops => flops(queries),
        Regularizer::L1 => queries.abs().sum_dim(1).mean(),
    };
    let document_flops = match recipe.document_flops {
        DocumentFlops::All => flops(documents),
        DocumentFlops::PositivesNegatives => (flops(positives) + flops(negatives)).div_scalar(2.0),
    };
    let total = ranking.clone()
        + query_term.clone().mul_scalar(lambda_q)
        + document_flops.clone().mul_scalar(lambda_d);
    LossTerms {
        total,
        ranking,
        contrastive,
        distillation,
        query_regularizer: query_term,
        document_flops,
        positive_scores,
        negative_scores,
    }
}

/// Each query's positive score `[B]` and the mean negative log-likelihood of its positive
/// among its candidates: its own positive first (or the batch's positives, the query's own at
/// its index), then its hard negatives `[B, n]`.
fn ranking_loss(
    queries: Tensor<2>,
    positives: Tensor<2>,
    negative_scores: Tensor<2>,
    in_batch: bool,
) -> (Tensor<1>, Tensor<1>) {
    let batch = queries.dims()[0];
    let device = queries.device();
    let (candidates, targets) = if in_batch {
        let targets = Tensor::<1, Int>::arange(0..batch as i64, &device);
        (queries.matmul(positives.transpose()), targets)
    } else {
        let targets = Tensor::<1, Int>::zeros([batch], &device);
        ((queries * positives).sum_dim(1), targets)
    };
    let targets = targets.unsqueeze_dim::<2>(1);
    let positive_scores = candidates
        .clone()
        .gather(1, targets.clone())
        .reshape([batch]);
    let logits = if negative_scores.dims()[1] > 0 {
        Tensor::cat(vec![candidates, negative_scores], 1)
    } else {
        candidates
    };
    let ranking = log_softmax(logits, 1).gather(1, targets).mean().neg();
    (positive_scores, ranking)
}

impl Distillation {
    /// The distillation loss of `student` scores `[B, 1+n]` (each query's positive, then its
    /// negatives) against the `teacher`'s, as naver/splade and sentence-transformers compute it
    /// (zero without distillation): MarginMSE averages `((s⁺ − s⁻_j) − (t⁺ − t⁻_j))²` over the
    /// B·n margins (naver's `DistilMarginMSE` with n = 1); KL-Div is
    /// `T² · mean_i Σ_j p_ij (log p_ij − log q_ij)` with `p = softmax(t/T)`, `q = softmax(s/T)`
    /// (torch's `KLDivLoss` summed over candidates, averaged over queries: naver's `DistilKLLoss`
    /// at T = 1, sentence-transformers' `batchmean`).
    ///
    /// # Panics
    /// If the recipe distils and `teacher` is `None`: validation refuses such a config.
    pub fn loss(self, student: Tensor<2>, teacher: Option<Tensor<2>>) -> Tensor<1> {
        match (self, teacher) {
            (Self::None {}, _) => Tensor::zeros([1], &student.device()),
            (Self::MarginMse { .. }, Some(teacher)) => margin_mse(student, teacher.detach()),
            (Self::KlDiv { temperature, .. }, Some(teacher)) => {
                kl_div(student, teacher.detach(), temperature)
            }
            (_, None) => panic!("distillation needs the teacher's scores"),
        }
    }
}

fn margin_mse(student: Tensor<2>, teacher: Tensor<2>) -> Tensor<1> {
    let candidates = student.dims()[1];
    let margins = |scores: Tensor<2>| {
        let positive = scores.clone().slice_dim(1, 0..1);
        positive - scores.slice_dim(1, 1..candidates)
    };
    (margins(student) - margins(teacher)).square().mean()
}

fn kl_div(student: Tensor<2>, teacher: Tensor<2>, temperature: f64) -> Tensor<1> {
    let batch = student.dims()[0];
    let log_q = log_softmax(student.div_scalar(temperature), 1);
    // log p from log_softmax, so that a probability that underflows to 0 contributes
    // 0·(finite) = 0, as torch's xlogy does.
    let log_p = log_softmax(teacher.div_scalar(temperature), 1);
    let p = log_p.clone().exp();
    (p * (log_p - log_q))
        .sum()
        .div_scalar(batch as f64)
        .mul_scalar(temperature * temperature)
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

    fn recipe(in_batch_negatives: bool, document_flops: DocumentFlops) -> Recipe {
        Recipe {
            negatives: 1,
            in_batch_negatives,
            document_flops,
            ..Recipe::default()
        }
    }

    /// Two queries, vocabulary 3; documents: positives p0, p1 then negatives n0, n1.
    fn batch() -> (Tensor<2>, Tensor<2>) {
        let q = tensor(&[1.0, 0.0, 2.0, 0.0, 1.0, 0.0], [2, 3]);
        let d = tensor(
            &[1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 3.0, 0.0, 0.0],
            [4, 3],
        );
        (q, d)
    }

    #[test]
    fn matches_a_hand_computed_batch() {
        let (q, d) = batch();
        let terms = splade_loss(q, d, None, &recipe(true, DocumentFlops::All), (0.5, 0.25));
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
    fn naver_options_match_a_hand_computed_batch() {
        let (q, d) = batch();
        let options = recipe(false, DocumentFlops::PositivesNegatives);
        let terms = splade_loss(q, d, None, &options, (0.5, 0.25));
        // Without in-batch negatives each query sees its positive and its negative only:
        // query 0 (3 vs 0), query 1 (2 vs 0).
        let nll = |pos: f64, neg: f64| -(pos - (pos.exp() + neg.exp()).ln());
        let ranking = (nll(3.0, 0.0) + nll(2.0, 0.0)) / 2.0;
        // FLOPS(p0, p1): column means 0.5, 1, 0.5; FLOPS(n0, n1): 1.5, 0.5, 0.
        let flops_d = ((0.25 + 1.0 + 0.25) + (2.25 + 0.25)) / 2.0;
        assert!((scalar(terms.ranking) - ranking).abs() < 1e-6);
        assert!((scalar(terms.document_flops) - flops_d).abs() < 1e-6);
        let positives: Vec<f32> = terms.positive_scores.into_data().try_into_vec().unwrap();
        assert_eq!(positives, vec![3.0, 2.0]);
    }

    #[test]
    fn l1_sums_terms_and_averages_queries() {
        let q = tensor(&[1.0, 0.0, 2.0, 0.0, 1.0, 0.0], [2, 3]);
        let d = tensor(&[1.0, 0.0, 1.0, 0.0, 2.0, 0.0], [2, 3]);
        let options = Recipe {
            negatives: 0,
            query_regularizer: Regularizer::L1,
            document_flops: DocumentFlops::All,
            ..Recipe::default()
        };
        let terms = splade_loss(q, d, None, &options, (1.0, 0.0));
        assert!((scalar(terms.query_regularizer) - 2.0).abs() < 1e-6);
        assert_eq!(terms.negative_scores.dims(), [2, 0]);
    }
}
