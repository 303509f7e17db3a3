//! GTE "new" (`NewForMaskedLM`, `Alibaba-NLP/gte-en-mlm-base`, remote code only): packed qkv,
//! rotate-half RoPE with optional static NTK scaling, a gated MLP whose *second* half is the
//! gate, post-LN layers. transformers has no class for it: the model's code is the Hub's remote
//! code <https://huggingface.co/Alibaba-NLP/new-impl/blob/main/modeling.py>, and the parity
//! reference is written from the spec (`scripts/fixtures/README.md`).

use std::path::Path;

use burn::nn::{Embedding, Linear};
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;
use serde_json::json;

use lsr_compute::launches::{Region, mark};
use lsr_compute::norm::LayerNorm;
use crate::config::{default_dropout, default_one, default_true};
use crate::family::{Dims, Encoder, EncoderModel, Family, ModelConfig, registered};
use crate::error::{BackboneError, Result};
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    ActivatedHalf, Activation, Dropout, Rope, RotaryAttention, gated_mlp, leading_rows,
    AttentionMask, over_tokens,
};
use crate::miniature::{HEADS, HIDDEN, INTERMEDIATE, LAYERS, POSITIONS};
use lsr_compute::precision::residual;
use crate::weights::Weights;

#[derive(Clone, Debug, Deserialize)]
pub struct GteConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_one")]
    pub type_vocab_size: usize,
    #[serde(default = "layer_norm")]
    pub layer_norm_type: String,
    pub layer_norm_eps: f64,
    #[serde(default = "rope")]
    pub position_embedding_type: String,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    /// transformers-5 style: `{"rope_theta": ...}`.
    #[serde(default)]
    pub rope_parameters: Option<RopeParameters>,
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    #[serde(default = "default_true")]
    pub pack_qkv: bool,
    #[serde(default)]
    pub logn_attention_scale: bool,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    /// `NewConfig`'s defaults: 0.1 on the hidden states, none on the attention probabilities.
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f64,
    #[serde(default)]
    pub attention_probs_dropout_prob: f64,
}

pub const GTE: Family = Family {
    name: "gte",
    model_type: "new",
    dims: Dims::standard::<GteConfig>,
    load,
    miniature: |vocab| {
        json!({
            "model_type": "new", "architectures": ["NewForMaskedLM"], "vocab_size": vocab,
            "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "intermediate_size": INTERMEDIATE, "hidden_act": "gelu",
            "max_position_embeddings": POSITIONS, "type_vocab_size": 1,
            "layer_norm_type": "layer_norm", "layer_norm_eps": 1e-12,
            "position_embedding_type": "rope", "rope_theta": 500000.0, "pack_qkv": true,
            "pad_token_id": 0
        })
    },
};

fn load(config: &ModelConfig, weights: &Weights) -> Result<(Encoder, MlmHead)> {
    registered(Gte::load(weights, &config.arch()?, config))
}

#[derive(Clone, Debug, Deserialize)]
pub struct RopeParameters {
    pub rope_theta: f64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RopeScaling {
    #[serde(rename = "type")]
    pub kind: String,
    pub factor: f64,
    #[serde(default)]
    pub mixed_b: Option<f64>,
}

fn layer_norm() -> String {
    "layer_norm".into()
}

fn rope() -> String {
    "rope".into()
}

impl GteConfig {
    fn theta(&self) -> f64 {
        self.rope_parameters
            .as_ref()
            .map(|p| p.rope_theta)
            .or(self.rope_theta)
            .unwrap_or(10_000.0)
    }

    /// Rejects the variants this port does not implement, naming the field.
    fn check_supported(&self, path: &Path) -> Result<Option<f64>> {
        let unsupported = |field: &str, value: String| {
            Err(BackboneError::config(
                path,
                format!("field `{field}`: {value} is not supported"),
            ))
        };
        if self.layer_norm_type != "layer_norm" {
            return unsupported("layer_norm_type", self.layer_norm_type.clone());
        }
        if self.position_embedding_type != "rope" {
            return unsupported(
                "position_embedding_type",
                self.position_embedding_type.clone(),
            );
        }
        if !self.pack_qkv {
            return unsupported("pack_qkv", "false".into());
        }
        if self.logn_attention_scale {
            return unsupported("logn_attention_scale", "true".into());
        }
        match &self.rope_scaling {
            None => Ok(None),
            Some(s) if s.kind == "ntk" && s.mixed_b.is_none() => Ok(Some(s.factor)),
            Some(s) => unsupported(
                "rope_scaling",
                format!("type `{}` (mixed_b {:?})", s.kind, s.mixed_b),
            ),
        }
    }
}

const HEAD: HeadNames = HeadNames {
    dense: "lm_head.dense",
    norm: "lm_head.norm",
    bias: "lm_head.decoder.bias",
    decoder_bias: "lm_head.decoder.bias",
    decoder_weight: "lm_head.decoder.weight",
};

#[derive(Module, Debug)]
pub struct GteLayer {
    /// `attention.qkv_proj`: q | k | v along the output dimension.
    pub qkv_proj: Linear,
    pub o_proj: Linear,
    pub attn_ln: LayerNorm,
    /// `mlp.up_gate_proj`: up | gate, no bias.
    pub up_gate_proj: Linear,
    pub down_proj: Linear,
    pub mlp_ln: LayerNorm,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub activation: Activation,
    /// After the attention output, inside and after the MLP.
    #[module(skip)]
    pub hidden_dropout: Dropout,
    #[module(skip)]
    pub attention_dropout: Dropout,
}

#[derive(Module, Debug)]
pub struct Gte {
    pub word_embeddings: Embedding,
    pub token_type_embeddings: Option<Embedding>,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<GteLayer>,
    /// For the head dimension of the RoPE tables.
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub rope_theta: f64,
    #[module(skip)]
    pub ntk_factor: Option<f64>,
    /// After the embeddings' LayerNorm (the layers hold their own).
    #[module(skip)]
    pub hidden_dropout: Dropout,
}

impl Gte {
    pub fn load(w: &Weights, c: &GteConfig, config: &ModelConfig) -> Result<(Self, MlmHead)> {
        let path = config.path.as_path();
        let ntk_factor = c.check_supported(path)?;
        let e = if w.contains("new.embeddings.word_embeddings.weight") {
            w.pp("new")
        } else {
            w.clone()
        };
        let (h, i, eps) = (c.hidden_size, c.intermediate_size, c.layer_norm_eps);
        let activation = Activation::from_hf(&c.hidden_act, path, "hidden_act")?;
        let hidden_dropout = config.dropout("hidden_dropout_prob", c.hidden_dropout_prob)?;
        let attention_dropout = config.dropout(
            "attention_probs_dropout_prob",
            c.attention_probs_dropout_prob,
        )?;
        let load_layer = |l: usize| -> Result<GteLayer> {
            let w = e.pp(&format!("encoder.layer.{l}"));
            Ok(GteLayer {
                qkv_proj: w.linear("attention.qkv_proj", h, 3 * h, true)?,
                o_proj: w.linear("attention.o_proj", h, h, true)?,
                attn_ln: w.layer_norm("attn_ln", h, eps, true)?,
                up_gate_proj: w.linear("mlp.up_gate_proj", h, 2 * i, false)?,
                down_proj: w.linear("mlp.down_proj", i, h, true)?,
                mlp_ln: w.layer_norm("mlp_ln", h, eps, true)?,
                heads: c.num_attention_heads,
                activation,
                hidden_dropout,
                attention_dropout,
            })
        };
        let encoder = Self {
            word_embeddings: e.embedding("embeddings.word_embeddings.weight", c.vocab_size, h)?,
            token_type_embeddings: if c.type_vocab_size > 0 {
                Some(e.embedding(
                    "embeddings.token_type_embeddings.weight",
                    c.type_vocab_size,
                    h,
                )?)
            } else {
                None
            },
            embeddings_norm: e.layer_norm("embeddings.LayerNorm", h, eps, true)?,
            layers: (0..c.num_hidden_layers)
                .map(load_layer)
                .collect::<Result<_>>()?,
            heads: c.num_attention_heads,
            rope_theta: c.theta(),
            ntk_factor,
            hidden_dropout,
        };
        let head = MlmHead::load(
            w,
            &HEAD,
            HeadShape::biased(h, h, c.vocab_size, eps, activation, c.tie_word_embeddings),
        )?;
        Ok((encoder, head))
    }
}

impl GteLayer {
    /// Post-LN: `a = LN(x + drop(Attn(x)))`, `x = LN(a + drop(MLP(a)))`, on the f32 residual
    /// stream.
    fn forward(
        &self,
        x: Tensor<2>,
        batch: usize,
        rope: &Rope,
        mask: &AttentionMask,
        dtype: DType,
    ) -> Tensor<2> {
        let x = mark(x, Region::Attention);
        let attention = RotaryAttention {
            qkv: &self.qkv_proj,
            out: &self.o_proj,
            heads: self.heads,
            dropout: self.attention_dropout,
            dtype,
        }
        .forward(x.clone(), batch, rope, mask);
        let x = self
            .attn_ln
            .forward(residual(x, self.hidden_dropout.forward(attention)));
        let x = mark(x, Region::Ffn);
        let mlp = gated_mlp(
            &self.up_gate_proj,
            &self.down_proj,
            x.clone(),
            self.activation,
            ActivatedHalf::Second,
            self.hidden_dropout,
            dtype,
        );
        self.mlp_ln
            .forward(residual(x, self.hidden_dropout.forward(mlp)))
    }
}

impl EncoderModel for Gte {
    /// The f32 residual stream `[B, L, hidden]`; products and activations run in `dtype`.
    fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        let [_, len] = ids.dims();
        let device = ids.device();
        let mut x = self.word_embeddings.forward(ids);
        if let Some(token_type) = &self.token_type_embeddings {
            x = x + leading_rows(token_type, 1);
        }
        let x = self.hidden_dropout.forward(self.embeddings_norm.forward(x));
        let head_dim = x.dims()[2] / self.heads;
        let rope = Rope::new(len, head_dim, self.rope_theta, self.ntk_factor, dtype, &device);
        let mask = AttentionMask::padding(mask);
        over_tokens(x, |rows, batch| {
            self.layers
                .iter()
                .fold(rows, |x, layer| layer.forward(x, batch, &rope, &mask, dtype))
        })
    }

    fn word_embeddings(&self) -> &Embedding {
        &self.word_embeddings
    }

    fn word_embeddings_mut(&mut self) -> &mut Embedding {
        &mut self.word_embeddings
    }
}
