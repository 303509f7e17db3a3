//! ModernBERT (`ModernBertForMaskedLM`) and Ettin (the same code, local RoPE theta = global):
//! pre-LN, no biases by default, fused Wqkv, GeGLU (the *first* half is activated), alternating
//! global and sliding-window attention with their own RoPE thetas, a final norm.
//!
//! Both config schemas are accepted: transformers 4 (`global_rope_theta`, `local_rope_theta`,
//! layer kind from `global_attn_every_n_layers`) and transformers 5 (`layer_types`,
//! `rope_parameters`), the latter preferred when present.

use std::collections::HashMap;
use std::path::Path;

use burn::nn::{Embedding, LayerNorm, Linear};
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;

use crate::config::default_true;
use crate::error::{BackboneError, Result};
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    Activation, Rope, attend, merge_heads, padding_bias, sliding_window_bias, split_heads,
};
use crate::precision::{linear, residual};
use crate::weights::Weights;

#[derive(Clone, Debug, Deserialize)]
pub struct ModernBertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub hidden_activation: String,
    pub max_position_embeddings: usize,
    /// The hub's ModernBERT-base carries both `norm_eps` and `layer_norm_eps` (aliases).
    #[serde(default)]
    pub norm_eps: Option<f64>,
    #[serde(default)]
    pub layer_norm_eps: Option<f64>,
    #[serde(default)]
    pub norm_bias: bool,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default = "default_true")]
    pub decoder_bias: bool,
    #[serde(default)]
    pub classifier_bias: bool,
    #[serde(default = "gelu")]
    pub classifier_activation: String,
    pub local_attention: usize,
    #[serde(default = "three")]
    pub global_attn_every_n_layers: usize,
    #[serde(default)]
    pub global_rope_theta: Option<f64>,
    #[serde(default)]
    pub local_rope_theta: Option<f64>,
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    #[serde(default)]
    pub rope_parameters: Option<HashMap<String, RopeParameters>>,
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RopeParameters {
    pub rope_theta: f64,
    #[serde(default = "default_rope_type")]
    pub rope_type: String,
}

fn gelu() -> String {
    "gelu".into()
}

fn three() -> usize {
    3
}

fn default_rope_type() -> String {
    "default".into()
}

const FULL: &str = "full_attention";
const SLIDING: &str = "sliding_attention";

impl ModernBertConfig {
    /// Whether each layer is sliding-window, and the global and local RoPE thetas, from
    /// whichever schema the file uses.
    fn layer_plan(&self, path: &Path) -> Result<(Vec<bool>, f64, f64)> {
        let err = |message: String| BackboneError::config(path, message);
        if self.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return Err(err(
                "field `rope_scaling`: RoPE scaling is not supported for ModernBERT".into(),
            ));
        }
        let (global_theta, local_theta) = match &self.rope_parameters {
            Some(params) => {
                let theta = |kind: &str| match params.get(kind) {
                    Some(p) if p.rope_type == "default" => Ok(p.rope_theta),
                    Some(p) => Err(err(format!(
                        "field `rope_parameters.{kind}.rope_type`: `{}` is not supported",
                        p.rope_type
                    ))),
                    None => Err(err(format!("field `rope_parameters.{kind}` is missing"))),
                };
                (theta(FULL)?, theta(SLIDING)?)
            }
            None => (
                self.global_rope_theta.unwrap_or(160_000.0),
                self.local_rope_theta.unwrap_or(10_000.0),
            ),
        };
        let sliding: Vec<bool> = match &self.layer_types {
            Some(types) => {
                if types.len() != self.num_hidden_layers {
                    return Err(err(format!(
                        "field `layer_types`: {} entries for {} layers",
                        types.len(),
                        self.num_hidden_layers
                    )));
                }
                types
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match t.as_str() {
                        FULL => Ok(false),
                        SLIDING => Ok(true),
                        other => Err(err(format!(
                            "field `layer_types[{i}]`: unknown layer type `{other}`"
                        ))),
                    })
                    .collect::<Result<_>>()?
            }
            None => (0..self.num_hidden_layers)
                .map(|i| i % self.global_attn_every_n_layers.max(1) != 0)
                .collect(),
        };
        Ok((sliding, global_theta, local_theta))
    }
}

const HEAD: HeadNames = HeadNames {
    dense: "head.dense",
    norm: "head.norm",
    bias: "decoder.bias",
    decoder_bias: "decoder.bias",
    decoder_weight: "decoder.weight",
};

#[derive(Module, Debug)]
pub struct ModernBertLayer {
    /// `attn_norm`; layer 0 has none (identity).
    pub attn_norm: Option<LayerNorm>,
    /// `attn.Wqkv`: q | k | v along the output dimension.
    pub wqkv: Linear,
    pub attn_out: Linear,
    pub mlp_norm: LayerNorm,
    /// `mlp.Wi`: input | gate.
    pub mlp_in: Linear,
    pub mlp_out: Linear,
    #[module(skip)]
    pub sliding: bool,
}

#[derive(Module, Debug)]
pub struct ModernBert {
    pub tok_embeddings: Embedding,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<ModernBertLayer>,
    pub final_norm: LayerNorm,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub half_window: usize,
    #[module(skip)]
    pub global_rope_theta: f64,
    #[module(skip)]
    pub local_rope_theta: f64,
    #[module(skip)]
    pub activation: Activation,
}

impl ModernBert {
    pub fn load(w: &Weights, c: &ModernBertConfig, path: &Path) -> Result<(Self, MlmHead)> {
        let (sliding_layers, global_rope_theta, local_rope_theta) = c.layer_plan(path)?;
        let e = w.pp("model");
        let eps = c.norm_eps.or(c.layer_norm_eps).ok_or_else(|| {
            BackboneError::config(path, "missing field `norm_eps` (or `layer_norm_eps`)")
        })?;
        let (h, i, nb) = (c.hidden_size, c.intermediate_size, c.norm_bias);
        let (ab, mb) = (c.attention_bias, c.mlp_bias);
        let load_layer = |(l, &sliding): (usize, &bool)| {
            let w = e.pp(&format!("layers.{l}"));
            Ok(ModernBertLayer {
                attn_norm: if l == 0 {
                    None
                } else {
                    Some(w.layer_norm("attn_norm", h, eps, nb)?)
                },
                wqkv: w.linear("attn.Wqkv", h, 3 * h, ab)?,
                attn_out: w.linear("attn.Wo", h, h, ab)?,
                mlp_norm: w.layer_norm("mlp_norm", h, eps, nb)?,
                mlp_in: w.linear("mlp.Wi", h, 2 * i, mb)?,
                mlp_out: w.linear("mlp.Wo", i, h, mb)?,
                sliding,
            })
        };
        let encoder = Self {
            tok_embeddings: e.embedding("embeddings.tok_embeddings.weight", c.vocab_size, h)?,
            embeddings_norm: e.layer_norm("embeddings.norm", h, eps, nb)?,
            layers: sliding_layers
                .iter()
                .enumerate()
                .map(load_layer)
                .collect::<Result<_>>()?,
            final_norm: e.layer_norm("final_norm", h, eps, nb)?,
            heads: c.num_attention_heads,
            half_window: c.local_attention / 2,
            global_rope_theta,
            local_rope_theta,
            activation: Activation::from_hf(&c.hidden_activation, path, "hidden_activation")?,
        };
        let head = MlmHead::load(
            w,
            &HEAD,
            HeadShape {
                hidden: h,
                embedding: h,
                vocab: c.vocab_size,
                eps,
                activation: Activation::from_hf(
                    &c.classifier_activation,
                    path,
                    "classifier_activation",
                )?,
                dense_bias: c.classifier_bias,
                norm_bias: nb,
                vocab_bias: c.decoder_bias,
                tied: c.tie_word_embeddings,
            },
        )?;
        Ok((encoder, head))
    }

    /// The final-normed f32 hidden states `[B, L, hidden]`; products and activations run in
    /// `dtype`.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        let [_, len] = ids.dims();
        let device = ids.device();
        let mut x = self
            .embeddings_norm
            .forward(self.tok_embeddings.forward(ids));
        let hidden = x.dims()[2];
        let head_dim = hidden / self.heads;
        let global_bias = padding_bias(mask);
        let local_bias = global_bias.clone() + sliding_window_bias(len, self.half_window, &device);
        let global_rope = Rope::new(len, head_dim, self.global_rope_theta, None, &device);
        let local_rope = Rope::new(len, head_dim, self.local_rope_theta, None, &device);
        for layer in &self.layers {
            let (rope, bias) = if layer.sliding {
                (&local_rope, local_bias.clone())
            } else {
                (&global_rope, global_bias.clone())
            };
            let normed = match &layer.attn_norm {
                Some(norm) => norm.forward(x.clone()),
                None => x.clone(),
            };
            let qkv = linear(&layer.wqkv, normed, dtype);
            let q = split_heads(qkv.clone().slice_dim(2, 0..hidden), self.heads);
            let k = split_heads(qkv.clone().slice_dim(2, hidden..2 * hidden), self.heads);
            let v = split_heads(qkv.slice_dim(2, 2 * hidden..3 * hidden), self.heads);
            let context = merge_heads(attend(rope.apply(q), rope.apply(k), v, bias));
            x = residual(x, linear(&layer.attn_out, context, dtype));
            let projected = linear(&layer.mlp_in, layer.mlp_norm.forward(x.clone()), dtype);
            let inner = projected.dims()[2] / 2;
            let input = self
                .activation
                .forward(projected.clone().slice_dim(2, 0..inner));
            let gate = projected.slice_dim(2, inner..2 * inner);
            x = residual(x, linear(&layer.mlp_out, input * gate, dtype));
        }
        self.final_norm.forward(x)
    }
}
