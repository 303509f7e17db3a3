//! DistilBERT (`DistilBertForMaskedLM`): BERT without token types, its own config keys, and
//! every LayerNorm at eps 1e-12 (hard-coded in transformers, absent from the config).
//!
//! Follows transformers v5.24.0, the release the parity fixtures were generated with:
//! <https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/distilbert/modeling_distilbert.py>

use burn::nn::Embedding;
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;
use serde_json::json;

use lsr_compute::norm::LayerNorm;
use crate::config::{default_dropout, default_true, parse_json};
use crate::family::{Dims, Encoder, EncoderModel, Family, ModelConfig, registered};
use crate::error::Result;
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    Activation, Dropout, PostLnBlock, PostLnDropout, PostLnNames, PostLnShape, leading_rows,
    run_post_ln,
};
use crate::miniature::{self, HIDDEN, INTERMEDIATE, LAYERS, POSITIONS};
use crate::weights::Weights;

const LAYER_NORM_EPS: f64 = 1e-12;

#[derive(Clone, Debug, Deserialize)]
pub struct DistilBertConfig {
    pub vocab_size: usize,
    pub dim: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub hidden_dim: usize,
    pub activation: String,
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    #[serde(default = "default_dropout")]
    pub dropout: f64,
    #[serde(default = "default_dropout")]
    pub attention_dropout: f64,
}

pub const DISTILBERT: Family = Family {
    name: "distilbert",
    model_type: "distilbert",
    dims: |path, text| {
        let c: DistilBertConfig = parse_json(path, text)?;
        Ok(Dims {
            vocab_size: c.vocab_size,
            hidden_size: c.dim,
            attention_heads: c.n_heads,
            pad_token_id: c.pad_token_id,
            max_positions: c.max_position_embeddings,
        })
    },
    load,
    miniature: |vocab| {
        json!({
            "model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"],
            "vocab_size": vocab, "dim": HIDDEN, "n_layers": LAYERS, "n_heads": miniature::HEADS,
            "hidden_dim": INTERMEDIATE, "activation": "gelu",
            "max_position_embeddings": POSITIONS, "sinusoidal_pos_embds": false,
            "pad_token_id": 0, "tie_word_embeddings": true
        })
    },
};

fn load(config: &ModelConfig, weights: &Weights) -> Result<(Encoder, MlmHead)> {
    registered(DistilBert::load(weights, &config.arch()?, config))
}

const LAYER: PostLnNames = PostLnNames {
    query: "attention.q_lin",
    key: "attention.k_lin",
    value: "attention.v_lin",
    attention_output: "attention.out_lin",
    attention_norm: "sa_layer_norm",
    intermediate: "ffn.lin1",
    output: "ffn.lin2",
    output_norm: "output_layer_norm",
};

const HEAD: HeadNames = HeadNames {
    dense: "vocab_transform",
    norm: "vocab_layer_norm",
    bias: "vocab_projector.bias",
    decoder_bias: "vocab_projector.bias",
    decoder_weight: "vocab_projector.weight",
};

#[derive(Module, Debug)]
pub struct DistilBert {
    pub word_embeddings: Embedding,
    pub position_embeddings: Embedding,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<PostLnBlock>,
    /// After the embeddings' LayerNorm.
    #[module(skip)]
    pub embeddings_dropout: Dropout,
}

impl DistilBert {
    pub fn load(
        w: &Weights,
        c: &DistilBertConfig,
        config: &ModelConfig,
    ) -> Result<(Self, MlmHead)> {
        let e = w.pp("distilbert");
        let h = c.dim;
        let activation = Activation::from_hf(&c.activation, &config.path, "activation")?;
        let dropout = config.dropout("dropout", c.dropout)?;
        let shape = PostLnShape {
            hidden: h,
            intermediate: c.hidden_dim,
            heads: c.n_heads,
            eps: LAYER_NORM_EPS,
            activation,
            // transformers' DistilBERT does not drop after the attention output (`out_lin`).
            dropout: PostLnDropout {
                attention_probs: config.dropout("attention_dropout", c.attention_dropout)?,
                attention_output: Dropout(0.0),
                output: dropout,
            },
        };
        let encoder = Self {
            word_embeddings: e.embedding("embeddings.word_embeddings.weight", c.vocab_size, h)?,
            position_embeddings: e.embedding(
                "embeddings.position_embeddings.weight",
                c.max_position_embeddings,
                h,
            )?,
            embeddings_norm: e.layer_norm("embeddings.LayerNorm", h, LAYER_NORM_EPS, true)?,
            layers: (0..c.n_layers)
                .map(|i| PostLnBlock::load(&e.pp(&format!("transformer.layer.{i}")), &LAYER, shape))
                .collect::<Result<_>>()?,
            embeddings_dropout: dropout,
        };
        let head = MlmHead::load(
            w,
            &HEAD,
            HeadShape::biased(
                h,
                h,
                c.vocab_size,
                LAYER_NORM_EPS,
                activation,
                c.tie_word_embeddings,
            ),
        )?;
        Ok((encoder, head))
    }
}

impl EncoderModel for DistilBert {
    fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        let positions = leading_rows(&self.position_embeddings, ids.dims()[1]);
        let x = self
            .embeddings_norm
            .forward(self.word_embeddings.forward(ids) + positions);
        let x = self.embeddings_dropout.forward(x);
        run_post_ln(&self.layers, x, mask, dtype)
    }

    fn word_embeddings(&self) -> &Embedding {
        &self.word_embeddings
    }

    fn word_embeddings_mut(&mut self) -> &mut Embedding {
        &mut self.word_embeddings
    }
}
