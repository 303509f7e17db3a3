//! Parity with Hugging Face transformers on the committed fixtures: identical token ids and
//! MLM logits within 1e-4 on every non-padding token, for every registered family (its fixture
//! is `data/fixtures/<family>`) and every other loading path listed here.
//! With `LSR_TEST_DEVICE` set (e.g. `wgpu`), the logits are also computed there and compared
//! with flex (≤ 1e-3).

use burn::prelude::*;
use lsr_backbone::reference::{ReferenceOutputs, fixture_texts, fixtures_dir, logits_of};
use lsr_backbone::{Backbone, FAMILIES};
use lsr_compute::parse_device;

use crate::family_fixture;

const HF_TOLERANCE: f32 = 1e-4;
const DEVICE_TOLERANCE: f32 = 1e-3;

fn check(name: &str) {
    let dir = fixtures_dir().join(name);
    let (texts, max_length) = fixture_texts().expect("texts.json");
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let expected = ReferenceOutputs::read(&dir).expect("expected outputs");
    let flex = Device::flex();
    let backbone = Backbone::load(dir.to_str().unwrap(), &flex, max_length).expect("load fixture");
    let deviation = expected
        .logits_deviation(&backbone, &texts, &flex)
        .expect("forward");
    assert!(
        deviation.ids_match,
        "{name}: token ids differ from HF's tokenizer"
    );
    assert!(deviation.mask_match, "{name}: attention mask differs");
    assert!(
        deviation.max_abs <= HF_TOLERANCE,
        "{name}: max |Δ logits| vs transformers = {:e}",
        deviation.max_abs
    );

    if let Ok(spec) = std::env::var("LSR_TEST_DEVICE") {
        let device = parse_device(Some(&spec)).expect("LSR_TEST_DEVICE");
        let (_, _, flex_logits) = logits_of(&backbone, &texts, &flex).expect("forward");
        let other = Backbone::load(dir.to_str().unwrap(), &device, max_length).expect("load");
        let (_, _, device_logits) = logits_of(&other, &texts, &device).expect("forward");
        let flex_as_reference = ReferenceOutputs {
            logits: flex_logits,
            ..expected
        };
        let diff = flex_as_reference.max_token_deviation(&device_logits);
        eprintln!("{name}: max |Δ logits| {spec} ({device:?}) vs flex = {diff:e}");
        assert!(
            diff <= DEVICE_TOLERANCE,
            "{name}: max |Δ logits| {spec} vs flex = {diff:e}"
        );
    }
}

/// Every family in the registry, on its own fixture.
#[test]
fn every_family_matches_transformers() {
    for family in FAMILIES {
        family_fixture(family.name);
        check(family.name);
    }
}

macro_rules! parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { check($fixture); })*
    };
}

// Loading paths beyond a family's own fixture: other weight names, dtypes, files and configs.
parity! {
    bert_legacy_gamma_beta_names => "bert-gamma-beta",
    bert_f16_weights => "bert-f16",
    bert_bf16_weights => "bert-bf16",
    bert_sharded_safetensors => "bert-sharded",
    bert_pytorch_bin => "bert-pytorch-bin",
    albert_two_layer_groups => "albert-groups",
    albert_decoder_bias_preferred => "albert-decoder-bias",
    modernbert_legacy_config => "modernbert-legacy-config",
}
