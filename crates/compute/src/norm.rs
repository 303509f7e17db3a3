//! LayerNorm, and every parameter vector broadcast over the rows of an activation (biases,
//! LayerNorm scales and shifts), arranged so that their gradients reduce in two short passes.
//!
//! Why: a vector broadcast over `[rows, width]` gets as gradient the column sums of a
//! `[rows, width]` tensor. burn folds the leading dimensions into one axis and reduces it in one
//! pass, with one GPU thread per column walking every row: at the recipe's 16,384 document tokens
//! that kernel took a third of a CUDA training step (`docs/gpu/2026-11-30.md`). Broadcasting the
//! vector over `[rows / block, block, width]` instead, through a `[1, block, width]` expansion,
//! makes autodiff sum `rows / block` rows for `block · width` outputs, then `block` rows for
//! `width`: two well-parallel reductions, on every backend, with no kernel of our own. The
//! forward values are those of the plain broadcast (the same element-wise operations).

use burn::module::Param;
use burn::prelude::*;
use burn::tensor::DType;

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
        let x = x.cast(DType::F32);
        let last = D - 1;
        let mean = x.clone().mean_dim(last);
        let centered = x - mean;
        let var = (centered.clone() * centered.clone()).mean_dim(last);
        let normalized = centered / var.add_scalar(self.epsilon).sqrt();
        let scaled = mul_rows(normalized, self.gamma.val());
        match &self.beta {
            Some(beta) => add_rows(scaled, beta.val()),
            None => scaled,
        }
    }
}

/// `x + v` for `v` of `x`'s last dimension, added to every row; its gradient reduces in two
/// passes (see the module's account).
pub fn add_rows<const D: usize>(x: Tensor<D>, v: Tensor<1>) -> Tensor<D> {
    over_row_blocks(x, v, |x, v| x + v)
}

/// `x ⊙ v` for `v` of `x`'s last dimension, applied to every row; as [`add_rows`].
pub fn mul_rows<const D: usize>(x: Tensor<D>, v: Tensor<1>) -> Tensor<D> {
    over_row_blocks(x, v, |x, v| x * v)
}

fn over_row_blocks<const D: usize>(
    x: Tensor<D>,
    v: Tensor<1>,
    op: impl FnOnce(Tensor<3>, Tensor<3>) -> Tensor<3>,
) -> Tensor<D> {
    let dims = x.dims();
    let width = dims[D - 1];
    let rows = dims[..D - 1].iter().product::<usize>();
    let block = row_block(rows);
    let v = v
        .cast(x.dtype())
        .reshape([1, 1, width])
        .expand([1, block, width]);
    op(x.reshape([rows / block, block, width]), v).reshape(dims)
}

/// The divisor of `rows` nearest to √rows from below (1 for a prime): both passes of the
/// gradient's reduction then walk about √rows rows.
pub fn row_block(rows: usize) -> usize {
    let mut block = (rows as f64).sqrt() as usize;
    while block > 1 && rows % block != 0 {
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
}
