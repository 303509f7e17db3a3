//! Parity with Hugging Face transformers on the committed fixtures: identical token ids and
//! MLM logits within 1e-4 on every non-padding token, for every family and loading path.
//! With `LSR_TEST_DEVICE` set (e.g. `wgpu`), the logits are also computed there and compared
//! with flex (≤ 1e-3).

use burn::prelude::*;
use lsr_backbone::reference::{ReferenceOutputs, fixture_texts, fixtures_dir};
use lsr_backbone::{Backbone, parse_device};

const HF_TOLERANCE: f32 = 1e-4;
const DEVICE_TOLERANCE: f32 = 1e-3;

fn logits_of(
    backbone: &Backbone,
    texts: &[&str],
    device: &Device,
) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
    let batch = backbone.tokenizer.encode_batch(texts).expect("tokenise");
    let (ids, mask) = batch.to_tensors(device);
    let logits = backbone.model.forward(ids, mask);
    let logits = logits
        .into_data()
        .try_into_vec::<f32>()
        .expect("f32 logits");
    (batch.ids, batch.mask, logits)
}

fn check(name: &str) {
    let dir = fixtures_dir().join(name);
    let (texts, max_length) = fixture_texts().expect("texts.json");
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let expected = ReferenceOutputs::read(&dir).expect("expected outputs");
    let flex = Device::flex();
    let backbone = Backbone::load(dir.to_str().unwrap(), &flex, max_length).expect("load fixture");
    let (ids, mask, logits) = logits_of(&backbone, &texts, &flex);

    let expected_ids: Vec<u32> = expected.input_ids.iter().map(|&i| i as u32).collect();
    let expected_mask: Vec<u32> = expected.attention_mask.iter().map(|&m| m as u32).collect();
    assert_eq!(
        ids, expected_ids,
        "{name}: token ids differ from HF's tokenizer"
    );
    assert_eq!(mask, expected_mask, "{name}: attention mask differs");
    assert_eq!(logits.len(), expected.logits.len(), "{name}: logits shape");

    let max_diff = |a: &[f32], b: &[f32]| {
        let mut worst = 0.0f32;
        for (t, &m) in mask.iter().enumerate() {
            if m == 1 {
                let range = t * expected.vocab..(t + 1) * expected.vocab;
                for (x, y) in a[range.clone()].iter().zip(&b[range]) {
                    worst = worst.max((x - y).abs());
                }
            }
        }
        worst
    };
    let diff = max_diff(&logits, &expected.logits);
    assert!(
        diff <= HF_TOLERANCE,
        "{name}: max |Δ logits| vs transformers = {diff:e}"
    );

    if let Ok(spec) = std::env::var("LSR_TEST_DEVICE") {
        let device = parse_device(Some(&spec)).expect("LSR_TEST_DEVICE");
        let other = Backbone::load(dir.to_str().unwrap(), &device, max_length).expect("load");
        let (_, _, device_logits) = logits_of(&other, &texts, &device);
        let diff = max_diff(&device_logits, &logits);
        eprintln!(
            "{name}: max |Δ logits| {spec} ({:?}) vs flex = {diff:e}",
            device
        );
        assert!(
            diff <= DEVICE_TOLERANCE,
            "{name}: max |Δ logits| {spec} vs flex = {diff:e}"
        );
    }
}

macro_rules! parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { check($fixture); })*
    };
}

parity! {
    bert => "bert",
    bert_legacy_gamma_beta_names => "bert-gamma-beta",
    bert_f16_weights => "bert-f16",
    bert_bf16_weights => "bert-bf16",
    bert_sharded_safetensors => "bert-sharded",
    bert_pytorch_bin => "bert-pytorch-bin",
    distilbert => "distilbert",
    albert => "albert",
    albert_two_layer_groups => "albert-groups",
    albert_decoder_bias_preferred => "albert-decoder-bias",
    roberta => "roberta",
    gte_ntk_rope => "gte",
    modernbert_sliding_window => "modernbert",
    modernbert_legacy_config => "modernbert-legacy-config",
    ettin_equal_thetas => "ettin",
}
