//! One training step against PyTorch: `scripts/fixtures/train_step.py` took the same step
//! (rescale by k, SPLADE pooling, InfoNCE + FLOPS with λ warm-up, global-norm clipping, AdamW)
//! on the tiny BERT and ModernBERT fixtures and saved the loss terms and every updated weight.

use burn::prelude::*;
use lsr_backbone::reference::fixtures_dir;
use lsr_backbone::{Backbone, RescaleMode, TokenBatch, parameter_values};
use lsr_train::data::TrainBatch;
use lsr_train::{Recipe, Trainer};
use safetensors::SafeTensors;

fn values(tensors: &SafeTensors, name: &str) -> (Vec<usize>, Vec<f64>) {
    let view = tensors
        .tensor(name)
        .unwrap_or_else(|_| panic!("fixture has no `{name}`"));
    let bytes = view.data();
    let values = match view.dtype() {
        safetensors::Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        safetensors::Dtype::F64 => bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        safetensors::Dtype::I64 => bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        other => panic!("{name}: unexpected dtype {other:?}"),
    };
    (view.shape().to_vec(), values)
}

fn token_batch(tensors: &SafeTensors, prefix: &str) -> TokenBatch {
    let (shape, ids) = values(tensors, &format!("{prefix}_ids"));
    let (_, mask) = values(tensors, &format!("{prefix}_mask"));
    TokenBatch {
        ids: ids.iter().map(|&v| v as u32).collect(),
        mask: mask.iter().map(|&v| v as u32).collect(),
        batch: shape[0],
        len: shape[1],
    }
}

fn recipe(json: &serde_json::Value) -> Recipe {
    let number = |key: &str| {
        json[key]
            .as_f64()
            .unwrap_or_else(|| panic!("recipe.json: {key}"))
    };
    Recipe {
        steps: number("steps") as usize,
        batch_size: 3,
        negatives: 1,
        lr: number("lr"),
        warmup_steps: number("warmup_steps") as usize,
        beta1: number("beta1"),
        beta2: number("beta2"),
        eps: number("eps"),
        weight_decay: number("weight_decay"),
        lambda_q: number("lambda_q"),
        lambda_d: number("lambda_d"),
        lambda_warmup_steps: number("lambda_warmup_steps") as usize,
        max_grad_norm: Some(number("max_grad_norm")),
        ..Recipe::default()
    }
}

fn check(family: &str) {
    let dir = fixtures_dir().join("train-step");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("recipe.json")).unwrap()).unwrap();
    let bytes = std::fs::read(dir.join(format!("{family}.safetensors"))).unwrap();
    let expected = SafeTensors::deserialize(&bytes).unwrap();

    let device = Device::flex().autodiff();
    let checkpoint = fixtures_dir().join(family);
    let backbone = Backbone::load(checkpoint.to_str().unwrap(), &device, 64).unwrap();
    let k = json["k"].as_f64().unwrap();
    let model = backbone
        .model
        .rescale_mlm_head(k, RescaleMode::Shared)
        .unwrap();
    let mut trainer = Trainer::new(model, recipe(&json));
    let batch = TrainBatch {
        index: 0,
        queries: token_batch(&expected, "query"),
        documents: token_batch(&expected, "document"),
    };
    let metrics = trainer.step(&[batch]);

    let (_, scalars) = values(&expected, "scalars");
    let ours = [
        metrics.loss,
        metrics.ranking_loss,
        metrics.flops_q,
        metrics.flops_d,
        metrics.grad_norm,
    ];
    for ((name, got), want) in ["loss", "ranking", "flops_q", "flops_d", "grad_norm"]
        .iter()
        .zip(ours)
        .zip(&scalars)
    {
        let tolerance = 1e-4 * want.abs().max(1.0);
        assert!(
            (got - want).abs() <= tolerance,
            "{family} {name}: {got} vs PyTorch {want}"
        );
    }

    let mut compared = 0;
    for (path, data) in parameter_values(&trainer.model, &backbone.tensor_names) {
        let name = &backbone
            .tensor_names
            .get(&path)
            .expect("every parameter is named")
            .name;
        let (shape, want) = values(&expected, &format!("param.{name}"));
        assert_eq!(data.shape().to_vec(), shape, "{family} {name}");
        let got: Vec<f32> = data.convert::<f32>().try_into_vec().unwrap();
        let max_diff = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (*a as f64 - b).abs())
            .fold(0.0, f64::max);
        assert!(
            max_diff <= 1e-4,
            "{family} {name}: max |Δ| {max_diff:e} after one step"
        );
        compared += 1;
    }
    assert_eq!(compared, backbone.tensor_names.len());
}

#[test]
fn bert_step_matches_pytorch() {
    check("bert");
}

#[test]
fn modernbert_step_matches_pytorch() {
    check("modernbert");
}
