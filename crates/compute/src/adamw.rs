//! AdamW's update of a parameter buffer as one backend operation ([`AdamWOps`]): on flex one
//! pass split over rayon's threads (`crate::cpu::update_with_moments`), elsewhere burn's operations, which the
//! cube backends fuse.
//!
//! Why: burn-optim's `AdamW::step` is a dozen tensor operations, and flex runs each on the
//! calling thread, so a CPU training step spent about a second updating BERT-base's 110M
//! parameters while the other core waited (docs/perf-cpu.md). Both paths compute what
//! burn-optim 0.22.1's AdamW computes without AMSGrad and cautious decay
//! (`burn-optim/src/optim/adamw.rs`), operation for operation in f32, scalars rounded to f32 as
//! flex rounds them, so parameters and moments are burn's bit for bit, which the tests check.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Flex, backend_extension};
use burn::prelude::*;

/// One step's scalars, as burn's AdamW derives them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    /// The step's number, from 1.
    pub time: i32,
    pub lr: f64,
    pub weight_decay: f32,
}

impl AdamWStep {
    pub fn new(
        beta_1: f32,
        beta_2: f32,
        epsilon: f32,
        time: i32,
        lr: f64,
        weight_decay: f32,
    ) -> Self {
        Self {
            beta_1,
            beta_2,
            epsilon,
            time,
            lr,
            weight_decay,
        }
    }

    /// `1 − β₁ᵗ` and `1 − β₂ᵗ`: the moments' bias corrections.
    pub fn corrections(&self) -> (f32, f32) {
        (
            1f32 - self.beta_1.powi(self.time),
            1f32 - self.beta_2.powi(self.time),
        )
    }

    /// What the parameters are multiplied by before the update (`1 − lr · decay`), none
    /// where the decay is 0; burn takes it in f64, flex multiplies by it in f32.
    pub fn decay(&self) -> Option<f32> {
        let rate = self.lr * f64::from(self.weight_decay);
        (rate != 0.0).then_some((1.0 - rate) as f32)
    }

    /// The step of one element `(p, m, v)` with its gradient `g`, in place: each operation
    /// burn's tensor operations take, in their order and in f32; on the `first` step the
    /// moments start from the gradient alone.
    pub fn element_update(&self, first: bool) -> impl Fn(&mut f32, &mut f32, &mut f32, f32) + Sync {
        let (beta_1, beta_2, epsilon) = (self.beta_1, self.beta_2, self.epsilon);
        let (factor_1, factor_2) = (1.0 - beta_1, 1.0 - beta_2);
        let (correction_1, correction_2) = self.corrections();
        let (keep, lr) = (self.decay(), self.lr as f32);
        move |p, m, v, g| {
            let (new_1, new_2) = (g * factor_1, (g * g) * factor_2);
            (*m, *v) = match first {
                true => (new_1, new_2),
                false => (*m * beta_1 + new_1, *v * beta_2 + new_2),
            };
            let delta = (*m / correction_1) / ((*v / correction_2).sqrt() + epsilon);
            let decayed = keep.map_or(*p, |keep| *p * keep);
            *p = decayed - delta * lr;
        }
    }
}

/// `(parameters, first moment, second moment)` after one AdamW step with `gradient`; without
/// moments (the first step) they start from the gradient alone, as burn's do.
pub fn adamw(
    parameters: Tensor<1>,
    gradient: Tensor<1>,
    moments: Option<(Tensor<1>, Tensor<1>)>,
    step: AdamWStep,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    // The first step's moments are the gradient's alone; it stands in for them.
    let first = moments.is_none();
    let (moment_1, moment_2) = moments.unwrap_or_else(|| (gradient.clone(), gradient.clone()));
    let (p, m, v) = <Dispatch as AdamWOps>::adamw_update(
        parameters.into_dispatch(),
        gradient.into_dispatch(),
        moment_1.into_dispatch(),
        moment_2.into_dispatch(),
        first,
        step.beta_1,
        step.beta_2,
        step.epsilon,
        step.time,
        step.lr,
        step.weight_decay,
    );
    (
        Tensor::from_dispatch(p),
        Tensor::from_dispatch(m),
        Tensor::from_dispatch(v),
    )
}

#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda"))
)]
pub trait AdamWOps: Backend {
    /// [`adamw`] on this backend's primitives, the step's scalars spelled out; on the `first`
    /// step the moments are not read.
    #[allow(clippy::too_many_arguments)]
    #[fusion(default)]
    fn adamw_update(
        parameters: FloatTensor<Self>,
        gradient: FloatTensor<Self>,
        moment_1: FloatTensor<Self>,
        moment_2: FloatTensor<Self>,
        first: bool,
        beta_1: f32,
        beta_2: f32,
        epsilon: f32,
        time: i32,
        lr: f64,
        weight_decay: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let step = AdamWStep::new(beta_1, beta_2, epsilon, time, lr, weight_decay);
        let moments = (!first).then_some((moment_1, moment_2));
        composed::<Self>(parameters, gradient, moments, step)
    }
}

impl AdamWOps for Flex {
    fn adamw_update(
        parameters: FloatTensor<Self>,
        gradient: FloatTensor<Self>,
        moment_1: FloatTensor<Self>,
        moment_2: FloatTensor<Self>,
        first: bool,
        beta_1: f32,
        beta_2: f32,
        epsilon: f32,
        time: i32,
        lr: f64,
        weight_decay: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let step = AdamWStep::new(beta_1, beta_2, epsilon, time, lr, weight_decay);
        let moments = (!first).then_some((moment_1, moment_2));
        if crate::cpu::moments_apply(&parameters, &gradient, moments.as_ref()) {
            let update = step.element_update(first);
            return crate::cpu::update_with_moments(parameters, &gradient, moments, update);
        }
        composed::<Self>(parameters, gradient, moments, step)
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl AdamWOps for burn_cubecl::CubeBackend {}

/// burn's AdamW step in burn's operations, in its order.
fn composed<B: Backend>(
    parameters: FloatTensor<B>,
    gradient: FloatTensor<B>,
    moments: Option<(FloatTensor<B>, FloatTensor<B>)>,
    step: AdamWStep,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let (factor_1, factor_2) = (1.0 - step.beta_1, 1.0 - step.beta_2);
    let square = B::float_powi_scalar(gradient.clone(), 2.into());
    let new_1 = B::float_mul_scalar(gradient, factor_1.into());
    let new_2 = B::float_mul_scalar(square, factor_2.into());
    let (moment_1, moment_2) = match moments {
        None => (new_1, new_2),
        Some((m, v)) => (
            B::float_add(B::float_mul_scalar(m, step.beta_1.into()), new_1),
            B::float_add(B::float_mul_scalar(v, step.beta_2.into()), new_2),
        ),
    };
    let (correction_1, correction_2) = step.corrections();
    let corrected_1 = B::float_div_scalar(moment_1.clone(), correction_1.into());
    let corrected_2 = B::float_div_scalar(moment_2.clone(), correction_2.into());
    let denominator = B::float_add_scalar(B::float_sqrt(corrected_2), step.epsilon.into());
    let delta = B::float_div(corrected_1, denominator);
    let decayed = match step.decay() {
        Some(keep) => B::float_mul_scalar(parameters, keep.into()),
        None => parameters,
    };
    let lr = step.lr as f32;
    let updated = B::float_sub(decayed, B::float_mul_scalar(delta, lr.into()));
    (updated, moment_1, moment_2)
}

#[cfg(test)]
mod tests {
    use burn::optim::{AdamW, AdamWConfig, AdamWState, AdaptiveMomentumState, Optimizer};

    use super::*;

    fn burn_adamw(step: &AdamWStep) -> AdamW {
        AdamWConfig::new()
            .with_beta_1(step.beta_1)
            .with_beta_2(step.beta_2)
            .with_epsilon(step.epsilon)
            .with_weight_decay(step.weight_decay)
            .with_cautious_weight_decay(false)
            .with_amsgrad(false)
            .with_grad_clipping(None)
            .build()
    }

    fn bits(t: &Tensor<1>) -> Vec<u32> {
        let v: Vec<f32> = t.to_data().convert::<f32>().try_into_vec().unwrap();
        v.into_iter().map(f32::to_bits).collect()
    }

    /// `composed` on `Tensor`s.
    fn composed_step(
        parameters: Tensor<1>,
        gradient: Tensor<1>,
        moments: Option<(Tensor<1>, Tensor<1>)>,
        step: AdamWStep,
    ) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
        let moments = moments.map(|(m, v)| (m.into_dispatch(), v.into_dispatch()));
        let (p, m, v) = composed::<Dispatch>(
            parameters.into_dispatch(),
            gradient.into_dispatch(),
            moments,
            step,
        );
        let t = Tensor::from_dispatch;
        (t(p), t(m), t(v))
    }

    /// Four steps over a buffer long enough to split over threads, with zeros of both signs
    /// among the gradients, with and without decay: flex's kernel and the composed operations
    /// give burn's parameters and moments, bit for bit.
    #[test]
    fn the_update_is_burns_adamw_bit_for_bit() {
        let device = Device::flex();
        let n = 100_003;
        let mut state = 3u64;
        let mut random = move |scale: f32| -> Tensor<1> {
            let values: Vec<f32> = (0..n)
                .map(|i| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    match i % 97 {
                        0 => 0.0,
                        1 => -0.0,
                        _ => ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale,
                    }
                })
                .collect();
            Tensor::from_data(TensorData::new(values, [n]), &device)
        };
        type Moments = Option<(Tensor<1>, Tensor<1>)>;
        for weight_decay in [0.01, 0.0] {
            let start = random(0.2);
            let mut kernel: (Tensor<1>, Moments) = (start.clone(), None);
            let mut reference: (Tensor<1>, Moments) = (start.clone(), None);
            let mut burn: (Tensor<1>, Option<AdamWState<1>>) = (start, None);
            for time in 1..=4 {
                let step = AdamWStep {
                    beta_1: 0.9,
                    beta_2: 0.999,
                    epsilon: 1e-8,
                    time,
                    lr: 2e-5 * f64::from(time),
                    weight_decay,
                };
                let gradient = random(3.0);
                let (p, m, v) = adamw(kernel.0, gradient.clone(), kernel.1, step);
                let (cp, cm, cv) = composed_step(reference.0, gradient.clone(), reference.1, step);
                let (bp, state) = burn_adamw(&step).step(step.lr, burn.0, gradient, burn.1);
                let momentum: &AdaptiveMomentumState<1> = &state.as_ref().unwrap().momentum;
                for (label, p, m, v) in [("kernel", &p, &m, &v), ("composed", &cp, &cm, &cv)] {
                    let at = format!("{label}, decay {weight_decay}, step {time}");
                    assert_eq!(bits(p), bits(&bp), "parameters, {at}");
                    assert_eq!(bits(m), bits(&momentum.moment_1), "moment 1, {at}");
                    assert_eq!(bits(v), bits(&momentum.moment_2), "moment 2, {at}");
                }
                kernel = (p, Some((m, v)));
                reference = (cp, Some((cm, cv)));
                burn = (bp, state);
            }
        }
    }
}
