//! What the integration tests compare a cached step with, and nothing in the product uses
//! (feature `testing`, which lsr-train's own dev-dependency turns on): the gradients of the whole
//! batch at once, and how far two sets of gradients lie apart.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use lsr_backbone::MaskedLm;

use crate::Trainer;
use crate::data::TrainBatch;

/// The gradient gradient caching must equal: the loss over the whole batch from every
/// micro-batch's representations, computed with the graph kept for all of them at once (each
/// micro-batch's dropout drawn from its own seed, as the trainer draws it), one backward pass.
pub fn whole_batch_gradients(
    trainer: &Trainer,
    micro_batches: &[TrainBatch],
    lambdas: (f64, f64),
) -> GradientsParams {
    let copies = trainer.copies().map(|copies| copies.tracked());
    let parts = (micro_batches.iter())
        .map(|batch| trainer.encode(&trainer.model, batch, copies.as_ref()))
        .collect();
    let layout = crate::trainer::WholeBatch::of(micro_batches, trainer.recipe.negatives);
    let (queries, documents) = layout.join(parts);
    let teacher = TrainBatch::joined_teacher(micro_batches, &queries.device());
    let terms = crate::splade_loss(queries, documents, teacher, &trainer.recipe, lambdas);
    trainer.backward(terms.total, copies.as_ref())
}

/// `(largest |a − b|, largest |b|)` over every parameter's gradient of `model`.
pub fn gradient_deviation(
    model: &MaskedLm,
    a: &GradientsParams,
    b: &GradientsParams,
) -> (f64, f64) {
    struct Compare<'a> {
        a: &'a GradientsParams,
        b: &'a GradientsParams,
        off: f64,
        largest: f64,
    }
    impl ModuleVisitor for Compare<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let (Some(a), Some(b)) = (self.a.get::<D>(param.id), self.b.get::<D>(param.id)) else {
                self.off = f64::INFINITY;
                return;
            };
            let off = (a - b.clone()).abs().max().into_scalar::<f32>().to_f64();
            let largest = b.abs().max().into_scalar::<f32>().to_f64();
            self.off = if off.is_nan() {
                f64::NAN
            } else {
                self.off.max(off)
            };
            self.largest = self.largest.max(largest);
        }
    }
    let mut compare = Compare {
        a,
        b,
        off: 0.0,
        largest: 0.0,
    };
    model.visit(&mut compare);
    (compare.off, compare.largest)
}
