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
