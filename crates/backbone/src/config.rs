//! `config.json` → its family and the common questions it answers, with errors that name the
//! file and field. The family's own config type is parsed where it loads ([`ModelConfig::arch`]).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::{BackboneError, Result};
use crate::family::{self, Dims, Family};
use crate::layers::Dropout;

/// A checkpoint's `config.json`: the path it was read from (for messages), its family, and
/// what every family answers.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub path: PathBuf,
    pub family: &'static Family,
    pub dims: Dims,
    text: String,
    /// Whether the model drops where its config says in training (`false`: nowhere).
    pub dropout: bool,
}

impl ModelConfig {
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| BackboneError::io(path, e))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let value: serde_json::Value = parse_json(path, text)?;
        let model_type = value
            .get("model_type")
            .and_then(|v| v.as_str())
            .ok_or_else(|| BackboneError::config(path, "missing field `model_type`"))?;
        let family =
            family::by_model_type(model_type).ok_or_else(|| BackboneError::UnknownModelType {
                path: path.to_path_buf(),
                model_type: model_type.to_string(),
                supported: family::supported_model_types(),
            })?;
        let dims = (family.dims)(path, text)?;
        validate(path, &dims)?;
        Ok(Self {
            path: path.to_path_buf(),
            family,
            dims,
            text: text.to_string(),
            dropout: true,
        })
    }

    /// The family name used in tables and messages.
    pub fn family(&self) -> &'static str {
        self.family.name
    }

    /// The config as the family's own type, naming the field that does not fit.
    pub fn arch<T: DeserializeOwned>(&self) -> Result<T> {
        parse_json(&self.path, &self.text)
    }
}

impl ModelConfig {
    /// The dropout of config field `field` with probability `p` (none if this model is loaded
    /// without dropout); `p` must be in [0, 1).
    pub fn dropout(&self, field: &str, p: f64) -> Result<Dropout> {
        if !(0.0..1.0).contains(&p) {
            return Err(BackboneError::config(
                &self.path,
                format!("field `{field}`: a dropout probability must be in [0, 1), got {p}"),
            ));
        }
        Ok(Dropout(if self.dropout { p } else { 0.0 }))
    }
}

fn validate(path: &Path, dims: &Dims) -> Result<()> {
    let (hidden, heads) = (dims.hidden_size, dims.attention_heads);
    if heads == 0 || hidden % heads != 0 {
        return Err(BackboneError::config(
            path,
            format!("hidden size {hidden} is not divisible by {heads} attention heads"),
        ));
    }
    if dims.vocab_size == 0 {
        return Err(BackboneError::config(
            path,
            "field `vocab_size` must be > 0",
        ));
    }
    Ok(())
}

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
