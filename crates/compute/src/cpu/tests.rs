//! The parallel kernels against flex's own operations, bit for bit, on shapes that split into
//! several tasks and on inputs another tensor shares; and the tensors they hand back to flex.

use burn::backend::Flex;
use burn::backend::ops::{ActivationOps, FloatTensorOps};
use burn::prelude::*;
use burn_flex::FlexTensor;

use crate::activation::ExactGelu;
use crate::attention::MASKED;
use crate::norm::RowOps;

/// `[rows, width]` values from −6 to 6 and beyond, every erf regime, no two rows alike.
fn matrix(rows: usize, width: usize, seed: f32) -> FlexTensor {
    let values = (0..rows * width)
        .map(|i| 7.0 * ((i as f32 * 0.618 + seed).sin()) * (1.0 + (i % 13) as f32 * 0.01))
        .collect::<Vec<f32>>();
    FlexTensor::from_data(TensorData::new(values, [rows, width]))
}

fn bits(x: FlexTensor) -> Vec<u32> {
    let values: Vec<f32> = x.into_data().convert::<f32>().try_into_vec().unwrap();
    values.into_iter().map(f32::to_bits).collect()
}

/// One task and several (100 · 768 elements are three tasks), widths that are not a multiple of
/// a vector.
const SHAPES: [(usize, usize); 4] = [(1, 1), (3, 7), (100, 768), (45, 1001)];

#[test]
fn gelu_and_its_gradient_are_flexs_bit_for_bit() {
    for (rows, width) in SHAPES {
        let (x, grad) = (matrix(rows, width, 0.3), matrix(rows, width, 1.7));
        let shared = x.clone();
        assert_eq!(
            bits(<Flex as ExactGelu>::exact_gelu(x.clone())),
            bits(Flex::gelu(x.clone())),
            "gelu, [{rows}, {width}], shared input"
        );
        drop(shared);
        assert_eq!(
            bits(<Flex as ExactGelu>::exact_gelu(matrix(rows, width, 0.3))),
            bits(Flex::gelu(x.clone())),
            "gelu, [{rows}, {width}], computed in place"
        );
        assert_eq!(
            bits(<Flex as ExactGelu>::exact_gelu_backward(
                x.clone(),
                grad.clone()
            )),
            bits(Flex::gelu_backward(x, grad)),
            "gelu's gradient, [{rows}, {width}]"
        );
    }
}

#[test]
fn the_norms_and_the_row_add_are_flexs_bit_for_bit() {
    for (rows, width) in SHAPES {
        let x = matrix(rows, width, 0.9);
        let gamma = matrix(1, width, 2.1).reshape([width].into());
        let beta = matrix(1, width, 4.4).reshape([width].into());
        let row = |v: &FlexTensor| v.reshape([1, width].into());
        let epsilon = 1e-12;
        let mean = |t: FlexTensor| Flex::float_mean_dim(t, 1);
        let centered = Flex::float_sub(x.clone(), mean(x.clone()));
        let var = mean(Flex::float_mul(centered.clone(), centered.clone()));
        let std = Flex::float_sqrt(Flex::float_add_scalar(var, epsilon.into()));
        let scaled = Flex::float_mul(Flex::float_div(centered, std), row(&gamma));
        let shifted = Flex::float_add(scaled.clone(), row(&beta));
        assert_eq!(
            bits(Flex::row_layer_norm(
                x.clone(),
                gamma.clone(),
                beta.clone(),
                epsilon
            )),
            bits(shifted),
            "layer norm, [{rows}, {width}]"
        );
        assert_eq!(
            bits(Flex::row_scaled_norm(x.clone(), gamma.clone(), epsilon)),
            bits(scaled),
            "norm without shift, [{rows}, {width}]"
        );
        assert_eq!(
            bits(Flex::row_add(x.clone(), beta.clone(), row(&beta))),
            bits(Flex::float_add(x, row(&beta))),
            "row add, [{rows}, {width}]"
        );
    }
}

#[test]
fn tensors_that_are_not_contiguous_f32_go_back_to_flex() {
    let x = matrix(5, 3, 0.1).transpose(0, 1);
    let gamma = matrix(1, 5, 0.2).reshape([5].into());
    assert!(crate::cpu::map(x.clone(), |_| {}).is_err());
    assert!(crate::cpu::layer_norm(x.clone(), &gamma, None, 1e-5).is_err());
    assert!(crate::cpu::add_row(x.clone(), gamma.clone()).is_err());
    let wrong_width = matrix(1, 4, 0.2).reshape([4].into());
    let rows = matrix(3, 5, 0.1);
    assert!(crate::cpu::add_row(rows.clone(), wrong_width).is_err());
    assert!(crate::cpu::zip(rows, x.clone(), |a, _| a).is_err());
    // And flex computes them: the transposed norm through the extension is flex's.
    let expected = Flex::row_scaled_norm(x.to_contiguous(), gamma.clone(), 1e-5);
    assert_eq!(bits(Flex::row_scaled_norm(x, gamma, 1e-5)), bits(expected));
}

#[test]
fn the_residual_add_and_the_group_max_are_flexs_bit_for_bit() {
    for (groups, per_group, width) in [(1, 1, 1), (4, 37, 3000), (3, 5, 7)] {
        let rows = groups * per_group;
        let mut values = matrix(rows, width, 0.4)
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        let n = values.len();
        values[2 % n] = f32::NAN;
        values[n / 2] = f32::NAN;
        let x = FlexTensor::from_data(TensorData::new(values, [rows, width]));
        // Pads' offsets as SPLADE's pooling has them, a row of NaN's beside.
        let shifts = (0..rows).map(|r| match r % 5 {
            3 => -1e30,
            4 if width == 1 => f32::NAN,
            _ => 0.0,
        });
        let offsets = FlexTensor::from_data(TensorData::new(shifts.collect(), [rows, 1]));
        let y = matrix(rows, width, 2.5);
        assert_eq!(
            bits(Flex::add_same_shape(x.clone(), y.clone())),
            bits(Flex::float_add(x.clone(), y)),
            "sum, [{rows}, {width}]"
        );
        let shifted = Flex::float_add(x.clone(), offsets.clone());
        let grouped = shifted.reshape([groups, per_group, width].into());
        let expected = Flex::float_max_dim(grouped, 1).reshape([groups, width].into());
        assert_eq!(
            bits(Flex::row_group_max(x, offsets, groups)),
            bits(expected),
            "group max, {groups} × [{per_group}, {width}]"
        );
    }
    let (x, offsets) = (matrix(5, 3, 0.1), matrix(5, 1, 0.2));
    assert!(
        crate::cpu::group_max(x, offsets, 2).is_err(),
        "5 rows in 2 groups"
    );
}

/// Where a gradient flows, the group max is burn's own operations, and each maximum's gradient
/// reaches its row.
#[test]
fn a_tracked_group_max_sends_each_gradient_to_its_maximum() {
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::from_data(
        [[1.0f32, 5.0], [3.0, 2.0], [0.0, 1.0], [4.0, -1.0]],
        &device,
    )
    .require_grad();
    let offsets = Tensor::<2>::from_data([[0.0f32], [0.0], [0.0], [-1e30]], &device);
    let pooled = crate::norm::group_max(x.clone(), offsets, 2);
    let values: Vec<f32> = pooled.clone().into_data().try_to_vec().unwrap();
    assert_eq!(values, [3.0, 5.0, 0.0, 1.0]);
    let grads = (pooled * Tensor::from_data([[1.0f32, 2.0], [3.0, 4.0]], &device))
        .sum()
        .backward();
    let gradient: Vec<f32> = x.grad(&grads).unwrap().into_data().try_to_vec().unwrap();
    assert_eq!(gradient, [0.0, 2.0, 1.0, 0.0, 3.0, 4.0, 0.0, 0.0]);
}

/// The group max's gradient from a `dy` that is a view, as the head's tiles get theirs from
/// the concatenated gradient: the kernel's, equal to the one from a copy of it.
#[test]
fn a_group_max_gradient_that_is_a_view_is_placed_by_the_kernel() {
    let (groups, per_group, width) = (4, 3, 300);
    let dy = matrix(width, groups, 0.4).transpose(0, 1);
    let rows: Vec<f32> = (0..groups * width)
        .map(|i| (i % per_group) as f32)
        .collect();
    let rows = FlexTensor::from_data(TensorData::new(rows, [groups, width]));
    let placed = crate::cpu::place_group_max_gradient(dy.clone(), &rows, per_group);
    let expected = crate::cpu::place_group_max_gradient(dy.to_contiguous(), &rows, per_group);
    assert_eq!(bits(placed.unwrap()), bits(expected.unwrap()));
}

/// With ties, a NaN, zeros of both signs in `dy` and more columns than a task takes: the
/// tracked group max and its gradient are burn's `max_dim` and its backward, bit for bit.
#[test]
fn the_group_max_and_its_gradient_are_max_dims_bit_for_bit() {
    let device = Device::flex().autodiff();
    let (groups, per_group, width) = (3, 5, 2500);
    let values: Vec<f32> = (0..groups * per_group * width)
        .map(|i| match i % 1009 {
            0 => f32::NAN,
            _ => ((i * 7919) % 13) as f32 - 6.0,
        })
        .collect();
    let x = Tensor::<2>::from_data(
        TensorData::new(values, [groups * per_group, width]),
        &device,
    );
    let shifts: Vec<f32> = (0..groups * per_group)
        .map(|r| (r % 3) as f32 * 0.5)
        .collect();
    let offsets = Tensor::<2>::from_data(TensorData::new(shifts, [groups * per_group, 1]), &device);
    let weights: Vec<f32> = (0..groups * width)
        .map(|i| match i % 7 {
            0 => -0.0,
            k => k as f32 - 3.5,
        })
        .collect();
    let weights = Tensor::<2>::from_data(TensorData::new(weights, [groups, width]), &device);
    let (ours, reference) = (x.clone().require_grad(), x.require_grad());
    let pooled = crate::norm::group_max(ours.clone(), offsets.clone(), groups);
    let expected = (reference.clone() + offsets)
        .reshape([groups, per_group, width])
        .max_dim(1)
        .reshape([groups, width]);
    assert_same_with_gradient((ours, pooled), (reference, expected), weights, "the maxima");
}

#[test]
fn scaled_and_masked_scores_are_flexs_bit_for_bit() {
    use crate::attention::composed::ScoreOps;
    let (batch, heads, len) = (3, 4, 45);
    let scores = matrix(batch * heads * len, len, 0.8).reshape([batch, heads, len, len].into());
    for queries in [1, len] {
        let bias = matrix(batch * queries, len, 1.3).reshape([batch, 1, queries, len].into());
        let expected = Flex::float_add(
            Flex::float_div_scalar(scores.clone(), 8.0.into()),
            bias.clone(),
        );
        assert_eq!(
            bits(Flex::scaled_scores(scores.clone(), bias.clone(), 8.0)),
            bits(expected),
            "bias of {queries} queries"
        );
    }
    let wrong = matrix(batch, len + 1, 0.1).reshape([batch, 1, 1, len + 1].into());
    assert!(crate::cpu::scaled_scores(scores, wrong, 8.0).is_err());
}

/// On an autodiff device the scores' gradient is `div_scalar`'s, bit for bit.
#[test]
fn the_scaled_scores_gradient_is_div_scalars() {
    let device = Device::flex().autodiff();
    let tensor = |dims: [usize; 4], seed: f32| {
        let n = dims.iter().product::<usize>();
        let values = (0..n).map(|i| ((i as f32 + seed) * 0.37).sin());
        Tensor::<4>::from_data(TensorData::new(values.collect(), dims), &device)
    };
    let q = tensor([2, 3, 5, 8], 0.1).require_grad();
    let k = tensor([2, 3, 5, 8], 0.5).require_grad();
    let v = tensor([2, 3, 5, 8], 0.9).require_grad();
    let bias = tensor([2, 1, 1, 5], 1.1);
    let weights = tensor([2, 3, 5, 8], 2.0);
    let ours = crate::attention::composed::attention(
        q.clone(),
        k.clone(),
        v.clone(),
        bias.clone(),
        crate::dropout::Dropout(0.0),
    );
    let product = crate::matmul::matmul;
    let scores = product(q.clone(), k.clone().swap_dims(2, 3)).div_scalar(8f64.sqrt()) + bias;
    let theirs = product(burn::tensor::activation::softmax(scores, 3), v.clone());
    let as_bits = |t: Tensor<4>| -> Vec<u32> {
        let values: Vec<f32> = t.into_data().try_to_vec().unwrap();
        values.into_iter().map(f32::to_bits).collect()
    };
    assert_eq!(as_bits(ours.clone()), as_bits(theirs.clone()), "values");
    let grads_a = (ours * weights.clone()).sum().backward();
    let grads_b = (theirs * weights).sum().backward();
    for (name, t) in [("q", &q), ("k", &k), ("v", &v)] {
        let (a, b) = (t.grad(&grads_a).unwrap(), t.grad(&grads_b).unwrap());
        assert_eq!(as_bits(a), as_bits(b), "gradient of {name}");
    }
}

/// The norm a backward pass follows, what it keeps, and its input gradient, against flex's own
/// operations in the order `norm::ops` composes them.
#[test]
fn the_kept_norm_and_its_input_gradient_are_flexs_bit_for_bit() {
    for (rows, width) in SHAPES {
        let (x, dy) = (matrix(rows, width, 0.9), matrix(rows, width, 3.3));
        let gamma = matrix(1, width, 2.1).reshape([width].into());
        let beta = matrix(1, width, 4.4).reshape([width].into());
        let row = |v: &FlexTensor| v.reshape([1, width].into());
        let epsilon = 1e-5;
        let mean = |t: FlexTensor| Flex::float_mean_dim(t, 1);
        let centered = Flex::float_sub(x.clone(), mean(x.clone()));
        let var = mean(Flex::float_mul(centered.clone(), centered.clone()));
        let std = Flex::float_sqrt(Flex::float_add_scalar(var, epsilon.into()));
        let normalized = Flex::float_div(centered, std.clone());
        let scaled = Flex::float_mul(normalized.clone(), row(&gamma));
        let shifted = Flex::float_add(scaled.clone(), row(&beta));
        let (y, kept, kept_std) =
            Flex::row_layer_norm_kept(x.clone(), gamma.clone(), beta.clone(), epsilon);
        assert_eq!(bits(y), bits(shifted.clone()), "y, [{rows}, {width}]");
        assert_eq!(bits(kept), bits(normalized.clone()), "x̂, [{rows}, {width}]");
        assert_eq!(bits(kept_std), bits(std.clone()), "std, [{rows}, {width}]");
        let (y, _, _) = Flex::row_scaled_norm_kept(x, gamma.clone(), epsilon);
        assert_eq!(bits(y), bits(scaled), "y without shift, [{rows}, {width}]");

        let g = Flex::float_mul(dy.clone(), row(&gamma));
        let projected = Flex::float_mul(g.clone(), normalized.clone());
        let along = Flex::float_mul(normalized.clone(), mean(projected));
        let centered = Flex::float_sub(Flex::float_sub(g.clone(), mean(g)), along);
        let expected = Flex::float_div(centered, std.clone());
        assert_eq!(
            bits(Flex::row_norm_input_gradient(dy, normalized, std, gamma)),
            bits(expected),
            "dx, [{rows}, {width}]"
        );
    }
}

/// `[rows, width]` scores with masked keys (and, with `nan`, a NaN in one row of the larger
/// shapes), and weights with zeros of both signs for the gradient's loss.
fn scores_and_weights(
    rows: usize,
    width: usize,
    nan: bool,
    device: &Device,
) -> (Tensor<2>, Tensor<2>) {
    let mut scores: Vec<f32> = matrix(rows, width, 0.9)
        .into_data()
        .convert::<f32>()
        .try_into_vec()
        .unwrap();
    scores.iter_mut().step_by(5).for_each(|v| *v = MASKED);
    if nan && rows > 3 {
        scores[2 * width + 1] = f32::NAN;
    }
    let weights = (0..rows * width).map(|i| match i % 11 {
        0 => -0.0,
        k => (k as f32 - 5.5) * 0.3,
    });
    let tensor = |v: Vec<f32>| Tensor::<2>::from_data(TensorData::new(v, [rows, width]), device);
    (tensor(scores), tensor(weights.collect()))
}

/// `ours` and `expected`, outputs of the tracked inputs `x` and `reference`, are the same bit
/// for bit, and so are the inputs' gradients of a weighted sum of them.
fn assert_same_with_gradient(
    (x, ours): (Tensor<2>, Tensor<2>),
    (reference, expected): (Tensor<2>, Tensor<2>),
    weights: Tensor<2>,
    what: &str,
) {
    assert_eq!(
        tensor_bits(ours.clone()),
        tensor_bits(expected.clone()),
        "{what}"
    );
    let grads = (ours * weights.clone()).sum().backward();
    let reference_grads = (expected * weights).sum().backward();
    assert_eq!(
        tensor_bits(x.grad(&grads).unwrap()),
        tensor_bits(reference.grad(&reference_grads).unwrap()),
        "the gradient, {what}"
    );
}

/// Each value's bits, every NaN as one: which of two NaN operands an operation passes on
/// depends on their order, and autodiff adds a node's gradients in the order it reaches them.
fn tensor_bits(t: Tensor<2>) -> Vec<u32> {
    let values: Vec<f32> = t.into_data().convert::<f32>().try_into_vec().unwrap();
    let canonical = |v: f32| if v.is_nan() { f32::NAN } else { v };
    values.into_iter().map(|v| canonical(v).to_bits()).collect()
}

/// The tracked softmax and its gradient are burn's composed softmax under autodiff, bit for
/// bit, on shapes of one task and of several, on an input another tensor shares and on a view
/// that is not contiguous (which goes back to the composed operations).
#[test]
fn the_softmax_and_its_gradient_are_burns_bit_for_bit() {
    let device = Device::flex().autodiff();
    for (rows, width) in SHAPES {
        let (scores, weights) = scores_and_weights(rows, width, true, &device);
        for transposed in [false, true] {
            let view = |t: &Tensor<2>| {
                if transposed {
                    t.clone().transpose()
                } else {
                    t.clone()
                }
            };
            let (ours, reference) = (view(&scores).require_grad(), view(&scores).require_grad());
            let p = crate::norm::softmax(ours.clone());
            let expected = burn::tensor::activation::softmax(reference.clone(), 1);
            let what = format!("[{rows}, {width}], transposed {transposed}");
            assert_same_with_gradient((ours, p), (reference, expected), view(&weights), &what);
        }
    }
}

/// A mask applied by the one operation and by burn's multiplication and division: the same
/// values and gradient, bit for bit, the mask drawn from the same seed.
#[test]
fn dropout_and_its_gradient_are_burns_multiplication_and_division() {
    use crate::dropout::{Dropout, seed};
    let device = Device::flex().autodiff();
    let p = 0.1;
    for (rows, width) in SHAPES {
        let (x, weights) = scores_and_weights(rows, width, true, &device);
        let (ours, reference) = (x.clone().require_grad(), x.require_grad());
        seed(&device, 11);
        let dropped = Dropout(p).forward(ours.clone());
        seed(&device, 11);
        let kept = reference.random_like(burn::tensor::Distribution::Bernoulli(1.0 - p));
        let expected = (reference.clone() * kept).div_scalar(1.0 - p);
        let what = format!("[{rows}, {width}]");
        assert_same_with_gradient((ours, dropped), (reference, expected), weights, &what);
    }
}

/// On every test device, the tracked softmax and its gradient are burn's softmax's to f32
/// rounding.
#[test]
fn the_softmax_and_its_gradient_match_burns_on_every_device() {
    for device in crate::device::test_devices() {
        let device = device.autodiff();
        let (rows, width) = (24, 45);
        let (scores, weights) = scores_and_weights(rows, width, false, &device);
        let (ours, reference) = (scores.clone().require_grad(), scores.require_grad());
        let p = crate::norm::softmax(ours.clone());
        let expected = burn::tensor::activation::softmax(reference.clone(), 1);
        let grads = (p.clone() * weights.clone()).sum().backward();
        let reference_grads = (expected.clone() * weights).sum().backward();
        let pairs = [
            (p, expected, "values"),
            (
                ours.grad(&grads).unwrap(),
                reference.grad(&reference_grads).unwrap(),
                "gradient",
            ),
        ];
        for (a, b, what) in pairs {
            let (a, b): (Vec<f32>, Vec<f32>) = (
                a.into_data().convert::<f32>().try_into_vec().unwrap(),
                b.into_data().convert::<f32>().try_into_vec().unwrap(),
            );
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-6 * y.abs().max(1.0),
                    "{what} on {device:?}: {x} vs {y}"
                );
            }
        }
    }
}
