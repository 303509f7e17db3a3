//! `config.json` → one of the architecture configs, with errors that name the file and field.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::albert::AlbertConfig;
use crate::bert::BertConfig;
use crate::distilbert::DistilBertConfig;
use crate::error::{BackboneError, Result};
use crate::gte::GteConfig;
use crate::modernbert::ModernBertConfig;

/// A parsed `config.json`, by architecture. RoBERTa shares BERT's config and code; Ettin
/// shares ModernBERT's.
#[derive(Clone, Debug)]
pub enum ArchConfig {
    Bert(BertConfig),
    Roberta(BertConfig),
    DistilBert(DistilBertConfig),
    Albert(AlbertConfig),
    Gte(GteConfig),
    ModernBert(ModernBertConfig),
}

/// The config file with the path it was read from, for messages.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub path: PathBuf,
    pub arch: ArchConfig,
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
        let arch = match model_type {
            "bert" => ArchConfig::Bert(parse_json(path, text)?),
            "roberta" => ArchConfig::Roberta(parse_json(path, text)?),
            "distilbert" => ArchConfig::DistilBert(parse_json(path, text)?),
            "albert" => ArchConfig::Albert(parse_json(path, text)?),
            "new" => ArchConfig::Gte(parse_json(path, text)?),
            "modernbert" => ArchConfig::ModernBert(parse_json(path, text)?),
            other => {
                return Err(BackboneError::UnknownModelType {
                    path: path.to_path_buf(),
                    model_type: other.to_string(),
                });
            }
        };
        let config = Self {
            path: path.to_path_buf(),
            arch,
        };
        config.validate()?;
        Ok(config)
    }

    /// The family name used in tables and messages.
    pub fn family(&self) -> &'static str {
        match &self.arch {
            ArchConfig::Bert(_) => "bert",
            ArchConfig::Roberta(_) => "roberta",
            ArchConfig::DistilBert(_) => "distilbert",
            ArchConfig::Albert(_) => "albert",
            ArchConfig::Gte(_) => "gte",
            ArchConfig::ModernBert(_) => "modernbert",
        }
    }

    /// Rows of the word-embedding matrix (= MLM logits).
    pub fn vocab_size(&self) -> usize {
        match &self.arch {
            ArchConfig::Bert(c) | ArchConfig::Roberta(c) => c.vocab_size,
            ArchConfig::DistilBert(c) => c.vocab_size,
            ArchConfig::Albert(c) => c.vocab_size,
            ArchConfig::Gte(c) => c.vocab_size,
            ArchConfig::ModernBert(c) => c.vocab_size,
        }
    }

    pub fn pad_token_id(&self) -> u32 {
        match &self.arch {
            ArchConfig::Bert(c) | ArchConfig::Roberta(c) => c.pad_token_id,
            ArchConfig::DistilBert(c) => c.pad_token_id,
            ArchConfig::Albert(c) => c.pad_token_id,
            ArchConfig::Gte(c) => c.pad_token_id,
            ArchConfig::ModernBert(c) => c.pad_token_id,
        }
    }

    /// Longest input the position scheme allows (RoPE models: what the config declares).
    pub fn max_positions(&self) -> usize {
        match &self.arch {
            ArchConfig::Bert(c) => c.max_position_embeddings,
            // RoBERTa's positions start after the padding index.
            ArchConfig::Roberta(c) => c
                .max_position_embeddings
                .saturating_sub(c.pad_token_id as usize + 1),
            ArchConfig::DistilBert(c) => c.max_position_embeddings,
            ArchConfig::Albert(c) => c.max_position_embeddings,
            ArchConfig::Gte(c) => c.max_position_embeddings,
            ArchConfig::ModernBert(c) => c.max_position_embeddings,
        }
    }

    /// Whether the MLM decoder shares the word-embedding matrix (`tie_word_embeddings`).
    pub fn tied(&self) -> bool {
        match &self.arch {
            ArchConfig::Bert(c) | ArchConfig::Roberta(c) => c.tie_word_embeddings,
            ArchConfig::DistilBert(c) => c.tie_word_embeddings,
            ArchConfig::Albert(c) => c.tie_word_embeddings,
            ArchConfig::Gte(c) => c.tie_word_embeddings,
            ArchConfig::ModernBert(c) => c.tie_word_embeddings,
        }
    }

    fn validate(&self) -> Result<()> {
        let (hidden, heads) = match &self.arch {
            ArchConfig::Bert(c) | ArchConfig::Roberta(c) => (c.hidden_size, c.num_attention_heads),
            ArchConfig::DistilBert(c) => (c.dim, c.n_heads),
            ArchConfig::Albert(c) => (c.hidden_size, c.num_attention_heads),
            ArchConfig::Gte(c) => (c.hidden_size, c.num_attention_heads),
            ArchConfig::ModernBert(c) => (c.hidden_size, c.num_attention_heads),
        };
        if heads == 0 || hidden % heads != 0 {
            return Err(BackboneError::config(
                &self.path,
                format!("hidden size {hidden} is not divisible by {heads} attention heads"),
            ));
        }
        if self.vocab_size() == 0 {
            return Err(BackboneError::config(
                &self.path,
                "field `vocab_size` must be > 0",
            ));
        }
        Ok(())
    }
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
