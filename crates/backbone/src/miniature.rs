//! Tiny random-initialised checkpoints of the seven families, written in Hugging Face format
//! (a real `config.json` of the family, `model.safetensors` under its tensor names, a WordPiece
//! `tokenizer.json` over a given word list), with the MLM decoder's rows set to a chosen L2 norm.
//! They stand in for the real backbones in the offline miniature of the experiment matrix: same
//! code paths, sizes a CPU trains in seconds, and the one property the paper is about — the
//! scale of the MLM head — set on purpose.

use std::path::Path;

use burn::prelude::*;
use serde_json::{Value, json};

use crate::error::{BackboneError, Result};

use crate::family::{self, FAMILIES, ModelConfig};
use crate::hf_names::TensorNames;
use crate::hf_writer::{write_directory, write_safetensors};
use crate::model::MaskedLm;
use crate::tokenizer::TextTokenizer;
use crate::weights::Weights;

/// Special tokens, ids 0..5 of every miniature vocabulary.
const SPECIALS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
/// The miniature size every family's `Family::miniature` config uses.
pub(crate) const HIDDEN: usize = 64;
pub(crate) const LAYERS: usize = 2;
pub(crate) const HEADS: usize = 4;
pub(crate) const INTERMEDIATE: usize = 128;
/// Positions (RoBERTa's are offset by the padding index + 1).
pub(crate) const POSITIONS: usize = 130;

/// A BERT-schema `config.json` at miniature size (BERT, and the start of RoBERTa's and
/// ALBERT's).
pub(crate) fn bert_like(model_type: &str, architecture: &str, vocab: usize) -> Value {
    json!({
        "model_type": model_type, "architectures": [architecture], "vocab_size": vocab,
        "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE, "hidden_act": "gelu",
        "max_position_embeddings": POSITIONS, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "pad_token_id": 0, "tie_word_embeddings": true
    })
}

/// A lower-casing WordPiece tokenizer whose vocabulary is the specials then `words`, adding
/// `[CLS] … [SEP]` around every text.
fn tokenizer(words: &[String]) -> Value {
    let vocab: serde_json::Map<String, Value> = SPECIALS
        .iter()
        .map(|s| s.to_string())
        .chain(words.iter().cloned())
        .enumerate()
        .map(|(id, token)| (token, json!(id)))
        .collect();
    let added: Vec<Value> = SPECIALS
        .iter()
        .enumerate()
        .map(|(id, content)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
            }
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

/// Writes the miniature `family` checkpoint over `words` into `out`: weights normal(0, 0.02)
/// seeded by `seed`, then every decoder row rescaled to L2 norm `row_norm` (directions kept).
pub fn write_miniature(
    family: &str,
    words: &[String],
    row_norm: f64,
    seed: u64,
    out: &Path,
) -> Result<()> {
    if !row_norm.is_finite() || row_norm <= 0.0 {
        return Err(BackboneError::Checkpoint(format!(
            "row norm must be finite and > 0, got {row_norm}"
        )));
    }
    let known = || {
        FAMILIES
            .iter()
            .map(|f| f.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let family = family::by_name(family).ok_or_else(|| {
        BackboneError::Checkpoint(format!("no miniature of `{family}`; families: {}", known()))
    })?;
    let config = (family.miniature)(SPECIALS.len() + words.len());
    write_directory(out, |staging| {
        lsr_files::write_json(&staging.join("config.json"), &config)?;
        lsr_files::write_json(&staging.join("tokenizer.json"), &tokenizer(words))?;
        let model_config = ModelConfig::read(&staging.join("config.json"))?;
        // Checks the vocabulary against the embeddings, as loading will.
        TextTokenizer::from_file(
            &staging.join("tokenizer.json"),
            0,
            model_config.dims.vocab_size,
            32,
        )?;
        let weights = Weights::random(seed, 0.02, &Device::flex());
        let model = MaskedLm::load(&model_config, &weights)?;
        let names = TensorNames::collect(&model, &weights.origins());
        let model = model.map_decoder(|w| {
            let norms = w.clone().square().sum_dim(1).sqrt();
            w / norms * row_norm
        });
        write_safetensors(&model, &names, &staging.join("model.safetensors"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Backbone;
    use crate::stats::HeadStats;

    #[test]
    fn every_family_loads_back_with_the_row_norm_asked_for() {
        let words: Vec<String> = (0..50).map(|i| format!("w{i:03}")).collect();
        let dir = tempfile::tempdir().unwrap();
        for (i, family) in FAMILIES.iter().map(|f| f.name).enumerate() {
            let out = dir.path().join(family);
            let norm = 0.5 + i as f64;
            write_miniature(family, &words, norm, 7, &out).unwrap();
            let backbone = Backbone::load(out.to_str().unwrap(), &Device::flex(), 32).unwrap();
            assert!(backbone.model.is_tied(), "{family}");
            let stats = HeadStats::compute(&backbone).unwrap();
            let (low, high) = (stats.row_norm_min, stats.row_norm_max);
            assert!(
                (low - norm).abs() < 1e-4 && (high - norm).abs() < 1e-4,
                "{family}: {stats:?}"
            );
            let ids = backbone.tokenizer.encode_batch(&["w001 w049"]).unwrap().ids;
            assert_eq!(ids, vec![2, 6, 54, 3], "{family}");
        }
        let again = write_miniature("bert", &words, 1.0, 7, &dir.path().join("bert"));
        assert!(again.unwrap_err().to_string().contains("not empty"));
        assert!(write_miniature("gpt2", &words, 1.0, 7, &dir.path().join("x")).is_err());
    }
}
