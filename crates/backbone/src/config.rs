//! Reading `config.json` text: deserialising with errors that name the file and the field, and
//! the defaults transformers gives fields a config may omit. Which family a config belongs to
//! is the registry's question (`ModelConfig`, in the family registry).

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{BackboneError, Result};

/// Deserialises JSON, naming the field that failed (`field `hidden_size`: invalid type ...`).
pub(crate) fn parse_json<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let message = if field == "." {
            inner.to_string()
        } else {
            format!("field `{field}`: {inner}")
        };
        BackboneError::config(path, message)
    })
}

/// transformers' `hidden_dropout_prob` / `attention_probs_dropout_prob` default (BERT, RoBERTa)
/// and DistilBERT's `dropout` / `attention_dropout`.
pub(crate) fn default_dropout() -> f64 {
    0.1
}

pub(crate) fn default_true() -> bool {
    true
}

pub(crate) fn default_one() -> usize {
    1
}

/// BERT's and ALBERT's `type_vocab_size` default.
pub(crate) fn default_type_vocab() -> usize {
    2
}
