//! Dropout as transformers applies it in training, and the one call that seeds every mask a
//! pass draws: burn's generator for the masks drawn as tensors, and the seeds of the fused
//! attention's masks, which are hashes of their position (`attention/fused/kernels.rs`).
//! Applying a drawn mask is one operation with its own backward ([`DropoutOps`]), which flex
//! runs split over its threads where burn's multiplication and division ran on one.

use std::sync::Mutex;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, AutodiffBackend, Backend, Dispatch, Flex, backend_extension};
use burn::prelude::*;
use burn::tensor::Distribution;

/// Dropout with probability p, as transformers applies it under `model.train()`: only on a
/// device that records a backward pass (so encoding and evaluation never drop), kept values
/// scaled by 1/(1 − p). The masks come from the device's generator, which training seeds before
/// every micro-batch ([`seed`]) from the run's seed and position, so a resumed run draws the same
/// masks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dropout(pub f64);

impl Dropout {
    pub fn forward<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        if !self.applies(&x.device()) {
            return x;
        }
        let keep = 1.0 - self.0;
        let kept = x.random_like(Distribution::Bernoulli(keep));
        Tensor::from_dispatch(<Dispatch as DropoutOps>::masked_scale(
            x.into_dispatch(),
            kept.into_dispatch(),
            keep,
        ))
    }

    /// Whether this dropout drops anything on `device`: a rate above 0, in training.
    pub fn applies(self, device: &Device) -> bool {
        self.0 > 0.0 && device.is_autodiff()
    }
}

/// A drawn mask applied, `x · kept / keep`, with its gradient, as one operation.
#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda")),
    Autodiff
)]
pub trait DropoutOps: Backend {
    /// `x · kept / keep`, `kept` the mask of ones and zeros, `keep` = 1 − p: burn's
    /// multiplication, then its division by the scalar.
    #[fusion(default)]
    fn masked_scale(x: FloatTensor<Self>, kept: FloatTensor<Self>, keep: f64) -> FloatTensor<Self> {
        composed_scale::<Self>(x, kept, keep)
    }

    /// The gradient of [`Self::masked_scale`] for `x`, as autodiff takes it through the two:
    /// `dy · (1 / keep)`, then `· kept`.
    #[fusion(default)]
    fn masked_scale_gradient(
        dy: FloatTensor<Self>,
        kept: FloatTensor<Self>,
        keep: f64,
    ) -> FloatTensor<Self> {
        composed_scale_gradient::<Self>(dy, kept, keep)
    }
}

impl DropoutOps for Flex {
    fn masked_scale(x: FloatTensor<Self>, kept: FloatTensor<Self>, keep: f64) -> FloatTensor<Self> {
        let keep32 = keep as f32;
        crate::cpu::zip(x, kept, |x, k| x * k / keep32)
            .unwrap_or_else(|(x, kept)| composed_scale::<Self>(x, kept, keep))
    }

    fn masked_scale_gradient(
        dy: FloatTensor<Self>,
        kept: FloatTensor<Self>,
        keep: f64,
    ) -> FloatTensor<Self> {
        let scale = reciprocal(keep);
        crate::cpu::zip(dy, kept, |d, k| d * scale * k)
            .unwrap_or_else(|(dy, kept)| composed_scale_gradient::<Self>(dy, kept, keep))
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl DropoutOps for burn_cubecl::CubeBackend {}

fn composed_scale<B: Backend>(
    x: FloatTensor<B>,
    kept: FloatTensor<B>,
    keep: f64,
) -> FloatTensor<B> {
    B::float_div_scalar(B::float_mul(x, kept), keep.into())
}

fn composed_scale_gradient<B: Backend>(
    dy: FloatTensor<B>,
    kept: FloatTensor<B>,
    keep: f64,
) -> FloatTensor<B> {
    B::float_mul(B::float_mul_scalar(dy, reciprocal(keep).into()), kept)
}

/// `1 / keep` as burn's `div_scalar` backward takes it: in f32.
fn reciprocal(keep: f64) -> f32 {
    1.0 / keep as f32
}

/// The mask's backward: its gradient scaled and masked as the forward was.
#[derive(Debug)]
struct MaskedScale;

impl<B: Backend + DropoutOps> Backward<B, 1> for MaskedScale {
    /// The mask and `keep`.
    type State = (FloatTensor<B>, f64);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<B>(&ops.node);
        let (kept, keep) = ops.state;
        if let [Some(x)] = &ops.parents {
            grads.register::<B>(x.id, B::masked_scale_gradient(dy, kept, keep));
        }
    }
}

impl<B: Backend + DropoutOps, C: CheckpointStrategy> DropoutOps for Autodiff<B, C> {
    fn masked_scale(x: FloatTensor<Self>, kept: FloatTensor<Self>, keep: f64) -> FloatTensor<Self> {
        if kept.is_tracked() {
            return composed_scale::<Self>(x, kept, keep);
        }
        let node = [x.node()];
        let (x, kept) = (x.into_primitive(), Self::inner(kept));
        match MaskedScale.prepare::<C>(node).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::masked_scale(x, kept.clone(), keep);
                prep.finish((kept, keep), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::masked_scale(x, kept, keep)),
        }
    }
}

/// Where the masks drawn after the last [`seed`] stand: the seed, and how many hashed masks
/// have taken a seed of their own since.
struct Stream {
    seed: u64,
    draws: u64,
}

/// One per process, as burn's generator is: the trainer holds a lock while it trains, so that
/// two runs never draw from it at once.
static STREAM: Mutex<Stream> = Mutex::new(Stream { seed: 0, draws: 0 });

/// Seeds every dropout mask drawn on `device` from here on: burn's generator, and the stream of
/// per-call seeds of the hashed masks. The same seed and the same sequence of calls draw the
/// same masks, whichever kind.
pub fn seed(device: &Device, seed: u64) {
    device.seed(seed);
    *STREAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Stream { seed, draws: 0 };
}

/// The seed of the next hashed mask: a function of the last [`seed`] and of how many masks
/// came before this one, as two 32-bit words.
pub fn next_hash_seed() -> [u32; 2] {
    let mut stream = STREAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let bits = splitmix64(stream.seed ^ splitmix64(stream.draws));
    stream.draws += 1;
    [bits as u32, (bits >> 32) as u32]
}

/// SplitMix64's output function of `x`: consecutive inputs give unrelated outputs.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: Tensor<2>) -> Vec<f32> {
        t.into_data().convert::<f32>().try_into_vec().unwrap()
    }

    #[test]
    fn dropout_zeroes_a_fraction_p_and_scales_the_rest_in_training_only() {
        let p = 0.1;
        let host = Device::flex();
        let ones = Tensor::<2>::ones([200, 500], &host);
        assert_eq!(values(Dropout(p).forward(ones.clone())), values(ones));

        let training = host.clone().autodiff();
        seed(&training, 7);
        let dropped = values(Dropout(p).forward(Tensor::<2>::ones([200, 500], &training)));
        let zeros = dropped.iter().filter(|&&v| v == 0.0).count() as f64 / dropped.len() as f64;
        // 10⁵ draws: the fraction's standard deviation is below 0.001.
        assert!((zeros - p).abs() < 0.005, "zeroed fraction {zeros}");
        let kept = (1.0 / (1.0 - p)) as f32;
        assert!(dropped.iter().all(|&v| v == 0.0 || (v - kept).abs() < 1e-6));

        seed(&training, 7);
        let again = values(Dropout(p).forward(Tensor::<2>::ones([200, 500], &training)));
        assert_eq!(dropped, again, "the same seed draws the same mask");
    }

    #[test]
    fn hashed_mask_seeds_repeat_after_the_same_seed_and_differ_from_call_to_call() {
        let device = Device::flex();
        seed(&device, 3);
        let first: Vec<_> = (0..3).map(|_| next_hash_seed()).collect();
        seed(&device, 3);
        let again: Vec<_> = (0..3).map(|_| next_hash_seed()).collect();
        assert_eq!(first, again);
        assert_ne!(first[0], first[1]);
        seed(&device, 4);
        assert_ne!(next_hash_seed(), first[0]);
    }
}
