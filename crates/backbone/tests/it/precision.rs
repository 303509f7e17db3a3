//! bf16-mixed against transformers' f32 logits on the committed fixtures, on flex: every family
//! computes its products in bf16 (the logits come out bf16) and lands within twice the distance
//! PyTorch's own bf16 autocast keeps from f32 (`reference::reduced_precision_logit_bound`).

use burn::prelude::*;
use burn::tensor::DType;
use lsr_backbone::reference::{
    ReferenceOutputs, Yardstick, fixture_texts, fixtures_dir, reduced_precision_logit_bound,
};
use lsr_backbone::{Backbone, FAMILIES};
use lsr_compute::Precision;

#[test]
fn every_family_runs_in_bf16_and_stays_close_to_transformers() {
    let (texts, max_length) = fixture_texts().unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let device = Device::flex();
    for name in FAMILIES.iter().map(|f| f.name) {
        let dir = fixtures_dir().join(name);
        let expected = ReferenceOutputs::read(&dir).unwrap();
        let mut backbone = Backbone::load(dir.to_str().unwrap(), &device, max_length).unwrap();
        backbone.model = backbone.model.with_precision(Precision::Bf16Mixed);
        let batch = backbone.tokenizer.encode_batch(&texts).unwrap();
        let (ids, mask) = batch.to_tensors(&device);
        let logits = backbone.model.forward(ids, mask);
        assert_eq!(logits.dtype(), DType::BF16, "{name}: logits dtype");
        let values: Vec<f32> = logits.into_data().convert::<f32>().try_into_vec().unwrap();
        let scale = expected.logits.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let bound =
            reduced_precision_logit_bound(&fixtures_dir(), Yardstick::Bf16, name, scale).unwrap();
        let deviation = expected.max_token_deviation(&values);
        eprintln!("{name}: bf16-mixed max |Δ logits| {deviation:.3e} (bound {bound:.3e})");
        assert!(
            deviation <= bound,
            "{name}: bf16-mixed max |Δ logits| {deviation:e}, more than {bound:e}"
        );
        assert!(
            deviation > 0.0,
            "{name}: bf16-mixed gave f32's logits exactly"
        );
    }
}
