//! Tokenisation with the `tokenizers` crate (`tokenizer.json`: WordPiece, SentencePiece
//! Unigram, byte-level BPE), family special tokens from the file's post-processor, truncation
//! to a maximum length and right padding (the RoPE models require right padding).

use std::path::{Path, PathBuf};

use burn::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

use crate::error::{BackboneError, Result};

#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    path: PathBuf,
    pad_id: u32,
    max_length: usize,
}

/// Right-padded token ids and attention mask, row-major `[batch, len]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBatch {
    pub ids: Vec<u32>,
    pub mask: Vec<u32>,
    pub batch: usize,
    pub len: usize,
}

impl TextTokenizer {
    /// Loads `tokenizer.json` and checks that every id it can produce has an embedding row.
    pub fn from_file(
        path: &Path,
        pad_id: u32,
        embedding_rows: usize,
        max_length: usize,
    ) -> Result<Self> {
        let error = |message: String| BackboneError::Tokenizer {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read(path).map_err(|e| BackboneError::io(path, e))?;
        // `tokenizers` panics on some syntax errors (inside a decoder) instead of returning
        // them, so the file is checked to be JSON first, strings decoded (a lone surrogate
        // escape is such an error).
        serde_json::from_slice::<serde_json::Value>(&text)
            .map_err(|e| error(format!("not valid JSON: {e}")))?;
        let mut inner = Tokenizer::from_bytes(&text).map_err(|e| error(e.to_string()))?;
        let vocab = inner.get_vocab_size(true);
        if vocab > embedding_rows {
            return Err(error(format!(
                "vocabulary of {vocab} tokens exceeds the model's {embedding_rows} embedding rows \
                 (config.json vocab_size): tokenizer and checkpoint do not belong together"
            )));
        }
        let processor =
            serde_json::to_value(inner.get_post_processor()).map_err(|e| error(e.to_string()))?;
        let mut special_ids = Vec::new();
        let undefined = template_special_tokens(&processor, &mut special_ids);
        if let Some(token) = undefined.first() {
            return Err(error(format!(
                "the post-processor's template uses special token `{token}`, which its \
                 `special_tokens` do not define"
            )));
        }
        let largest = inner.get_vocab(true).into_values().chain(special_ids).max();
        if let Some(id) = largest.filter(|&id| id as usize >= embedding_rows) {
            return Err(error(format!(
                "token id {id} has no row among the model's {embedding_rows} embedding rows \
                 (config.json vocab_size): tokenizer and checkpoint do not belong together"
            )));
        }
        if max_length < 2 {
            return Err(error(format!(
                "max length {max_length} leaves no room for text"
            )));
        }
        inner
            .with_truncation(Some(TruncationParams {
                max_length,
                ..Default::default()
            }))
            .map_err(|e| error(e.to_string()))?;
        inner.with_padding(None);
        Ok(Self {
            inner,
            path: path.to_path_buf(),
            pad_id,
            max_length,
        })
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The same tokenizer truncating at `max_length` (queries and documents differ: 32 and
    /// 256 in the SPLADE recipe).
    pub fn with_max_length(&self, max_length: usize) -> Result<Self> {
        let mut copy = self.clone();
        copy.inner
            .with_truncation(Some(TruncationParams {
                max_length,
                ..Default::default()
            }))
            .map_err(|e| BackboneError::Tokenizer {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        copy.max_length = max_length;
        Ok(copy)
    }

    /// Tokenises with the family's special tokens, truncates, right-pads to the longest text.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<TokenBatch> {
        let encodings = self.inner.encode_batch(texts.to_vec(), true).map_err(|e| {
            BackboneError::Tokenizer {
                path: self.path.clone(),
                message: e.to_string(),
            }
        })?;
        let len = encodings.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(texts.len() * len);
        let mut mask = Vec::with_capacity(texts.len() * len);
        for encoding in &encodings {
            let n = encoding.len();
            ids.extend_from_slice(encoding.get_ids());
            ids.extend(std::iter::repeat_n(self.pad_id, len - n));
            mask.extend(std::iter::repeat_n(1, n));
            mask.extend(std::iter::repeat_n(0, len - n));
        }
        Ok(TokenBatch {
            ids,
            mask,
            batch: texts.len(),
            len,
        })
    }

    pub fn token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// The special tokens that the template post-processors in `processor` (as serialised, so
/// that those inside a `Sequence` are found too) use without defining, and, into `ids`, the ids
/// of the special tokens every post-processor adds. `tokenizers` loads a template that uses an
/// undefined token and panics on the first text.
fn template_special_tokens(processor: &serde_json::Value, ids: &mut Vec<u32>) -> Vec<String> {
    use serde_json::Value;
    let mut undefined = Vec::new();
    let kind = processor.get("type").and_then(Value::as_str);
    match processor {
        Value::Object(map) if matches!(kind, Some("BertProcessing" | "RobertaProcessing")) => {
            // `sep` and `cls` are `[token, id]`.
            let id = |field: &str| {
                map.get(field)
                    .and_then(|v| v.get(1))
                    .and_then(Value::as_u64)
            };
            ids.extend(
                ["sep", "cls"]
                    .into_iter()
                    .filter_map(id)
                    .map(|id| id as u32),
            );
        }
        Value::Object(map) if kind == Some("TemplateProcessing") => {
            let defined = map.get("special_tokens").and_then(Value::as_object);
            for token in defined.into_iter().flat_map(|d| d.values()) {
                let token_ids = token.get("ids").and_then(Value::as_array);
                ids.extend(
                    token_ids
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_u64)
                        .map(|id| id as u32),
                );
            }
            let pieces = ["single", "pair"]
                .into_iter()
                .filter_map(|template| map.get(template).and_then(Value::as_array))
                .flatten();
            for piece in pieces {
                let Some(id) = piece.pointer("/SpecialToken/id").and_then(Value::as_str) else {
                    continue;
                };
                if !defined.is_some_and(|d| d.contains_key(id)) {
                    undefined.push(id.to_string());
                }
            }
        }
        Value::Object(map) => {
            for value in map.values() {
                undefined.extend(template_special_tokens(value, ids));
            }
        }
        Value::Array(values) => {
            for value in values {
                undefined.extend(template_special_tokens(value, ids));
            }
        }
        _ => {}
    }
    undefined
}

impl TokenBatch {
    /// `(ids, mask)` as `[batch, len]` int tensors.
    pub fn to_tensors(&self, device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
        let as_tensor = |values: &[u32]| {
            let values: Vec<i64> = values.iter().map(|&v| v as i64).collect();
            Tensor::<2, Int>::from_data(TensorData::new(values, [self.batch, self.len]), device)
        };
        (as_tensor(&self.ids), as_tensor(&self.mask))
    }

    /// Ids of row `b` without padding.
    pub fn row(&self, b: usize) -> &[u32] {
        let start = b * self.len;
        let n = self.mask[start..start + self.len]
            .iter()
            .filter(|&&m| m == 1)
            .count();
        &self.ids[start..start + n]
    }
}
