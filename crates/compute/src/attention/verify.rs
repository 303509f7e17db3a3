//! The fused kernels checked where they run: their output and the gradients of q, k and v
//! against the composed attention computed in f32 on the host from the same inputs, with
//! padding, with a sliding window, and with dropout (the kernels' own mask rebuilt for the
//! host), at shapes that span several tiles and cubes. `lsr check` reports it on a GPU; the
//! tests hold it on CI's WGPU device.

// Without a cube backend there is nothing to check, and only the entry point is compiled in.
#![cfg_attr(
    not(any(feature = "wgpu", feature = "cuda")),
    allow(dead_code, unused_imports)
)]

use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::activation::softmax;

use super::AttentionMask;

/// How far one output of the kernels is from the host's: the largest |Δ| of any element, and
/// the largest |value| of the host's, which scales it.
#[derive(Clone, Debug)]
pub struct Deviation {
    /// `padding`, `window` or `dropout`.
    pub case: &'static str,
    /// `out`, `dq`, `dk` or `dv`.
    pub what: &'static str,
    /// Whether the kernels took q, k and v as the rows of one projection (and gave one
    /// gradient), as the families with three projections call them.
    pub packed: bool,
    pub max_abs: f64,
    pub largest: f64,
}

impl Deviation {
    /// `max_abs` as a fraction of `largest`.
    pub fn relative(&self) -> f64 {
        self.max_abs / self.largest.max(f64::MIN_POSITIVE)
    }
}

/// One case: `[B, H, L, d]`, how many pads end the second text, the window, and dropout.
pub(crate) struct Case {
    pub name: &'static str,
    pub dims: [usize; 4],
    pub pads: usize,
    pub half_window: Option<usize>,
    pub dropout: Option<f64>,
}

/// BERT-base's head dimension; 300 tokens span several tiles and cubes of queries and keys.
const CASES: [Case; 3] = [
    Case {
        name: "padding",
        dims: [2, 3, 300, 64],
        pads: 77,
        half_window: None,
        dropout: None,
    },
    Case {
        name: "window",
        dims: [2, 2, 200, 64],
        pads: 50,
        half_window: Some(64),
        dropout: None,
    },
    Case {
        name: "dropout",
        dims: [2, 2, 150, 64],
        pads: 30,
        half_window: None,
        dropout: Some(0.1),
    },
];

/// The deviations of every case on `device` in `dtype` (the kernels' inputs and outputs; the
/// host computes in f32 from the same, rounded, inputs), or `None` where the kernels do not
/// serve that device and dtype (attention is composed there, and nothing needs checking).
pub fn fused_against_host(device: &Device, dtype: DType) -> Option<Vec<Deviation>> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    {
        if !super::fused::serves(device, dtype, 64) {
            return None;
        }
        Some(
            CASES
                .iter()
                .flat_map(|case| deviations(case, device, dtype))
                .collect(),
        )
    }
    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    {
        let _ = (device, dtype);
        None
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn deviations(case: &Case, device: &Device, dtype: DType) -> Vec<Deviation> {
    use super::fused::{
        HashedDropout, Options, dropout_factors, fused_attention_of, fused_attention_packed_of,
    };
    let options = Options {
        scale: (case.dims[3] as f32).sqrt().recip(),
        half_window: case.half_window,
        dropout: case.dropout.map(|rate| HashedDropout {
            rate,
            seed: [17, 4242],
        }),
    };
    let factors = options.dropout.map(|_| {
        let host = Device::flex();
        dropout_factors(Tensor::zeros(case.dims, device), options).to_device(&host)
    });
    let inputs = Inputs::new(case, dtype);
    let fused = inputs.outputs_and_gradients(device, dtype, |q, k, v, mask| {
        fused_attention_of(q, k, v, mask.key_bias.clone(), options)
            .0
            .swap_dims(1, 2)
    });
    let packed = inputs.packed_outputs_and_gradients(device, dtype, |qkv, mask| {
        fused_attention_packed_of(qkv, mask.key_bias.clone(), options)
            .0
            .swap_dims(1, 2)
    });
    // In f32, as the model's composed attention: a score of −1e9 plus a dot product is −1e9
    // there, which makes a query whose keys are all masked uniform (f64 would keep the dot
    // products and give such a row other weights).
    let host = inputs.outputs_and_gradients(&Device::flex(), DType::F32, |q, k, v, mask| {
        let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(options.scale) + mask.composed_bias();
        let probabilities = softmax(scores, 3);
        match &factors {
            Some(factors) => (probabilities * factors.clone()).matmul(v),
            None => probabilities.matmul(v),
        }
    });
    let labels = [false, true]
        .into_iter()
        .flat_map(|packed| ["out", "dq", "dk", "dv"].map(|what| (what, packed)));
    labels
        .zip(fused.iter().chain(&packed).zip(host.iter().chain(&host)))
        .map(|((what, packed), (a, b))| {
            let max_abs = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs() as f64)
                .fold(0.0, f64::max);
            let largest = b.iter().map(|y| y.abs() as f64).fold(0.0, f64::max);
            Deviation {
                case: case.name,
                what,
                packed,
                max_abs,
                largest,
            }
        })
        .collect()
}

/// A case's inputs, as host values already rounded to the dtype: the device and the host
/// start from the same numbers.
struct Inputs {
    case_dims: [usize; 4],
    pads: usize,
    half_window: Option<usize>,
    qkv: [Vec<f32>; 3],
    weights: Vec<f32>,
}

impl Inputs {
    fn new(case: &Case, dtype: DType) -> Self {
        let host = Device::flex();
        let values = |seed: f32| -> Vec<f32> {
            let n = case.dims.iter().product::<usize>();
            let data = (0..n).map(|i| ((i as f32 * 0.37 + seed).sin() * 1.7).sin());
            Tensor::<4>::from_data(TensorData::new(data.collect(), case.dims), &host)
                .cast(dtype)
                .cast(DType::F32)
                .into_data()
                .try_to_vec()
                .expect("f32 values")
        };
        Self {
            case_dims: case.dims,
            pads: case.pads,
            half_window: case.half_window,
            qkv: [values(0.1), values(2.3), values(4.7)],
            weights: values(9.1),
        }
    }

    /// The output of `attend` on `device` with q, k, v in `dtype`, then the gradients of q, k,
    /// v of `Σ out · w`, as f32 values in `[B, H, L, d]` order.
    fn outputs_and_gradients(
        &self,
        device: &Device,
        dtype: DType,
        attend: impl Fn(Tensor<4>, Tensor<4>, Tensor<4>, &AttentionMask) -> Tensor<4>,
    ) -> Vec<Vec<f32>> {
        let device = device.clone().autodiff();
        let [q, k, v] = self.qkv(&device, dtype).map(Tensor::require_grad);
        let out = attend(q.clone(), k.clone(), v.clone(), &self.mask(&device));
        let grads = self.weighted_sum(out.clone()).backward();
        let mut all = vec![values(out.cast(DType::F32))];
        all.extend([q, k, v].map(|t| values(t.grad(&grads).expect("a gradient of each input"))));
        all
    }

    /// As [`Self::outputs_and_gradients`], `attend` taking q, k, v as one `[B, L, 3, H, d]`
    /// tensor, whose gradient is split for the comparison.
    fn packed_outputs_and_gradients(
        &self,
        device: &Device,
        dtype: DType,
        attend: impl Fn(Tensor<5>, &AttentionMask) -> Tensor<4>,
    ) -> Vec<Vec<f32>> {
        let device = device.clone().autodiff();
        let parts = self.qkv(&device, dtype).map(|t| t.swap_dims(1, 2));
        let qkv = Tensor::stack::<5>(parts.to_vec(), 2).require_grad();
        let out = attend(qkv.clone(), &self.mask(&device));
        let grads = self.weighted_sum(out.clone()).backward();
        let gradient = qkv.grad(&grads).expect("a gradient of q|k|v");
        let [batch, heads, len, dim] = self.case_dims;
        let mut all = vec![values(out.cast(DType::F32))];
        all.extend([0, 1, 2].map(|part| {
            let one = gradient.clone().slice_dim(2, part..part + 1);
            values(one.reshape([batch, len, heads, dim]).swap_dims(1, 2))
        }));
        all
    }

    /// q, k and v `[B, H, L, d]` on `device`, in `dtype`.
    fn qkv(&self, device: &Device, dtype: DType) -> [Tensor<4>; 3] {
        self.qkv
            .each_ref()
            .map(|d| self.tensor(d, device).cast(dtype))
    }

    fn tensor(&self, data: &[f32], device: &Device) -> Tensor<4> {
        Tensor::from_data(TensorData::new(data.to_vec(), self.case_dims), device)
    }

    /// `Σ out · w`, in f32: the loss whose gradients are compared.
    fn weighted_sum(&self, out: Tensor<4>) -> Tensor<1> {
        let weights = self.tensor(&self.weights, &out.device());
        (out.cast(DType::F32) * weights).sum()
    }

    /// The case's padding (the last `pads` tokens of the second text), and its window.
    fn mask(&self, device: &Device) -> AttentionMask {
        let [batch, _, len, _] = self.case_dims;
        let tokens: Vec<i64> = (0..batch * len)
            .map(|i| i64::from(!(i / len == 1 && i % len >= len - self.pads)))
            .collect();
        let padding = AttentionMask::padding(Tensor::from_data(
            TensorData::new(tokens, [batch, len]),
            device,
        ));
        match self.half_window {
            Some(w) => padding.sliding(w),
            None => padding,
        }
    }
}

fn values(t: Tensor<4>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_to_vec()
        .expect("f32 values")
}
