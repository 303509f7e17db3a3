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
        let mut inner = Tokenizer::from_file(path).map_err(|e| error(e.to_string()))?;
        let vocab = inner.get_vocab_size(true);
        if vocab > embedding_rows {
            return Err(error(format!(
                "vocabulary of {vocab} tokens exceeds the model's {embedding_rows} embedding rows \
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
