//! The backend extension every routed product goes through, `routed_matmul(lhs, rhs, trans_lhs,
//! trans_rhs)`, and its backward pass: each gradient is again one product, its transposes passed
//! as flags and never materialised. Each backend decides where its products run: CUDA through
//! cuBLASLt (`cublas/`), flex through a CPU BLAS (`blas.rs`), and burn's matmul otherwise.

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, binary};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, backend_extension};

use super::fallback::burn_matmul;

/// `op(lhs) · op(rhs)`'s shape for fusion: the leading dimensions of `lhs`, then `[m, n]`.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(super) fn product_spec(
    lhs: &TensorSpec,
    rhs: &TensorSpec,
    trans_lhs: &bool,
    trans_rhs: &bool,
) -> TensorSpec {
    let d = lhs.shape.num_dims();
    let mut shape = lhs.shape.clone();
    shape[d - 2] = lhs.shape[if *trans_lhs { d - 1 } else { d - 2 }];
    shape[d - 1] = rhs.shape[if *trans_rhs { d - 2 } else { d - 1 }];
    TensorSpec::new(shape, lhs.dtype)
}

/// `op(lhs) · op(rhs)` over the last two dimensions, `op` the transpose where its flag is set.
#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda")),
    Autodiff
)]
pub trait RoutedMatmul: Backend {
    #[fusion(meta = product_spec)]
    fn routed_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self>;
}

impl RoutedMatmul for Flex {
    fn routed_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self> {
        match super::blas::product(lhs, rhs, trans_lhs, trans_rhs) {
            Ok(product) => product,
            Err((lhs, rhs)) => burn_matmul::<Self>(lhs, rhs, trans_lhs, trans_rhs),
        }
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl RoutedMatmul for burn_cubecl::CubeBackend {
    fn routed_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self> {
        #[cfg(feature = "cuda")]
        let (lhs, rhs) = match super::cublas::product_on_cuda(lhs, rhs, trans_lhs, trans_rhs) {
            Ok(product) => return product,
            Err(operands) => operands,
        };
        // WGPU, or a dtype cuBLASLt is not asked for here.
        burn_matmul::<Self>(lhs, rhs, trans_lhs, trans_rhs)
    }
}

/// Which tensor a factor of a gradient product is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GradientFactor {
    Grad,
    Lhs,
    Rhs,
}

/// One product `op(x) · op(y)` of the backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GradientProduct {
    pub(super) x: GradientFactor,
    pub(super) trans_x: bool,
    pub(super) y: GradientFactor,
    pub(super) trans_y: bool,
}

/// For `Y = A·B` with `A = op(L)`, `B = op(R)` and upstream `G`: `dA = G·Bᵀ`, so `dL = G·op(R)ᵀ`,
/// or its transpose `op(R)·Gᵀ` when `L` enters transposed.
pub(super) fn lhs_gradient(trans_lhs: bool, trans_rhs: bool) -> GradientProduct {
    use GradientFactor::*;
    match trans_lhs {
        false => GradientProduct {
            x: Grad,
            trans_x: false,
            y: Rhs,
            trans_y: !trans_rhs,
        },
        true => GradientProduct {
            x: Rhs,
            trans_x: trans_rhs,
            y: Grad,
            trans_y: true,
        },
    }
}

/// `dB = Aᵀ·G`, so `dR = op(L)ᵀ·G`, or `Gᵀ·op(L)` when `R` enters transposed.
pub(super) fn rhs_gradient(trans_lhs: bool, trans_rhs: bool) -> GradientProduct {
    use GradientFactor::*;
    match trans_rhs {
        false => GradientProduct {
            x: Lhs,
            trans_x: !trans_lhs,
            y: Grad,
            trans_y: false,
        },
        true => GradientProduct {
            x: Grad,
            trans_x: true,
            y: Lhs,
            trans_y: trans_lhs,
        },
    }
}

impl GradientProduct {
    pub(super) fn eval<T>(
        self,
        grad: T,
        lhs: Option<T>,
        rhs: Option<T>,
        product: impl FnOnce(T, T, bool, bool) -> T,
    ) -> T {
        let (mut grad, mut lhs, mut rhs) = (Some(grad), lhs, rhs);
        let mut take = |factor| {
            match factor {
                GradientFactor::Grad => grad.take(),
                GradientFactor::Lhs => lhs.take(),
                GradientFactor::Rhs => rhs.take(),
            }
            .expect("the backward kept the operand its gradient needs")
        };
        let x = take(self.x);
        let y = take(self.y);
        product(x, y, self.trans_x, self.trans_y)
    }
}

impl<B: Backend + RoutedMatmul, C: CheckpointStrategy> RoutedMatmul for Autodiff<B, C> {
    fn routed_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct Product;

        impl<B: Backend + RoutedMatmul> Backward<B, 2> for Product {
            type State = (Option<NodeId>, Option<NodeId>, bool, bool);

            fn backward(
                self,
                ops: Ops<Self::State, 2>,
                grads: &mut Gradients,
                checkpointer: &mut Checkpointer,
            ) {
                let (lhs, rhs, trans_lhs, trans_rhs) = ops.state;
                let lhs: Option<FloatTensor<B>> =
                    lhs.map(|id| checkpointer.retrieve_node_output(id));
                let rhs: Option<FloatTensor<B>> =
                    rhs.map(|id| checkpointer.retrieve_node_output(id));
                binary::<B, _, _>(
                    ops.parents,
                    ops.node,
                    grads,
                    |grad| {
                        lhs_gradient(trans_lhs, trans_rhs).eval(grad, None, rhs, B::routed_matmul)
                    },
                    |grad| {
                        rhs_gradient(trans_lhs, trans_rhs).eval(grad, lhs, None, B::routed_matmul)
                    },
                );
            }
        }

        let (lhs_tracked, rhs_tracked) = (lhs.is_tracked(), rhs.is_tracked());
        match Product
            .prepare::<C>([lhs.node(), rhs.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                // L is needed only for dR and R only for dL, as in burn's own matmul.
                let lhs_state = rhs_tracked.then(|| prep.checkpoint(&lhs));
                let rhs_state = lhs_tracked.then(|| prep.checkpoint(&rhs));
                let output = B::routed_matmul(
                    lhs.into_primitive(),
                    rhs.into_primitive(),
                    trans_lhs,
                    trans_rhs,
                );
                prep.finish((lhs_state, rhs_state, trans_lhs, trans_rhs), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::routed_matmul(
                lhs.into_primitive(),
                rhs.into_primitive(),
                trans_lhs,
                trans_rhs,
            )),
        }
    }
}
