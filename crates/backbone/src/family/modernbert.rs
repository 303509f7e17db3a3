//! ModernBERT (`ModernBertForMaskedLM`) and Ettin (the same code, local RoPE theta = global):
//! pre-LN, no biases by default, fused Wqkv, GeGLU (the *first* half is activated), alternating
//! global and sliding-window attention with their own RoPE thetas, a final norm.
//!
//! Both config schemas are accepted: transformers 4 (`global_rope_theta`, `local_rope_theta`,
//! layer kind from `global_attn_every_n_layers`) and transformers 5 (`layer_types`,
//! `rope_parameters`), the latter preferred when present.
//!
//! Follows transformers v5.24.0, the release the parity fixtures were generated with:
//! <https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/modernbert/modeling_modernbert.py>

use std::collections::HashMap;
use std::path::Path;

use burn::nn::{Embedding, Linear};
use burn::prelude::*;
use burn::tensor::DType;
use serde::Deserialize;
use serde_json::{Value, json};

use lsr_compute::launches::{Region, mark};
use lsr_compute::norm::LayerNorm;
use crate::config::{default_true};
use crate::family::{Dims, Encoder, EncoderModel, Family, ModelConfig, registered};
use crate::error::{BackboneError, Result};
use crate::head::{HeadNames, HeadShape, MlmHead};
use crate::layers::{
    ActivatedHalf, Activation, Dropout, Rope, RotaryAttention, gated_mlp, over_tokens,
    AttentionMask,
};
use crate::miniature::{HEADS, HIDDEN, INTERMEDIATE, LAYERS, POSITIONS};
use lsr_compute::precision::residual;
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
    /// `ModernBertConfig`'s defaults, and ModernBERT-base's and Ettin's values: 0.
    #[serde(default)]
    pub embedding_dropout: f64,
    #[serde(default)]
    pub attention_dropout: f64,
    #[serde(default)]
    pub mlp_dropout: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
}

pub const MODERNBERT: Family = Family {
    name: "modernbert",
    model_type: "modernbert",
    dims: Dims::standard::<ModernBertConfig>,
    load,
    miniature: |vocab| miniature(vocab, 10_000.0),
};

/// Ettin: ModernBERT's code and `model_type`, its local RoPE theta equal to the global one.
pub const ETTIN: Family = Family {
    name: "ettin",
    miniature: |vocab| miniature(vocab, 160_000.0),
    ..MODERNBERT
};

fn load(config: &ModelConfig, weights: &Weights) -> Result<(Encoder, MlmHead)> {
    registered(ModernBert::load(weights, &config.arch()?, config))
}

fn miniature(vocab: usize, local_theta: f64) -> Value {
    json!({
        "model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"],
        "vocab_size": vocab, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
        "hidden_activation": "gelu", "max_position_embeddings": POSITIONS,
        "layer_types": ["full_attention", "sliding_attention"], "global_attn_every_n_layers": 2,
        "local_attention": 32,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 160000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": local_theta}
        },
        "norm_eps": 1e-5, "norm_bias": false, "attention_bias": false, "mlp_bias": false,
        "decoder_bias": true, "classifier_activation": "gelu", "pad_token_id": 0,
        "cls_token_id": 2, "sep_token_id": 3, "bos_token_id": 2, "eos_token_id": 3,
        "tie_word_embeddings": true
    })
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
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub activation: Activation,
    #[module(skip)]
    pub dropout: ModernBertDropout,
}

#[derive(Module, Debug)]
pub struct ModernBert {
    pub tok_embeddings: Embedding,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<ModernBertLayer>,
    pub final_norm: LayerNorm,
    /// For the head dimension of the RoPE tables.
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub half_window: usize,
    #[module(skip)]
    pub global_rope_theta: f64,
    #[module(skip)]
    pub local_rope_theta: f64,
    /// After the embeddings' norm.
    #[module(skip)]
    pub embedding_dropout: Dropout,
}

/// Where a ModernBERT layer drops in training: on the attention probabilities and after `Wo`
/// (both `attention_dropout`), inside the GLU before `mlp.Wo`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModernBertDropout {
    pub attention: Dropout,
    pub mlp: Dropout,
}

impl ModernBert {
    pub fn load(
        w: &Weights,
        c: &ModernBertConfig,
        config: &ModelConfig,
    ) -> Result<(Self, MlmHead)> {
        let path = config.path.as_path();
        let (sliding_layers, global_rope_theta, local_rope_theta) = c.layer_plan(path)?;
        let e = w.pp("model");
        let eps = c.norm_eps.or(c.layer_norm_eps).ok_or_else(|| {
            BackboneError::config(path, "missing field `norm_eps` (or `layer_norm_eps`)")
        })?;
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let (norm_bias, attention_bias, mlp_bias) = (c.norm_bias, c.attention_bias, c.mlp_bias);
        let activation = Activation::from_hf(&c.hidden_activation, path, "hidden_activation")?;
        let dropout = ModernBertDropout {
            attention: config.dropout("attention_dropout", c.attention_dropout)?,
            mlp: config.dropout("mlp_dropout", c.mlp_dropout)?,
        };
        let load_layer = |(l, &sliding): (usize, &bool)| {
            let w = e.pp(&format!("layers.{l}"));
            Ok(ModernBertLayer {
                attn_norm: if l == 0 {
                    None
                } else {
                    Some(w.layer_norm("attn_norm", h, eps, norm_bias)?)
                },
                wqkv: w.linear("attn.Wqkv", h, 3 * h, attention_bias)?,
                attn_out: w.linear("attn.Wo", h, h, attention_bias)?,
                mlp_norm: w.layer_norm("mlp_norm", h, eps, norm_bias)?,
                mlp_in: w.linear("mlp.Wi", h, 2 * i, mlp_bias)?,
                mlp_out: w.linear("mlp.Wo", i, h, mlp_bias)?,
                sliding,
                heads: c.num_attention_heads,
                activation,
                dropout,
            })
        };
        let encoder = Self {
            tok_embeddings: e.embedding("embeddings.tok_embeddings.weight", c.vocab_size, h)?,
            embeddings_norm: e.layer_norm("embeddings.norm", h, eps, norm_bias)?,
            layers: sliding_layers
                .iter()
                .enumerate()
                .map(load_layer)
                .collect::<Result<_>>()?,
            final_norm: e.layer_norm("final_norm", h, eps, norm_bias)?,
            heads: c.num_attention_heads,
            half_window: c.local_attention / 2,
            global_rope_theta,
            local_rope_theta,
            embedding_dropout: config.dropout("embedding_dropout", c.embedding_dropout)?,
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
                norm_bias,
                vocab_bias: c.decoder_bias,
                tied: c.tie_word_embeddings,
            },
        )?;
        Ok((encoder, head))
    }
}

impl ModernBertLayer {
    /// Pre-LN: `x += Attn(norm(x))`, `x += MLP(norm(x))`, on the f32 residual stream, with the
    /// RoPE and mask of the layer's kind (global or sliding window).
    fn forward(
        &self,
        x: Tensor<2>,
        batch: usize,
        rope: &Rope,
        mask: &AttentionMask,
        dtype: DType,
    ) -> Tensor<2> {
        let x = mark(x, Region::Attention);
        let normed = match &self.attn_norm {
            Some(norm) => norm.forward(x.clone()),
            None => x.clone(),
        };
        let attention = RotaryAttention {
            qkv: &self.wqkv,
            out: &self.attn_out,
            heads: self.heads,
            dropout: self.dropout.attention,
            dtype,
        }
        .forward(normed, batch, rope, mask);
        let x = mark(
            residual(x, self.dropout.attention.forward(attention)),
            Region::Ffn,
        );
        let mlp = gated_mlp(
            &self.mlp_in,
            &self.mlp_out,
            self.mlp_norm.forward(x.clone()),
            self.activation,
            ActivatedHalf::First,
            self.dropout.mlp,
            dtype,
        );
        residual(x, mlp)
    }
}

impl EncoderModel for ModernBert {
    /// The final-normed f32 hidden states `[B, L, hidden]`; products and activations run in
    /// `dtype`.
    fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>, dtype: DType) -> Tensor<3> {
        let [_, len] = ids.dims();
        let device = ids.device();
        let x = self
            .embeddings_norm
            .forward(self.tok_embeddings.forward(ids));
        let x = self.embedding_dropout.forward(x);
        let head_dim = x.dims()[2] / self.heads;
        let global_mask = AttentionMask::padding(mask);
        let local_mask = global_mask.sliding(self.half_window);
        let global_rope = Rope::new(len, head_dim, self.global_rope_theta, None, dtype, &device);
        let local_rope = Rope::new(len, head_dim, self.local_rope_theta, None, dtype, &device);
        over_tokens(x, |rows, batch| {
            let rows = self.layers.iter().fold(rows, |x, layer| {
                let (rope, mask) = if layer.sliding {
                    (&local_rope, &local_mask)
                } else {
                    (&global_rope, &global_mask)
                };
                layer.forward(x, batch, rope, mask, dtype)
            });
            self.final_norm.forward(rows)
        })
    }

    fn word_embeddings(&self) -> &Embedding {
        &self.tok_embeddings
    }

    fn word_embeddings_mut(&mut self) -> &mut Embedding {
        &mut self.tok_embeddings
    }
}
