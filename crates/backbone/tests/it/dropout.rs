//! Dropout from the config: on in training (an autodiff device) where transformers places it,
//! off when encoding, off entirely for a model loaded without it, and never in the families
//! whose configs have none.

use burn::prelude::*;
use itertools::Itertools;
use lsr_backbone::Backbone;
use lsr_backbone::reference::{fixture_texts, fixtures_dir};

fn logits(name: &str, device: &Device, dropout: bool) -> Vec<f32> {
    let (texts, max_length) = fixture_texts().unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let spec = fixtures_dir().join(name);
    let backbone =
        Backbone::load_with_dropout(spec.to_str().unwrap(), device, max_length, dropout).unwrap();
    let (ids, mask) = backbone
        .tokenizer
        .encode_batch(&texts)
        .unwrap()
        .to_tensors(device);
    device.seed(11);
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
    // The fixtures' configs: BERT, RoBERTa, DistilBERT 0.1; GTE 0.1 by NewConfig's default.
    for name in ["bert", "roberta", "distilbert", "gte"] {
        let eval = logits(name, &host, true);
        assert!(eval == logits(name, &host, false), "{name}: encoding drops");
        let off = max_diff(&eval, &logits(name, &training, false));
        assert!(off <= SAME, "{name}: dropout off still drops ({off})");
        let dropped = logits(name, &training, true);
        let drop = max_diff(&eval, &dropped);
        assert!(drop > 0.1, "{name}: training does not drop ({drop})");
        let again = logits(name, &training, true);
        assert!(dropped == again, "{name}: seeded masks differ");
    }
    // ALBERT (albert-base-v2: 0), ModernBERT and Ettin (0 everywhere).
    for name in ["albert", "modernbert", "ettin"] {
        let (with, without) = (
            logits(name, &training, true),
            logits(name, &training, false),
        );
        assert!(with == without, "{name}: drops");
    }
}
