//! Reference outputs produced by Hugging Face transformers for the parity fixtures
//! (`scripts/fixtures/generate.py` → `data/fixtures/<name>/expected.safetensors`), read by the
//! parity tests of this and later crates.

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};

use crate::error::{BackboneError, Result};

/// `data/fixtures` of this repository.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fixtures")
}

/// The texts the fixtures were computed on and the max length they were truncated to.
pub fn fixture_texts() -> Result<(Vec<String>, usize)> {
    #[derive(serde::Deserialize)]
    struct Texts {
        max_length: usize,
        texts: Vec<String>,
    }
    let path = fixtures_dir().join("texts.json");
    let text = std::fs::read_to_string(&path).map_err(|e| BackboneError::io(&path, e))?;
    let parsed: Texts = crate::config::parse_json(&path, &text)?;
    Ok((parsed.texts, parsed.max_length))
}

pub struct ReferenceOutputs {
    pub batch: usize,
    pub len: usize,
    pub vocab: usize,
    pub input_ids: Vec<i64>,
    pub attention_mask: Vec<i64>,
    /// `[batch, len, vocab]`.
    pub logits: Vec<f32>,
    /// `[batch, vocab]`.
    pub splade: Vec<f32>,
}

impl ReferenceOutputs {
    pub fn read(fixture: &Path) -> Result<Self> {
        let path = fixture.join("expected.safetensors");
        let bytes = std::fs::read(&path).map_err(|e| BackboneError::io(&path, e))?;
        let corrupt = |message: String| BackboneError::Corrupt {
            path: path.clone(),
            message,
        };
        let file = SafeTensors::deserialize(&bytes).map_err(|e| corrupt(e.to_string()))?;
        let get = |name: &str, dtype: Dtype| {
            let view = file.tensor(name).map_err(|e| corrupt(e.to_string()))?;
            if view.dtype() != dtype {
                return Err(corrupt(format!(
                    "`{name}` is {:?}, expected {dtype:?}",
                    view.dtype()
                )));
            }
            Ok((view.shape().to_vec(), view.data().to_vec()))
        };
        let (shape, ids) = get("input_ids", Dtype::I64)?;
        let (_, mask) = get("attention_mask", Dtype::I64)?;
        let (logit_shape, logits) = get("logits", Dtype::F32)?;
        let (_, splade) = get("splade", Dtype::F32)?;
        let i64s = |b: Vec<u8>| {
            b.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let f32s = |b: Vec<u8>| {
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        Ok(Self {
            batch: shape[0],
            len: shape[1],
            vocab: logit_shape[2],
            input_ids: i64s(ids),
            attention_mask: i64s(mask),
            logits: f32s(logits),
            splade: f32s(splade),
        })
    }
}
