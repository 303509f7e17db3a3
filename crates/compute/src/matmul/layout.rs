//! How one operand of a product is stored, in the terms every BLAS takes: a transpose flag and a
//! leading dimension per matrix, one stride between the matrices of a batch (cuBLASLt and a CPU
//! BLAS read burn's strided tensors through these, copying only what maps onto neither).

/// How a `[rows, cols]` matrix with element strides `(sr, sc)` is stored: `(false, ld)` for
/// row-major rows `ld` apart, `(true, ld)` for the row-major storage of its transpose (burn's
/// `transpose()` of a row-major matrix, e.g. a PyTorch-layout weight), `None` for any other
/// layout (it must be made contiguous first). A dimension of size one is never stepped along,
/// so its stride is free (0 where burn expanded it, as in a `[…, 1, 1]` operand).
pub(super) fn operand_layout(
    rows: usize,
    cols: usize,
    sr: usize,
    sc: usize,
) -> Option<(bool, i64)> {
    if (cols == 1 || sc == 1) && (rows == 1 || sr >= cols) {
        let ld = if rows == 1 { sr.max(cols) } else { sr };
        Some((false, ld.max(1) as i64))
    } else if (rows == 1 || sr == 1) && (cols == 1 || sc >= rows) {
        let ld = if cols == 1 { sc.max(rows) } else { sc };
        Some((true, ld.max(1) as i64))
    } else {
        None
    }
}

/// The one stride that steps through all the leading (batch) dimensions in order, or `None`
/// when they do not fold into one (attention's `swap_dims` views): dimensions of size one are
/// skipped, and no batch at all has stride 0.
pub(super) fn batch_stride(dims: &[usize], strides: &[usize]) -> Option<i64> {
    let (mut stride, mut next) = (None, None);
    for (&dim, &step) in dims.iter().zip(strides).rev().filter(|(dim, _)| **dim != 1) {
        match next {
            None => stride = Some(step),
            Some(expected) if expected != step => return None,
            Some(_) => {}
        }
        next = Some(step * dim);
    }
    Some(stride.unwrap_or(0) as i64)
}
