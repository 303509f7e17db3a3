//! Attention composed of burn's operations: the scores as a `[B, H, L, L]` tensor, the mask
//! added to them, burn's softmax (one operation with its own backward where a gradient flows,
//! `crate::norm::softmax`), dropout drawn from the device's generator. It runs on flex,
//! where it is as fast as a CPU kernel would be, and is the reference the fused kernels are
//! tested against. The scores' scale and mask are one operation ([`ScoreOps`]), which flex runs
//! split over its threads (`crate::cpu`) where its own two ran on the calling thread.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, AutodiffBackend, Backend, Dispatch, Flex, backend_extension};
use burn::prelude::*;
use burn::tensor::DType;

use super::MASKED;
use crate::dropout::Dropout;
use crate::matmul::matmul;
use crate::norm::softmax;

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
    let scores = matmul(q, k.swap_dims(2, 3)).cast(DType::F32);
    let scores = Tensor::from_dispatch(<Dispatch as ScoreOps>::scaled_scores(
        scores.into_dispatch(),
        bias.into_dispatch(),
        head_dim.sqrt(),
    ));
    matmul(dropout.forward(softmax(scores).cast(dtype)), v)
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

/// `[B, H, Lq, Lk]` scores divided by `divisor` (√d), plus the mask `bias` (`[B, 1, 1 or Lq,
/// Lk]`), with the scores' gradient; the mask has none.
#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda")),
    Autodiff
)]
pub trait ScoreOps: Backend {
    #[fusion(default)]
    fn scaled_scores(
        scores: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        divisor: f64,
    ) -> FloatTensor<Self> {
        composed_scores::<Self>(scores, bias, divisor)
    }
}

impl ScoreOps for Flex {
    fn scaled_scores(
        scores: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        divisor: f64,
    ) -> FloatTensor<Self> {
        crate::cpu::scaled_scores(scores, bias, divisor)
            .unwrap_or_else(|(scores, bias)| composed_scores::<Self>(scores, bias, divisor))
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl ScoreOps for burn_cubecl::CubeBackend {}

/// burn's division by a scalar, then its broadcast add.
fn composed_scores<B: Backend>(
    scores: FloatTensor<B>,
    bias: FloatTensor<B>,
    divisor: f64,
) -> FloatTensor<B> {
    B::float_add(B::float_div_scalar(scores, divisor.into()), bias)
}

/// The scores' gradient as burn's `div_scalar` gives it: `dy · (1 / divisor)`, the reciprocal
/// in f32.
#[derive(Debug)]
struct ScaledScores;

impl<B: Backend> Backward<B, 1> for ScaledScores {
    type State = f64;

    fn backward(self, ops: Ops<f64, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<B>(&ops.node);
        if let [Some(scores)] = &ops.parents {
            let reciprocal = 1.0 / ops.state as f32;
            grads.register::<B>(scores.id, B::float_mul_scalar(dy, reciprocal.into()));
        }
    }
}

impl<B: Backend + ScoreOps, C: CheckpointStrategy> ScoreOps for Autodiff<B, C> {
    fn scaled_scores(
        scores: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        divisor: f64,
    ) -> FloatTensor<Self> {
        if bias.is_tracked() {
            return composed_scores::<Self>(scores, bias, divisor);
        }
        let node = [scores.node()];
        let (scores, bias) = (scores.into_primitive(), Self::inner(bias));
        let out = B::scaled_scores(scores, bias, divisor);
        match ScaledScores.prepare::<C>(node).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(divisor, out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
}
