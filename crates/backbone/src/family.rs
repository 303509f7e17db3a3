//! The registry of backbone families. A family is one file in `family/` providing a [`Family`]
//! (its `model_type`, the common questions its config answers, how it loads, its miniature) and
//! an encoder module implementing [`EncoderModel`]; its line in `registry!` at the bottom
//! declares the module and generates [`Encoder`], the burn module that holds any family's
//! encoder, and [`FAMILIES`]. A checkpoint's `config.json` is read here too, as its family's
//! ([`ModelConfig`]), since a family loads from that config and the config names its family.

use std::path::{Path, PathBuf};

use burn::nn::Embedding;
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::parse_json;
use crate::error::{BackboneError, Result};
use crate::head::MlmHead;
use crate::layers::Dropout;
use crate::weights::Weights;

/// What every family's `config.json` must answer, whatever its keys are called. Deserialised
/// from the usual HF keys; a family that names them otherwise builds it by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub struct Dims {
    /// Rows of the word-embedding matrix (= MLM logits).
    pub vocab_size: usize,
    pub hidden_size: usize,
    #[serde(rename = "num_attention_heads")]
    pub attention_heads: usize,
    #[serde(default)]
    pub pad_token_id: u32,
    /// Longest input the position scheme allows (RoPE models: what the config declares).
    #[serde(rename = "max_position_embeddings")]
    pub max_positions: usize,
}

impl Dims {
    /// The dims of a config under the usual HF keys, once it parses as the family's `C` (so a
    /// bad field is reported when the config is read, not when the model loads).
    pub(crate) fn standard<C: DeserializeOwned>(path: &Path, text: &str) -> Result<Self> {
        parse_json::<C>(path, text)?;
        parse_json(path, text)
    }
}

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
        let family = by_model_type(model_type).ok_or_else(|| BackboneError::UnknownModelType {
            path: path.to_path_buf(),
            model_type: model_type.to_string(),
            supported: supported_model_types(),
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

/// One backbone family: everything the rest of the crate asks of it.
pub struct Family {
    /// The name in tables, fixtures, miniatures and matrices.
    pub name: &'static str,
    /// `model_type` in `config.json`; families sharing code share it (Ettin is `modernbert`),
    /// and a checkpoint is read as the first family listed with its type.
    pub model_type: &'static str,
    /// The common questions, answered from the config text (`path` is for messages).
    pub dims: fn(&Path, &str) -> Result<Dims>,
    /// Encoder and MLM head from a checkpoint's weights.
    pub load: fn(&ModelConfig, &Weights) -> Result<(Encoder, MlmHead)>,
    /// The family's `config.json` at miniature size over `vocab` tokens (`crate::miniature`).
    pub miniature: fn(usize) -> Value,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The encoder of one family.
pub trait EncoderModel {
    /// Final hidden states `[B, L, hidden]` (f32), products and activations computed in `dtype`.
    fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3>;
    /// The input embeddings, which a tied MLM decoder shares.
    fn word_embeddings(&self) -> &Embedding;
    fn word_embeddings_mut(&mut self) -> &mut Embedding;
}

/// A family's encoder and head as the registry's: for its `load`.
pub(crate) fn registered<E: Into<Encoder>>(
    loaded: Result<(E, MlmHead)>,
) -> Result<(Encoder, MlmHead)> {
    loaded.map(|(encoder, head)| (encoder.into(), head))
}

/// The family whose `model_type` this is.
pub fn by_model_type(model_type: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.model_type == model_type)
}

/// The family called `name`.
pub fn by_name(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.name == name)
}

/// `model_type` values lsr reads, with the families behind each where they differ
/// (`new (gte)`, `modernbert (modernbert, ettin)`), for messages.
pub fn supported_model_types() -> String {
    let mut types: Vec<&str> = Vec::new();
    for family in FAMILIES {
        if !types.contains(&family.model_type) {
            types.push(family.model_type);
        }
    }
    let described = types.iter().map(|&t| {
        let names: Vec<&str> = FAMILIES
            .iter()
            .filter(|f| f.model_type == t)
            .map(|f| f.name)
            .collect();
        if names == [t] {
            t.to_string()
        } else {
            format!("{t} ({})", names.join(", "))
        }
    });
    described.collect::<Vec<_>>().join(", ")
}

/// Lines of `module::EncoderType: its families;` — the one list of families.
macro_rules! registry {
    ($($module:ident::$variant:ident: $($family:ident),+;)+) => {
        $(pub mod $module;)+


        /// Any family's encoder, as one burn module.
        #[derive(Module, Debug)]
        pub enum Encoder {
            $($variant($module::$variant)),+
        }

        $(impl From<$module::$variant> for Encoder {
            fn from(encoder: $module::$variant) -> Self {
                Self::$variant(encoder)
            }
        })+

        impl EncoderModel for Encoder {
            fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
                match self {
                    $(Self::$variant(m) => m.forward(ids, mask, dtype)),+
                }
            }

            fn word_embeddings(&self) -> &Embedding {
                match self {
                    $(Self::$variant(m) => m.word_embeddings()),+
                }
            }

            fn word_embeddings_mut(&mut self) -> &mut Embedding {
                match self {
                    $(Self::$variant(m) => m.word_embeddings_mut()),+
                }
            }
        }

        /// Every family lsr reads.
        pub const FAMILIES: &[&Family] = &[$($(&$module::$family),+),+];
    };
}

registry! {
    bert::Bert: BERT, ROBERTA;
    distilbert::DistilBert: DISTILBERT;
    albert::Albert: ALBERT;
    gte::Gte: GTE;
    modernbert::ModernBert: MODERNBERT, ETTIN;
}
