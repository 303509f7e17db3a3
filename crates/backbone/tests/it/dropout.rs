//! Dropout from the config: on in training (an autodiff device) where transformers places it,
//! off when encoding, off entirely for a model loaded without it, and never in the families
//! whose configs have none.

use burn::prelude::*;
use itertools::Itertools;
use lsr_backbone::reference::fixture_texts;
use lsr_backbone::{Backbone, FAMILIES};

use crate::family_fixture;

/// Whether each family's fixture drops in training: BERT, RoBERTa, DistilBERT 0.1 in their
/// configs, GTE 0.1 by NewConfig's default; ALBERT 0 (albert-base-v2's), ModernBERT and Ettin
/// 0 everywhere.
const DROPS: [(&str, bool); 7] = [
    ("bert", true),
    ("roberta", true),
    ("distilbert", true),
    ("gte", true),
    ("albert", false),
    ("modernbert", false),
    ("ettin", false),
];

fn logits(name: &str, device: &Device, dropout: bool) -> Vec<f32> {
    let (texts, max_length) = fixture_texts().unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let spec = family_fixture(name);
    let backbone =
        Backbone::load_with_dropout(spec.to_str().unwrap(), device, max_length, dropout).unwrap();
    let (ids, mask) = backbone
        .tokenizer
        .encode_batch(&texts)
        .unwrap()
        .to_tensors(device);
    lsr_compute::dropout::seed(device, 11);
    let logits = backbone.model.forward(ids, mask);
    logits.into_data().convert::<f32>().try_into_vec().unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip_eq(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The autodiff device computes the same products by other kernels: equal within float noise.
const SAME: f32 = 1e-4;

/// One test: the masks come from the process's generator, which a test on a parallel thread
/// would reseed.
#[test]
fn each_family_drops_where_its_config_says_in_training_only() {
    let host = Device::flex();
    let training = host.clone().autodiff();
    for (listed, _) in DROPS {
        assert!(
            FAMILIES.iter().any(|f| f.name == listed),
            "DROPS lists `{listed}`, which is not a registered family"
        );
    }
    for name in FAMILIES.iter().map(|f| f.name) {
        let Some(&(_, drops)) = DROPS.iter().find(|(listed, _)| *listed == name) else {
            panic!("family `{name}`: add to DROPS whether its fixture drops in training");
        };
        let eval = logits(name, &host, true);
        assert!(eval == logits(name, &host, false), "{name}: encoding drops");
        if !drops {
            let without = logits(name, &training, false);
            assert!(logits(name, &training, true) == without, "{name}: drops");
            continue;
        }
        let off = max_diff(&eval, &logits(name, &training, false));
        assert!(off <= SAME, "{name}: dropout off still drops ({off})");
        let dropped = logits(name, &training, true);
        let drop = max_diff(&eval, &dropped);
        assert!(drop > 0.1, "{name}: training does not drop ({drop})");
        let again = logits(name, &training, true);
        assert!(dropped == again, "{name}: seeded masks differ");
    }
}
