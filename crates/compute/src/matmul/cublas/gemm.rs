//! How burn's strided row-major tensors map onto cuBLASLt's column-major strided-batched calls:
//! the element type, each operand's transpose flag and leading dimension, the batch stride.

use burn::tensor::DType;
use cudarc::cublaslt::sys;

/// Element type of A, B and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum GemmDtype {
    /// f32 storage on TF32 tensor cores with f32 accumulation: PyTorch with TF32 on.
    F32Tf32,
    /// bf16 storage, f32 accumulation and f32 scales.
    Bf16,
}

impl GemmDtype {
    pub(super) fn of(dtype: DType) -> Option<Self> {
        match dtype {
            DType::F32 => Some(Self::F32Tf32),
            DType::BF16 => Some(Self::Bf16),
            _ => None,
        }
    }

    pub(super) fn data_type(self) -> sys::cudaDataType {
        match self {
            Self::F32Tf32 => sys::cudaDataType::CUDA_R_32F,
            Self::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        }
    }

    pub(super) fn compute_type(self) -> sys::cublasComputeType_t {
        match self {
            Self::F32Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            Self::Bf16 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }
    }
}

/// How one operand's storage reaches cuBLASLt: row-major with row stride `ld` (elements),
/// holding the transpose of the operand when `trans`, `batch_stride` apart (0: shared).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Operand {
    pub(super) trans: bool,
    pub(super) ld: i64,
    pub(super) batch_stride: i64,
}

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

/// One row-major strided-batched product `C[m, n] = op(A)[m, k] · op(B)[k, n]`, `C` dense.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Gemm {
    pub(super) dtype: GemmDtype,
    pub(super) m: u64,
    pub(super) n: u64,
    pub(super) k: u64,
    pub(super) a: Operand,
    pub(super) b: Operand,
    pub(super) batch: i32,
}

impl std::fmt::Display for Gemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = |o: Operand| if o.trans { "ᵀ" } else { "" };
        write!(
            f,
            "{} × [{}, {}]{}·[{}, {}]{} {:?} (M×N×K {}x{}x{})",
            self.batch,
            self.m,
            self.k,
            op(self.a),
            self.k,
            self.n,
            op(self.b),
            self.dtype,
            self.m,
            self.n,
            self.k
        )
    }
}

/// A column-major matrix as cuBLASLt's layouts describe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Matrix {
    pub(super) rows: u64,
    pub(super) cols: u64,
    pub(super) ld: i64,
    pub(super) batch_stride: i64,
}

/// The column-major call that computes a row-major [`Gemm`]. Row-major `X[r, c]` with row stride
/// `ld` reads column-major as `Xᵀ[c, r]` with the same `ld`, so `C = op(A)·op(B)` is issued as
/// `Cᵀ[n, m] = op(B)ᵀ·op(A)ᵀ`: cuBLAS's first operand is B's storage with TRANSA = B's flag,
/// its second A's storage with TRANSB = A's flag, and the output is `Cᵀ` with `ld = n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ColumnMajor {
    pub(super) first: Matrix,
    pub(super) trans_first: bool,
    pub(super) second: Matrix,
    pub(super) trans_second: bool,
    pub(super) out: Matrix,
}

impl Gemm {
    pub(super) fn column_major(&self) -> ColumnMajor {
        let (m, n, k) = (self.m, self.n, self.k);
        // B's storage is row-major [k, n] (or [n, k] when transposed): column-major [n, k] ([k, n]).
        let (b_rows, b_cols) = if self.b.trans { (k, n) } else { (n, k) };
        let (a_rows, a_cols) = if self.a.trans { (m, k) } else { (k, m) };
        let matrix = |rows, cols, o: Operand| Matrix {
            rows,
            cols,
            ld: o.ld,
            batch_stride: o.batch_stride,
        };
        ColumnMajor {
            first: matrix(b_rows, b_cols, self.b),
            trans_first: self.b.trans,
            second: matrix(a_rows, a_cols, self.a),
            trans_second: self.a.trans,
            out: Matrix {
                rows: n,
                cols: m,
                ld: n as i64,
                batch_stride: (m * n) as i64,
            },
        }
    }
}
