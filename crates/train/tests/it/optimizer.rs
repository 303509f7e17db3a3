//! The flat AdamW against what it replaced: burn's per-parameter optimiser step for step, and
//! the per-parameter checkpoint record (data/fixtures/checkpoint-per-parameter, written before
//! the flat buffer and before q, k and v were one product) read and written again.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{AdamWConfig, GradientsParams};
use burn::prelude::*;
use burn_pack::Reader;
use lsr_backbone::layers::split_qkv_in_record;
use lsr_backbone::reference::fixtures_dir;
use lsr_backbone::{MaskedLm, Scale};
use lsr_splade::encode_pooled;
use lsr_train::legacy;
use lsr_train::optimizer::FlatAdamW;
use lsr_train::{ModelSpec, Recipe, Trainer};

fn bert(device: &Device) -> MaskedLm {
    let spec = ModelSpec {
        checkpoint: fixtures_dir().join("bert").display().to_string(),
        k: Scale::ONE,
        untie: false,
    };
    spec.load_rescaled(device, 32, false).unwrap().1
}

/// Every parameter's bytes, in module order.
fn weights(model: &MaskedLm) -> Vec<Vec<u8>> {
    struct Bytes(Vec<Vec<u8>>);
    impl ModuleVisitor for Bytes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data().as_bytes().to_vec());
        }
    }
    let mut bytes = Bytes(Vec::new());
    model.visit(&mut bytes);
    bytes.0
}

/// A loss that reaches every parameter, on a batch that varies by step.
fn loss(model: &MaskedLm, step: usize) -> Tensor<1> {
    let device = model.device();
    let ids: Vec<i64> = (0..2 * 12)
        .map(|i| ((i * 7 + step * 3) % 90 + 5) as i64)
        .collect();
    let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, 12]), &device);
    let mask = Tensor::<2, Int>::ones([2, 12], &device);
    encode_pooled(model, ids, mask).square().sum()
}

/// Bit for bit burn's AdamW applied a parameter at a time, clipping included: each element goes
/// through the same operations, only once for the whole buffer.
#[test]
fn the_flat_step_is_burns_per_parameter_step() {
    let device = Device::flex().autodiff();
    let recipe = Recipe {
        weight_decay: 0.01,
        ..Recipe::default()
    };
    let (mut flat, mut flat_model) = FlatAdamW::adopt(bert(&device), &recipe);
    let mut burn_model = bert(&device);
    let mut per_parameter = AdamWConfig::new()
        .with_beta_1(recipe.beta1 as f32)
        .with_beta_2(recipe.beta2 as f32)
        .with_epsilon(recipe.eps as f32)
        .with_weight_decay(recipe.weight_decay as f32)
        .init();
    for step in 0..3 {
        let lr = 1e-3 * (step + 1) as f64;
        let factor = 0.5;
        let gradient = flat.flat_gradient(&flat_model, loss(&flat_model, step).backward(), None);
        flat_model = flat.step(lr, flat_model, gradient.mul_scalar(factor));
        let gradients =
            GradientsParams::from_grads(loss(&burn_model, step).backward(), &burn_model);
        let scaled = scale(&burn_model, gradients, factor);
        burn_model = per_parameter.step(lr, burn_model, scaled);
        assert!(
            weights(&flat_model) == weights(&burn_model),
            "step {step}: weights differ"
        );
    }
}

fn scale(model: &MaskedLm, mut gradients: GradientsParams, factor: f64) -> GradientsParams {
    struct Scale<'a>(&'a mut GradientsParams, f64);
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(gradient) = self.0.remove::<D>(param.id) {
                self.0.register(param.id, gradient.mul_scalar(self.1));
            }
        }
    }
    model.visit(&mut Scale(&mut gradients, factor));
    gradients
}

/// What a burnpack holds, by name: tensors (dtype, shape, parameter id, bytes), scalars and
/// metadata.
#[derive(Clone, Debug, PartialEq)]
struct Contents {
    tensors: BTreeMap<String, (String, Vec<usize>, Option<u64>, Vec<u8>)>,
    scalars: BTreeMap<String, String>,
    metadata: BTreeMap<String, String>,
}

fn contents(path: &Path) -> Contents {
    let reader = Reader::from_file(path).unwrap();
    let scalars = (reader.scalars().iter())
        .map(|(key, value)| (key.clone(), format!("{value:?}")))
        .collect();
    let metadata = reader.metadata().clone();
    let tensors = (reader.into_tensors().unwrap().into_iter())
        .map(|t| {
            let (name, dtype, shape, id, bytes) = t.into_parts().unwrap();
            (
                name,
                (format!("{dtype:?}"), shape.to_vec(), id, bytes.to_vec()),
            )
        })
        .collect();
    Contents {
        tensors,
        scalars,
        metadata,
    }
}

/// A per-parameter AdamW record as it reads with each block's query, key and value joined into
/// one parameter under the query's id: their moments concatenated, the key's and value's entries
/// gone.
fn with_qkv_joined(mut record: Contents) -> Contents {
    let paths: BTreeMap<String, u64> = (record.metadata.iter())
        .map(|(id, path)| (path.clone(), id.parse().unwrap()))
        .collect();
    for split in split_qkv_in_record(paths.keys().map(String::as_str)) {
        let ids = split.parts.each_ref().map(|p| paths[p]);
        for field in ["moment_1", "moment_2"] {
            let parts: Vec<TensorData> = (ids.iter())
                .map(|id| {
                    let (_, shape, _, bytes) = record
                        .tensors
                        .remove(&format!("{id}.momentum.{field}"))
                        .unwrap();
                    TensorData::from_bytes_vec(bytes, shape, burn::tensor::DType::F32)
                })
                .collect();
            let joined = legacy::concat(&parts, split.dim).unwrap();
            let entry = (
                "F32".into(),
                joined.shape().to_vec(),
                Some(ids[0]),
                joined.into_bytes().to_vec(),
            );
            record
                .tensors
                .insert(format!("{}.momentum.{field}", ids[0]), entry);
        }
        for id in &ids[1..] {
            record.metadata.remove(&id.to_string());
            record.scalars.remove(&format!("{id}.__rank"));
            record.scalars.remove(&format!("{id}.momentum.time"));
        }
        record.metadata.insert(ids[0].to_string(), split.path);
    }
    record
}

/// A checkpoint of the per-parameter optimiser with q, k and v apart, restored and saved again,
/// holds the same moments, step counts and module paths under the same names and parameter ids,
/// but for q | k | v, joined (its tensors may come in another order: burn wrote them in hash
/// order); and what the flat AdamW writes, it reads back unchanged.
#[test]
fn a_per_parameter_record_is_read_and_written_again_with_q_k_v_joined() {
    let device = Device::flex().autodiff();
    let checkpoint = fixtures_dir().join("checkpoint-per-parameter/step-00000005");
    let restore = |checkpoint: &Path| {
        let mut trainer = Trainer::new(bert(&device), Recipe::default());
        let state = lsr_train::checkpoint::restore(checkpoint, &mut trainer).unwrap();
        assert_eq!((state.step, trainer.step), (5, 5));
        trainer
    };
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("optimizer.bpk");
    restore(&checkpoint).optimizer.save(&saved).unwrap();
    let before = contents(&checkpoint.join("optimizer.bpk"));
    assert_eq!(
        before.tensors.len(),
        2 * 42,
        "the fixture's BERT has 42 parameters"
    );
    let after = contents(&saved);
    assert_eq!(
        after.tensors.len(),
        2 * (42 - 2 * 4),
        "two layers' q, k, v joined"
    );
    let expected = with_qkv_joined(before);
    assert!(expected.tensors == after.tensors, "tensors differ");
    assert_eq!(expected.scalars, after.scalars, "scalars differ");
    assert_eq!(expected.metadata, after.metadata, "metadata differ");

    let again = tempfile::tempdir().unwrap();
    let trainer = restore(&checkpoint);
    let state = lsr_train::checkpoint::RunState {
        step: 5,
        ..Default::default()
    };
    let written = lsr_train::checkpoint::save(again.path(), &trainer, &state, "", 1).unwrap();
    let resaved = dir.path().join("again.bpk");
    restore(&written).optimizer.save(&resaved).unwrap();
    assert!(
        contents(&resaved) == after,
        "the flat record did not read back unchanged"
    );
}
