//! The marker operation of launch attribution: an identity that, when the device's stream
//! reaches it, sets the label the next launches count towards, and whose gradient does the same
//! for the backward pass. A burn backend extension, so that under fusion it is an operation of
//! the stream like any other and runs in its order, on the thread that launches the kernels.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, unary};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, backend_extension};
use burn::prelude::*;
use burn_cubecl::CubeBackend;

/// `x` unchanged; reaching it sets the label `forward`, reaching its gradient `backward`
/// (codes of [`super::Label`]).
pub fn mark<const D: usize>(x: Tensor<D>, forward: u32, backward: u32) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as LaunchMarker>::launch_marker(
        x.into_dispatch(),
        forward,
        backward,
    ))
}

#[backend_extension(Cube, Fusion, Autodiff)]
pub trait LaunchMarker: Backend {
    #[fusion(dtype = x, shape = x)]
    fn launch_marker(x: FloatTensor<Self>, forward: u32, backward: u32) -> FloatTensor<Self>;
}

impl LaunchMarker for CubeBackend {
    fn launch_marker(x: FloatTensor<Self>, forward: u32, _backward: u32) -> FloatTensor<Self> {
        super::reached(forward);
        x
    }
}

impl<B: Backend + LaunchMarker, C: CheckpointStrategy> LaunchMarker for Autodiff<B, C> {
    fn launch_marker(x: FloatTensor<Self>, forward: u32, backward: u32) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct Marker;

        impl<B: Backend + LaunchMarker> Backward<B, 1> for Marker {
            type State = u32;

            fn backward(self, ops: Ops<u32, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let code = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                    B::launch_marker(grad, code, code)
                });
            }
        }

        // Compute-bound: a checkpointing strategy never recomputes it, which would set a
        // forward label in the middle of the backward pass.
        match Marker.prepare::<C>([x.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(
                backward,
                B::launch_marker(x.into_primitive(), forward, backward),
            ),
            OpsKind::UnTracked(prep) => {
                prep.finish(B::launch_marker(x.into_primitive(), forward, backward))
            }
        }
    }
}
