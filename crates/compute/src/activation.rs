//! The exact (erf) GELU with its exact gradient on every backend.
//!
//! Why: burn 0.22.1's `gelu` is the erf GELU on every backend, but its default `gelu_backward`,
//! which the cube backends and fusion use, is the derivative of the tanh approximation (with
//! six-digit constants, up to 8.7e-4 off); only flex overrides it with the erf one. On WGPU
//! (lavapipe) `lsr check`'s BERT train step had its gradient norm 1.4e-4 (relative) from
//! PyTorch's and its update off by 5.5e-4; with the backward here, `dy · (Φ(x) + x·φ(x))`
//! written out, 3.7e-7 and 1.7e-6, as flex (2026-12-04). flex keeps its own kernels.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::ActivationOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, backend_extension};
use burn::prelude::*;

/// `1 / √(2π)`, the standard normal density at 0.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// `x · Φ(x)`, Φ the standard normal distribution, and its gradient.
#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda")),
    Autodiff
)]
pub trait ExactGelu: Backend {
    /// The backend's own erf GELU.
    #[fusion(default)]
    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::gelu(x)
    }

    /// `grad · (Φ(x) + x · φ(x))`, `Φ(x) = (1 + erf(x / √2)) / 2`, `φ(x) = e^(−x²/2) / √(2π)`.
    #[fusion(default)]
    fn exact_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let erf = Self::float_erf(Self::float_mul_scalar(
            x.clone(),
            std::f64::consts::FRAC_1_SQRT_2.into(),
        ));
        let cdf = Self::float_mul_scalar(Self::float_add_scalar(erf, 1.0.into()), 0.5.into());
        let square = Self::float_mul(x.clone(), x.clone());
        let density = Self::float_mul_scalar(
            Self::float_exp(Self::float_mul_scalar(square, (-0.5).into())),
            INV_SQRT_2PI.into(),
        );
        let derivative = Self::float_add(cdf, Self::float_mul(x, density));
        Self::float_mul(grad, derivative)
    }
}

/// flex's GELU kernels are the erf GELU and its exact derivative already; here they run split
/// over rayon's threads (`crate::cpu`), where flex runs them on the calling thread.
impl ExactGelu for Flex {
    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        crate::cpu::map(x, flex_gelu_in_place).unwrap_or_else(Self::gelu)
    }

    fn exact_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        crate::cpu::zip(x, grad, flex_gelu_slope)
            .unwrap_or_else(|(x, grad)| Self::gelu_backward(x, grad))
    }
}

/// burn-flex 0.22.1's f32 GELU, `0.5 · x · (1 + erff(x / √2))` as its `gelu` writes it, so that
/// the values are its own, with libm's `erff` sixteen lanes at a time.
fn flex_gelu_in_place(values: &mut [f32]) {
    use crate::erf::{LANES, each_sixteen, erff16};
    each_sixteen(values, |x| {
        let erf = erff16(std::array::from_fn(|i| x[i] / std::f32::consts::SQRT_2));
        for i in 0..LANES {
            x[i] = 0.5 * x[i] * (1.0 + erf[i]);
        }
    })
}

/// `grad · gelu'(x)` as burn-flex 0.22.1's `gelu_backward` writes it.
fn flex_gelu_slope(x: f32, grad: f32) -> f32 {
    let inv_sqrt_2pi: f32 = 1.0 / (2.0 * std::f32::consts::PI).sqrt();
    let cdf = 0.5 * (1.0 + libm::erff(x / std::f32::consts::SQRT_2));
    let pdf = inv_sqrt_2pi * (-0.5 * x * x).exp();
    grad * (cdf + x * pdf)
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl ExactGelu for burn_cubecl::CubeBackend {}

#[derive(Debug)]
struct GeluBackward;

impl<B: Backend + ExactGelu> Backward<B, 1> for GeluBackward {
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        if let [Some(parent)] = &ops.parents {
            grads.register::<B>(parent.id, B::exact_gelu_backward(ops.state, grad));
        }
    }
}

impl<B: Backend + ExactGelu, C: CheckpointStrategy> ExactGelu for Autodiff<B, C> {
    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let node = [x.node()];
        let x = x.into_primitive();
        match GeluBackward.prepare::<C>(node).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let y = B::exact_gelu(x.clone());
                prep.finish(x, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::exact_gelu(x)),
        }
    }
}

/// The erf GELU of `x`, differentiable with its exact gradient on every backend.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as ExactGelu>::exact_gelu(x.into_dispatch()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values and gradients against the erf GELU's closed forms, computed in f64 on the host,
    /// on each test device: the gradient to 1e-6, where the tanh approximation's is off by up
    /// to ~1e-4 near |x| ≈ 2.
    #[test]
    fn gelu_and_its_gradient_are_the_erf_ones_on_every_device() {
        let xs: Vec<f32> = (0..81).map(|i| -4.0 + 0.1 * i as f32).collect();
        let exact = |x: f64| {
            let cdf = 0.5 * (1.0 + libm_erf(x / std::f64::consts::SQRT_2));
            let density = (-0.5 * x * x).exp() * INV_SQRT_2PI;
            (x * cdf, cdf + x * density)
        };
        for device in crate::device::test_devices() {
            let device = device.autodiff();
            let x = Tensor::<1>::from_data(TensorData::new(xs.clone(), [xs.len()]), &device)
                .require_grad();
            let y = gelu(x.clone());
            let grads = y.clone().sum().backward();
            let values: Vec<f32> = y.into_data().convert::<f32>().try_into_vec().unwrap();
            let gradient: Vec<f32> = x
                .grad(&grads)
                .unwrap()
                .into_data()
                .convert::<f32>()
                .try_into_vec()
                .unwrap();
            for ((x, y), g) in xs.iter().zip(&values).zip(&gradient) {
                let (value, slope) = exact(*x as f64);
                assert!(
                    (*y as f64 - value).abs() < 1e-6,
                    "{device:?} gelu({x}) = {y}, not {value}"
                );
                assert!(
                    (*g as f64 - slope).abs() < 1e-6,
                    "{device:?} gelu'({x}) = {g}, not {slope}"
                );
            }
        }
    }

    /// erf in f64 by its Maclaurin series (|x| ≤ 3: the series converges to 1e-15 in 60 terms)
    /// and its continued fraction beyond.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() > 3.0 {
            return x.signum() * (1.0 - erfc_large(x.abs()));
        }
        let (mut term, mut sum) = (x, x);
        for n in 1..80 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    fn erfc_large(x: f64) -> f64 {
        // Lentz's continued fraction for erfc(x)·e^{x²}·√π = 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))).
        let mut f = x;
        for k in (1..60).rev() {
            f = x + (k as f64 / 2.0) / f;
        }
        (-x * x).exp() / (f * std::f64::consts::PI.sqrt())
    }
}
