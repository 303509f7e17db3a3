//! GTE "new" (`NewForMaskedLM`, `Alibaba-NLP/gte-en-mlm-base`, remote code only): packed qkv,
//! rotate-half RoPE with optional static NTK scaling, a gated MLP whose *second* half is the
//! gate, post-LN layers. transformers has no class for it; the parity reference is written from
//! the spec (`scripts/fixtures/README.md`).

use std::path::Path;

use burn::nn::{Embedding, LayerNorm, Linear};
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;

use crate::config::{default_one, default_true};
use crate::error::{BackboneError, Result};
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    Activation, Rope, attend, leading_rows, merge_heads, padding_bias, split_heads,
};
use crate::precision::{linear, residual};
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
}

#[derive(Module, Debug)]
pub struct Gte {
    pub word_embeddings: Embedding,
    pub token_type_embeddings: Option<Embedding>,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<GteLayer>,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub activation: Activation,
    #[module(skip)]
    pub rope_theta: f64,
    #[module(skip)]
    pub ntk_factor: Option<f64>,
}

impl Gte {
    pub fn load(w: &Weights, c: &GteConfig, path: &Path) -> Result<(Self, MlmHead)> {
        let ntk_factor = c.check_supported(path)?;
        let e = if w.contains("new.embeddings.word_embeddings.weight") {
            w.pp("new")
        } else {
            w.clone()
        };
        let (h, i, eps) = (c.hidden_size, c.intermediate_size, c.layer_norm_eps);
        let activation = Activation::from_hf(&c.hidden_act, path, "hidden_act")?;
        let load_layer = |l: usize| -> Result<GteLayer> {
            let w = e.pp(&format!("encoder.layer.{l}"));
            Ok(GteLayer {
                qkv_proj: w.linear("attention.qkv_proj", h, 3 * h, true)?,
                o_proj: w.linear("attention.o_proj", h, h, true)?,
                attn_ln: w.layer_norm("attn_ln", h, eps, true)?,
                up_gate_proj: w.linear("mlp.up_gate_proj", h, 2 * i, false)?,
                down_proj: w.linear("mlp.down_proj", i, h, true)?,
                mlp_ln: w.layer_norm("mlp_ln", h, eps, true)?,
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
            activation,
            rope_theta: c.theta(),
            ntk_factor,
        };
        let head = MlmHead::load(
            w,
            &HEAD,
            HeadShape::biased(h, h, c.vocab_size, eps, activation, c.tie_word_embeddings),
        )?;
        Ok((encoder, head))
    }

    /// The f32 residual stream `[B, L, hidden]`; products and activations run in `dtype`.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        let [_, len] = ids.dims();
        let device = ids.device();
        let mut x = self.word_embeddings.forward(ids);
        if let Some(token_type) = &self.token_type_embeddings {
            x = x + leading_rows(token_type, 1);
        }
        let mut x = self.embeddings_norm.forward(x);
        let hidden = x.dims()[2];
        let rope = Rope::new(
            len,
            hidden / self.heads,
            self.rope_theta,
            self.ntk_factor,
            &device,
        );
        let bias = padding_bias(mask);
        for layer in &self.layers {
            let qkv = linear(&layer.qkv_proj, x.clone(), dtype);
            let q = split_heads(qkv.clone().slice_dim(2, 0..hidden), self.heads);
            let k = split_heads(qkv.clone().slice_dim(2, hidden..2 * hidden), self.heads);
            let v = split_heads(qkv.slice_dim(2, 2 * hidden..3 * hidden), self.heads);
            let context = merge_heads(attend(rope.apply(q), rope.apply(k), v, bias.clone()));
            x = layer
                .attn_ln
                .forward(residual(x, linear(&layer.o_proj, context, dtype)));
            let up_gate = linear(&layer.up_gate_proj, x.clone(), dtype);
            let inner = up_gate.dims()[2] / 2;
            let up = up_gate.clone().slice_dim(2, 0..inner);
            let gate = self
                .activation
                .forward(up_gate.slice_dim(2, inner..2 * inner));
            x = layer
                .mlp_ln
                .forward(residual(x, linear(&layer.down_proj, gate * up, dtype)));
        }
        x
    }
}
