//! ALBERT (`AlbertForMaskedLM`): factorised embeddings (`embedding_size` → hidden through
//! `embedding_hidden_mapping_in`), layer groups whose weights are shared across depth, and a
//! head that projects back to `embedding_size` before the tied decoder.
//!
//! Follows transformers v5.24.0, the release the parity fixtures were generated with:
//! <https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/albert/modeling_albert.py>

use burn::nn::{Embedding, Linear};
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;
use serde_json::json;

use lsr_compute::norm::LayerNorm;
use crate::config::{default_one, default_true, default_type_vocab};
use crate::family::{Dims, Encoder, EncoderModel, Family, ModelConfig, registered};
use crate::error::{BackboneError, Result};
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    Activation, Dropout, PostLnBlock, PostLnDropout, PostLnNames, PostLnShape, leading_rows,
    run_post_ln,
};
use crate::miniature::{self, HIDDEN};
use lsr_compute::precision::linear;
use crate::weights::Weights;

#[derive(Clone, Debug, Deserialize)]
pub struct AlbertConfig {
    pub vocab_size: usize,
    pub embedding_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    #[serde(default = "default_one")]
    pub num_hidden_groups: usize,
    #[serde(default = "default_one")]
    pub inner_group_num: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    /// transformers' `AlbertConfig` defaults are 0, as albert-base-v2's config says.
    #[serde(default)]
    pub hidden_dropout_prob: f64,
    #[serde(default)]
    pub attention_probs_dropout_prob: f64,
}

pub const ALBERT: Family = Family {
    name: "albert",
    model_type: "albert",
    dims: Dims::standard::<AlbertConfig>,
    load,
    miniature: |vocab| {
        let mut config = miniature::bert_like("albert", "AlbertForMaskedLM", vocab);
        config["embedding_size"] = json!(HIDDEN / 2);
        config["num_hidden_groups"] = json!(1);
        config["inner_group_num"] = json!(1);
        config["hidden_act"] = json!("gelu_new");
        config
    },
};

fn load(config: &ModelConfig, weights: &Weights) -> Result<(Encoder, MlmHead)> {
    registered(Albert::load(weights, &config.arch()?, config))
}

const LAYER: PostLnNames = PostLnNames {
    query: "attention.query",
    key: "attention.key",
    value: "attention.value",
    attention_output: "attention.dense",
    attention_norm: "attention.LayerNorm",
    intermediate: "ffn",
    output: "ffn_output",
    output_norm: "full_layer_layer_norm",
};

const HEAD: HeadNames = HeadNames {
    dense: "predictions.dense",
    norm: "predictions.LayerNorm",
    bias: "predictions.bias",
    decoder_bias: "predictions.decoder.bias",
    decoder_weight: "predictions.decoder.weight",
};

#[derive(Module, Debug)]
pub struct Albert {
    pub word_embeddings: Embedding,
    pub position_embeddings: Embedding,
    pub token_type_embeddings: Embedding,
    pub embeddings_norm: LayerNorm,
    pub embedding_hidden_mapping_in: Linear,
    /// `groups[g][j]`: inner layer j of group g.
    pub groups: Vec<Vec<PostLnBlock>>,
    #[module(skip)]
    pub num_hidden_layers: usize,
    /// After the embeddings' LayerNorm.
    #[module(skip)]
    pub embeddings_dropout: Dropout,
}

impl Albert {
    pub fn load(w: &Weights, c: &AlbertConfig, config: &ModelConfig) -> Result<(Self, MlmHead)> {
        let path = config.path.as_path();
        if c.num_hidden_groups == 0 || !c.num_hidden_layers.is_multiple_of(c.num_hidden_groups) {
            return Err(BackboneError::config(
                path,
                format!(
                    "field `num_hidden_groups`: {} does not divide num_hidden_layers {}",
                    c.num_hidden_groups, c.num_hidden_layers
                ),
            ));
        }
        let e = w.pp("albert");
        let (emb, h) = (c.embedding_size, c.hidden_size);
        let activation = Activation::from_hf(&c.hidden_act, path, "hidden_act")?;
        let hidden_dropout = config.dropout("hidden_dropout_prob", c.hidden_dropout_prob)?;
        let shape = PostLnShape {
            hidden: h,
            intermediate: c.intermediate_size,
            heads: c.num_attention_heads,
            eps: c.layer_norm_eps,
            activation,
            // transformers' ALBERT defines a feed-forward dropout but never applies it.
            dropout: PostLnDropout {
                attention_probs: config.dropout(
                    "attention_probs_dropout_prob",
                    c.attention_probs_dropout_prob,
                )?,
                attention_output: hidden_dropout,
                output: Dropout(0.0),
            },
        };
        let load_group = |g: usize| -> Result<Vec<PostLnBlock>> {
            (0..c.inner_group_num)
                .map(|j| {
                    let prefix = format!("encoder.albert_layer_groups.{g}.albert_layers.{j}");
                    PostLnBlock::load(&e.pp(&prefix), &LAYER, shape)
                })
                .collect()
        };
        let encoder = Self {
            word_embeddings: e.embedding("embeddings.word_embeddings.weight", c.vocab_size, emb)?,
            position_embeddings: e.embedding(
                "embeddings.position_embeddings.weight",
                c.max_position_embeddings,
                emb,
            )?,
            token_type_embeddings: e.embedding(
                "embeddings.token_type_embeddings.weight",
                c.type_vocab_size,
                emb,
            )?,
            embeddings_norm: e.layer_norm("embeddings.LayerNorm", emb, c.layer_norm_eps, true)?,
            embedding_hidden_mapping_in: e.linear(
                "encoder.embedding_hidden_mapping_in",
                emb,
                h,
                true,
            )?,
            groups: (0..c.num_hidden_groups)
                .map(load_group)
                .collect::<Result<_>>()?,
            num_hidden_layers: c.num_hidden_layers,
            embeddings_dropout: hidden_dropout,
        };
        let head = MlmHead::load(
            w,
            &HEAD,
            HeadShape::biased(
                h,
                emb,
                c.vocab_size,
                c.layer_norm_eps,
                activation,
                c.tie_word_embeddings,
            ),
        )?;
        Ok((encoder, head))
    }
}

impl EncoderModel for Albert {
    fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        let positions = leading_rows(&self.position_embeddings, ids.dims()[1]);
        let token_type = leading_rows(&self.token_type_embeddings, 1);
        let x = self
            .embeddings_norm
            .forward(self.word_embeddings.forward(ids) + positions + token_type);
        let x = self.embeddings_dropout.forward(x);
        // The residual stream the blocks add to is f32.
        let x = linear(&self.embedding_hidden_mapping_in, x, dtype).cast(DType::F32);
        // Layer i runs every inner layer of group floor(i / (layers / groups)).
        let layers_per_group = self.num_hidden_layers / self.groups.len();
        let schedule = (0..self.num_hidden_layers).flat_map(|i| &self.groups[i / layers_per_group]);
        run_post_ln(schedule, x, mask, dtype)
    }

    fn word_embeddings(&self) -> &Embedding {
        &self.word_embeddings
    }

    fn word_embeddings_mut(&mut self) -> &mut Embedding {
        &mut self.word_embeddings
    }
}
