//! Gradient caching on flex: a step over 8 queries in 4 micro-batches, dropout on, has the
//! gradient of the whole batch's loss (in-batch negatives and FLOPS over all 8) within f32
//! bounds; accumulation, whose negatives and FLOPS are each micro-batch's, does not.
//! In bf16-mixed, within bf16 bounds; and a bf16-mixed step's gradient, its weights one cast of
//! the flat master, is the one a cast at each weight's first use gives.

use burn::prelude::*;
use lsr_backbone::Backbone;
use lsr_backbone::reference::fixtures_dir;
use lsr_compute::Precision;
use lsr_train::config::Batching;
use lsr_train::data::{BatchPlan, TrainBatch, TripleSource};
use lsr_train::testing::{gradient_cast_at_first_use, gradient_deviation, whole_batch_gradients};
use lsr_train::{DataConfig, Recipe, Trainer};

fn micro_batches(backbone: &Backbone, count: u64, size: usize) -> Vec<TrainBatch> {
    let source = TripleSource::open(&DataConfig::Triples {
        triples: fixtures_dir().join("train/triples.tsv"),
    })
    .unwrap();
    let plan = BatchPlan {
        micro_batch: size,
        negatives: 1,
        seed: 5,
        query_tokenizer: backbone.tokenizer.with_max_length(16).unwrap(),
        document_tokenizer: backbone.tokenizer.with_max_length(32).unwrap(),
    };
    let mut orders = Vec::new();
    (0..count)
        .map(|index| plan.batch(&source, index, &mut orders).unwrap())
        .collect()
}

/// BERT's fixture with dropout on, and 4 micro-batches of 2 queries.
fn bert_with_dropout() -> (Backbone, Vec<TrainBatch>) {
    let device = Device::flex().autodiff();
    let path = fixtures_dir().join("bert");
    let backbone = Backbone::load_with_dropout(path.to_str().unwrap(), &device, 64, true).unwrap();
    let batches = micro_batches(&backbone, 4, 2);
    (backbone, batches)
}

/// The step's (λ_q, λ_d).
const LAMBDAS: (f64, f64) = (0.3, 0.2);

/// A trainer of `backbone` over 8 queries in 4 micro-batches.
fn trainer(backbone: &Backbone, batching: Batching, precision: Precision) -> Trainer {
    let recipe = Recipe {
        batch_size: 8,
        accumulation: 4,
        batching,
        precision,
        ..Recipe::default()
    };
    Trainer::new(backbone.model.clone(), recipe)
}

#[test]
fn a_cached_step_has_the_whole_batch_gradient_with_dropout_on() {
    let _lock = crate::one_run_at_a_time();
    let (backbone, batches) = bert_with_dropout();
    let cached = trainer(&backbone, Batching::Cached, Precision::F32);
    let reference = whole_batch_gradients(&cached, &batches, LAMBDAS);
    let (gradients, _) = cached.gradients(&batches, LAMBDAS, true);
    let (off, largest) = gradient_deviation(&gradients, &reference);
    assert!(largest > 0.0);
    assert!(
        off <= 1e-5 * largest,
        "cached: off by {off:e} of {largest:e}"
    );

    let accumulated = trainer(&backbone, Batching::Accumulation, Precision::F32);
    let (gradients, _) = accumulated.gradients(&batches, LAMBDAS, true);
    let (off, largest) = gradient_deviation(&gradients, &reference);
    assert!(
        off > 1e-2 * largest,
        "accumulation: only {off:e} of {largest:e} off"
    );
}

/// In bf16-mixed every pass takes its weights from one cast of the flat master
/// (`FlatAdamW::copies`): the cached step still has the whole batch's gradient, to bf16's
/// rounding (its sums over the micro-batches are f32 where the whole batch's are bf16).
#[test]
fn a_cached_bf16_mixed_step_has_the_whole_batch_gradient() {
    let _lock = crate::one_run_at_a_time();
    let (backbone, batches) = bert_with_dropout();
    let cached = trainer(&backbone, Batching::Cached, Precision::Bf16Mixed);
    let reference = whole_batch_gradients(&cached, &batches, LAMBDAS);
    let (gradients, _) = cached.gradients(&batches, LAMBDAS, true);
    let (off, largest) = gradient_deviation(&gradients, &reference);
    assert!(largest > 0.0);
    assert!(
        // bf16's 8 significant bits: 2^-8 ≈ 3.9e-3 relative (3.1e-3 of the largest here).
        off <= 1e-2 * largest,
        "cached, bf16-mixed: off by {off:e} of {largest:e}"
    );
}

/// A bf16-mixed step takes its weights from one cast of the flat master and casts their
/// gradients gathered, a kernel per buffer: the gradient is the one of a cast at each weight's
/// first use. Bit for bit but for the tied word embeddings, whose three terms (the queries' and
/// the documents' lookups in f32, the head's bf16 copy) are added in another order: there the
/// last bit of f32 (2.4e-7 of 24 on this fixture).
#[test]
fn bf16_mixed_copies_gradients_cast_at_once_are_the_cast_at_first_use_gradient() {
    let _lock = crate::one_run_at_a_time();
    let (backbone, batches) = bert_with_dropout();
    let trainer = trainer(&backbone, Batching::Accumulation, Precision::Bf16Mixed);
    let (gathered, _) = trainer.gradients(&batches[..1], LAMBDAS, true);
    let cast = gradient_cast_at_first_use(&trainer, &batches[0], LAMBDAS);
    let (off, largest) = gradient_deviation(&gathered, &cast);
    assert!(largest > 0.0);
    assert!(
        off <= 4.0 * f64::from(f32::EPSILON) * largest,
        "off by {off:e} of {largest:e}"
    );
}
