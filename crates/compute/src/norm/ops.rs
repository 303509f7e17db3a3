//! LayerNorm and the row-vector add as burn operations with a backward of their own.
//!
//! Why: composed of burn's primitives, autodiff records a LayerNorm as ten operations and runs
//! a backward step for each (a LayerNorm forward and backward launched 39 kernels where these
//! launch about half as many), and a broadcast shaped for the two-pass gradient hides the add
//! from fusion, so a bias was its own kernel after every product. Here the forward is the
//! plain computation, which fusion merges with its neighbours (a bias into the product's
//! epilogue, the whole norm into one reduction), and the backward is written out: `dx` from
//! the two row means the formula needs, and each parameter's gradient, the column sum of a
//! `[rows, width]` tensor, in the two short passes of [`super::column_sum`].

use burn::backend::AutodiffBackend;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, TensorMetadata, backend_extension};
use burn::tensor::{IndexingUpdateOp, IntDType};

/// `[rows, width]` operations over rows, with their gradients.
#[backend_extension(
    Flex,
    Cube: cfg(any(feature = "wgpu", feature = "cuda")),
    Fusion: cfg(any(feature = "wgpu", feature = "cuda")),
    Autodiff
)]
pub trait RowOps: Backend {
    /// `(x − mean) / √(var + epsilon) · gamma + beta` over each row of `x`.
    #[fusion(default)]
    fn row_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        composed_norm::<Self>(x, gamma, Some(beta), epsilon)
    }

    /// [`Self::row_layer_norm`] without a shift (ModernBERT's norms).
    #[fusion(default)]
    fn row_scaled_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        composed_norm::<Self>(x, gamma, None, epsilon)
    }

    /// `x + row`, the `[1, width]` `row` added to every row; `v` is the same vector `[width]`,
    /// the one its gradient is for (`super::RowVector`).
    #[fusion(default)]
    fn row_add(
        x: FloatTensor<Self>,
        v: FloatTensor<Self>,
        row: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        drop(v);
        Self::float_add(x, row)
    }

    /// [`Self::row_layer_norm`] with what its backward keeps: `(y, normalized, std)`, `std`
    /// `[rows, 1]`.
    #[fusion(default)]
    fn row_layer_norm_kept(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        kept_norm::<Self>(x, gamma, Some(beta), epsilon)
    }

    /// [`Self::row_scaled_norm`] with what its backward keeps, as [`Self::row_layer_norm_kept`].
    #[fusion(default)]
    fn row_scaled_norm_kept(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        kept_norm::<Self>(x, gamma, None, epsilon)
    }

    /// A norm's input gradient from the upstream `dy` and what its forward kept:
    /// `dx = (g − mean(g) − x̂ · mean(g · x̂)) / std` with `g = dy · gamma`.
    #[fusion(default)]
    fn row_norm_input_gradient(
        dy: FloatTensor<Self>,
        normalized: FloatTensor<Self>,
        std: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed_input_gradient::<Self>(dy, normalized, std, gamma)
    }

    /// Softmax over each row of `x` (attention's scores, a row per query). Without a backward
    /// pass, the backend's own softmax.
    #[fusion(default)]
    fn row_softmax(x: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::softmax(x, 1)
    }

    /// The softmax as burn composes it, with what its backward keeps: `(p, e, sums)`,
    /// `e = exp(x − max)` and its row sums `[rows, 1]`.
    #[fusion(default)]
    fn row_softmax_kept(
        x: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed_softmax_kept::<Self>(x)
    }

    /// The softmax's input gradient from `dp` and what its forward kept, as burn's autodiff
    /// takes it through the composed softmax.
    #[fusion(default)]
    fn row_softmax_input_gradient(
        dp: FloatTensor<Self>,
        e: FloatTensor<Self>,
        sums: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed_softmax_gradient::<Self>(dp, e, sums)
    }

    /// `x + y`, two tensors of one shape (a residual stream and its update).
    #[fusion(default)]
    fn add_same_shape(x: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_add(x, y)
    }

    /// The max over each of `groups` consecutive blocks of rows of `x + offsets` (`[rows, 1]`,
    /// one per row): `[groups, width]`; a NaN wins, as in burn's `max_dim`.
    #[fusion(default)]
    fn row_group_max(
        x: FloatTensor<Self>,
        offsets: FloatTensor<Self>,
        groups: usize,
    ) -> FloatTensor<Self> {
        composed_group_max::<Self>(x, offsets, groups)
    }

    /// [`Self::row_group_max`] and each maximum's row within its group as f32, the row
    /// `max_dim_with_indices` names: `([groups, width], [groups, width])`.
    #[fusion(default)]
    fn row_group_max_rows(
        x: FloatTensor<Self>,
        offsets: FloatTensor<Self>,
        groups: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed_group_max_rows::<Self>(x, offsets, groups)
    }

    /// The gradient of [`Self::row_group_max`] for `x` from `dy` (`[groups, width]`): `dy` in
    /// the rows [`Self::row_group_max_rows`] named, zeros elsewhere, as `max_dim`'s backward.
    #[fusion(default)]
    fn row_group_max_gradient(
        dy: FloatTensor<Self>,
        rows: FloatTensor<Self>,
        per_group: usize,
    ) -> FloatTensor<Self> {
        composed_group_max_gradient::<Self>(dy, rows, per_group)
    }
}

/// flex runs these split over rayon's threads (`crate::cpu`), where its own operations run on
/// the calling thread; the values are the same.
impl RowOps for Flex {
    fn row_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        crate::cpu::layer_norm(x, &gamma, Some(&beta), epsilon)
            .unwrap_or_else(|x| composed_norm::<Self>(x, gamma, Some(beta), epsilon))
    }

    fn row_scaled_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        crate::cpu::layer_norm(x, &gamma, None, epsilon)
            .unwrap_or_else(|x| composed_norm::<Self>(x, gamma, None, epsilon))
    }

    fn row_layer_norm_kept(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        crate::cpu::layer_norm_kept(x, &gamma, Some(&beta), epsilon)
            .unwrap_or_else(|x| kept_norm::<Self>(x, gamma, Some(beta), epsilon))
    }

    fn row_scaled_norm_kept(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        crate::cpu::layer_norm_kept(x, &gamma, None, epsilon)
            .unwrap_or_else(|x| kept_norm::<Self>(x, gamma, None, epsilon))
    }

    fn row_norm_input_gradient(
        dy: FloatTensor<Self>,
        normalized: FloatTensor<Self>,
        std: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        crate::cpu::norm_input_gradient(&dy, &normalized, &std, &gamma)
            .unwrap_or_else(|| composed_input_gradient::<Self>(dy, normalized, std, gamma))
    }

    fn row_add(
        x: FloatTensor<Self>,
        v: FloatTensor<Self>,
        row: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        drop(v);
        crate::cpu::add_row(x, row)
            .unwrap_or_else(|(x, row)| <Self as FloatTensorOps<Self>>::float_add(x, row))
    }

    fn row_softmax_kept(
        x: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        crate::cpu::softmax_kept(x).unwrap_or_else(composed_softmax_kept::<Self>)
    }

    fn row_softmax_input_gradient(
        dp: FloatTensor<Self>,
        e: FloatTensor<Self>,
        sums: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        crate::cpu::softmax_input_gradient(&dp, &e, &sums)
            .unwrap_or_else(|| composed_softmax_gradient::<Self>(dp, e, sums))
    }

    fn add_same_shape(x: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        crate::cpu::zip(x, y, |a, b| a + b)
            .unwrap_or_else(|(x, y)| <Self as FloatTensorOps<Self>>::float_add(x, y))
    }

    fn row_group_max(
        x: FloatTensor<Self>,
        offsets: FloatTensor<Self>,
        groups: usize,
    ) -> FloatTensor<Self> {
        crate::cpu::group_max(x, offsets, groups)
            .unwrap_or_else(|(x, offsets)| composed_group_max::<Self>(x, offsets, groups))
    }

    fn row_group_max_rows(
        x: FloatTensor<Self>,
        offsets: FloatTensor<Self>,
        groups: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        crate::cpu::group_max_rows(x, offsets, groups)
            .unwrap_or_else(|(x, offsets)| composed_group_max_rows::<Self>(x, offsets, groups))
    }

    fn row_group_max_gradient(
        dy: FloatTensor<Self>,
        rows: FloatTensor<Self>,
        per_group: usize,
    ) -> FloatTensor<Self> {
        crate::cpu::place_group_max_gradient(dy, &rows, per_group)
            .unwrap_or_else(|dy| composed_group_max_gradient::<Self>(dy, rows, per_group))
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl RowOps for burn_cubecl::CubeBackend {}

/// `v` `[width]` as a `[1, width]` row.
fn as_row<B: Backend>(v: FloatTensor<B>) -> FloatTensor<B> {
    let width = v.shape()[0];
    B::float_reshape(v, [1, width].into())
}

/// The norm as burn's `layer_norm` composes it, shifted by `beta` where there is one.
fn composed_norm<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    epsilon: f64,
) -> FloatTensor<B> {
    let (normalized, _) = standardize::<B>(x, epsilon);
    affine::<B>(normalized, gamma, beta)
}

/// `x + offsets` in groups of rows `[groups, rows / groups, width]`, its max over the middle axis.
fn composed_group_max<B: Backend>(
    x: FloatTensor<B>,
    offsets: FloatTensor<B>,
    groups: usize,
) -> FloatTensor<B> {
    let shape = x.shape();
    let (rows, width) = (shape[0], shape[1]);
    let shifted = B::float_add(x, offsets);
    let grouped = B::float_reshape(shifted, [groups, rows / groups, width].into());
    B::float_reshape(B::float_max_dim(grouped, 1), [groups, width].into())
}

/// [`composed_group_max`] through `max_dim_with_indices`, the rows as f32.
fn composed_group_max_rows<B: Backend>(
    x: FloatTensor<B>,
    offsets: FloatTensor<B>,
    groups: usize,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let shape = x.shape();
    let (rows, width) = (shape[0], shape[1]);
    let shifted = B::float_add(x, offsets);
    let grouped = B::float_reshape(shifted, [groups, rows / groups, width].into());
    let (maxima, indices) = B::float_max_dim_with_indices(grouped, 1, IntDType::I64);
    let flat = |t| B::float_reshape(t, [groups, width].into());
    let dtype = maxima.dtype().into();
    (flat(maxima), flat(B::int_into_float(indices, dtype)))
}

/// `max_dim`'s backward (burn-autodiff's `MaxMinDim`): `dy` scatter-added into zeros of the
/// grouped input's shape at the rows named.
fn composed_group_max_gradient<B: Backend>(
    dy: FloatTensor<B>,
    rows: FloatTensor<B>,
    per_group: usize,
) -> FloatTensor<B> {
    let shape = dy.shape();
    let (groups, width) = (shape[0], shape[1]);
    let one = |t| B::float_reshape(t, [groups, 1, width].into());
    let indices = B::float_into_int(one(rows), IntDType::I64);
    let zeros = B::float_zeros(
        [groups, per_group, width].into(),
        &dy.device(),
        dy.dtype().into(),
    );
    let placed = B::float_scatter(1, zeros, indices, one(dy), IndexingUpdateOp::Add);
    B::float_reshape(placed, [groups * per_group, width].into())
}

/// burn's softmax of each row (`ActivationOps::softmax`'s default, which autodiff records as
/// its five operations): the detached row max subtracted, `exp`, the row sum, the division;
/// with what its backward keeps, `(p, e, sums)`.
fn composed_softmax_kept<B: Backend>(
    x: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let max = B::float_max_dim(x.clone(), 1);
    let e = B::float_exp(B::float_sub(x, max));
    let sums = B::float_sum_dim(e.clone(), 1);
    (B::float_div(e.clone(), sums.clone()), e, sums)
}

/// The gradient burn's autodiff takes through [`composed_softmax_kept`]'s operations: the
/// division's for its numerator, `dp · (1 / sum)`, and for its denominator `dp · (−e / sum²)`
/// summed over the row, reaching `e` through the sum; their sum times `e` (`exp`'s); the
/// subtraction passes it on and the max is detached.
fn composed_softmax_gradient<B: Backend>(
    dp: FloatTensor<B>,
    e: FloatTensor<B>,
    sums: FloatTensor<B>,
) -> FloatTensor<B> {
    let numerator = B::float_mul(dp.clone(), B::float_recip(sums.clone()));
    let ratio = B::float_div(B::float_neg(e.clone()), B::float_mul(sums.clone(), sums));
    let denominator = B::float_sum_dim(B::float_mul(dp, ratio), 1);
    B::float_mul(B::float_add(numerator, denominator), e)
}

/// `((x − mean) / std, std)` per row, `std = √(var + epsilon)` `[rows, 1]`: the operations of
/// burn's `layer_norm`, in its order, which fusion runs as one reduction.
fn standardize<B: Backend>(x: FloatTensor<B>, epsilon: f64) -> (FloatTensor<B>, FloatTensor<B>) {
    let mean = B::float_mean_dim(x.clone(), 1);
    let centered = B::float_sub(x, mean);
    let var = B::float_mean_dim(B::float_mul(centered.clone(), centered.clone()), 1);
    let std = B::float_sqrt(B::float_add_scalar(var, epsilon.into()));
    (B::float_div(centered, std.clone()), std)
}

fn affine<B: Backend>(
    normalized: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
) -> FloatTensor<B> {
    let scaled = B::float_mul(normalized, as_row::<B>(gamma));
    match beta {
        Some(beta) => B::float_add(scaled, as_row::<B>(beta)),
        None => scaled,
    }
}

/// What the norm's backward keeps: the normalized input, `std` per row, `gamma`.
#[derive(Clone, Debug)]
struct NormState<B: Backend> {
    normalized: FloatTensor<B>,
    std: FloatTensor<B>,
    gamma: FloatTensor<B>,
}

impl<B: Backend + RowOps> NormState<B> {
    fn input_gradient(&self, dy: FloatTensor<B>) -> FloatTensor<B> {
        let (normalized, std) = (self.normalized.clone(), self.std.clone());
        B::row_norm_input_gradient(dy, normalized, std, self.gamma.clone())
    }

    fn gamma_gradient(&self, dy: FloatTensor<B>) -> FloatTensor<B> {
        super::column_sum::<B>(B::float_mul(dy, self.normalized.clone()))
    }
}

/// The norm as burn composes it, and what its backward keeps: `(y, normalized, std)`.
fn kept_norm<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    epsilon: f64,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let (normalized, std) = standardize::<B>(x, epsilon);
    (
        affine::<B>(normalized.clone(), gamma, beta),
        normalized,
        std,
    )
}

/// [`RowOps::row_norm_input_gradient`] of burn's operations.
fn composed_input_gradient<B: Backend>(
    dy: FloatTensor<B>,
    normalized: FloatTensor<B>,
    std: FloatTensor<B>,
    gamma: FloatTensor<B>,
) -> FloatTensor<B> {
    let g = B::float_mul(dy, as_row::<B>(gamma));
    let mean_g = B::float_mean_dim(g.clone(), 1);
    let projected = B::float_mul(g.clone(), normalized.clone());
    let mean_projected = B::float_mean_dim(projected, 1);
    let along = B::float_mul(normalized, mean_projected);
    let centered = B::float_sub(B::float_sub(g, mean_g), along);
    B::float_div(centered, std)
}

/// The norm's forward when a backward pass follows: its output, and what the backward keeps.
fn tracked_norm<B: Backend + RowOps>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    epsilon: f64,
) -> (NormState<B>, FloatTensor<B>) {
    let (y, normalized, std) = match beta {
        Some(beta) => B::row_layer_norm_kept(x, gamma.clone(), beta, epsilon),
        None => B::row_scaled_norm_kept(x, gamma.clone(), epsilon),
    };
    let state = NormState {
        normalized,
        std,
        gamma,
    };
    (state, y)
}

/// The gradients of a norm with `N` parents: x, gamma and, where there is one, beta.
fn norm_backward<B: Backend + RowOps, const N: usize>(
    ops: Ops<NormState<B>, N>,
    grads: &mut Gradients,
) {
    let dy = grads.consume::<B>(&ops.node);
    let state = &ops.state;
    let mut parents = ops.parents.iter();
    if let Some(Some(x)) = parents.next() {
        grads.register::<B>(x.id, state.input_gradient(dy.clone()));
    }
    if let Some(Some(gamma)) = parents.next() {
        grads.register::<B>(gamma.id, state.gamma_gradient(dy.clone()));
    }
    if let Some(Some(beta)) = parents.next() {
        grads.register::<B>(beta.id, super::column_sum::<B>(dy));
    }
}

#[derive(Debug)]
struct ShiftedNorm;
#[derive(Debug)]
struct ScaledNorm;

impl<B: Backend + RowOps> Backward<B, 3> for ShiftedNorm {
    type State = NormState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        norm_backward::<B, 3>(ops, grads);
    }
}

impl<B: Backend + RowOps> Backward<B, 2> for ScaledNorm {
    type State = NormState<B>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        norm_backward::<B, 2>(ops, grads);
    }
}

/// The row add's backward: `dx = dy`, `dv` the column sum of `dy`.
#[derive(Debug)]
struct RowAdd;

impl<B: Backend> Backward<B, 2> for RowAdd {
    type State = ();

    fn backward(self, ops: Ops<(), 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        sum_backward::<B>(ops, grads, super::column_sum::<B>);
    }
}

/// The group max's backward: `dy` in each maximum's row.
#[derive(Debug)]
struct GroupMax;

impl<B: Backend + RowOps> Backward<B, 1> for GroupMax {
    /// Each maximum's row within its group (f32, `[groups, width]`), and the rows a group.
    type State = (FloatTensor<B>, usize);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<B>(&ops.node);
        let (rows, per_group) = ops.state;
        if let [Some(x)] = &ops.parents {
            grads.register::<B>(x.id, B::row_group_max_gradient(dy, rows, per_group));
        }
    }
}

/// The softmax's backward, from the `e = exp(x − max)` and row sums its forward kept.
#[derive(Debug)]
struct Softmax;

impl<B: Backend + RowOps> Backward<B, 1> for Softmax {
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dp = grads.consume::<B>(&ops.node);
        let (e, sums) = ops.state;
        if let [Some(x)] = &ops.parents {
            grads.register::<B>(x.id, B::row_softmax_input_gradient(dp, e, sums));
        }
    }
}

/// The sum's backward: `dy` to both terms.
#[derive(Debug)]
struct SameShapeSum;

impl<B: Backend> Backward<B, 2> for SameShapeSum {
    type State = ();

    fn backward(self, ops: Ops<(), 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        sum_backward::<B>(ops, grads, |dy| dy);
    }
}

/// A sum's backward: `dy` to the first term, `second(dy)` to the second.
fn sum_backward<B: Backend>(
    ops: Ops<(), 2>,
    grads: &mut Gradients,
    second: impl FnOnce(FloatTensor<B>) -> FloatTensor<B>,
) {
    let dy = grads.consume::<B>(&ops.node);
    let [x, y] = ops.parents;
    if let Some(y) = y {
        grads.register::<B>(y.id, second(dy.clone()));
    }
    if let Some(x) = x {
        grads.register::<B>(x.id, dy);
    }
}

impl<B: Backend + RowOps, C: CheckpointStrategy> RowOps for Autodiff<B, C> {
    fn row_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), gamma.node(), beta.node()];
        let (x, gamma) = (x.into_primitive(), gamma.into_primitive());
        let beta = beta.into_primitive();
        match ShiftedNorm.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (state, y) = tracked_norm::<B>(x, gamma, Some(beta), epsilon);
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::row_layer_norm(x, gamma, beta, epsilon)),
        }
    }

    fn row_scaled_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), gamma.node()];
        let (x, gamma) = (x.into_primitive(), gamma.into_primitive());
        match ScaledNorm.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (state, y) = tracked_norm::<B>(x, gamma, None, epsilon);
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::row_scaled_norm(x, gamma, epsilon)),
        }
    }

    fn row_add(
        x: FloatTensor<Self>,
        v: FloatTensor<Self>,
        row: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), v.node()];
        let (x, v, row) = (x.into_primitive(), v.into_primitive(), row.into_primitive());
        let sum = B::row_add(x, v, row);
        RowAdd.prepare::<C>(nodes).compute_bound().stateless(sum)
    }

    /// One operation whose backward is the one autodiff took through burn's five, written out
    /// (`row_softmax_input_gradient`), the same values; untracked, the composed softmax
    /// autodiff ran before.
    fn row_softmax(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let node = [x.node()];
        let x = x.into_primitive();
        match Softmax.prepare::<C>(node).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (p, e, sums) = B::row_softmax_kept(x);
                prep.finish((e, sums), p)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::row_softmax_kept(x).0),
        }
    }

    fn add_same_shape(x: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        let nodes = [x.node(), y.node()];
        let sum = B::add_same_shape(x.into_primitive(), y.into_primitive());
        SameShapeSum
            .prepare::<C>(nodes)
            .compute_bound()
            .stateless(sum)
    }

    /// With a gradient for `x` only, one operation whose backward places `dy` in each
    /// maximum's row (`row_group_max_gradient`); with one for the offsets, burn's own
    /// operations; without, the backend's.
    fn row_group_max(
        x: FloatTensor<Self>,
        offsets: FloatTensor<Self>,
        groups: usize,
    ) -> FloatTensor<Self> {
        if offsets.is_tracked() {
            return composed_group_max::<Self>(x, offsets, groups);
        }
        let per_group = x.shape()[0] / groups.max(1);
        let node = [x.node()];
        let (x, offsets) = (x.into_primitive(), Self::inner(offsets));
        match GroupMax.prepare::<C>(node).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (maxima, rows) = B::row_group_max_rows(x, offsets, groups);
                prep.finish((rows, per_group), maxima)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::row_group_max(x, offsets, groups)),
        }
    }
}
