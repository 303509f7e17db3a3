//! The fused kernels against attention in f32 on the host, on each test device that runs them
//! (CI: WGPU on lavapipe), to 1e-5 of each output's largest value (2e-5 for the gradients, see
//! [`GRADIENTS`]): `verify`'s cases (BERT's head size with padding, a window, dropout with the
//! kernels' own mask rebuilt) and small head sizes whose tiles and cubes split differently;
//! the dropout mask's kept fraction; and the composed attention's dtypes.

use burn::prelude::*;
use burn::tensor::DType;

use super::*;
use crate::device::test_devices;

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec().unwrap()
}

/// The test devices on which the kernels serve f32 attention.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn fused_devices() -> Vec<Device> {
    test_devices()
        .into_iter()
        .filter(|device| fused::serves(device, DType::F32, 8))
        .collect()
}

/// The bound on the gradients, as a fraction of their largest value. The kernels compute
/// softmax's backward term `Σ_j p_j·dp_j` as FlashAttention does, `D = rowsum(dO ∘ O)` from the
/// saved output, whose own rounding (~2e-6 of the largest) carries into every `ds = p·(dp − D)`:
/// dQ, which sums them against the keys, came 1.2e-5 of its largest from the host's (in f32 and
/// in f64 alike, 2026-12-04, lavapipe), dK and dV ≤ 1.5e-6; 6.0e-6 and 9.2e-7 with the kernels
/// in register blocks (2026-12-07).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
const GRADIENTS: f64 = 2e-5;

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn assert_within(deviations: Vec<verify::Deviation>, device: &Device) {
    for d in deviations {
        let bound = if d.what == "out" { 1e-5 } else { GRADIENTS };
        assert!(
            d.relative() <= bound,
            "{device:?} {} {} (packed: {}): |Δ| {} of largest {}",
            d.case,
            d.what,
            d.packed,
            d.max_abs,
            d.largest
        );
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
#[test]
fn fused_attention_equals_the_host_with_padding_a_window_and_dropout() {
    for device in test_devices() {
        if let Some(deviations) = verify::fused_against_host(&device, DType::F32) {
            assert_within(deviations, &device);
        }
    }
}

/// Head sizes 16 and 8: other tiles, three cubes of queries, a window narrower than a tile.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
#[test]
fn fused_attention_equals_the_host_at_small_head_sizes() {
    let cases = [
        verify::Case {
            name: "d16",
            dims: [2, 3, 290, 16],
            pads: 37,
            half_window: None,
            dropout: None,
        },
        verify::Case {
            name: "d8 window",
            dims: [2, 2, 70, 8],
            pads: 20,
            half_window: Some(4),
            dropout: Some(0.3),
        },
    ];
    for device in fused_devices() {
        let deviations = cases
            .iter()
            .flat_map(|case| verify::deviations(case, &device, DType::F32));
        assert_within(deviations.collect(), &device);
    }
}

/// The mask the kernels draw keeps a fraction within three standard deviations of 1 − p, and
/// a different seed draws a different mask.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
#[test]
fn the_hashed_dropout_mask_keeps_one_minus_p() {
    use fused::{HashedDropout, Options, dropout_factors};
    let (rate, dims) = (0.3, [2, 3, 100, 8]);
    for device in fused_devices() {
        let options = |seed| Options {
            scale: 1.0,
            half_window: None,
            dropout: Some(HashedDropout { rate, seed }),
        };
        let factors = values(dropout_factors(
            Tensor::zeros(dims, &device),
            options([1, 2]),
        ));
        let kept = factors.iter().filter(|&&f| f > 0.0).count() as f64 / factors.len() as f64;
        let sigma = (rate * (1.0 - rate) / factors.len() as f64).sqrt();
        assert!((kept - (1.0 - rate)).abs() < 3.0 * sigma, "kept {kept}");
        let scale = (1.0 / (1.0 - rate)) as f32;
        assert!(
            factors
                .iter()
                .all(|&f| f == 0.0 || (f - scale).abs() < 1e-6)
        );
        let other = values(dropout_factors(
            Tensor::zeros(dims, &device),
            options([1, 3]),
        ));
        assert_ne!(factors, other);
    }
}

#[test]
fn composed_softmax_is_f32_and_the_output_is_in_the_input_dtype() {
    let device = Device::flex();
    let data: Vec<f32> = (0..2 * 3 * 4).map(|i| (i as f32 * 0.37).sin()).collect();
    let t = || Tensor::<4>::from_data(TensorData::new(data.clone(), [1, 2, 3, 4]), &device);
    let bias = Tensor::<4>::zeros([1, 1, 1, 3], &device);
    let exact = composed::attention(t(), t(), t(), bias.clone(), Dropout(0.0));
    let bf16 = || t().cast(DType::BF16);
    let mixed = composed::attention(bf16(), bf16(), bf16(), bias, Dropout(0.0));
    assert_eq!(mixed.dtype(), DType::BF16);
    for (a, b) in values(exact).iter().zip(&values(mixed)) {
        assert!((a - b).abs() <= 2e-2, "{a} vs {b}");
    }
}

/// The q, k and v blocks of a projection: on flex's autodiff device, their values and the
/// projection's gradient (each block's placed in one pass) are those of burn's slices, bit for
/// bit; on every test device the gradient is each block's in its columns.
#[test]
fn the_projections_blocks_and_their_gradient_are_burns_slices() {
    let (batch, heads, len, dim) = (2, 3, 5, 4);
    let width = 3 * heads * dim;
    let devices = std::iter::once(Device::flex().autodiff())
        .chain(test_devices().into_iter().map(|d| d.autodiff()));
    for device in devices {
        let values_at = |seed: usize| -> Vec<f32> {
            (0..batch * len * width)
                .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 - 500.0) / 37.0)
                .collect()
        };
        let tensor =
            |v: Vec<f32>| Tensor::<2>::from_data(TensorData::new(v, [batch * len, width]), &device);
        let (qkv, weights) = (tensor(values_at(1)).require_grad(), tensor(values_at(2)));
        let reference = qkv.clone().detach().require_grad();
        let hidden = width / 3;
        let weighted = |parts: [Tensor<4>; 3]| -> Tensor<1> {
            let [w_q, w_k, w_v] = split_qkv(weights.clone(), batch, heads);
            (parts[0].clone() * w_q + parts[1].clone() * w_k.exp() + parts[2].clone() * w_v).sum()
        };
        let ours = split_qkv(qkv.clone(), batch, heads);
        let sliced = [0, 1, 2].map(|i| {
            let part = reference.clone().slice_dim(1, i * hidden..(i + 1) * hidden);
            split_heads(part, batch, heads)
        });
        for (a, b) in ours.iter().zip(&sliced) {
            assert_eq!(
                values(a.clone()),
                values(b.clone()),
                "{device:?}: the blocks"
            );
        }
        let grads = weighted(ours).backward();
        let expected = weighted(sliced).backward();
        let (got, want) = (qkv.grad(&grads), reference.grad(&expected));
        let bits = |t: Option<Tensor<2>>| -> Vec<u32> {
            values(t.expect("a gradient"))
                .into_iter()
                .map(f32::to_bits)
                .collect()
        };
        assert_eq!(
            bits(got),
            bits(want),
            "{device:?}: the projection's gradient"
        );
    }
}
