//! burn's own matmul on the operands of a routed product, for what a route does not take (a
//! device, dtype or layout it lacks, or a product it refuses): shared by the routes and the
//! backend extension that chooses among them, so that none of them imports another for it.

use burn::backend::Backend;
use burn::backend::tensor::FloatTensor;

/// `op(lhs) · op(rhs)` by burn's own matmul, on transposed views.
pub(super) fn burn_matmul<B: Backend>(
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    trans_lhs: bool,
    trans_rhs: bool,
) -> FloatTensor<B> {
    let op = |t, trans| if trans { B::float_transpose(t) } else { t };
    B::float_matmul(op(lhs, trans_lhs), op(rhs, trans_rhs))
}
