//! SPLADE vectors of the fixture models equal `max_t log(1 + relu(logits)) · mask` computed
//! from transformers' logits, within 1e-4.

use burn::prelude::*;
use itertools::Itertools;
use lsr_backbone::reference::{ReferenceOutputs, fixture_texts, fixtures_dir};
use lsr_backbone::{Backbone, RescaleMode, Scale};
use lsr_splade::SpladeEncoder;

fn encoder(name: &str) -> SpladeEncoder {
    let (_, max_length) = fixture_texts().unwrap();
    let dir = fixtures_dir().join(name);
    let backbone = Backbone::load(dir.to_str().unwrap(), &Device::flex(), max_length).unwrap();
    SpladeEncoder::new(backbone, Scale::ONE, RescaleMode::Shared).unwrap()
}

#[test]
fn splade_vectors_match_transformers() {
    let (texts, _) = fixture_texts().unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    for name in lsr_backbone::FAMILIES.iter().map(|f| f.name) {
        let expected = ReferenceOutputs::read(&fixtures_dir().join(name)).unwrap();
        let dense = encoder(name).encode_dense(&texts).unwrap();
        let got = dense.into_data().try_into_vec::<f32>().unwrap();
        assert_eq!(got.len(), expected.splade.len(), "{name}");
        let worst = got
            .iter()
            .zip_eq(&expected.splade)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst <= 1e-4, "{name}: max |Δ SPLADE weight| = {worst:e}");
        assert!(
            expected.splade.iter().any(|&w| w > 0.0),
            "{name}: fixture has no active term"
        );
    }
}

#[test]
fn sparse_vectors_hold_every_nonzero_weight_sorted() {
    let (texts, _) = fixture_texts().unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let expected = ReferenceOutputs::read(&fixtures_dir().join("modernbert")).unwrap();
    // A batch size of 2 splits the three texts over two forward passes.
    let vectors = encoder("modernbert").encode(&texts, 2).unwrap();
    assert_eq!(vectors.len(), texts.len());
    for (b, vector) in vectors.iter().enumerate() {
        let row = &expected.splade[b * expected.vocab..(b + 1) * expected.vocab];
        let nonzero = row.iter().filter(|&&w| w > 0.0).count();
        assert_eq!(vector.len(), nonzero, "text {b}: number of active terms");
        assert!(
            vector.terms.windows(2).all(|w| w[0].1 >= w[1].1),
            "text {b}: not sorted"
        );
        for &(id, weight) in &vector.terms {
            assert!(
                (row[id as usize] - weight).abs() <= 1e-4,
                "text {b}, term {id}"
            );
        }
    }
}
