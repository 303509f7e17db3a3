//! Products through cuBLASLt on CUDA devices (`LSR_MATMUL=cublas|auto`, chosen per product by
//! `precision::matmul`). cubecl's own matmul reached 0.12-0.35x of cuBLAS at the model's shapes
//! on an H200, so this module owns everything cuBLAS: a burn backend extension
//! `lt_matmul(lhs, rhs, trans_lhs, trans_rhs)` with its own backward (each gradient is again one
//! cuBLASLt product, transposes passed as flags and never materialised), the mapping of burn's
//! strided row-major tensors onto cuBLASLt's column-major calls, the plan cache and workspace,
//! and the ordering of each call with cubecl's CUDA stream ([`on_own_stream`]).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, binary};
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, CubeDevice, Dispatch, DispatchDevice, backend_extension};
use burn::prelude::*;
use burn::tensor::DType;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl::client::Client;
use burn_cubecl::cubecl::cuda::CudaRuntime;
use burn_cubecl::cubecl::server::Handle;
use burn_cubecl::kernel::{into_contiguous, untile};
use burn_cubecl::tensor::CubeTensor;
use cubecl_runtime::runtime::Runtime;
use cudarc::cublaslt::result::{self as lt, CublasError};
use cudarc::cublaslt::sys;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
use cudarc::driver::{CudaContext, CudaStream};

use crate::matmul_mode::MatmulMode;
use crate::precision::LtTotals;

/// Whether `mode` sends the products on `device` to cuBLASLt: never off CUDA; `auto` when
/// libcublasLt loads; `cublas` always, or an error when libcublasLt does not load.
pub fn takes(mode: MatmulMode, device: &Device) -> Result<bool, String> {
    if mode == MatmulMode::Cube || cuda_index(device).is_none() {
        return Ok(false);
    }
    match (mode, library_loads()) {
        (_, true) => Ok(true),
        (MatmulMode::Auto, false) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::info!(
                    "{}=auto: {}; products use cube",
                    MatmulMode::VARIABLE,
                    where_looked()
                )
            });
            Ok(false)
        }
        (_, false) => Err(format!(
            "{}=cublas: {}; put the directory holding it on LD_LIBRARY_PATH, or use {}=cube",
            MatmulMode::VARIABLE,
            where_looked(),
            MatmulMode::VARIABLE
        )),
    }
}

/// One line on where the dynamic loader was asked for libcublasLt: cudarc opens bare names, so
/// only `LD_LIBRARY_PATH` and the loader's cache are searched, never a Python wheel's folder.
fn where_looked() -> String {
    let names = cudarc::get_lib_name_candidates("cublasLt");
    let path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    format!(
        "libcublasLt (CUDA's cuBLASLt) did not load: the dynamic loader found none of {} on \
         LD_LIBRARY_PATH ({}) or in its cache (`ldconfig -p`)",
        names.join(", "),
        if path.is_empty() { "unset" } else { &path }
    )
}

/// The file libcublasLt was loaded from, once a product has loaded it (`/proc/self/maps`).
pub fn loaded_library() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.contains("libcublasLt"))
        .map(str::to_string)
}

fn cuda_index(device: &Device) -> Option<usize> {
    match device.clone().inner().as_dispatch() {
        DispatchDevice::Cube(CubeDevice::Cuda(cuda)) => Some(cuda.index),
        _ => None,
    }
}

fn library_loads() -> bool {
    static LOADS: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the shared library, as cudarc does before its first call.
    *LOADS.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Whether cuBLASLt computes `a · b`: f32 (as TF32) or bf16 operands of one dtype, and equal
/// leading (batch) dimensions; burn's matmul takes the rest (other dtypes, broadcasting).
pub fn supports<const D: usize>(a: &Tensor<D>, b: &Tensor<D>) -> bool {
    D >= 2
        && a.dtype() == b.dtype()
        && GemmDtype::of(a.dtype()).is_some()
        && a.dims()[..D - 2] == b.dims()[..D - 2]
}

/// `a · b` through cuBLASLt, differentiable when `a` or `b` is tracked.
pub fn matmul<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as LtMatmul>::lt_matmul(
        a.into_dispatch(),
        b.into_dispatch(),
        false,
        false,
    ))
}

/// `op(lhs) · op(rhs)`'s shape for fusion: the leading dimensions of `lhs`, then `[m, n]`.
fn product_spec(
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
#[backend_extension(Cube, Fusion, Autodiff)]
pub trait LtMatmul: Backend {
    #[fusion(meta = product_spec)]
    fn lt_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self>;
}

impl LtMatmul for CubeBackend {
    fn lt_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self> {
        let dtype = GemmDtype::of(lhs.dtype).filter(|_| rhs.dtype == lhs.dtype);
        let index = match &lhs.device {
            CubeDevice::Cuda(cuda) => Some(cuda.index),
            _ => None,
        };
        match (index, dtype) {
            (Some(index), Some(dtype)) => product(lhs, rhs, trans_lhs, trans_rhs, dtype, index),
            // WGPU, or a dtype cuBLASLt is not asked for here.
            _ => burn_matmul(lhs, rhs, trans_lhs, trans_rhs),
        }
    }
}

/// `op(lhs) · op(rhs)` by burn's own matmul, on transposed views.
fn burn_matmul(lhs: CubeTensor, rhs: CubeTensor, trans_lhs: bool, trans_rhs: bool) -> CubeTensor {
    let op = |t, trans| {
        if trans {
            CubeBackend::float_transpose(t)
        } else {
            t
        }
    };
    CubeBackend::float_matmul(op(lhs, trans_lhs), op(rhs, trans_rhs))
}

/// Which tensor a factor of a gradient product is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Factor {
    Grad,
    Lhs,
    Rhs,
}

/// One product `op(x) · op(y)` of the backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Term {
    x: Factor,
    trans_x: bool,
    y: Factor,
    trans_y: bool,
}

/// For `Y = A·B` with `A = op(L)`, `B = op(R)` and upstream `G`: `dA = G·Bᵀ`, so `dL = G·op(R)ᵀ`,
/// or its transpose `op(R)·Gᵀ` when `L` enters transposed.
fn lhs_gradient(trans_lhs: bool, trans_rhs: bool) -> Term {
    use Factor::*;
    match trans_lhs {
        false => Term {
            x: Grad,
            trans_x: false,
            y: Rhs,
            trans_y: !trans_rhs,
        },
        true => Term {
            x: Rhs,
            trans_x: trans_rhs,
            y: Grad,
            trans_y: true,
        },
    }
}

/// `dB = Aᵀ·G`, so `dR = op(L)ᵀ·G`, or `Gᵀ·op(L)` when `R` enters transposed.
fn rhs_gradient(trans_lhs: bool, trans_rhs: bool) -> Term {
    use Factor::*;
    match trans_rhs {
        false => Term {
            x: Lhs,
            trans_x: !trans_lhs,
            y: Grad,
            trans_y: false,
        },
        true => Term {
            x: Grad,
            trans_x: true,
            y: Lhs,
            trans_y: trans_lhs,
        },
    }
}

impl Term {
    fn eval<T>(
        self,
        grad: T,
        lhs: Option<T>,
        rhs: Option<T>,
        product: impl FnOnce(T, T, bool, bool) -> T,
    ) -> T {
        let (mut grad, mut lhs, mut rhs) = (Some(grad), lhs, rhs);
        let mut take = |factor| {
            match factor {
                Factor::Grad => grad.take(),
                Factor::Lhs => lhs.take(),
                Factor::Rhs => rhs.take(),
            }
            .expect("the backward kept the operand its gradient needs")
        };
        let x = take(self.x);
        let y = take(self.y);
        product(x, y, self.trans_x, self.trans_y)
    }
}

impl<B: Backend + LtMatmul, C: CheckpointStrategy> LtMatmul for Autodiff<B, C> {
    fn lt_matmul(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct Product;

        impl<B: Backend + LtMatmul> Backward<B, 2> for Product {
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
                    |grad| lhs_gradient(trans_lhs, trans_rhs).eval(grad, None, rhs, B::lt_matmul),
                    |grad| rhs_gradient(trans_lhs, trans_rhs).eval(grad, lhs, None, B::lt_matmul),
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
                let output = B::lt_matmul(
                    lhs.into_primitive(),
                    rhs.into_primitive(),
                    trans_lhs,
                    trans_rhs,
                );
                prep.finish((lhs_state, rhs_state, trans_lhs, trans_rhs), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::lt_matmul(
                lhs.into_primitive(),
                rhs.into_primitive(),
                trans_lhs,
                trans_rhs,
            )),
        }
    }
}

/// Element type of A, B and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum GemmDtype {
    /// f32 storage on TF32 tensor cores with f32 accumulation: PyTorch with TF32 on.
    F32Tf32,
    /// bf16 storage, f32 accumulation and f32 scales.
    Bf16,
}

impl GemmDtype {
    fn of(dtype: DType) -> Option<Self> {
        match dtype {
            DType::F32 => Some(Self::F32Tf32),
            DType::BF16 => Some(Self::Bf16),
            _ => None,
        }
    }

    fn data_type(self) -> sys::cudaDataType {
        match self {
            Self::F32Tf32 => sys::cudaDataType::CUDA_R_32F,
            Self::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        }
    }

    fn compute_type(self) -> sys::cublasComputeType_t {
        match self {
            Self::F32Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            Self::Bf16 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }
    }
}

/// How one operand's storage reaches cuBLASLt: row-major with row stride `ld` (elements),
/// holding the transpose of the operand when `trans`, `batch_stride` apart (0: shared).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Operand {
    trans: bool,
    ld: i64,
    batch_stride: i64,
}

/// How a `[rows, cols]` matrix with element strides `(sr, sc)` is stored: `(false, ld)` for
/// row-major rows `ld` apart, `(true, ld)` for the row-major storage of its transpose (burn's
/// `transpose()` of a row-major matrix, e.g. a PyTorch-layout weight), `None` for any other
/// layout (it must be made contiguous first). A dimension of size one is never stepped along,
/// so its stride is free (0 where burn expanded it, as in a `[…, 1, 1]` operand).
fn operand_layout(rows: usize, cols: usize, sr: usize, sc: usize) -> Option<(bool, i64)> {
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
fn batch_stride(dims: &[usize], strides: &[usize]) -> Option<i64> {
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
struct Gemm {
    dtype: GemmDtype,
    m: u64,
    n: u64,
    k: u64,
    a: Operand,
    b: Operand,
    batch: i32,
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
struct Matrix {
    rows: u64,
    cols: u64,
    ld: i64,
    batch_stride: i64,
}

/// The column-major call that computes a row-major [`Gemm`]. Row-major `X[r, c]` with row stride
/// `ld` reads column-major as `Xᵀ[c, r]` with the same `ld`, so `C = op(A)·op(B)` is issued as
/// `Cᵀ[n, m] = op(B)ᵀ·op(A)ᵀ`: cuBLAS's first operand is B's storage with TRANSA = B's flag,
/// its second A's storage with TRANSB = A's flag, and the output is `Cᵀ` with `ld = n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ColumnMajor {
    first: Matrix,
    trans_first: bool,
    second: Matrix,
    trans_second: bool,
    out: Matrix,
}

impl Gemm {
    fn column_major(&self) -> ColumnMajor {
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

/// `op(lhs) · op(rhs)` of two CUDA tensors through cuBLASLt, written into a new dense tensor;
/// burn's matmul instead when cuBLASLt refuses the product before anything is enqueued.
fn product(
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
        return burn_matmul(lhs, rhs, trans_lhs, trans_rhs);
    }
    let (lhs, a) = operand(lhs, trans_lhs);
    let (rhs, b) = operand(rhs, trans_rhs);
    let (Some(a), Some(b)) = (a, b) else {
        let shape = format!("{batch} × [{m}, {k}]·[{k}, {n}] {dtype:?}");
        return fall_back(
            &shape,
            "an operand's strides map onto no cuBLASLt layout",
            || burn_matmul(lhs, rhs, trans_lhs, trans_rhs),
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
            burn_matmul(lhs, rhs, trans_lhs, trans_rhs)
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

/// Why a cuBLASLt product did not run.
#[derive(Debug)]
enum LtError {
    /// Refused before anything was enqueued: burn's matmul can compute it instead.
    Refused(String),
    /// The device had failed before the product (a fault surfacing in the sync before it).
    Before(String),
    /// The device failed once the product was enqueued.
    After(String),
}

/// `compute()` instead of a product cuBLASLt refused, saying so once per product shape.
fn fall_back(shape: &str, why: &str, compute: impl FnOnce() -> CubeTensor) -> CubeTensor {
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
fn operand(tensor: CubeTensor, trans: bool) -> (CubeTensor, Option<Operand>) {
    let tensor = untile(tensor);
    if let Some(operand) = describe(&tensor, trans) {
        return (tensor, Some(operand));
    }
    let tensor = into_contiguous(tensor);
    let operand = describe(&tensor, trans);
    (tensor, operand)
}

fn describe(tensor: &CubeTensor, trans: bool) -> Option<Operand> {
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

/// Orders one cuBLASLt call with cubecl's work on the device. FIRST PROTOTYPE ("Route A" in
/// docs/perf-gpu.md): cubecl-cuda 0.11.3 keeps its CUDA stream private, so the call runs on a
/// stream of lsr's own, and the host waits twice: for cubecl's stream before the call (its
/// inputs written, and, through `get_resource`, the waits on other streams' writers enqueued),
/// and for lsr's stream after it (its output written before cubecl's next kernel reads it, and
/// its inputs no longer read when cubecl frees and reuses them). That costs two host round
/// trips and two drained GPU pipelines per product (an estimated 20-50 µs each), and it stops
/// the CPU from running ahead: right for checking numerics, too slow to win. Route B, a small
/// patch to cubecl-cuda that runs `work` on cubecl's own stream (docs/perf-gpu.md), replaces
/// this one function and nothing else.
fn on_own_stream<R>(
    client: &Client,
    index: usize,
    handles: [Handle; 3],
    work: impl FnOnce(&mut LtContext, &CudaStream, [CUdeviceptr; 3]) -> Result<R, LtError>,
) -> Result<R, LtError> {
    type CudaServer = <CudaRuntime as Runtime>::Server;
    let waited = Instant::now();
    // The managed resources pin the allocations until the call is done.
    let resources = handles.map(|handle| client.get_resource::<CudaServer>(handle));
    let resources = resources
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LtError::Before(format!("{e:?}")))?;
    burn_cubecl::cubecl::future::block_on(client.sync())
        .map_err(|e| LtError::Before(format!("{e:?}")))?;
    let mut waited = waited.elapsed();
    let pointers = [0, 1, 2].map(|i| resources[i].resource().ptr);
    let mut contexts = contexts()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !contexts.contains_key(&index) {
        contexts.insert(index, OwnStream::new(index).map_err(LtError::Refused)?);
    }
    let own = contexts.get_mut(&index).expect("inserted above");
    own.device
        .bind_to_thread()
        .map_err(|e| LtError::Before(format!("{e:?}")))?;
    let timing = device_timing();
    let start = timing.then(|| own.stream.record_event(Some(CU_EVENT_DEFAULT)));
    let result = work(&mut own.lt, &own.stream, pointers)?;
    let end = timing.then(|| own.stream.record_event(Some(CU_EVENT_DEFAULT)));
    let synced = Instant::now();
    own.stream
        .synchronize()
        .map_err(|e| LtError::After(format!("{e:?}")))?;
    waited += synced.elapsed();
    drop(resources);
    let device_seconds = match (start, end) {
        (Some(Ok(start)), Some(Ok(end))) => start.elapsed_ms(&end).ok().map(|ms| ms as f64 / 1e3),
        _ => None,
    };
    count_product(waited.as_secs_f64(), device_seconds);
    Ok(result)
}

/// Whether each product's device time is measured with CUDA events (`LSR_CUBLAS_TIMING=1`):
/// two events per product, read when Route A's sync after it has returned anyway.
fn device_timing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(TIMING_VARIABLE).is_ok_and(|v| v == "1"))
}

/// `LSR_CUBLAS_TIMING=1` times each cuBLASLt product on the device (`lsr bench` reports it).
pub const TIMING_VARIABLE: &str = "LSR_CUBLAS_TIMING";

fn count_product(host_sync_seconds: f64, device_seconds: Option<f64>) {
    let mut totals = totals();
    totals.products += 1;
    totals.host_sync_seconds += host_sync_seconds;
    if let Some(seconds) = device_seconds {
        *totals.device_seconds.get_or_insert(0.0) += seconds;
    }
}

fn totals() -> std::sync::MutexGuard<'static, LtTotals> {
    static TOTALS: Mutex<LtTotals> = Mutex::new(LtTotals {
        products: 0,
        fallbacks: 0,
        host_sync_seconds: 0.0,
        device_seconds: None,
    });
    TOTALS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The totals since the last call, which starts them again.
pub fn take_totals() -> LtTotals {
    std::mem::take(&mut *totals())
}

/// lsr's stream on one device, with its cuBLASLt context.
struct OwnStream {
    device: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    lt: LtContext,
}

impl OwnStream {
    fn new(index: usize) -> Result<Self, String> {
        // The device's primary context, the one cubecl runs in, made current on this thread.
        let device = CudaContext::new(index).map_err(|e| format!("CUDA device {index}: {e:?}"))?;
        let stream = device
            .new_stream()
            .map_err(|e| format!("CUDA stream: {e:?}"))?;
        let (major, _) = device.compute_capability().map_err(|e| format!("{e:?}"))?;
        let lt = LtContext::new(major).map_err(|e| format!("cuBLASLt: {e:?}"))?;
        Ok(Self { device, stream, lt })
    }
}

fn contexts() -> &'static Mutex<HashMap<usize, OwnStream>> {
    static CONTEXTS: OnceLock<Mutex<HashMap<usize, OwnStream>>> = OnceLock::new();
    CONTEXTS.get_or_init(Default::default)
}

/// Descriptors and the heuristic's algorithm for one product, built once.
struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    first: sys::cublasLtMatrixLayout_t,
    second: sys::cublasLtMatrixLayout_t,
    out: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by `Plan::new` and used by nothing else.
        unsafe {
            for layout in [self.first, self.second, self.out] {
                if !layout.is_null() {
                    let _ = lt::destroy_matrix_layout(layout);
                }
            }
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

/// A cuBLASLt handle, its plans and the workspace of ONE stream (the workspace is reused in
/// stream order, so a second stream needs its own).
struct LtContext {
    handle: sys::cublasLtHandle_t,
    workspace: CUdeviceptr,
    workspace_size: usize,
    plans: Plans<Plan>,
}

/// The products one context has planned, keyed by the product and the alignment of A, B and C
/// (cuBLASLt's heuristic assumes 256-byte-aligned operands unless told less, and cubecl's slices
/// sit at smaller offsets), with the ones it refused: a refusal is asked for once, not at every
/// call.
struct Plans<P> {
    planned: HashMap<(Gemm, [u32; 3]), Result<P, String>>,
}

impl<P> Plans<P> {
    fn new() -> Self {
        Self {
            planned: HashMap::new(),
        }
    }

    /// The plan of `key`, made by `make` the first time, or why there is none. A product that
    /// `LSR_CUBLAS_REFUSE` names is refused without asking cuBLASLt.
    fn get(
        &mut self,
        key: (Gemm, [u32; 3]),
        refused: &Refusals,
        make: impl FnOnce() -> Result<P, CublasError>,
    ) -> Result<&P, String> {
        self.planned
            .entry(key)
            .or_insert_with(|| match refused.names(&key.0) {
                true => Err(format!("refused by {REFUSE_VARIABLE}")),
                false => make().map_err(|e| format!("no plan: {e}")),
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// `LSR_CUBLAS_REFUSE`: products cuBLASLt is made to refuse, to run the fallback on a GPU
/// (`all`, or `MxNxK` shapes separated by commas).
pub const REFUSE_VARIABLE: &str = "LSR_CUBLAS_REFUSE";

/// The products [`REFUSE_VARIABLE`] names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Refusals {
    all: bool,
    shapes: Vec<[u64; 3]>,
}

impl Refusals {
    fn parse(value: Option<&str>) -> Result<Self, String> {
        let mut refusals = Self::default();
        for item in value
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            if item == "all" {
                refusals.all = true;
                continue;
            }
            let dims: Vec<u64> = item.split('x').filter_map(|d| d.parse().ok()).collect();
            let shape: [u64; 3] = dims.try_into().map_err(|_| {
                format!("{REFUSE_VARIABLE}: `{item}` is neither `all` nor a product `MxNxK`")
            })?;
            refusals.shapes.push(shape);
        }
        Ok(refusals)
    }

    fn from_env() -> &'static Self {
        static REFUSALS: OnceLock<Refusals> = OnceLock::new();
        REFUSALS.get_or_init(|| {
            Self::parse(std::env::var(REFUSE_VARIABLE).ok().as_deref())
                .unwrap_or_else(|message| panic!("{message}"))
        })
    }

    fn names(&self, gemm: &Gemm) -> bool {
        self.all || self.shapes.contains(&[gemm.m, gemm.n, gemm.k])
    }
}

// SAFETY: plain cuBLASLt objects and a device allocation, used by one thread at a time (the
// `Mutex` in `contexts`).
unsafe impl Send for LtContext {}

impl LtContext {
    /// With the device's context current. 32 MiB of workspace from Hopper on, 4 MiB before
    /// (cudarc's choice, after NVIDIA's recommendation).
    fn new(compute_capability_major: i32) -> Result<Self, String> {
        let workspace_size = if compute_capability_major >= 9 {
            32 << 20
        } else {
            4 << 20
        };
        let handle = lt::create_handle().map_err(|e| format!("cublasLtCreate: {e}"))?;
        // SAFETY: a plain allocation in the current context, freed in `drop`.
        let workspace = unsafe { cudarc::driver::result::malloc_sync(workspace_size) }
            .map_err(|e| format!("workspace: {e:?}"))?;
        Ok(Self {
            handle,
            workspace,
            workspace_size,
            plans: Plans::new(),
        })
    }

    /// Enqueues `c = op(a)·op(b)` on `stream`.
    ///
    /// # Safety
    /// `a`, `b`, `c` are live device allocations of the sizes `gemm` implies, `c` aliases
    /// neither, the device's context is current, and `stream` is the one this context serves.
    unsafe fn gemm(
        &mut self,
        stream: &CudaStream,
        a: CUdeviceptr,
        b: CUdeviceptr,
        c: CUdeviceptr,
        gemm: &Gemm,
    ) -> Result<(), LtError> {
        let align = [alignment(a), alignment(b), alignment(c)];
        let (handle, workspace_size) = (self.handle, self.workspace_size);
        let plan = self
            .plans
            .get((*gemm, align), Refusals::from_env(), || {
                Plan::new(handle, gemm, align, workspace_size)
            })
            .map_err(LtError::Refused)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // The column-major call swaps the operands (`Gemm::column_major`); C doubles as D.
        // SAFETY: the caller's contract; layouts and algorithm come from the same plan.
        unsafe {
            lt::matmul(
                self.handle,
                plan.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                b as *const c_void,
                plan.first,
                a as *const c_void,
                plan.second,
                c as *const c_void,
                plan.out,
                c as *mut c_void,
                plan.out,
                &plan.algo,
                self.workspace as *mut c_void,
                self.workspace_size,
                // cuBLASLt's `cudaStream_t` is its own Rust type for the driver's stream.
                stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| LtError::After(format!("cublasLtMatmul: {e}")))
    }
}

impl Drop for LtContext {
    fn drop(&mut self) {
        self.plans.planned.clear();
        // SAFETY: created in `new`; no call of this context is in flight once it is dropped.
        unsafe {
            let _ = cudarc::driver::result::free_sync(self.workspace);
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

/// The largest power of two, at most 256, that divides a device address.
fn alignment(pointer: CUdeviceptr) -> u32 {
    1u32 << pointer.trailing_zeros().min(8)
}

impl Plan {
    fn new(
        handle: sys::cublasLtHandle_t,
        gemm: &Gemm,
        align: [u32; 3],
        workspace_size: usize,
    ) -> Result<Self, CublasError> {
        let call = gemm.column_major();
        let t = gemm.dtype.data_type();
        let desc =
            lt::create_matmul_desc(gemm.dtype.compute_type(), sys::cudaDataType::CUDA_R_32F)?;
        // Built field by field so that `Drop` frees whatever was made before an error.
        let mut plan = Plan {
            desc,
            first: std::ptr::null_mut(),
            second: std::ptr::null_mut(),
            out: std::ptr::null_mut(),
            // SAFETY: plain integers (an opaque algorithm id), replaced before any use.
            algo: unsafe { std::mem::zeroed() },
        };
        use sys::cublasLtMatmulDescAttributes_t as Desc;
        set_desc_i32(
            desc,
            Desc::CUBLASLT_MATMUL_DESC_TRANSA,
            call.trans_first as i32,
        )?;
        set_desc_i32(
            desc,
            Desc::CUBLASLT_MATMUL_DESC_TRANSB,
            call.trans_second as i32,
        )?;
        plan.first = layout(t, call.first, gemm.batch)?;
        plan.second = layout(t, call.second, gemm.batch)?;
        plan.out = layout(t, call.out, gemm.batch)?;
        let pref = lt::create_matmul_pref()?;
        // SAFETY: attribute values of the types cuBLASLt documents (size_t, uint32).
        let heuristic = unsafe {
            preferences(pref, workspace_size, align).and_then(|()| {
                lt::get_matmul_algo_heuristic(
                    handle,
                    desc,
                    plan.first,
                    plan.second,
                    plan.out,
                    plan.out,
                    pref,
                )
            })
        };
        // SAFETY: created above and used by nothing else.
        unsafe { lt::destroy_matmul_pref(pref)? };
        plan.algo = heuristic?.algo;
        Ok(plan)
    }
}

/// The workspace available, and the operands' actual alignments: cuBLAS's A is our B (the
/// column-major swap) and D is C.
unsafe fn preferences(
    pref: sys::cublasLtMatmulPreference_t,
    workspace_size: usize,
    align: [u32; 3],
) -> Result<(), CublasError> {
    use sys::cublasLtMatmulPreferenceAttributes_t as P;
    unsafe {
        lt::set_matmul_pref_attribute(
            pref,
            P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            (&workspace_size as *const usize).cast(),
            size_of::<usize>(),
        )?;
        for (attribute, bytes) in [
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[1]),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[0]),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]),
        ] {
            lt::set_matmul_pref_attribute(pref, attribute, (&bytes as *const u32).cast(), 4)?;
        }
    }
    Ok(())
}

fn set_desc_i32(
    desc: sys::cublasLtMatmulDesc_t,
    attribute: sys::cublasLtMatmulDescAttributes_t,
    value: i32,
) -> Result<(), CublasError> {
    // SAFETY: TRANSA and TRANSB take a cublasOperation_t, an int32 (0 = N, 1 = T).
    unsafe { lt::set_matmul_desc_attribute(desc, attribute, (&value as *const i32).cast(), 4) }
}

/// A column-major layout, with a strided batch when there is more than one.
fn layout(
    dtype: sys::cudaDataType,
    matrix: Matrix,
    batch: i32,
) -> Result<sys::cublasLtMatrixLayout_t, CublasError> {
    let layout = lt::create_matrix_layout(dtype, matrix.rows, matrix.cols, matrix.ld)?;
    if batch > 1 {
        use sys::cublasLtMatrixLayoutAttribute_t as L;
        // SAFETY: BATCH_COUNT is an int32, STRIDED_BATCH_OFFSET an int64.
        let set = unsafe {
            lt::set_matrix_layout_attribute(
                layout,
                L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                (&batch as *const i32).cast(),
                4,
            )
            .and_then(|()| {
                lt::set_matrix_layout_attribute(
                    layout,
                    L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    (&matrix.batch_stride as *const i64).cast(),
                    8,
                )
            })
        };
        if let Err(error) = set {
            // SAFETY: created above, not handed out.
            unsafe {
                let _ = lt::destroy_matrix_layout(layout);
            }
            return Err(error);
        }
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use itertools::Itertools;

    #[test]
    fn strides_map_to_a_transpose_flag_and_leading_dimension() {
        // Row-major [4, 3], dense and with rows pitched to 8.
        assert_eq!(operand_layout(4, 3, 3, 1), Some((false, 3)));
        assert_eq!(operand_layout(4, 3, 8, 1), Some((false, 8)));
        // burn's transpose() of a row-major [3, 4]: [4, 3] with strides (1, 4).
        assert_eq!(operand_layout(4, 3, 1, 4), Some((true, 4)));
        // A single row or column is either; it still gets a valid leading dimension.
        assert_eq!(operand_layout(1, 5, 5, 1), Some((false, 5)));
        assert_eq!(operand_layout(5, 1, 1, 1), Some((false, 1)));
        // Every other element of every other row, or overlapping rows: copy first.
        assert_eq!(operand_layout(4, 3, 6, 2), None);
        assert_eq!(operand_layout(4, 3, 2, 1), None);
        // burn's expansions of size-one dimensions (stride 0): `[…, 1, 1]`, and a row vector
        // broadcast from `[n]`, map; a column repeating one element does not.
        assert_eq!(operand_layout(1, 1, 0, 0), Some((false, 1)));
        assert_eq!(operand_layout(1, 5, 0, 1), Some((false, 5)));
        assert_eq!(operand_layout(4, 1, 0, 0), None);
    }

    fn gemm(m: u64, n: u64, k: u64) -> Gemm {
        let dense = |ld| Operand {
            trans: false,
            ld,
            batch_stride: 0,
        };
        Gemm {
            dtype: GemmDtype::Bf16,
            m,
            n,
            k,
            a: dense(k as i64),
            b: dense(n as i64),
            batch: 1,
        }
    }

    #[test]
    fn a_refused_product_is_planned_once_and_the_fault_switch_refuses_without_asking() {
        let refuse_none = Refusals::default();
        let mut plans = Plans::<u32>::new();
        let key = |g| (g, [256, 256, 256]);
        let not_supported = || {
            Err(CublasError(
                sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED,
            ))
        };
        let refusal = plans.get(key(gemm(8, 4, 2)), &refuse_none, not_supported);
        assert!(refusal.unwrap_err().contains("NOT_SUPPORTED"));
        // Asked again: the refusal is remembered, the heuristic is not run a second time.
        let again = plans.get(key(gemm(8, 4, 2)), &refuse_none, || unreachable!());
        assert!(again.unwrap_err().contains("NOT_SUPPORTED"));
        assert_eq!(
            plans.get(key(gemm(8, 4, 3)), &refuse_none, || Ok(7)),
            Ok(&7)
        );
        assert_eq!(
            plans.get(key(gemm(8, 4, 3)), &refuse_none, || unreachable!()),
            Ok(&7)
        );

        let refuse = Refusals::parse(Some("8x4x9, 16x16x16")).unwrap();
        let refused = plans.get(key(gemm(8, 4, 9)), &refuse, || unreachable!());
        assert_eq!(refused, Err(format!("refused by {REFUSE_VARIABLE}")));
        assert!(Refusals::parse(Some("all")).unwrap().names(&gemm(1, 2, 3)));
        assert!(!Refusals::parse(None).unwrap().names(&gemm(1, 2, 3)));
        let error = Refusals::parse(Some("8x4")).unwrap_err();
        assert!(
            error.contains(REFUSE_VARIABLE) && error.contains("`8x4`"),
            "{error}"
        );
    }

    #[test]
    fn a_product_names_its_shape_in_warnings_and_panics() {
        let text = gemm(32768, 30522, 768).to_string();
        assert_eq!(
            text,
            "1 × [32768, 768]·[768, 30522] Bf16 (M×N×K 32768x30522x768)"
        );
    }

    #[test]
    fn batch_dimensions_fold_into_one_stride_or_are_refused() {
        // Contiguous [2, 3, L·d]: the inner batch stride, with the outer one its multiple.
        assert_eq!(batch_stride(&[2, 3], &[3 * 20, 20]), Some(20));
        assert_eq!(batch_stride(&[2, 1, 3], &[60, 999, 20]), Some(20));
        assert_eq!(batch_stride(&[], &[]), Some(0));
        assert_eq!(batch_stride(&[1], &[7]), Some(0));
        // [B, H, L, d] as swap_dims(1, 2) of a contiguous [B, L, H, d] (L = 5, H = 3, d = 4).
        assert_eq!(batch_stride(&[2, 3], &[5 * 3 * 4, 4]), None);
    }

    /// cuBLAS's semantics on the host: column-major `D = op(first)·op(second)`.
    fn column_major_product(
        call: &ColumnMajor,
        k: usize,
        first: &[f32],
        second: &[f32],
    ) -> Vec<f32> {
        let (rows, cols) = (call.out.rows as usize, call.out.cols as usize);
        let at = |matrix: &Matrix, data: &[f32], trans: bool, i: usize, j: usize| {
            let (r, c) = if trans { (j, i) } else { (i, j) };
            data[r + c * matrix.ld as usize]
        };
        let mut out = vec![0.0; call.out.ld as usize * cols];
        for i in 0..rows {
            for j in 0..cols {
                out[i + j * call.out.ld as usize] = (0..k)
                    .map(|p| {
                        at(&call.first, first, call.trans_first, i, p)
                            * at(&call.second, second, call.trans_second, p, j)
                    })
                    .sum();
            }
        }
        out
    }

    /// Row-major storage of `x[rows, cols]` (or of its transpose) with rows `ld` apart.
    fn store(x: &[Vec<f32>], trans: bool, ld: usize) -> Vec<f32> {
        let (rows, cols) = (x.len(), x[0].len());
        let (sr, sc) = if trans { (cols, rows) } else { (rows, cols) };
        let mut data = vec![f32::NAN; sr * ld];
        for r in 0..sr {
            for c in 0..sc {
                data[r * ld + c] = if trans { x[c][r] } else { x[r][c] };
            }
        }
        data
    }

    #[test]
    fn row_major_products_map_onto_column_major_calls_for_every_transpose_pair() {
        let (m, n, k) = (3usize, 5, 4);
        let matrix = |rows: usize, cols: usize, seed: f32| -> Vec<Vec<f32>> {
            (0..rows)
                .map(|i| {
                    (0..cols)
                        .map(|j| ((i * 7 + j * 3) as f32 * seed).sin())
                        .collect()
                })
                .collect()
        };
        let (a, b) = (matrix(m, k, 0.37), matrix(k, n, 0.91));
        let expected: Vec<f32> = (0..m)
            .flat_map(|i| {
                (0..n)
                    .map(|j| (0..k).map(|p| a[i][p] * b[p][j]).sum::<f32>())
                    .collect::<Vec<_>>()
            })
            .collect();
        // NN, NT (y = x·Wᵀ), TN (dW = dyᵀ·x) and TT, with pitched rows (ld = width + 2).
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            let width = |trans: bool, rows: usize, cols: usize| if trans { rows } else { cols };
            let (lda, ldb) = (width(trans_a, m, k) + 2, width(trans_b, k, n) + 2);
            let gemm = Gemm {
                dtype: GemmDtype::F32Tf32,
                m: m as u64,
                n: n as u64,
                k: k as u64,
                a: Operand {
                    trans: trans_a,
                    ld: lda as i64,
                    batch_stride: 0,
                },
                b: Operand {
                    trans: trans_b,
                    ld: ldb as i64,
                    batch_stride: 0,
                },
                batch: 1,
            };
            let call = gemm.column_major();
            let (a_data, b_data) = (store(&a, trans_a, lda), store(&b, trans_b, ldb));
            let got = column_major_product(&call, k, &b_data, &a_data);
            assert_eq!(got.len(), m * n);
            for (g, e) in got.iter().zip_eq(&expected) {
                assert!(
                    (g - e).abs() < 1e-5,
                    "trans {trans_a}/{trans_b}: {got:?} vs {expected:?}"
                );
            }
        }
    }

    #[test]
    fn backward_transpose_flags_give_the_gradients_of_burns_matmul() {
        let device = Device::flex().autodiff();
        let values = |len: usize, seed: f32| -> Vec<f32> {
            (0..len).map(|i| (i as f32 * seed).sin()).collect()
        };
        let (m, n, k) = (3, 4, 5);
        let upstream =
            Tensor::<3>::from_data(TensorData::new(values(2 * m * n, 0.73), [2, m, n]), &device);
        for (trans_lhs, trans_rhs) in [(false, false), (false, true), (true, false), (true, true)] {
            let shape = |trans: bool, rows: usize, cols: usize| {
                if trans {
                    [2, cols, rows]
                } else {
                    [2, rows, cols]
                }
            };
            let lhs = Tensor::<3>::from_data(
                TensorData::new(values(2 * m * k, 0.37), shape(trans_lhs, m, k)),
                &device,
            )
            .require_grad();
            let rhs = Tensor::<3>::from_data(
                TensorData::new(values(2 * k * n, 0.91), shape(trans_rhs, k, n)),
                &device,
            )
            .require_grad();
            let op = |t: Tensor<3>, trans: bool| if trans { t.transpose() } else { t };
            let y = op(lhs.clone(), trans_lhs).matmul(op(rhs.clone(), trans_rhs));
            let grads = (y * upstream.clone()).sum().backward();
            let product =
                |x: Tensor<3>, y: Tensor<3>, tx: bool, ty: bool| op(x, tx).matmul(op(y, ty));
            let (l, r, g) = (
                lhs.clone().inner(),
                rhs.clone().inner(),
                upstream.clone().inner(),
            );
            let d_lhs = lhs_gradient(trans_lhs, trans_rhs).eval(g.clone(), None, Some(r), product);
            let d_rhs = rhs_gradient(trans_lhs, trans_rhs).eval(g, Some(l), None, product);
            d_lhs.into_data().assert_approx_eq::<f32>(
                &lhs.grad(&grads).unwrap().into_data(),
                Default::default(),
            );
            d_rhs.into_data().assert_approx_eq::<f32>(
                &rhs.grad(&grads).unwrap().into_data(),
                Default::default(),
            );
        }
    }

    #[test]
    fn only_cuda_devices_take_cublas() {
        for mode in [MatmulMode::Cube, MatmulMode::Cublas, MatmulMode::Auto] {
            assert_eq!(takes(mode, &Device::flex()), Ok(false));
            assert_eq!(takes(mode, &Device::flex().autodiff()), Ok(false));
        }
    }
}
