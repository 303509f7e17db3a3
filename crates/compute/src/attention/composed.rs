//! Attention composed of burn's operations: the scores as a `[B, H, L, L]` tensor, the mask
//! added to them, burn's softmax, dropout drawn from the device's generator. It runs on flex,
//! where it is as fast as a CPU kernel would be, and is the reference the fused kernels are
//! tested against.

use burn::prelude::*;
use burn::tensor::{DType, activation};

use super::MASKED;
use crate::dropout::Dropout;
use crate::matmul::matmul;

/// `dropout(softmax(q·kᵀ/√d + bias))·v`: the products in `q`'s dtype, the scores widened to f32
/// for the bias and the softmax.
pub fn attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: Tensor<4>,
    dropout: Dropout,
) -> Tensor<4> {
    let dtype = q.dtype();
    let head_dim = q.dims()[3] as f64;
    let scores = matmul(q, k.swap_dims(2, 3))
        .cast(DType::F32)
        .div_scalar(head_dim.sqrt())
        + bias;
    matmul(
        dropout.forward(activation::softmax(scores, 3).cast(dtype)),
        v,
    )
}

/// The additive bias of `[B, L]` `key_bias`: `[B, 1, 1, L]`, or with a window
/// `[B, 1, L, L]`, [`MASKED`] added where a key is further than `half_window` from the query.
pub fn bias(key_bias: &Tensor<2>, half_window: Option<usize>) -> Tensor<4> {
    let [batch, len] = key_bias.dims();
    let padding = key_bias.clone().reshape([batch, 1, 1, len]);
    match half_window {
        None => padding,
        Some(half_window) => padding + window(len, half_window, &key_bias.device()),
    }
}

/// `[1, 1, L, L]`: 0 where `|q − k| ≤ half_window`, else [`MASKED`].
fn window(len: usize, half_window: usize, device: &Device) -> Tensor<4> {
    let values: Vec<f32> = (0..len * len)
        .map(|i| {
            let (q, k) = (i / len, i % len);
            if q.abs_diff(k) > half_window {
                MASKED
            } else {
                0.0
            }
        })
        .collect();
    Tensor::<2>::from_data(TensorData::new(values, [len, len]), device).reshape([1, 1, len, len])
}
