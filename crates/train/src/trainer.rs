//! One optimiser step of SPLADE training, and the quantities logged about it.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::DType;
use lsr_backbone::MaskedLm;
use lsr_compute::launches::{self, Label, Region};
use lsr_compute::precision::{Copies, casting_from, casting_once};
use lsr_splade::encode_pooled;
use serde::{Deserialize, Serialize};

use crate::config::{Batching, Recipe};
use crate::data::TrainBatch;
use crate::loss::splade_loss;
use crate::optimizer::{FlatAdamW, FlatGradient};
use crate::schedule::{learning_rate, regularizer_weight};
use crate::validation::ValidationScores;

/// What one step did, as logged (`train.csv`). Losses and statistics are means over the
/// step's micro-batches. A step that is not logged computes only what every step needs (the
/// losses, which the loss has already reduced, and the L0s the collapse and density watches
/// read); its `flops`, scores and `max_activation` are NaN, as in a collapse row logged off the
/// recipe's `log_every`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StepMetrics {
    pub step: usize,
    pub lr: f64,
    pub loss: f64,
    pub ranking_loss: f64,
    /// The query regulariser (FLOPS or L1, as the recipe says), before λ_q.
    pub flops_q: f64,
    pub flops_d: f64,
    pub lambda_q: f64,
    pub lambda_d: f64,
    /// Mean number of non-zero terms per query / document.
    pub l0_q: f64,
    pub l0_d: f64,
    /// The FLOPs of retrieval the batch implies, `Σ_j p_q(j)·p_d(j)` with `p(j)` the share of its
    /// queries (documents) that have term j: the evaluation's FLOPs formula on this batch.
    pub flops: f64,
    pub positive_score: f64,
    pub negative_score: f64,
    /// Largest weight of any query or document term.
    pub max_activation: f64,
    /// Global L2 norm of the gradient, before clipping.
    pub grad_norm: f64,
    /// Consecutive steps, through this one, whose mean query or document L0 exceeded the
    /// recipe's `dense_fraction` of the vocabulary (set by the run, which keeps the count).
    pub dense_steps: usize,
    /// The validation pass taken after this step, if one was.
    pub validation: Option<ValidationScores>,
    pub seconds: f64,
}

/// The model being trained, its optimiser and the step count.
pub struct Trainer {
    /// Its trainable parameters are views of the optimiser's flat master: replace it only with
    /// [`Trainer::restore`].
    pub model: MaskedLm,
    pub optimizer: FlatAdamW,
    pub recipe: Recipe,
    /// Steps taken so far.
    pub step: usize,
}

impl Trainer {
    /// `model` must live on an autodiff device and already carry the rescaled head; it computes
    /// in the recipe's precision from here on.
    pub fn new(model: MaskedLm, recipe: Recipe) -> Self {
        let (optimizer, model) = FlatAdamW::adopt(model.with_precision(recipe.precision), &recipe);
        Self {
            model,
            optimizer,
            recipe,
            step: 0,
        }
    }

    /// Continues from `step` with `model` and `optimizer` as a checkpoint restored them.
    pub fn restore(&mut self, (optimizer, model): (FlatAdamW, MaskedLm), step: usize) {
        self.model = model.with_precision(self.recipe.precision);
        self.optimizer = optimizer;
        self.step = step;
    }

    /// One optimiser step over `micro_batches` (the recipe's `accumulation` of them); `logged`:
    /// whether its metrics are all computed (see [`StepMetrics`]).
    pub fn step(&mut self, micro_batches: &[TrainBatch], logged: bool) -> StepMetrics {
        let started = std::time::Instant::now();
        let t = self.step + 1;
        let r = &self.recipe;
        let lr = learning_rate(r.lr, t, r.warmup_steps, r.steps, r.lr_warmup);
        let lambda_q = regularizer_weight(r.lambda_q, t, r.lambda_warmup_steps);
        let lambda_d = regularizer_weight(r.lambda_d, t, r.lambda_warmup_steps);
        let (mut gradient, sums) = self.gradients(micro_batches, (lambda_q, lambda_d), logged);
        let r = &self.recipe;
        let device = self.model.device();
        launches::enter(&device, Label::forward(Region::GradientNorm));
        let grad_norm = (gradient.square_sum()).into_scalar::<f32>().to_f64().sqrt();
        if let Some(max_norm) = r.max_grad_norm
            && grad_norm > max_norm
        {
            // torch.nn.utils.clip_grad_norm_'s factor.
            gradient = gradient.mul_scalar(max_norm / (grad_norm + 1e-6));
        }
        launches::enter(&device, Label::forward(Region::Optimizer));
        self.model = self.optimizer.step(lr, self.model.clone(), gradient);
        self.step = t;
        let [
            loss,
            ranking_loss,
            flops_q,
            flops_d,
            l0_q,
            l0_d,
            flops,
            positive_score,
            negative_score,
            max_activation,
        ] = sums;
        StepMetrics {
            step: t,
            lr,
            loss,
            ranking_loss,
            flops_q,
            flops_d,
            lambda_q,
            lambda_d,
            l0_q,
            l0_d,
            flops,
            positive_score,
            negative_score,
            max_activation,
            grad_norm,
            dense_steps: 0,
            validation: None,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// The gradient of the step's loss over `micro_batches`, with the values it logs (means
    /// over the batch), as the recipe's `batching` combines the micro-batches; `lambdas` are
    /// the step's (λ_q, λ_d); `logged` as in [`step`](Self::step).
    pub fn gradients(
        &self,
        micro_batches: &[TrainBatch],
        lambdas: (f64, f64),
        logged: bool,
    ) -> (FlatGradient, [f64; MONITORED]) {
        match self.recipe.batching {
            Batching::Accumulation => self.accumulated(micro_batches, lambdas, logged),
            Batching::Cached => self.cached(micro_batches, lambdas, logged),
        }
    }

    /// Each micro-batch's loss on its own, their gradients averaged.
    fn accumulated(
        &self,
        micro_batches: &[TrainBatch],
        lambdas: (f64, f64),
        logged: bool,
    ) -> (FlatGradient, [f64; MONITORED]) {
        let count = micro_batches.len() as f64;
        let copies = self.copies();
        let mut total = None;
        let mut sums = [0.0f64; MONITORED];
        for batch in micro_batches {
            let tracked = copies.as_ref().map(Copies::tracked);
            let (queries, documents) = self.encode(&self.model, batch, tracked.as_ref());
            let device = queries.device();
            launches::enter(&device, Label::forward(Region::Loss));
            let teacher = batch.teacher_tensor(&device);
            let terms = splade_loss(
                queries.clone(),
                documents.clone(),
                teacher,
                &self.recipe,
                lambdas,
            );
            let monitored = monitor(&terms, &queries, &documents, logged);
            backward_starts(&device);
            let loss = terms.total.div_scalar(count);
            accumulate(&mut total, self.backward(loss, tracked.as_ref()));
            for (sum, value) in sums.iter_mut().zip(monitored) {
                *sum += value / count;
            }
        }
        (total.expect("a micro-batch"), sums)
    }

    /// Gradient caching: every micro-batch's representations without the graph, the loss over
    /// the whole batch and its gradient with respect to them, then each micro-batch again with
    /// the graph (its dropout masks drawn again from the same seed), back-propagating its rows
    /// of that gradient. The gradient is the whole batch's, in the memory of one micro-batch's
    /// graph and the batch's representations.
    fn cached(
        &self,
        micro_batches: &[TrainBatch],
        lambdas: (f64, f64),
        logged: bool,
    ) -> (FlatGradient, [f64; MONITORED]) {
        let untracked = self.model.clone().no_grad();
        let copies = self.copies();
        let representations: Vec<(Tensor<2>, Tensor<2>)> = (micro_batches.iter())
            .map(|batch| self.encode(&untracked, batch, copies.as_ref()))
            .collect();
        let layout = WholeBatch::of(micro_batches, self.recipe.negatives);
        let (queries, documents) = layout.join(representations);
        let queries = queries.detach().require_grad();
        let documents = documents.detach().require_grad();
        let device = queries.device();
        launches::enter(&device, Label::forward(Region::Loss));
        let teacher = TrainBatch::joined_teacher(micro_batches, &device);
        let terms = splade_loss(
            queries.clone(),
            documents.clone(),
            teacher,
            &self.recipe,
            lambdas,
        );
        let monitored = monitor(&terms, &queries, &documents, logged);
        backward_starts(&device);
        let gradients = terms.total.backward();
        let query_gradient = queries.grad(&gradients).expect("queries require grad");
        let document_gradient = documents.grad(&gradients).expect("documents require grad");
        let mut total = None;
        for (index, batch) in micro_batches.iter().enumerate() {
            let tracked = copies.as_ref().map(Copies::tracked);
            let (queries, documents) = self.encode(&self.model, batch, tracked.as_ref());
            let (query_rows, document_rows) =
                layout.rows(index, query_gradient.clone(), document_gradient.clone());
            let surrogate = (queries * query_rows.autodiff()).sum()
                + (documents * document_rows.autodiff()).sum();
            backward_starts(&device);
            accumulate(&mut total, self.backward(surrogate, tracked.as_ref()));
        }
        (total.expect("a micro-batch"), monitored)
    }

    /// The step's compute-dtype copies of the parameters, one cast of the optimiser's flat
    /// master for all its micro-batches; none in f32, where the parameters are used as they are.
    pub(crate) fn copies(&self) -> Option<Copies> {
        let dtype = self.recipe.precision.compute();
        (dtype != DType::F32).then(|| {
            launches::enter(&self.model.device(), Label::forward(Region::Optimizer));
            self.optimizer.copies(dtype)
        })
    }

    /// SPLADE vectors of a micro-batch's queries and documents under `model`, its dropout masks
    /// drawn from the seed of its place in the data; both use one compute-dtype copy of each
    /// weight: `copies`' (tracked where `model` is), or else one cast at its first use.
    pub(crate) fn encode(
        &self,
        model: &MaskedLm,
        batch: &TrainBatch,
        copies: Option<&Copies>,
    ) -> (Tensor<2>, Tensor<2>) {
        let device = model.device();
        lsr_compute::dropout::seed(&device, dropout_seed(self.recipe.seed, batch.index));
        let encode = || {
            let (query_ids, query_mask) = batch.queries.to_tensors(&device);
            let queries = encode_pooled(model, query_ids, query_mask);
            let (doc_ids, doc_mask) = batch.documents.to_tensors(&device);
            (queries, encode_pooled(model, doc_ids, doc_mask))
        };
        match copies {
            Some(copies) => casting_from(copies, encode),
            None => casting_once(encode),
        }
    }

    /// The gradient of `loss` for the model's parameters, laid out as the optimiser's buffers,
    /// the uses of the `copies` it was computed with included.
    pub(crate) fn backward(&self, loss: Tensor<1>, copies: Option<&Copies>) -> FlatGradient {
        let device = loss.device();
        let gradients = loss.backward();
        launches::enter(&device, Label::forward(Region::GradientNorm));
        self.optimizer.flat_gradient(&self.model, gradients, copies)
    }
}

/// Adds a micro-batch's gradient to the step's.
fn accumulate(total: &mut Option<FlatGradient>, gradient: FlatGradient) {
    *total = Some(match total.take() {
        Some(sum) => sum.add(gradient),
        None => gradient,
    });
}

/// Where each micro-batch's rows go in the whole batch: queries in order; documents as the
/// loss lays them out, every positive of the batch, then every query's negatives.
pub(crate) struct WholeBatch {
    /// Queries per micro-batch.
    sizes: Vec<usize>,
    negatives: usize,
}

impl WholeBatch {
    pub(crate) fn of(micro_batches: &[TrainBatch], negatives: usize) -> Self {
        let sizes = micro_batches.iter().map(|b| b.queries.batch).collect();
        Self { sizes, negatives }
    }

    fn starts(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.sizes.iter().scan(0, |start, &size| {
            let this = *start;
            *start += size;
            Some((this, size))
        })
    }

    /// The whole batch's queries `[B, V]` and documents `[B·(1+n), V]` from each micro-batch's.
    pub(crate) fn join(&self, parts: Vec<(Tensor<2>, Tensor<2>)>) -> (Tensor<2>, Tensor<2>) {
        let mut queries = Vec::new();
        let (mut positives, mut negatives) = (Vec::new(), Vec::new());
        for ((q, d), size) in parts.into_iter().zip(&self.sizes) {
            queries.push(q);
            positives.push(d.clone().slice_dim(0, 0..*size));
            if self.negatives > 0 {
                negatives.push(d.slice_dim(0, *size..size * (1 + self.negatives)));
            }
        }
        positives.extend(negatives);
        (Tensor::cat(queries, 0), Tensor::cat(positives, 0))
    }

    /// Micro-batch `index`'s rows of the whole batch's query and document tensors, in its own
    /// layout (its positives, then its negatives).
    fn rows(
        &self,
        index: usize,
        queries: Tensor<2>,
        documents: Tensor<2>,
    ) -> (Tensor<2>, Tensor<2>) {
        let total: usize = self.sizes.iter().sum();
        let (start, size) = self.starts().nth(index).expect("a micro-batch of the step");
        let n = self.negatives;
        let mut rows = vec![documents.clone().slice_dim(0, start..start + size)];
        if n > 0 {
            rows.push(documents.slice_dim(0, total + start * n..total + (start + size) * n));
        }
        (
            queries.slice_dim(0, start..start + size),
            Tensor::cat(rows, 0),
        )
    }
}

/// The seed of the dropout masks of micro-batch `index`: a function of the run's seed and the
/// data cursor alone, so a resumed run draws the masks an uninterrupted one would have.
fn dropout_seed(seed: u64, index: u64) -> u64 {
    let mut state = seed ^ crate::data::splitmix64(&mut index.clone());
    crate::data::splitmix64(&mut state)
}

/// Where a count of kernel launches (`lsr_compute::launches`) sees the backward pass start,
/// after the activations it keeps are all in place.
fn backward_starts(device: &Device) {
    launches::memory_point(device, "before-backward");
    launches::enter(device, Label::backward(Region::Loss));
}

/// How many values a step logs from its loss ([`monitor`]).
pub const MONITORED: usize = 10;

/// The logged values of one micro-batch, read from the device in one transfer; with `logged`
/// false only the losses and L0s, the rest NaN (two reductions in place of about a dozen).
fn monitor(
    terms: &crate::LossTerms,
    queries: &Tensor<2>,
    documents: &Tensor<2>,
    logged: bool,
) -> [f64; MONITORED] {
    launches::enter(&queries.device(), Label::forward(Region::Metrics));
    // 1 where a weight is positive (0 where NaN), as a mask fill, which fusion runs in the
    // comparison's kernel and the sum's (a cast of the comparison's bools ends a fused block).
    let present = |t: &Tensor<2>| {
        let t = t.clone().detach();
        t.zeros_like().mask_fill(t.greater_elem(0.0), 1.0)
    };
    // Each batch's count of non-zero weights (exact in f32 up to 2^24), per row once read.
    let non_zero = |t: &Tensor<2>| present(t).sum();
    let mut values = vec![
        terms.total.clone().detach(),
        terms.ranking.clone().detach(),
        terms.query_regularizer.clone().detach(),
        terms.document_flops.clone().detach(),
        non_zero(queries),
        non_zero(documents),
    ];
    if logged {
        let share = |t: &Tensor<2>| present(t).mean_dim(0);
        let negatives = terms.negative_scores.clone().detach();
        let negative_mean = if negatives.dims()[1] == 0 {
            Tensor::zeros([1], &negatives.device())
        } else {
            negatives.mean()
        };
        let max = (queries.clone().detach().max()).max_pair(documents.clone().detach().max());
        values.extend([
            (share(queries) * share(documents)).sum(),
            terms.positive_scores.clone().detach().mean(),
            negative_mean,
            max,
        ]);
    }
    let values: Vec<f32> = Tensor::cat(values, 0)
        .into_data()
        .convert::<f32>()
        .try_into_vec()
        .expect("f32 after conversion");
    let mut values: [f64; MONITORED] =
        std::array::from_fn(|i| values.get(i).map_or(f64::NAN, |&v| f64::from(v)));
    // The L0s (the fifth and sixth values) as means over rows, divided here: on the device a
    // division after a sum is a launch of its own.
    values[4] /= queries.dims()[0] as f64;
    values[5] /= documents.dims()[0] as f64;
    values
}

/// Whether every weight of `model` is finite: a collapsed run's model is exported only then.
pub fn weights_finite(model: &MaskedLm) -> bool {
    struct Finite(bool);
    impl ModuleVisitor for Finite {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0 = self.0 && param.val().is_finite().all().into_scalar::<bool>();
        }
    }
    let mut visitor = Finite(true);
    model.visit(&mut visitor);
    visitor.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The L0s are each batch's mean count of positive weights per row; a NaN weight is not
    /// counted, nor a zero.
    #[test]
    fn the_l0s_count_positive_weights_per_row() {
        let device = Device::flex();
        let rows = |values: Vec<f32>, cols: usize| {
            let n = values.len() / cols;
            Tensor::<2>::from_data(TensorData::new(values, [n, cols]), &device)
        };
        let queries = rows(vec![0.5, 0.0, 2.0, 0.0, 0.0, 1.0], 3);
        let documents = rows(vec![f32::NAN, 1.0, 0.0, 3.0, 0.25, 0.0, 0.0, 4.0, 1.0], 3);
        let scalar = || Tensor::<1>::zeros([1], &device);
        let terms = crate::LossTerms {
            total: scalar(),
            ranking: scalar(),
            contrastive: scalar(),
            distillation: scalar(),
            query_regularizer: scalar(),
            document_flops: scalar(),
            positive_scores: Tensor::zeros([2], &device),
            negative_scores: Tensor::zeros([2, 0], &device),
        };
        for logged in [false, true] {
            let values = monitor(&terms, &queries, &documents, logged);
            assert_eq!(values[4], 1.5, "(2 + 1) / 2 query rows");
            assert_eq!(values[5], 5.0 / 3.0, "(1 + 2 + 2) / 3 document rows");
        }
    }
}
