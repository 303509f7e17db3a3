//! What the integration tests compare a cached step with, and nothing in the product uses
//! (feature `testing`, which lsr-train's own dev-dependency turns on): the gradients of the whole
//! batch at once, the gradient with the weights cast at their first use, and how far two
//! gradients lie apart.

use burn::prelude::*;

use crate::Trainer;
use crate::data::TrainBatch;
use crate::optimizer::FlatGradient;

/// The gradient gradient caching must equal: the loss over the whole batch from every
/// micro-batch's representations, computed with the graph kept for all of them at once (each
/// micro-batch's dropout drawn from its own seed, as the trainer draws it), one backward pass.
pub fn whole_batch_gradients(
    trainer: &Trainer,
    micro_batches: &[TrainBatch],
    lambdas: (f64, f64),
) -> FlatGradient {
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

/// The gradient of one micro-batch's loss with each parameter cast to the compute dtype at its
/// first use (as encoding casts), where the trainer's step takes its weights from one cast of
/// the flat master (`FlatAdamW::copies`) and gathers their gradients to cast them at once: the
/// gradient that must not change by it.
pub fn gradient_cast_at_first_use(
    trainer: &Trainer,
    batch: &TrainBatch,
    lambdas: (f64, f64),
) -> FlatGradient {
    let (queries, documents) = trainer.encode(&trainer.model, batch, None);
    let teacher = batch.teacher_tensor(&queries.device());
    let terms = crate::splade_loss(queries, documents, teacher, &trainer.recipe, lambdas);
    trainer.backward(terms.total, None)
}

/// `(largest |a − b|, largest |b|)` over every element of two gradients of one model.
pub fn gradient_deviation(a: &FlatGradient, b: &FlatGradient) -> (f64, f64) {
    let largest = |t: Tensor<1>| t.abs().max().into_scalar::<f32>().to_f64();
    (a.buffers.iter().zip(&b.buffers)).fold((0.0, 0.0), |(off, most), (a, b)| {
        let here = largest(a.clone() - b.clone());
        // NaN wins, where f64::max would drop it.
        let off = if here.is_nan() || off.is_nan() {
            f64::NAN
        } else {
            off.max(here)
        };
        (off, most.max(largest(b.clone())))
    })
}
