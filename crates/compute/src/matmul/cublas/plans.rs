//! cuBLASLt's objects through its raw API: a context per stream (handle, workspace), the plan of
//! each product (descriptors, layouts and the heuristic's algorithm) built once, and the
//! products `LSR_CUBLAS_REFUSE` makes it refuse.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::cublaslt::result::{self as lt, CublasError};
use cudarc::cublaslt::sys;
use cudarc::driver::CudaStream;
use cudarc::driver::sys::CUdeviceptr;

use super::gemm::{Gemm, Matrix};

/// Descriptors and the heuristic's algorithm for one product, built once.
pub(super) struct Plan {
    pub(super) desc: sys::cublasLtMatmulDesc_t,
    pub(super) first: sys::cublasLtMatrixLayout_t,
    pub(super) second: sys::cublasLtMatrixLayout_t,
    pub(super) out: sys::cublasLtMatrixLayout_t,
    pub(super) algo: sys::cublasLtMatmulAlgo_t,
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
pub(super) struct LtContext {
    pub(super) handle: sys::cublasLtHandle_t,
    pub(super) workspace: CUdeviceptr,
    pub(super) workspace_size: usize,
    pub(super) plans: Plans<Plan>,
}

/// The products one context has planned, keyed by the product and the alignment of A, B and C
/// (cuBLASLt's heuristic assumes 256-byte-aligned operands unless told less, and cubecl's slices
/// sit at smaller offsets), with the ones it refused: a refusal is asked for once, not at every
/// call.
pub(super) struct Plans<P> {
    pub(super) planned: HashMap<(Gemm, [u32; 3]), Result<P, String>>,
}

impl<P> Plans<P> {
    pub(super) fn new() -> Self {
        Self {
            planned: HashMap::new(),
        }
    }

    /// The plan of `key`, made by `make` the first time, or why there is none. A product that
    /// `LSR_CUBLAS_REFUSE` names is refused without asking cuBLASLt.
    pub(super) fn get(
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
pub(super) struct Refusals {
    pub(super) all: bool,
    pub(super) shapes: Vec<[u64; 3]>,
}

impl Refusals {
    pub(super) fn parse(value: Option<&str>) -> Result<Self, String> {
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

    pub(super) fn from_env() -> &'static Self {
        static REFUSALS: OnceLock<Refusals> = OnceLock::new();
        REFUSALS.get_or_init(|| {
            Self::parse(std::env::var(REFUSE_VARIABLE).ok().as_deref())
                .unwrap_or_else(|message| panic!("{message}"))
        })
    }

    pub(super) fn names(&self, gemm: &Gemm) -> bool {
        self.all || self.shapes.contains(&[gemm.m, gemm.n, gemm.k])
    }
}

// SAFETY: plain cuBLASLt objects and a device allocation, used by one thread at a time (the
// `Mutex` in `contexts`).
unsafe impl Send for LtContext {}

impl LtContext {
    /// With the device's context current. 32 MiB of workspace from Hopper on, 4 MiB before
    /// (cudarc's choice, after NVIDIA's recommendation).
    pub(super) fn new(compute_capability_major: i32) -> Result<Self, String> {
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
    pub(super) unsafe fn gemm(
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
pub(super) fn alignment(pointer: CUdeviceptr) -> u32 {
    1u32 << pointer.trailing_zeros().min(8)
}

impl Plan {
    pub(super) fn new(
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
pub(super) unsafe fn preferences(
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

pub(super) fn set_desc_i32(
    desc: sys::cublasLtMatmulDesc_t,
    attribute: sys::cublasLtMatmulDescAttributes_t,
    value: i32,
) -> Result<(), CublasError> {
    // SAFETY: TRANSA and TRANSB take a cublasOperation_t, an int32 (0 = N, 1 = T).
    unsafe { lt::set_matmul_desc_attribute(desc, attribute, (&value as *const i32).cast(), 4) }
}

/// A column-major layout, with a strided batch when there is more than one.
pub(super) fn layout(
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

/// Why a cuBLASLt product did not run.
#[derive(Debug)]
pub(super) enum LtError {
    /// Refused before anything was enqueued: burn's matmul can compute it instead.
    Refused(String),
    /// The device had failed before the product (a fault surfacing in the sync before it).
    Before(String),
    /// The device failed once the product was enqueued.
    After(String),
}
