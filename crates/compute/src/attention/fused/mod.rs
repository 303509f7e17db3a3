//! Attention as lsr's own kernels on the cube backends (CUDA, WGPU): the backend extension
//! [`FusedAttention`] (a forward that keeps the output and two statistics per query, the
//! largest score and the log of the sum, a backward that recomputes the probabilities from
//! them), its autodiff, and which devices and shapes it serves. The kernels are `kernels.rs`, their launches `launch.rs`.
//!
//! Why: composed of burn's operations, attention writes and reads a `[B, H, L, L]` tensor at
//! every link of its chain and was 62% of a training step's launches (`docs/perf-gpu.md`);
//! burn's own flash kernel takes no additive bias and no dropout, and autodiff decomposes it.

mod kernels;
mod launch;
#[cfg(all(test, feature = "cuda"))]
mod ptx;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, DispatchDevice, TensorMetadata, backend_extension};
use burn::prelude::*;
use burn::tensor::{DType, Slice};

use crate::dropout::{Dropout, next_hash_seed};

/// The head dimensions the kernels are compiled for: a unit holds `dim / 16` or more columns of
/// each of its rows in registers, and a cube stages four tiles of rows this wide.
const MAX_HEAD_DIM: usize = 128;

/// What the kernels take besides tensors: the score's scale, the window, and dropout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub scale: f32,
    pub half_window: Option<usize>,
    pub dropout: Option<HashedDropout>,
}

/// Dropout with rate `rate` whose mask is a hash of each position and `seed`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HashedDropout {
    pub rate: f64,
    pub seed: [u32; 2],
}

/// `[B, L, H, d]`: the layout of the output and the gradients, for `[B, H, L, d]` `q`.
fn token_major(q: &TensorSpec) -> TensorSpec {
    let [batch, heads, len, dim] = q.shape.dims::<4>();
    TensorSpec::new([batch, len, heads, dim].into(), q.dtype)
}

fn forward_spec(
    q: &TensorSpec,
    _k: &TensorSpec,
    _v: &TensorSpec,
    _bias: &TensorSpec,
    _options: &Options,
) -> (TensorSpec, TensorSpec) {
    let [batch, heads, len, _] = q.shape.dims::<4>();
    (
        token_major(q),
        TensorSpec::new([batch, heads, len, 2].into(), DType::F32),
    )
}

#[allow(clippy::too_many_arguments)]
fn backward_spec(
    q: &TensorSpec,
    _k: &TensorSpec,
    _v: &TensorSpec,
    _bias: &TensorSpec,
    _out: &TensorSpec,
    _dout: &TensorSpec,
    _stats: &TensorSpec,
    _options: &Options,
) -> TensorSpec {
    let [batch, heads, len, dim] = q.shape.dims::<4>();
    TensorSpec::new([batch, len, 3, heads, dim].into(), q.dtype)
}

fn packed_spec(qkv: &TensorSpec, bias: &TensorSpec, options: &Options) -> (TensorSpec, TensorSpec) {
    let [batch, len, _, heads, dim] = qkv.shape.dims::<5>();
    let q = TensorSpec::new([batch, heads, len, dim].into(), qkv.dtype);
    forward_spec(&q, &q, &q, bias, options)
}

fn mask_spec(q: &TensorSpec, _options: &Options) -> TensorSpec {
    let [batch, heads, len, _] = q.shape.dims::<4>();
    TensorSpec::new([batch, heads, len, len].into(), DType::F32)
}

/// Attention of `[B, H, L, d]` `q`, `k`, `v` with `[B, L]` f32 `key_bias` added to each key's
/// scores. The output is `[B, L, H, d]`, the gradients one `[B, L, 3, H, d]` tensor: the layout
/// of a q | k | v projection's rows, so that where q, k and v are its views their gradient is
/// written in place rather than assembled from three.
#[backend_extension(Cube, Fusion, Autodiff)]
pub trait FusedAttention: Backend {
    /// The output `[B, L, H, d]` and the statistics of each query's scores `[B, H, L, 2]`
    /// (f32): the largest, and the log of the sum of their exponentials less it.
    #[fusion(meta = forward_spec)]
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        options: Options,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// [`Self::fused_attention`] of the q, k and v that `qkv` `[B, L, 3, H, d]` holds (the rows
    /// of one projection), with one gradient, `qkv`'s, in the backward pass.
    #[fusion(meta = packed_spec)]
    fn fused_attention_packed(
        qkv: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        options: Options,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// dQ, dK and dV as one `[B, L, 3, H, d]` tensor from the upstream gradient `dout` of `out`.
    #[allow(clippy::too_many_arguments)]
    #[fusion(meta = backward_spec)]
    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        out: FloatTensor<Self>,
        dout: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        options: Options,
    ) -> FloatTensor<Self>;

    /// The factor dropout leaves on each probability, `[B, H, L, L]` f32 (0 or
    /// `1 / (1 − rate)`), as the kernels draw it for `q`'s shape and `options`: the mask a test
    /// rebuilds to check that the forward and the backward drop the same positions.
    #[fusion(meta = mask_spec)]
    fn fused_attention_dropout(q: FloatTensor<Self>, options: Options) -> FloatTensor<Self>;
}

/// `[B, L, 3, H, d]` `qkv` as q, k and v `[B, H, L, d]`: views of it where the backend can
/// make them. As the model's `split_qkv`, the parts are sliced from `[B·L, 3·H·d]` rows: a
/// slice of the middle dimension and the reshape dropping it made burn-cubecl-fusion 0.22.1
/// copy each part.
fn heads_of<B: Backend>(qkv: FloatTensor<B>) -> [FloatTensor<B>; 3] {
    let [batch, len, _, heads, dim] = qkv.shape().dims::<5>();
    let (rows, width) = (batch * len, heads * dim);
    let rows_of = B::float_reshape(qkv, [rows, 3 * width].into());
    [0, 1, 2].map(|part| {
        let ranges = [0..rows, part * width..(part + 1) * width].map(Slice::from);
        let one = B::float_slice(rows_of.clone(), &ranges);
        B::float_swap_dims(B::float_reshape(one, [batch, len, heads, dim].into()), 1, 2)
    })
}

/// What the backward keeps: the inputs, the output and its statistics; nothing of size L².
#[derive(Clone, Debug)]
struct Saved<B: Backend> {
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    key_bias: FloatTensor<B>,
    out: FloatTensor<B>,
    stats: FloatTensor<B>,
    options: Options,
}

/// The backward of attention whose parents are q, k and v (`N = 3`), or the `[B, L, 3, H, d]`
/// tensor they are views of (`N = 1`), which takes the kernels' gradient as it is.
#[derive(Debug)]
struct AttentionBackward<const N: usize>;

impl<B: Backend + FusedAttention, const N: usize> Backward<B, N> for AttentionBackward<N> {
    type State = Saved<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dout = grads.consume::<B>(&ops.node);
        let s = ops.state;
        let packed =
            B::fused_attention_backward(s.q, s.k, s.v, s.key_bias, s.out, dout, s.stats, s.options);
        let gradients = match N {
            1 => vec![packed],
            _ => heads_of::<B>(packed).into(),
        };
        for (parent, gradient) in ops.parents.iter().zip(gradients) {
            if let Some(parent) = parent {
                grads.register::<B>(parent.id, gradient);
            }
        }
    }
}

/// The forward on the inner backend, recorded for [`AttentionBackward`] over `parents`.
fn record<B: Backend + FusedAttention, C: CheckpointStrategy, const N: usize>(
    parents: [NodeGuard; N],
    [q, k, v]: [FloatTensor<B>; 3],
    key_bias: FloatTensor<B>,
    options: Options,
) -> (FloatTensor<Autodiff<B, C>>, FloatTensor<Autodiff<B, C>>) {
    use burn::backend::AutodiffBackend;
    match AttentionBackward::<N>
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (out, stats) =
                B::fused_attention(q.clone(), k.clone(), v.clone(), key_bias.clone(), options);
            let saved = Saved {
                q,
                k,
                v,
                key_bias,
                out: out.clone(),
                stats: stats.clone(),
                options,
            };
            (prep.finish(saved, out), Autodiff::<B, C>::from_inner(stats))
        }
        OpsKind::UnTracked(prep) => {
            let (out, stats) = B::fused_attention(q, k, v, key_bias, options);
            (prep.finish(out), Autodiff::<B, C>::from_inner(stats))
        }
    }
}

impl<B: Backend + FusedAttention, C: CheckpointStrategy> FusedAttention for Autodiff<B, C> {
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        options: Options,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let parents = [q.node(), k.node(), v.node()];
        let inputs = [q, k, v].map(|t| t.into_primitive());
        record::<B, C, 3>(parents, inputs, key_bias.into_primitive(), options)
    }

    fn fused_attention_packed(
        qkv: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        options: Options,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let parents = [qkv.node()];
        let inputs = heads_of::<B>(qkv.into_primitive());
        record::<B, C, 1>(parents, inputs, key_bias.into_primitive(), options)
    }

    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        out: FloatTensor<Self>,
        dout: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        options: Options,
    ) -> FloatTensor<Self> {
        use burn::backend::AutodiffBackend;
        Self::from_inner(B::fused_attention_backward(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            key_bias.into_primitive(),
            out.into_primitive(),
            dout.into_primitive(),
            stats.into_primitive(),
            options,
        ))
    }

    fn fused_attention_dropout(q: FloatTensor<Self>, options: Options) -> FloatTensor<Self> {
        use burn::backend::AutodiffBackend;
        Self::from_inner(B::fused_attention_dropout(q.into_primitive(), options))
    }
}

/// Whether the kernels compute attention of heads of `dim` terms in `dtype` on `device`: a cube
/// device, a head dimension they are compiled for, a dtype the device has (bf16 on CUDA, not in
/// WGSL), and the shared memory and bindings of their smallest block.
pub fn serves(device: &Device, dtype: DType, dim: usize) -> bool {
    let inner = device.clone().inner();
    let DispatchDevice::Cube(cube) = inner.as_dispatch() else {
        return false;
    };
    let client = cube.client();
    (1..=MAX_HEAD_DIM).contains(&dim)
        && launch::supports(&client, dtype)
        && launch::blocks(&client.properties().hardware, dim).is_some()
}

/// The kernels' options for heads of `dim` terms: `dropout` hashed from the next seed of the
/// stream that training seeds.
fn options(dim: usize, half_window: Option<usize>, dropout: Dropout, device: &Device) -> Options {
    Options {
        scale: (dim as f32).sqrt().recip(),
        half_window,
        dropout: dropout.applies(device).then(|| HashedDropout {
            rate: dropout.0,
            seed: next_hash_seed(),
        }),
    }
}

/// [`super::attention`] through the kernels.
pub fn attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    key_bias: &Tensor<2>,
    half_window: Option<usize>,
    dropout: Dropout,
) -> Tensor<4> {
    let options = options(q.dims()[3], half_window, dropout, &q.device());
    let (out, _stats) = fused_attention_of(q, k, v, key_bias.clone(), options);
    out.swap_dims(1, 2)
}

/// [`super::attention_qkv`] through the kernels: `qkv` is `[B, L, 3, H, d]`, the output
/// `[B, L, H, d]`.
pub fn attention_packed(
    qkv: Tensor<5>,
    key_bias: &Tensor<2>,
    half_window: Option<usize>,
    dropout: Dropout,
) -> Tensor<4> {
    let options = options(qkv.dims()[4], half_window, dropout, &qkv.device());
    fused_attention_packed_of(qkv, key_bias.clone(), options).0
}

/// The extension on model tensors: the output `[B, L, H, d]` and the statistics `[B, H, L, 2]`.
pub(crate) fn fused_attention_of(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    key_bias: Tensor<2>,
    options: Options,
) -> (Tensor<4>, Tensor<4>) {
    let dtype = q.dtype();
    let (out, stats) = <burn::backend::Dispatch as FusedAttention>::fused_attention(
        q.into_dispatch(),
        k.cast(dtype).into_dispatch(),
        v.cast(dtype).into_dispatch(),
        key_bias.cast(DType::F32).into_dispatch(),
        options,
    );
    (Tensor::from_dispatch(out), Tensor::from_dispatch(stats))
}

/// The extension on the `[B, L, 3, H, d]` rows of a q | k | v projection: as
/// [`fused_attention_of`], with one gradient, `qkv`'s.
pub(crate) fn fused_attention_packed_of(
    qkv: Tensor<5>,
    key_bias: Tensor<2>,
    options: Options,
) -> (Tensor<4>, Tensor<4>) {
    let (out, stats) = <burn::backend::Dispatch as FusedAttention>::fused_attention_packed(
        qkv.into_dispatch(),
        key_bias.cast(DType::F32).into_dispatch(),
        options,
    );
    (Tensor::from_dispatch(out), Tensor::from_dispatch(stats))
}

/// The dropout factors `[B, H, L, L]` the kernels apply for `q` and `options`: the mask
/// `verify` rebuilds for the host.
pub(crate) fn dropout_factors(q: Tensor<4>, options: Options) -> Tensor<4> {
    Tensor::from_dispatch(
        <burn::backend::Dispatch as FusedAttention>::fused_attention_dropout(
            q.into_dispatch(),
            options,
        ),
    )
}
