//! A block of a matrix's rows or columns as a view with its own backward ([`BlockOps`]): the
//! q, k and v columns of a fused projection, the head's vocabulary tiles of the decoder. The
//! gradient of a block is the whole matrix's shape, the block's gradient in its place and zeros
//! elsewhere; burn's slice writes it as zeros, then the block, each on flex's calling thread
//! (about 0.7 s of a BERT-base training step with the other core idle, docs/perf-cpu.md).
//! Flex here writes both in one pass split over rayon's threads (`crate::cpu::place_block`);
//! the cube backends keep burn's two operations. Either way the values are the same: the
//! block's gradient, and zeros.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, TensorMetadata, backend_extension};
use burn::prelude::*;
use std::ops::Range;

use burn::tensor::Slice;

/// `x`'s rows (`dim` 0) or columns (`dim` 1) `range`, a view of it.
pub fn block(x: Tensor<2>, dim: usize, range: Range<usize>) -> Tensor<2> {
    assert!(
        dim < 2,
        "a block of rows (0) or columns (1), not of dimension {dim}"
    );
    let (start, len) = (range.start, range.len());
    Tensor::from_dispatch(<Dispatch as BlockOps>::block(
        x.into_dispatch(),
        dim,
        start,
        len,
    ))
}

#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda")),
    Autodiff
)]
pub trait BlockOps: Backend {
    /// [`block`] on this backend's primitives.
    #[fusion(default)]
    fn block(x: FloatTensor<Self>, dim: usize, start: usize, len: usize) -> FloatTensor<Self> {
        Self::float_slice(x, &slices(dim, start, len))
    }

    /// The matrix of `total` rows or columns along `dim`: `block` from `start`, zeros
    /// elsewhere, as burn's slice backward makes it.
    #[fusion(default)]
    fn placed_block(
        block: FloatTensor<Self>,
        dim: usize,
        total: usize,
        start: usize,
    ) -> FloatTensor<Self> {
        zeros_around::<Self>(block, dim, total, start)
    }
}

impl BlockOps for Flex {
    fn placed_block(
        block: FloatTensor<Self>,
        dim: usize,
        total: usize,
        start: usize,
    ) -> FloatTensor<Self> {
        crate::cpu::place_block(block, dim, total, start)
            .unwrap_or_else(|block| zeros_around::<Self>(block, dim, total, start))
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl BlockOps for burn_cubecl::CubeBackend {}

/// burn's slice backward: zeros of the whole matrix's shape, the block assigned into them.
fn zeros_around<B: Backend>(
    block: FloatTensor<B>,
    dim: usize,
    total: usize,
    start: usize,
) -> FloatTensor<B> {
    let mut shape: [usize; 2] = block.shape().dims();
    let len = std::mem::replace(&mut shape[dim], total);
    let zeros = B::float_zeros(shape.into(), &block.device(), block.dtype().into());
    B::float_slice_assign(zeros, &slices(dim, start, len), block)
}

/// `start..start + len` along `dim`, everything along the other.
fn slices(dim: usize, start: usize, len: usize) -> [Slice; 2] {
    let mut slices = [Slice::from(..), Slice::from(..)];
    slices[dim] = Slice::from(start..start + len);
    slices
}

/// A block's backward: its gradient placed in the whole matrix's.
#[derive(Debug)]
struct Block;

impl<B: Backend + BlockOps> Backward<B, 1> for Block {
    /// The dimension, the matrix's extent along it, and the block's start.
    type State = (usize, usize, usize);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<B>(&ops.node);
        let (dim, total, start) = ops.state;
        if let [Some(x)] = &ops.parents {
            grads.register::<B>(x.id, B::placed_block(dy, dim, total, start));
        }
    }
}

impl<B: Backend + BlockOps, C: CheckpointStrategy> BlockOps for Autodiff<B, C> {
    fn block(x: FloatTensor<Self>, dim: usize, start: usize, len: usize) -> FloatTensor<Self> {
        let total = x.shape().dims::<2>()[dim];
        let node = [x.node()];
        let out = B::block(x.into_primitive(), dim, start, len);
        match Block.prepare::<C>(node).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((dim, total, start), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(t: Tensor<2>) -> Vec<u32> {
        let values: Vec<f32> = t.into_data().convert::<f32>().try_into_vec().unwrap();
        values.into_iter().map(f32::to_bits).collect()
    }

    /// Blocks of rows and of columns that tile a matrix, each weighted, on flex's autodiff
    /// device and each test device: the values and the matrix's gradient are those of burn's
    /// slices, bit for bit.
    #[test]
    fn blocks_and_their_gradient_are_burns_slices() {
        let (rows, width) = (37, 20);
        let devices = std::iter::once(Device::flex().autodiff()).chain(
            crate::device::test_devices()
                .into_iter()
                .map(|d| d.autodiff()),
        );
        for device in devices {
            let matrix = |seed: usize| {
                let values: Vec<f32> = (0..rows * width)
                    .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 - 500.0) / 37.0)
                    .collect();
                Tensor::<2>::from_data(TensorData::new(values, [rows, width]), &device)
            };
            for (dim, cuts) in [(0, [0, 5, 16, 37]), (1, [0, 7, 8, 20])] {
                let (x, weights) = (matrix(1).require_grad(), matrix(2));
                let reference = x.clone().detach().require_grad();
                let (mut ours, mut theirs) = (Vec::new(), Vec::new());
                for (i, range) in cuts.windows(2).map(|w| w[0]..w[1]).enumerate() {
                    let w = block(weights.clone(), dim, range.clone()).mul_scalar(i as f32 + 1.0);
                    let (a, b) = (
                        block(x.clone(), dim, range.clone()),
                        reference.clone().slice_dim(dim, range),
                    );
                    assert_eq!(bits(a.clone()), bits(b.clone()), "{device:?}, dim {dim}");
                    ours.push((a * w.clone()).sum());
                    theirs.push((b * w).sum());
                }
                let grads = Tensor::cat(ours, 0).sum().backward();
                let expected = Tensor::cat(theirs, 0).sum().backward();
                let (got, want) = (x.grad(&grads).unwrap(), reference.grad(&expected).unwrap());
                assert_eq!(bits(got), bits(want), "{device:?}, dim {dim}: the gradient");
            }
        }
    }
}
