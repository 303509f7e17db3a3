//! A model lsr exported, as sentence-transformers loads it: `SparseEncoder(path)` on the
//! committed export `data/fixtures/bert-st` (scripts/fixtures/sparse_encoder.sh) loaded
//! MLMTransformer + SpladePooling with dot product, and its `encode_query`/`encode_document`
//! equal `lsr encode` within 1e-4. The packaging files there are what lsr writes today.

use itertools::Itertools;
use std::collections::BTreeMap;

use crate::common::{fixture, lsr, stdout_of};

type Terms = BTreeMap<String, f64>;

#[test]
fn sparse_encoder_encodes_an_lsr_export_as_lsr_does() {
    let folder = fixture("bert-st");
    let text = std::fs::read_to_string(format!("{folder}/expected.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        expected["modules"],
        serde_json::json!(["MLMTransformer", "SpladePooling"])
    );
    assert_eq!(expected["similarity_fn_name"], "dot");
    for side in ["queries", "documents"] {
        let by_text: BTreeMap<String, Terms> =
            serde_json::from_value(expected[side].clone()).unwrap();
        let mut command = lsr();
        command.args([
            "encode",
            "--json",
            "--device",
            "flex",
            "--checkpoint",
            &folder,
        ]);
        for text in by_text.keys() {
            command.args(["--text", text]);
        }
        let lines = String::from_utf8(stdout_of(&mut command)).unwrap();
        for (line, (text, want)) in lines.lines().zip_eq(&by_text) {
            let got: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(got["text"], *text);
            let got: Terms = got["terms"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| (t["id"].to_string(), t["weight"].as_f64().unwrap()))
                .collect();
            for id in got.keys().chain(want.keys()) {
                let (a, b) = (got.get(id).unwrap_or(&0.0), want.get(id).unwrap_or(&0.0));
                assert!(
                    (a - b).abs() <= 1e-4,
                    "{side} `{text}` term {id}: lsr {a}, SparseEncoder {b}"
                );
            }
        }
    }
}

#[test]
fn the_committed_export_has_the_packaging_lsr_writes_now() {
    let folder = std::path::PathBuf::from(fixture("bert-st"));
    let fresh = tempfile::tempdir().unwrap();
    let max_seq_length = 32; // the recipe's longer length in sparse_encoder.sh
    lsr_splade::write_sentence_transformers(fresh.path(), 160, max_seq_length).unwrap();
    for file in [
        "modules.json",
        "config_sentence_transformers.json",
        "sentence_bert_config.json",
        "1_SpladePooling/config.json",
    ] {
        assert_eq!(
            std::fs::read_to_string(fresh.path().join(file)).unwrap(),
            std::fs::read_to_string(folder.join(file)).unwrap(),
            "{file}: regenerate the fixture (scripts/fixtures/sparse_encoder.sh)"
        );
    }
    let card = std::fs::read_to_string(folder.join("README.md")).unwrap();
    for line in [
        "library_name: sentence-transformers",
        "- sparse-encoder",
        "| k | 2 (on the shared matrix) |",
        "| steps | 10 |",
        "lambda_q = 0.001",
    ] {
        assert!(card.contains(line), "the card lacks `{line}`:\n{card}");
    }
}
