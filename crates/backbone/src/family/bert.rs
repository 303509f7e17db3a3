//! BERT (`BertForMaskedLM`) and RoBERTa (`RobertaForMaskedLM`): learned absolute positions,
//! token types, post-LN layers. They differ in tensor prefixes, head names and position ids.
//!
//! Follows transformers v5.24.0, the release the parity fixtures were generated with:
//! <https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/bert/modeling_bert.py>
//! <https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/roberta/modeling_roberta.py>

use burn::nn::Embedding;
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;
use serde_json::json;

use lsr_compute::norm::LayerNorm;
use crate::config::{default_dropout, default_true, default_type_vocab};
use crate::family::{Dims, Encoder, EncoderModel, Family, ModelConfig, registered};
use crate::error::{BackboneError, Result};
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    Activation, Dropout, PostLnBlock, PostLnDropout, PostLnNames, PostLnShape, leading_rows,
    run_post_ln,
};
use crate::miniature;
use crate::weights::Weights;

#[derive(Clone, Debug, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_absolute")]
    pub position_embedding_type: String,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f64,
    #[serde(default = "default_dropout")]
    pub attention_probs_dropout_prob: f64,
}

fn default_absolute() -> String {
    "absolute".into()
}

pub const BERT: Family = Family {
    name: "bert",
    model_type: "bert",
    dims: Dims::standard::<BertConfig>,
    load: |config, weights| load(config, weights, false),
    miniature: |vocab| miniature::bert_like("bert", "BertForMaskedLM", vocab),
};

pub const ROBERTA: Family = Family {
    name: "roberta",
    model_type: "roberta",
    dims: |path, text| {
        let dims = Dims::standard::<BertConfig>(path, text)?;
        // RoBERTa's positions start after the padding index.
        let reserved = dims.pad_token_id as usize + 1;
        Ok(Dims {
            max_positions: dims.max_positions.saturating_sub(reserved),
            ..dims
        })
    },
    load: |config, weights| load(config, weights, true),
    miniature: |vocab| {
        let mut config = miniature::bert_like("roberta", "RobertaForMaskedLM", vocab);
        config["type_vocab_size"] = json!(1);
        config["layer_norm_eps"] = json!(1e-5);
        config
    },
};

fn load(config: &ModelConfig, weights: &Weights, roberta: bool) -> Result<(Encoder, MlmHead)> {
    registered(Bert::load(weights, &config.arch()?, roberta, config))
}

const LAYER: PostLnNames = PostLnNames {
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    attention_output: "attention.output.dense",
    attention_norm: "attention.output.LayerNorm",
    intermediate: "intermediate.dense",
    output: "output.dense",
    output_norm: "output.LayerNorm",
};

const BERT_HEAD: HeadNames = HeadNames {
    dense: "cls.predictions.transform.dense",
    norm: "cls.predictions.transform.LayerNorm",
    bias: "cls.predictions.bias",
    decoder_bias: "cls.predictions.decoder.bias",
    decoder_weight: "cls.predictions.decoder.weight",
};

const ROBERTA_HEAD: HeadNames = HeadNames {
    dense: "lm_head.dense",
    norm: "lm_head.layer_norm",
    bias: "lm_head.bias",
    decoder_bias: "lm_head.decoder.bias",
    decoder_weight: "lm_head.decoder.weight",
};

/// How position ids are derived from the input ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// `arange(L)`.
    Absolute,
    /// RoBERTa: `cumsum(ids != pad) · (ids != pad) + pad`, so tokens start at `pad + 1`.
    AfterPadding { pad: u32 },
}

#[derive(Module, Debug)]
pub struct Bert {
    pub word_embeddings: Embedding,
    pub position_embeddings: Embedding,
    pub token_type_embeddings: Embedding,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<PostLnBlock>,
    #[module(skip)]
    pub positions: Positions,
    /// After the embeddings' LayerNorm.
    #[module(skip)]
    pub embeddings_dropout: Dropout,
}

impl Bert {
    /// Loads encoder and head; `roberta` selects RoBERTa's prefix, head and positions.
    pub fn load(
        w: &Weights,
        c: &BertConfig,
        roberta: bool,
        config: &ModelConfig,
    ) -> Result<(Self, MlmHead)> {
        let path = config.path.as_path();
        if c.position_embedding_type != "absolute" {
            return Err(BackboneError::config(
                path,
                format!(
                    "field `position_embedding_type`: `{}` is not supported (only `absolute`)",
                    c.position_embedding_type
                ),
            ));
        }
        let prefix = if roberta { "roberta" } else { "bert" };
        // Bare `BertModel` files have no prefix; they also have no head, which `MlmHead::load`
        // reports, so the encoder is read from wherever it is.
        let e = if w.contains(&format!("{prefix}.embeddings.word_embeddings.weight")) {
            w.pp(prefix)
        } else {
            w.clone()
        };
        let (h, shape) = (c.hidden_size, c.layer_shape(config)?);
        let encoder = Self {
            word_embeddings: e.embedding("embeddings.word_embeddings.weight", c.vocab_size, h)?,
            position_embeddings: e.embedding(
                "embeddings.position_embeddings.weight",
                c.max_position_embeddings,
                h,
            )?,
            token_type_embeddings: e.embedding(
                "embeddings.token_type_embeddings.weight",
                c.type_vocab_size,
                h,
            )?,
            embeddings_norm: e.layer_norm("embeddings.LayerNorm", h, c.layer_norm_eps, true)?,
            layers: (0..c.num_hidden_layers)
                .map(|i| PostLnBlock::load(&e.pp(&format!("encoder.layer.{i}")), &LAYER, shape))
                .collect::<Result<_>>()?,
            positions: if roberta {
                Positions::AfterPadding {
                    pad: c.pad_token_id,
                }
            } else {
                Positions::Absolute
            },
            embeddings_dropout: shape.dropout.output,
        };
        // RoBERTa's head calls `gelu` directly, whatever `hidden_act` says.
        let (names, activation) = match roberta {
            true => (&ROBERTA_HEAD, Activation::Gelu),
            false => (&BERT_HEAD, shape.activation),
        };
        let eps = c.layer_norm_eps;
        let head_shape = HeadShape::biased(h, h, c.vocab_size, eps, activation, c.tie_word_embeddings);
        Ok((encoder, MlmHead::load(w, names, head_shape)?))
    }
}

impl BertConfig {
    /// Each layer's shape; dropout as the config's probabilities say, where training drops.
    fn layer_shape(&self, config: &ModelConfig) -> Result<PostLnShape> {
        let activation = Activation::from_hf(&self.hidden_act, &config.path, "hidden_act")?;
        let hidden_dropout = config.dropout("hidden_dropout_prob", self.hidden_dropout_prob)?;
        let attention_probs = self.attention_probs_dropout_prob;
        Ok(PostLnShape {
            hidden: self.hidden_size,
            intermediate: self.intermediate_size,
            heads: self.num_attention_heads,
            eps: self.layer_norm_eps,
            activation,
            dropout: PostLnDropout {
                attention_probs: config.dropout("attention_probs_dropout_prob", attention_probs)?,
                attention_output: hidden_dropout,
                output: hidden_dropout,
            },
        })
    }
}

impl EncoderModel for Bert {
    fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        // Token type 0 for every token, as HF does for a single text.
        let token_type = leading_rows(&self.token_type_embeddings, 1);
        let positions = match self.positions {
            // Rows 0..L of the table, broadcast over the batch: what a lookup of `arange(L)`
            // gives, without the ids or the gather (and its scatter in the backward pass).
            Positions::Absolute => leading_rows(&self.position_embeddings, ids.dims()[1]),
            Positions::AfterPadding { pad } => {
                let tokens = ids.clone().not_equal_elem(pad as i64).int();
                let positions = tokens.clone().cumsum(1) * tokens + pad as i64;
                self.position_embeddings.forward(positions)
            }
        };
        let x = self.word_embeddings.forward(ids) + positions + token_type;
        let x = self.embeddings_dropout.forward(self.embeddings_norm.forward(x));
        run_post_ln(&self.layers, x, mask, dtype)
    }

    fn word_embeddings(&self) -> &Embedding {
        &self.word_embeddings
    }

    fn word_embeddings_mut(&mut self) -> &mut Embedding {
        &mut self.word_embeddings
    }
}
