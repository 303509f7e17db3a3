//! One product on CUDA tensors: its operands described (or made contiguous), the call issued
//! through Route A, and burn's matmul in its place, with one warning, when cuBLASLt refuses it.

use std::sync::{Mutex, OnceLock};

use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::{into_contiguous, untile};
use burn_cubecl::tensor::CubeTensor;

use super::super::fallback::burn_matmul;
use super::super::layout::{batch_stride, operand_layout};
use super::gemm::{Gemm, GemmDtype, Operand};
use super::plans::LtError;
use super::stream::{on_own_stream, totals};

/// `op(lhs) · op(rhs)` of two CUDA tensors through cuBLASLt, written into a new dense tensor;
/// burn's matmul instead when cuBLASLt refuses the product before anything is enqueued.
pub(super) fn product(
    lhs: CubeTensor,
    rhs: CubeTensor,
    trans_lhs: bool,
    trans_rhs: bool,
    dtype: GemmDtype,
    index: usize,
) -> CubeTensor {
    let (ls, rs) = (lhs.meta.shape().to_vec(), rhs.meta.shape().to_vec());
    let d = ls.len();
    let m = ls[if trans_lhs { d - 1 } else { d - 2 }];
    let k = ls[if trans_lhs { d - 2 } else { d - 1 }];
    let n = rs[if trans_rhs { d - 2 } else { d - 1 }];
    let batch: usize = ls[..d - 2].iter().product();
    if batch * m * n * k == 0 {
        // Nothing to compute, or an empty sum (which cuBLASLt would leave unwritten).
        return burn_matmul::<CubeBackend>(lhs, rhs, trans_lhs, trans_rhs);
    }
    let (lhs, a) = operand(lhs, trans_lhs);
    let (rhs, b) = operand(rhs, trans_rhs);
    let (Some(a), Some(b)) = (a, b) else {
        let shape = format!("{batch} × [{m}, {k}]·[{k}, {n}] {dtype:?}");
        return fall_back(
            &shape,
            "an operand's strides map onto no cuBLASLt layout",
            || burn_matmul::<CubeBackend>(lhs, rhs, trans_lhs, trans_rhs),
        );
    };
    let mut shape = ls;
    shape[d - 2] = m;
    shape[d - 1] = n;
    let (client, device) = (lhs.client.clone(), lhs.device.clone());
    let output = client.empty(batch * m * n * lhs.dtype.size());
    let out = CubeTensor::new_contiguous(client.clone(), device, shape.into(), output, lhs.dtype);
    let gemm = Gemm {
        dtype,
        m: m as u64,
        n: n as u64,
        k: k as u64,
        a,
        b,
        batch: i32::try_from(batch).expect("cuBLASLt takes at most 2^31 - 1 batches"),
    };
    let handles = [lhs.handle.clone(), rhs.handle.clone(), out.handle.clone()];
    let done = on_own_stream(&client, index, handles, |context, stream, [a, b, c]| {
        // SAFETY: the pointers are live allocations of the sizes `gemm` implies (held by
        // `on_own_stream`), `c` is a fresh allocation, and `stream` is `context`'s own.
        unsafe { context.gemm(stream, a, b, c, &gemm) }
    });
    match done {
        Ok(()) => out,
        Err(LtError::Refused(why)) => fall_back(&gemm.to_string(), &why, || {
            burn_matmul::<CubeBackend>(lhs, rhs, trans_lhs, trans_rhs)
        }),
        Err(LtError::Before(error)) => {
            panic!(
                "the device failed before the cuBLASLt product {gemm} (an earlier kernel's fault): {error}"
            )
        }
        Err(LtError::After(error)) => panic!(
            "the device failed after the cuBLASLt product {gemm} was enqueued (its fault or an \
             earlier kernel's): {error}"
        ),
    }
}

/// `compute()` instead of a product cuBLASLt refused, saying so once per product shape.
pub(super) fn fall_back(
    shape: &str,
    why: &str,
    compute: impl FnOnce() -> CubeTensor,
) -> CubeTensor {
    static SAID: OnceLock<Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    let first = SAID
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(shape.to_string());
    if first {
        tracing::warn!("cuBLASLt refused the product {shape} ({why}); burn's matmul computes it");
    }
    totals().fallbacks += 1;
    compute()
}

/// A tensor as a cuBLASLt operand: as it is when its layout maps, else made contiguous first;
/// `None` when even that does not map (the caller falls back).
pub(super) fn operand(tensor: CubeTensor, trans: bool) -> (CubeTensor, Option<Operand>) {
    let tensor = untile(tensor);
    if let Some(operand) = describe(&tensor, trans) {
        return (tensor, Some(operand));
    }
    let tensor = into_contiguous(tensor);
    let operand = describe(&tensor, trans);
    (tensor, operand)
}

pub(super) fn describe(tensor: &CubeTensor, trans: bool) -> Option<Operand> {
    let (shape, strides) = (tensor.meta.shape(), tensor.meta.strides());
    let d = shape.len();
    let (stored_transposed, ld) =
        operand_layout(shape[d - 2], shape[d - 1], strides[d - 2], strides[d - 1])?;
    Some(Operand {
        trans: trans ^ stored_transposed,
        ld,
        batch_stride: batch_stride(&shape[..d - 2], &strides[..d - 2])?,
    })
}
