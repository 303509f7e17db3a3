//! Scaled dot-product attention over `[B, heads, L, d]` queries, keys and values, with the masks
//! lsr's families need (key padding, ModernBERT's sliding window) and dropout on the
//! probabilities: the one entry point [`attention`], which runs the fused kernels (`fused/`) on
//! the cube backends and the composed computation (`composed.rs`) elsewhere, as `LSR_ATTENTION`
//! allows (`mode.rs`); and the kernels checked against the host where they run (`verify.rs`).

pub(crate) mod composed;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod fused;
mod mode;
pub mod verify;

use std::cell::OnceCell;

use burn::prelude::*;
use burn::tensor::DType;

use crate::dropout::Dropout;
pub use mode::{AttentionMode, attention_mode};

/// Added to the attention score of a key a query may not see. Large enough that `exp` gives 0,
/// small enough that two of them added (padding and window) stay finite, so a row with every
/// key masked (a padded query) is uniform rather than NaN.
pub const MASKED: f32 = -1.0e9;

/// Which keys each query sees: the texts' padding, and for a local layer a window around the
/// query (ModernBERT's `|q − k| ≤ local_attention / 2`).
pub struct AttentionMask {
    /// `[B, L]`, f32: 0 for a token, [`MASKED`] for a pad, added to every query's score of it.
    key_bias: Tensor<2>,
    half_window: Option<usize>,
    /// The additive `[B, 1, 1 or L, L]` bias of the composed computation, made on first use.
    composed: OnceCell<Tensor<4>>,
}

impl AttentionMask {
    /// Every token sees every token of its text (`mask` is 1 for tokens, 0 for pads).
    pub fn padding(mask: Tensor<2, Int>) -> Self {
        Self {
            key_bias: (mask.float() - 1.0).mul_scalar(-MASKED),
            half_window: None,
            composed: OnceCell::new(),
        }
    }

    /// The same padding, each query seeing only the keys within `half_window` of it.
    pub fn sliding(&self, half_window: usize) -> Self {
        Self {
            key_bias: self.key_bias.clone(),
            half_window: Some(half_window),
            composed: OnceCell::new(),
        }
    }

    fn composed_bias(&self) -> Tensor<4> {
        self.composed
            .get_or_init(|| composed::bias(&self.key_bias, self.half_window))
            .clone()
    }
}

/// `dropout(softmax(q·kᵀ/√d + mask))·v` over `[B, heads, L, d]` tensors, in `q`'s dtype, the
/// scores and the softmax in f32 (autocast's choice: a bf16 softmax over long rows loses the
/// small probabilities).
pub fn attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: &AttentionMask,
    dropout: Dropout,
) -> Tensor<4> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if runs_fused(&q.device(), q.dtype(), q.dims()[3]) {
        return fused::attention(q, k, v, &mask.key_bias, mask.half_window, dropout);
    }
    composed::attention(q, k, v, mask.composed_bias(), dropout)
}

/// Attention of the `[B·L, 3·H]` rows of B texts' q | k | v projection, `heads` heads each:
/// the context's `[B·L, H]` rows. As [`attention`] of [`split_qkv`]'s views, with the fused
/// kernels writing the projection's gradient whole rather than three to be gathered into it.
pub fn attention_qkv(
    qkv: Tensor<2>,
    batch: usize,
    heads: usize,
    mask: &AttentionMask,
    dropout: Dropout,
) -> Tensor<2> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    {
        let [rows, width] = qkv.dims();
        let dim = width / (3 * heads);
        if runs_fused(&qkv.device(), qkv.dtype(), dim) {
            let packed = qkv.reshape([batch, rows / batch, 3, heads, dim]);
            let out = fused::attention_packed(packed, &mask.key_bias, mask.half_window, dropout);
            return out.reshape([rows, heads * dim]);
        }
    }
    let [q, k, v] = split_qkv(qkv, batch, heads);
    merge_heads(attention(q, k, v, mask, dropout))
}

/// `[B·L, H]` rows → `[B, heads, L, H / heads]`.
pub fn split_heads(x: Tensor<2>, batch: usize, heads: usize) -> Tensor<4> {
    let [rows, hidden] = x.dims();
    x.reshape([batch, rows / batch, heads, hidden / heads])
        .swap_dims(1, 2)
}

/// `[B, heads, L, d]` → `[B·L, heads · d]` rows.
pub fn merge_heads(x: Tensor<4>) -> Tensor<2> {
    let [batch, heads, len, dim] = x.dims();
    x.swap_dims(1, 2).reshape([batch * len, heads * dim])
}

/// The `[B·L, 3H]` rows of a q | k | v projection → q, k and v as `[B, heads, L, H / heads]`
/// views of it (`crate::block`: their gradients placed in the projection's in one pass on flex).
pub fn split_qkv(qkv: Tensor<2>, batch: usize, heads: usize) -> [Tensor<4>; 3] {
    let hidden = qkv.dims()[1] / 3;
    let part = |i: usize| crate::block::block(qkv.clone(), 1, i * hidden..(i + 1) * hidden);
    [0, 1, 2].map(|i| split_heads(part(i), batch, heads))
}

/// How attention of heads of `dim` terms in `dtype` runs on `device`: fused where
/// `LSR_ATTENTION` allows it and the kernels serve the three, else composed.
pub fn route(device: &Device, dtype: DType, dim: usize) -> AttentionMode {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if runs_fused(device, dtype, dim) {
        return AttentionMode::Fused;
    }
    let _ = (device, dtype, dim);
    AttentionMode::Composed
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn runs_fused(device: &Device, dtype: DType, dim: usize) -> bool {
    attention_mode() == Ok(AttentionMode::Fused) && fused::serves(device, dtype, dim)
}

#[cfg(test)]
mod tests;
