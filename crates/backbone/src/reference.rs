//! Reference outputs produced by Hugging Face transformers for the parity fixtures
//! (`scripts/fixtures/generate.py` → `data/fixtures/<name>/expected.safetensors`), and how far a
//! model on some device is from them: read by the parity tests of this and later crates and by
//! `lsr check`, which runs the same comparison on a GPU.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use safetensors::{Dtype, SafeTensors};

use crate::error::{BackboneError, Result};
use crate::model::Backbone;

/// `data/fixtures` of this repository.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fixtures")
}

/// The texts the fixtures were computed on and the max length they were truncated to.
pub fn fixture_texts() -> Result<(Vec<String>, usize)> {
    fixture_texts_in(&fixtures_dir())
}

/// [`fixture_texts`] of a fixtures directory elsewhere (a checkout on another machine).
pub fn fixture_texts_in(root: &Path) -> Result<(Vec<String>, usize)> {
    #[derive(serde::Deserialize)]
    struct Texts {
        max_length: usize,
        texts: Vec<String>,
    }
    let path = root.join("texts.json");
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

/// Reduced-precision arithmetic whose distance from f32 PyTorch itself keeps on the fixtures
/// is recorded beside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Yardstick {
    /// f32 matmuls in TF32 on CUDA tensor cores (`tf32-cuda.json`, measured on an H200).
    Tf32,
    /// bf16 autocast (`bf16-autocast.json`).
    Bf16,
}

/// The bound on |Δ logit| on fixture `name` for a model computing in `arithmetic`: twice what
/// PyTorch deviates there in the same arithmetic (both files written by
/// `scripts/gpu/torch_parity.py`), or, for a fixture PyTorch cannot run by itself (GTE), 1%
/// (TF32) or 6% (bf16) of the largest reference logit. lsr is meant to be PyTorch in the same
/// precision, not better.
pub fn reduced_precision_logit_bound(
    root: &Path,
    arithmetic: Yardstick,
    name: &str,
    largest_logit: f32,
) -> Result<f32> {
    #[derive(serde::Deserialize)]
    struct Recorded {
        max_abs_deviation: std::collections::HashMap<String, f32>,
    }
    let (file, fraction) = match arithmetic {
        Yardstick::Tf32 => ("tf32-cuda.json", 1e-2),
        Yardstick::Bf16 => ("bf16-autocast.json", 6e-2),
    };
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| BackboneError::io(&path, e))?;
    let recorded: Recorded = crate::config::parse_json(&path, &text)?;
    Ok(match recorded.max_abs_deviation.get(name) {
        Some(deviation) => 2.0 * deviation,
        None => fraction * largest_logit.max(1.0),
    })
}

/// How far a model's logits on the fixture texts are from transformers'.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LogitsDeviation {
    pub ids_match: bool,
    pub mask_match: bool,
    /// Largest |Δ logit| over every non-padding token (infinite if the shapes differ).
    pub max_abs: f32,
    /// Largest |logit| of the reference, the scale `max_abs` is to be read against.
    pub reference_max_abs: f32,
}

/// Logits of `backbone` (already on its device) for `texts`, as `(ids, mask, [B·L·V] logits)`.
pub fn logits_of(
    backbone: &Backbone,
    texts: &[&str],
    device: &Device,
) -> Result<(Vec<u32>, Vec<u32>, Vec<f32>)> {
    let batch = backbone.tokenizer.encode_batch(texts)?;
    let (ids, mask) = batch.to_tensors(device);
    let logits = backbone
        .model
        .forward(ids, mask)
        .cast(burn::tensor::DType::F32);
    let logits = logits
        .into_data()
        .try_into_vec::<f32>()
        .expect("f32 logits");
    Ok((batch.ids, batch.mask, logits))
}

impl ReferenceOutputs {
    /// Compares `backbone`'s logits on `texts` with these reference outputs.
    pub fn logits_deviation(
        &self,
        backbone: &Backbone,
        texts: &[&str],
        device: &Device,
    ) -> Result<LogitsDeviation> {
        let (ids, mask, logits) = logits_of(backbone, texts, device)?;
        let ids_match = ids
            .iter()
            .map(|&i| i as i64)
            .eq(self.input_ids.iter().copied());
        let mask_match = mask
            .iter()
            .map(|&m| m as i64)
            .eq(self.attention_mask.iter().copied());
        let reference_max_abs = self.logits.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let max_abs = if logits.len() == self.logits.len() && mask_match {
            self.max_token_deviation(&logits)
        } else {
            f32::INFINITY
        };
        Ok(LogitsDeviation {
            ids_match,
            mask_match,
            max_abs,
            reference_max_abs,
        })
    }

    /// Largest |Δ| between `logits` and the reference over non-padding tokens; NaN if any is.
    pub fn max_token_deviation(&self, logits: &[f32]) -> f32 {
        let mut worst = 0.0f32;
        for (t, &m) in self.attention_mask.iter().enumerate() {
            if m == 1 {
                let range = t * self.vocab..(t + 1) * self.vocab;
                for (x, y) in logits[range.clone()].iter().zip(&self.logits[range]) {
                    let d = (x - y).abs();
                    if d.is_nan() {
                        return f32::NAN;
                    }
                    worst = worst.max(d);
                }
            }
        }
        worst
    }
}
