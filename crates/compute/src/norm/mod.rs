//! LayerNorm, and every parameter vector added to the rows of an activation (biases), as
//! operations with a backward of their own (`ops.rs`): a forward that fusion merges with its
//! neighbours, and parameter gradients that reduce in two short passes. With them the other
//! operations over rows that flex runs through `crate::cpu`: the residual add, the max over
//! groups of rows (a text's tokens) that SPLADE's pooling takes, and attention's softmax.
//!
//! Why two passes: a vector broadcast over `[rows, width]` gets as gradient the column sums of
//! a `[rows, width]` tensor, and one pass with one GPU thread per column walking every row took
//! a third of a CUDA training step at the recipe's 16,384 document tokens
//! (`docs/gpu/2026-11-30.md`). Summing `[rows / block, block, width]` over its first axis,
//! then the `block` partial sums, gives two well-parallel reductions on every backend, with no
//! kernel of our own.

mod ops;

use burn::backend::Dispatch;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::module::Param;
use burn::prelude::*;
use burn::tensor::DType;

pub(crate) use ops::RowOps;

/// LayerNorm over the last dimension, `(x − mean) / √(var + eps) · gamma + beta`, in f32, with
/// burn's parameter names (`gamma`, `beta`), so that records written with burn's own LayerNorm
/// load unchanged.
#[derive(Module, Debug)]
pub struct LayerNorm {
    pub gamma: Param<Tensor<1>>,
    pub beta: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub epsilon: f64,
}

impl LayerNorm {
    /// The norm of `x` in f32 whatever `x`'s dtype: the statistics of a bf16 row lose too much.
    /// The same operations, in the same order, as burn's `layer_norm`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let (rows, dims) = as_rows(x.cast(DType::F32));
        let (rows, gamma) = (rows.into_dispatch(), self.gamma.val().into_dispatch());
        let y = match &self.beta {
            Some(beta) => {
                let beta = beta.val().into_dispatch();
                <Dispatch as RowOps>::row_layer_norm(rows, gamma, beta, self.epsilon)
            }
            None => <Dispatch as RowOps>::row_scaled_norm(rows, gamma, self.epsilon),
        };
        Tensor::<2>::from_dispatch(y).reshape(dims)
    }
}

/// A vector to add to every row of an activation ([`add_rows`]), made before the operation that
/// computes the rows: the `[1, width]` row the forward adds is reshaped from it here, so that
/// fusion sees the add as that operation's epilogue (a bias in its product's kernel). A reshape
/// issued after a product ended the product's fused block, and the add, with every element-wise
/// operation after it, ran as a kernel of its own. The row is detached: the gradient goes to the
/// `[width]` vector itself, as a column sum, with no reshape between it and the sum of the
/// vector's other uses (a reshape that drops a rank ends a fused block too).
pub struct RowVector {
    vector: Tensor<1>,
    row: Tensor<2>,
}

/// `v` ready for [`add_rows`], in `dtype`.
pub fn row_vector(v: Tensor<1>, dtype: DType) -> RowVector {
    let vector = v.cast(dtype);
    let width = vector.dims()[0];
    let row = vector.clone().detach().reshape([1, width]);
    RowVector { vector, row }
}

/// `x + v`, the vector added to every row in `x`'s dtype (a cast here, after the product, would
/// end its fused block: make `v` in that dtype); its gradient reduces in two passes.
pub fn add_rows<const D: usize>(x: Tensor<D>, v: RowVector) -> Tensor<D> {
    let dtype = x.dtype();
    let (rows, dims) = as_rows(x);
    let (vector, row) = (v.vector.cast(dtype), v.row.cast(dtype));
    let (vector, row) = (vector.into_dispatch(), row.into_dispatch());
    let y = <Dispatch as RowOps>::row_add(rows.into_dispatch(), vector, row);
    Tensor::<2>::from_dispatch(y).reshape(dims)
}

/// `x + y`, two tensors of one shape (a residual stream and its update), in their dtype.
pub fn add_same<const D: usize>(x: Tensor<D>, y: Tensor<D>) -> Tensor<D> {
    let sum = <Dispatch as RowOps>::add_same_shape(x.into_dispatch(), y.into_dispatch());
    Tensor::from_dispatch(sum)
}

/// Softmax over the last dimension of `x`. Where a gradient flows, one operation whose
/// backward is the one burn's autodiff takes through its composed softmax, written out (flex
/// runs both split over its threads), the same values; elsewhere the backend's own softmax.
pub fn softmax<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let (rows, dims) = as_rows(x);
    let p = <Dispatch as RowOps>::row_softmax(rows.into_dispatch());
    Tensor::<2>::from_dispatch(p).reshape(dims)
}

/// The max over each of `groups` consecutive blocks of the `[rows, width]` rows of `x`, each row
/// shifted by its `[rows, 1]` offset first: `[groups, width]`, a NaN winning as in `max_dim`.
/// Where a gradient flows, it reaches each maximum's row as `max_dim`'s does.
pub fn group_max(x: Tensor<2>, offsets: Tensor<2>, groups: usize) -> Tensor<2> {
    let (x, offsets) = (x.into_dispatch(), offsets.into_dispatch());
    Tensor::<2>::from_dispatch(<Dispatch as RowOps>::row_group_max(x, offsets, groups))
}

/// `x` as `[rows, width]`, and its shape.
fn as_rows<const D: usize>(x: Tensor<D>) -> (Tensor<2>, [usize; D]) {
    let dims = x.dims();
    let width = dims[D - 1];
    (
        x.reshape([dims[..D - 1].iter().product::<usize>(), width]),
        dims,
    )
}

/// The column sums `[width]` of `[rows, width]` `t`, in two passes of about √rows rows each.
fn column_sum<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let shape = t.shape();
    let (rows, width) = (shape[0], shape[1]);
    let block = row_block(rows);
    let blocks = B::float_reshape(t, [rows / block, block, width].into());
    let partial = B::float_sum_dim(blocks, 0);
    B::float_reshape(B::float_sum_dim(partial, 1), [width].into())
}

/// The divisor of `rows` nearest to √rows from below (1 for a prime): both passes of the
/// gradient's reduction then walk about √rows rows.
pub fn row_block(rows: usize) -> usize {
    let mut block = (rows as f64).sqrt() as usize;
    while block > 1 && !rows.is_multiple_of(block) {
        block -= 1;
    }
    block.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use itertools::Itertools;

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().convert::<f32>().try_into_vec().unwrap()
    }

    #[test]
    fn row_blocks_divide_the_rows_near_their_square_root() {
        assert_eq!(row_block(16384), 128);
        assert_eq!(row_block(1024), 32);
        assert_eq!(row_block(6), 2);
        assert_eq!(row_block(7), 1);
        assert_eq!(row_block(0), 1);
        assert_eq!(row_block(1), 1);
    }

    /// Values and gradients as burn's LayerNorm and plain broadcasts give them, for a row count
    /// that splits (6 × 4 = 24 rows → blocks of 4) and one that does not (a prime).
    #[test]
    fn layer_norm_and_row_vectors_equal_the_plain_broadcast_with_their_gradients() {
        let devices = crate::device::test_devices().into_iter();
        for (device, batch) in devices.flat_map(|d| [(d.clone(), 6), (d, 7)]) {
            let device = device.autodiff();
            let width = 5;
            let data = |n: usize, seed: f32| -> Vec<f32> {
                (0..n)
                    .map(|i| ((i as f32 + seed) * 0.731).sin() * 2.0)
                    .collect()
            };
            let input = || {
                Tensor::<3>::from_data(
                    TensorData::new(data(batch * 4 * width, 0.3), [batch, 4, width]),
                    &device,
                )
                .require_grad()
            };
            let gamma = Tensor::<1>::from_data(TensorData::new(data(width, 1.7), [width]), &device);
            let beta = Tensor::<1>::from_data(TensorData::new(data(width, 2.9), [width]), &device);
            let ours = LayerNorm {
                gamma: Param::from_tensor(gamma.clone()),
                beta: Some(Param::from_tensor(beta.clone())),
                epsilon: 1e-5,
            };
            let mut theirs = burn::nn::LayerNormConfig::new(width)
                .with_epsilon(1e-5)
                .init(&device);
            theirs.gamma = Param::from_tensor(gamma);
            theirs.beta = Some(Param::from_tensor(beta));
            let weights = Tensor::<3>::from_data(
                TensorData::new(data(batch * 4 * width, 5.1), [batch, 4, width]),
                &device,
            );
            let (x_a, x_b) = (input(), input());
            let out_a = ours.forward(x_a.clone());
            let out_b = theirs.forward(x_b.clone());
            let close = |a: Vec<f32>, b: Vec<f32>, what: &str| {
                assert_eq!(a.len(), b.len(), "{what}");
                for (x, y) in a.iter().zip_eq(&b) {
                    assert!(
                        (x - y).abs() <= 1e-5 * y.abs().max(1.0),
                        "{what}: {x} vs {y}"
                    );
                }
            };
            close(
                values(out_a.clone()),
                values(out_b.clone()),
                "forward values",
            );
            let grads_a = (out_a * weights.clone()).sum().backward();
            let grads_b = (out_b * weights).sum().backward();
            close(
                values(x_a.grad(&grads_a).unwrap()),
                values(x_b.grad(&grads_b).unwrap()),
                "input",
            );
            close(
                values(ours.gamma.grad(&grads_a).unwrap()),
                values(theirs.gamma.grad(&grads_b).unwrap()),
                "gamma",
            );
            close(
                values(ours.beta.as_ref().unwrap().grad(&grads_a).unwrap()),
                values(theirs.beta.as_ref().unwrap().grad(&grads_b).unwrap()),
                "beta",
            );
        }
    }

    /// The norm without a shift (ModernBERT's) and the bias add against the same computations
    /// written with burn's tensor operations, values and every gradient.
    #[test]
    fn a_norm_without_shift_and_the_bias_add_have_the_gradients_of_their_plain_forms() {
        for device in crate::device::test_devices() {
            let device = device.autodiff();
            let (rows, width) = (12, 6);
            let tensor = |dims: [usize; 2], seed: f32| {
                let values = (0..dims[0] * dims[1]).map(|i| ((i as f32 + seed) * 0.613).cos());
                Tensor::<2>::from_data(TensorData::new(values.collect(), dims), &device)
                    .require_grad()
            };
            let vector = |seed| {
                tensor([1, width], seed)
                    .reshape([width])
                    .detach()
                    .require_grad()
            };
            let (x, gamma, bias) = (tensor([rows, width], 0.1), vector(3.0), vector(7.0));
            let weights = tensor([rows, width], 9.0).detach();
            let norm = LayerNorm {
                gamma: Param::from_tensor(gamma.clone()),
                beta: None,
                epsilon: 1e-6,
            };
            let ours = add_rows(
                norm.forward(x.clone()),
                row_vector(bias.clone(), DType::F32),
            );
            let centered = x.clone() - x.clone().mean_dim(1);
            let var = centered.clone().square().mean_dim(1);
            let theirs = centered / var.add_scalar(1e-6).sqrt() * gamma.clone().unsqueeze()
                + bias.clone().unsqueeze();
            let close = |a: Tensor<2>, b: Tensor<2>, what: &str| {
                for (a, b) in values(a).iter().zip_eq(&values(b)) {
                    assert!(
                        (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                        "{what}: {a} vs {b}"
                    );
                }
            };
            close(ours.clone(), theirs.clone(), "values");
            let grads_a = (ours * weights.clone()).sum().backward();
            let grads_b = (theirs * weights).sum().backward();
            let grad = |t: &Tensor<2>, g| t.grad(g).unwrap();
            close(grad(&x, &grads_a), grad(&x, &grads_b), "input");
            for (name, v) in [("gamma", &gamma), ("bias", &bias)] {
                let (a, b) = (v.grad(&grads_a).unwrap(), v.grad(&grads_b).unwrap());
                close(a.unsqueeze(), b.unsqueeze(), name);
            }
        }
    }
}
