//! Building blocks shared by several architectures: activations, the heads' views of the
//! projections, rotate-half RoPE, the split of a fused q | k | v projection, rotary attention and the gated MLP of GTE and
//! ModernBERT, and the post-LN transformer block of BERT, DistilBERT and ALBERT. Attention itself
//! and dropout are `lsr_compute`'s.

use burn::nn::{Embedding, Linear};
use burn::prelude::*;
use burn::tensor::{DType, activation};

use crate::error::{BackboneError, Result};
use crate::weights::Weights;
pub use lsr_compute::attention::AttentionMask;
use lsr_compute::attention::{attention, attention_qkv, merge_heads, split_qkv};
pub use lsr_compute::dropout::Dropout;
use lsr_compute::launches::{Region, mark};
use lsr_compute::norm::LayerNorm;
use lsr_compute::precision::{linear, residual};

/// The HF activation names the seven families use (`ACT2FN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `"gelu"`: exact erf GELU.
    Gelu,
    /// `"gelu_new"`, `"gelu_pytorch_tanh"`, `"gelu_fast"`: the tanh approximation.
    GeluTanh,
    Relu,
    Silu,
}

impl Activation {
    pub fn from_hf(name: &str, path: &std::path::Path, field: &str) -> Result<Self> {
        match name {
            "gelu" => Ok(Self::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Self::GeluTanh),
            "relu" => Ok(Self::Relu),
            "silu" | "swish" => Ok(Self::Silu),
            other => Err(BackboneError::config(
                path,
                format!(
                    "field `{field}`: activation `{other}` is not implemented (expected gelu, \
                     gelu_new, gelu_pytorch_tanh, relu or silu)"
                ),
            )),
        }
    }

    pub fn forward<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Self::Gelu => lsr_compute::activation::gelu(x),
            Self::GeluTanh => activation::gelu_approximate(x),
            Self::Relu => activation::relu(x),
            Self::Silu => activation::silu(x),
        }
    }
}

/// `f` over the tokens of `[B, L, H]` hidden states as `[B·L, H]` rows, with B. The layers
/// compute on rows: burn's fusion cannot merge element-wise work across a reshape that lowers a
/// tensor's rank, so reshaping around every product and norm split each layer into many more
/// kernels; the rows are reshaped only where attention needs its heads.
pub fn over_tokens(x: Tensor<3>, f: impl FnOnce(Tensor<2>, usize) -> Tensor<2>) -> Tensor<3> {
    let [batch, len, hidden] = x.dims();
    f(x.reshape([batch * len, hidden]), batch).reshape([batch, len, hidden])
}

/// Rotary position embedding in the rotate-half (NeoX) convention HF uses for ModernBERT and
/// GTE; burn's `RotaryEncoding` rotates interleaved pairs, which does not match their weights.
pub struct Rope {
    cos: Tensor<4>,
    sin: Tensor<4>,
}

impl Rope {
    /// Tables for positions `0..len`. `ntk_factor` applies GTE's static NTK scaling
    /// (`base · factor`, then `inv_freq / factor^(2/dim)`). Computed in f32 as HF does, so
    /// parity holds at large positions too, and held in `dtype`, that of the queries and keys
    /// they rotate.
    pub fn new(
        len: usize,
        dim: usize,
        theta: f64,
        ntk_factor: Option<f64>,
        dtype: DType,
        device: &Device,
    ) -> Self {
        let base = (theta * ntk_factor.unwrap_or(1.0)) as f32;
        let correction = ntk_factor.map_or(1.0, |f| (f as f32).powf(2.0 / dim as f32));
        let inv_freq: Vec<f32> = (0..dim / 2)
            .map(|i| 1.0 / base.powf((2 * i) as f32 / dim as f32) / correction)
            .collect();
        let mut cos = Vec::with_capacity(len * dim);
        let mut sin = Vec::with_capacity(len * dim);
        for pos in 0..len {
            // `emb = cat(freqs, freqs)`: the same angles fill both halves of the head.
            for f in inv_freq.iter().chain(&inv_freq) {
                let angle = pos as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        // Rounded to `dtype` on the host (HF casts its f32 tables to the queries' dtype): no
        // cast per layer on the device.
        let table = |v| {
            let data = TensorData::new(v, [len, dim]).convert_dtype(dtype);
            Tensor::<2>::from_data(data, device).reshape([1, 1, len, dim])
        };
        Self {
            cos: table(cos),
            sin: table(sin),
        }
    }

    /// Rotates `[B, heads, L, d]` queries or keys, in their dtype (HF casts its tables to it).
    pub fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let dim = x.dims()[3];
        let dtype = x.dtype();
        let first = x.clone().slice_dim(3, 0..dim / 2);
        let second = x.clone().slice_dim(3, dim / 2..dim);
        let rotated = Tensor::cat(vec![second.neg(), first], 3);
        x * self.cos.clone().cast(dtype) + rotated * self.sin.clone().cast(dtype)
    }
}

/// Self-attention from a fused q | k | v projection with rotary positions (GTE, ModernBERT),
/// over a layer's own projections and settings. It borrows them rather than owning them, so
/// that the projections keep their place in each family's layer and with it the module paths
/// that checkpoints and the HF export name them by.
pub struct RotaryAttention<'a> {
    /// q | k | v along the output dimension.
    pub qkv: &'a Linear,
    pub out: &'a Linear,
    pub heads: usize,
    /// On the attention probabilities.
    pub dropout: Dropout,
    /// The dtype of the products.
    pub dtype: DType,
}

impl RotaryAttention<'_> {
    /// `out(attention(rope(q), rope(k), v))` of the `[B·L, H]` rows `x` of B texts under `mask`.
    pub fn forward(
        &self,
        x: Tensor<2>,
        batch: usize,
        rope: &Rope,
        mask: &AttentionMask,
    ) -> Tensor<2> {
        let [q, k, v] = split_qkv(linear(self.qkv, x, self.dtype), batch, self.heads);
        let context = attention(rope.apply(q), rope.apply(k), v, mask, self.dropout);
        linear(self.out, merge_heads(context), self.dtype)
    }
}

/// Which half of a gated MLP's fused projection goes through the activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivatedHalf {
    /// ModernBERT's `Wi`: input | gate, the input activated.
    First,
    /// GTE's `up_gate_proj`: up | gate, the gate activated.
    Second,
}

/// A gated MLP (GTE, ModernBERT): `down(dropout(act(one half) · other half))` of `up(x)`, on
/// `[tokens, H]` rows, products in `dtype`.
pub fn gated_mlp(
    up: &Linear,
    down: &Linear,
    x: Tensor<2>,
    activation: Activation,
    activated: ActivatedHalf,
    inner_dropout: Dropout,
    dtype: DType,
) -> Tensor<2> {
    let projected = linear(up, x, dtype);
    let inner = projected.dims()[1] / 2;
    let first = projected.clone().slice_dim(1, 0..inner);
    let second = projected.slice_dim(1, inner..2 * inner);
    let gated = match activated {
        ActivatedHalf::First => activation.forward(first) * second,
        ActivatedHalf::Second => activation.forward(second) * first,
    };
    linear(down, inner_dropout.forward(gated), dtype)
}

/// The first `rows` rows of a learned embedding table as `[1, rows, dim]`, to broadcast over
/// a batch: positions `0..L` of absolute position embeddings, or token type 0.
pub fn leading_rows(embedding: &Embedding, rows: usize) -> Tensor<3> {
    embedding
        .weight
        .val()
        .slice_dim(0, 0..rows)
        .unsqueeze::<3>()
}

/// Runs post-LN blocks in order over `x`, hiding padded keys, computing in `dtype`.
pub fn run_post_ln<'a>(
    layers: impl IntoIterator<Item = &'a PostLnBlock>,
    x: Tensor<3>,
    mask: Tensor<2, Int>,
    dtype: DType,
) -> Tensor<3> {
    let mask = AttentionMask::padding(mask);
    over_tokens(x, |rows, batch| {
        layers
            .into_iter()
            .fold(rows, |x, layer| layer.forward(x, batch, &mask, dtype))
    })
}

/// The HF names of one post-LN block's tensors, relative to the layer's prefix.
pub struct PostLnNames {
    pub query: &'static str,
    pub key: &'static str,
    pub value: &'static str,
    pub attention_output: &'static str,
    pub attention_norm: &'static str,
    pub intermediate: &'static str,
    pub output: &'static str,
    pub output_norm: &'static str,
}

/// Sizes of a post-LN block.
#[derive(Clone, Copy, Debug)]
pub struct PostLnShape {
    pub hidden: usize,
    pub intermediate: usize,
    pub heads: usize,
    pub eps: f64,
    pub activation: Activation,
    pub dropout: PostLnDropout,
}

/// Where a post-LN block drops in training: the families place dropout differently (DistilBERT
/// not after the attention output, ALBERT not after the feed-forward output).
#[derive(Clone, Copy, Debug, Default)]
pub struct PostLnDropout {
    pub attention_probs: Dropout,
    pub attention_output: Dropout,
    pub output: Dropout,
}

/// BERT's encoder layer: `a = LN(x + drop(O·Attn(x)))`, `x = LN(a + drop(W2·act(W1·a)))`.
#[derive(Module, Debug)]
pub struct PostLnBlock {
    /// `query | key | value` along the output dimension, one product for the three (HF keeps
    /// them apart; so do the checkpoints lsr writes, through `TensorOrigin`).
    pub qkv: Linear,
    pub attention_output: Linear,
    pub attention_norm: LayerNorm,
    pub intermediate: Linear,
    pub output: Linear,
    pub output_norm: LayerNorm,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub activation: Activation,
    #[module(skip)]
    pub dropout: PostLnDropout,
}

impl PostLnBlock {
    pub fn load(w: &Weights, names: &PostLnNames, shape: PostLnShape) -> Result<Self> {
        let PostLnShape {
            hidden: h,
            intermediate: i,
            eps,
            ..
        } = shape;
        Ok(Self {
            qkv: w.fused_linear(&[names.query, names.key, names.value], h, h, true)?,
            attention_output: w.linear(names.attention_output, h, h, true)?,
            attention_norm: w.layer_norm(names.attention_norm, h, eps, true)?,
            intermediate: w.linear(names.intermediate, h, i, true)?,
            output: w.linear(names.output, i, h, true)?,
            output_norm: w.layer_norm(names.output_norm, h, eps, true)?,
            heads: shape.heads,
            activation: shape.activation,
            dropout: shape.dropout,
        })
    }

    /// `x` is the f32 residual stream, the `[B·L, H]` rows of B texts; products and
    /// activations run in `dtype`.
    pub fn forward(
        &self,
        x: Tensor<2>,
        batch: usize,
        mask: &AttentionMask,
        dtype: DType,
    ) -> Tensor<2> {
        let x = mark(x, Region::Attention);
        let qkv = linear(&self.qkv, x.clone().cast(dtype), dtype);
        let drop = self.dropout;
        let context = attention_qkv(qkv, batch, self.heads, mask, drop.attention_probs);
        let attended = linear(&self.attention_output, context, dtype);
        let a = self
            .attention_norm
            .forward(residual(x, drop.attention_output.forward(attended)));
        let a = mark(a, Region::Ffn);
        let inner = self
            .activation
            .forward(linear(&self.intermediate, a.clone(), dtype));
        let output = drop.output.forward(linear(&self.output, inner, dtype));
        self.output_norm.forward(residual(a, output))
    }
}

/// A parameter of a post-LN block that records written before q, k and v were one product
/// (`lsr` before 2026-12-05) hold in three: its module path, the paths of its parts and the
/// dimension of burn's layout along which they join (`[in, out]` weights: 1; biases: 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitQkv {
    pub path: String,
    pub parts: [String; 3],
    pub dim: usize,
}

/// The fused parameters whose parts a record of module `paths` holds apart.
pub fn split_qkv_in_record<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<SplitQkv> {
    let paths: std::collections::BTreeSet<&str> = paths.into_iter().collect();
    let mut found = Vec::new();
    for path in &paths {
        let Some((block, field)) = path
            .strip_suffix(".weight")
            .map(|b| (b, "weight"))
            .or_else(|| path.strip_suffix(".bias").map(|b| (b, "bias")))
        else {
            continue;
        };
        let Some(block) = block.strip_suffix(".query") else {
            continue;
        };
        let parts = ["query", "key", "value"].map(|p| format!("{block}.{p}.{field}"));
        if parts.iter().all(|p| paths.contains(p.as_str())) {
            found.push(SplitQkv {
                path: format!("{block}.qkv.{field}"),
                parts,
                dim: usize::from(field == "weight"),
            });
        }
    }
    found
}
