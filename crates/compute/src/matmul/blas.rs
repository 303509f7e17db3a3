//! Products on flex through a CPU BLAS loaded at run time (`LSR_MATMUL=blas|auto`, the library
//! file named by `LSR_BLAS`): oneMKL's `libmkl_rt` or OpenBLAS through CBLAS (`cblas_sgemm`, and
//! `cblas_gemm_bf16bf16f32` or `cblas_sbgemm` for bf16 where the library has one), or oneDNN's
//! `libdnnl` through its own BLAS-like products (`dnnl_sgemm`, `dnnl_gemm_bf16bf16f32`). bf16
//! products accumulate in f32 and use AVX512_BF16 and AMX on CPUs that have them; oneMKL's do
//! only on Intel's, oneDNN's on any CPU with the units (oneDNN has none without AVX-512, which
//! loading checks). gemm 0.19, flex's own, runs the model's products at 50-84% of the f32
//! fused-multiply-add ceiling (docs/perf-cpu.md).
//!
//! The library runs single-threaded and lsr splits each product over rayon's threads (by row or
//! column blocks, or by the matrices of a batch): a BLAS's own thread pool would spin beside
//! rayon's, which runs everything else flex computes. Nothing is linked: without the library
//! lsr runs as it does without this file.

use std::cell::Cell;
use std::ffi::{c_char, c_int};
use std::ops::Range;
use std::sync::OnceLock;

use burn::backend::tensor::FloatTensor;
use burn::backend::{DispatchDevice, Flex};
use burn::prelude::*;
use burn::tensor::{Bytes, DType, Shape, bf16};
use burn_flex::{FlexTensor, Layout};
use libloading::Library;
use rayon::prelude::*;

use super::MatmulMode;
use super::layout::{batch_stride, operand_layout};
use crate::setting::Setting;

/// The variable naming the BLAS library file (a path, or a name the dynamic loader finds).
pub const LIBRARY_VARIABLE: &str = "LSR_BLAS";

/// Tried in order when `LSR_BLAS` is unset, by the loader's own search (`LD_LIBRARY_PATH`, its
/// cache): oneMKL's single dynamic library, OpenBLAS as distributions name it, then oneDNN.
const CANDIDATES: [&str; 5] = [
    "libmkl_rt.so.3",
    "libmkl_rt.so.2",
    "libopenblas.so.0",
    "libopenblas.so",
    "libdnnl.so.3",
];

/// Symbol prefixes of the builds known: plain, and the `scipy_` of SciPy's OpenBLAS wheels.
const PREFIXES: [&str; 2] = ["", "scipy_"];

// CBLAS's enums, fixed by the standard.
const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

type CblasGemm<T> = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    f32,
    *const T,
    c_int,
    *const T,
    c_int,
    f32,
    *mut f32,
    c_int,
) -> ();

/// oneDNN's products: always row-major, transposes as `'N'`/`'T'`, 64-bit dimensions, and a
/// status back (`dnnl_success` is 0).
type DnnlGemm<T> = unsafe extern "C" fn(
    c_char,
    c_char,
    i64,
    i64,
    i64,
    f32,
    *const T,
    i64,
    *const T,
    i64,
    f32,
    *mut f32,
    i64,
) -> c_int;

type SetThreads = unsafe extern "C" fn(c_int);

/// One product entry point of a loaded library, by the interface the library has.
enum Gemm<T> {
    Cblas(CblasGemm<T>),
    /// With OpenMP's `omp_set_num_threads` where the build threads with OpenMP: its thread count
    /// is each calling thread's own setting, so each of rayon's threads sets 1 before its first
    /// product (oneDNN has no sequential switch of its own).
    Dnnl(DnnlGemm<T>, Option<SetThreads>),
}

// Function pointers copy whatever `T` is (a derive would ask `T: Copy`).
impl<T> Clone for Gemm<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Gemm<T> {}

/// A loaded library's product entry points; the library stays loaded for the process.
pub struct Blas {
    path: String,
    sgemm: Gemm<f32>,
    bf16: Option<Gemm<u16>>,
    _library: Library,
}

impl Blas {
    /// The file the library was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether products of `dtype` go through the library.
    pub fn computes(&self, dtype: DType) -> bool {
        match dtype {
            DType::F32 => true,
            DType::BF16 => self.bf16.is_some(),
            _ => false,
        }
    }
}

/// The library `LSR_BLAS` names (or the first candidate that loads), loaded once per process,
/// or why none loaded.
pub fn library() -> Result<&'static Blas, String> {
    static LOADED: OnceLock<Result<Blas, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let named = std::env::var(LIBRARY_VARIABLE)
                .ok()
                .filter(|s| !s.is_empty());
            match named {
                Some(name) => load(&name),
                None => CANDIDATES.iter().find_map(|name| load(name).ok()).ok_or_else(|| {
                    format!(
                        "no CPU BLAS loaded: {LIBRARY_VARIABLE} is unset and the dynamic loader \
                         found none of {} (scripts/cpu/blas.sh installs oneMKL or oneDNN)",
                        CANDIDATES.join(", ")
                    )
                }),
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}

pub(super) fn load(name: &str) -> Result<Blas, String> {
    let fail = |why: String| format!("{LIBRARY_VARIABLE}=`{name}`: {why}");
    // SAFETY: loading runs the library's initialisers; these are BLAS libraries, which set up
    // their CPU dispatch and nothing that conflicts with this process.
    let library = unsafe { Library::new(name) }.map_err(|e| fail(e.to_string()))?;
    let (sgemm, bf16) = match cblas_entries(&library) {
        Some(entries) => entries,
        None => dnnl_entries(&library).map_err(fail)?.ok_or_else(|| {
            fail(
                "it has neither CBLAS's `cblas_sgemm` nor oneDNN's `dnnl_sgemm`; is it a BLAS?"
                    .into(),
            )
        })?,
    };
    single_threaded(&library);
    let address = match sgemm {
        Gemm::Cblas(f) => f as *const (),
        Gemm::Dnnl(f, _) => f as *const (),
    };
    let path = loaded_path(address).unwrap_or_else(|| name.to_string());
    tracing::info!(
        "CPU BLAS: {path} (f32{})",
        if bf16.is_some() { ", bf16" } else { "" }
    );
    Ok(Blas {
        path,
        sgemm,
        bf16,
        _library: library,
    })
}

/// CBLAS's products, under the plain names or a build's prefixed ones.
fn cblas_entries(library: &Library) -> Option<(Gemm<f32>, Option<Gemm<u16>>)> {
    PREFIXES.iter().find_map(|prefix| {
        let sgemm = symbol::<CblasGemm<f32>>(library, &format!("{prefix}cblas_sgemm"))?;
        let bf16 = ["cblas_gemm_bf16bf16f32", "cblas_sbgemm"]
            .iter()
            .find_map(|name| symbol::<CblasGemm<u16>>(library, &format!("{prefix}{name}")));
        Some((Gemm::Cblas(sgemm), bf16.map(Gemm::Cblas)))
    })
}

/// oneDNN's products, or `None` when the library is not oneDNN; an error for a build whose
/// threads lsr cannot hold to one per task (a TBB or thread-pool build).
#[allow(clippy::type_complexity)]
fn dnnl_entries(library: &Library) -> Result<Option<(Gemm<f32>, Option<Gemm<u16>>)>, String> {
    /// `dnnl_version_t`, fixed by oneDNN's C API.
    #[repr(C)]
    struct Version {
        major: c_int,
        minor: c_int,
        patch: c_int,
        hash: *const c_char,
        cpu_runtime: u32,
        gpu_runtime: u32,
    }
    const RUNTIME_SEQUENTIAL: u32 = 1;
    const RUNTIME_OPENMP: u32 = 2;
    let (Some(sgemm), Some(version)) = (
        symbol::<DnnlGemm<f32>>(library, "dnnl_sgemm"),
        symbol::<unsafe extern "C" fn() -> *const Version>(library, "dnnl_version"),
    ) else {
        return Ok(None);
    };
    // SAFETY: oneDNN returns a pointer to its static version record.
    let version = unsafe { &*version() };
    let threads = match version.cpu_runtime {
        RUNTIME_SEQUENTIAL => None,
        RUNTIME_OPENMP => Some(symbol::<SetThreads>(library, "omp_set_num_threads").ok_or(
            "oneDNN threads with OpenMP but `omp_set_num_threads` is not among its libraries",
        )?),
        other => {
            return Err(format!(
                "this oneDNN {}.{} threads with CPU runtime {other} (TBB or a thread pool), which \
                 would run beside rayon's threads; use an OpenMP or sequential build (`scripts/cpu/\
                 blas.sh onednn` installs one)",
                version.major, version.minor
            ));
        }
    };
    let bf16 = symbol::<DnnlGemm<u16>>(library, "dnnl_gemm_bf16bf16f32")
        .filter(|&gemm| runs(gemm, threads));
    Ok(Some((
        Gemm::Dnnl(sgemm, threads),
        bf16.map(|f| Gemm::Dnnl(f, threads)),
    )))
}

/// Whether oneDNN's bf16 product runs on this CPU: oneDNN has it only with AVX-512 and answers
/// `dnnl_unimplemented` elsewhere (an AMD EPYC of family 23, AVX2 alone), so one 1 × 1 × 1
/// product decides, where a missing symbol would have been the only sign.
fn runs(gemm: DnnlGemm<u16>, threads: Option<SetThreads>) -> bool {
    const ONE: u16 = 0x3f80;
    let (one, mut out) = (ONE, 0.0f32);
    let flag = b'N' as c_char;
    if let Some(set) = threads.filter(|_| !ONE_OPENMP_THREAD.replace(true)) {
        // SAFETY: sets this thread's own OpenMP thread count, as every product does first.
        unsafe { set(1) };
    }
    // SAFETY: one-element operands and result, each a leading dimension of 1.
    let status = unsafe { gemm(flag, flag, 1, 1, 1, 1.0, &one, 1, &one, 1, 0.0, &mut out, 1) };
    status == 0 && out == 1.0
}

fn symbol<T: Copy>(library: &Library, name: &str) -> Option<T> {
    // SAFETY: each symbol asked for is called through the CBLAS signature its name has.
    unsafe { library.get::<T>(name.as_bytes()).ok().map(|f| *f) }
}

/// oneMKL's sequential layer (chosen before its first call) with results reproducible from run
/// to run on one CPU whatever the operands' alignment; OpenBLAS's pool at one thread (oneDNN's
/// is set per thread, [`Gemm::Dnnl`]).
fn single_threaded(library: &Library) {
    const MKL_THREADING_SEQUENTIAL: c_int = 1;
    const MKL_CBWR_AUTO: c_int = 2;
    type SetInt = unsafe extern "C" fn(c_int) -> c_int;
    // SAFETY: these take and return plain ints; MKL documents calling both before any other.
    unsafe {
        if let Some(set) = symbol::<SetInt>(library, "MKL_Set_Threading_Layer") {
            set(MKL_THREADING_SEQUENTIAL);
        }
        if let Some(set) = symbol::<SetInt>(library, "MKL_CBWR_Set") {
            set(MKL_CBWR_AUTO);
        }
        for prefix in PREFIXES {
            if let Some(set) =
                symbol::<SetThreads>(library, &format!("{prefix}openblas_set_num_threads"))
            {
                set(1);
            }
        }
    }
}

/// The file that holds `address`, from the loader (a bare name resolves to a full path).
fn loaded_path(address: *const ()) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let address = address as usize;
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let (start, end) = (
            usize::from_str_radix(start, 16).ok()?,
            usize::from_str_radix(end, 16).ok()?,
        );
        let path = fields.nth(4)?;
        (start <= address && address < end).then(|| path.to_string())
    })
}

thread_local! {
    /// Set within [`with_bf16_operands`]: f32 products round their operands to bf16.
    static BF16_OPERANDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's f32 products through the BLAS computed from bf16-rounded operands
/// (f32 accumulation and result) when `on`: `Precision::Bf16`'s forward pass. The model's
/// forward runs its products on the calling thread, so a thread-local scope reaches all of them
/// and nothing else.
pub fn with_bf16_operands<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BF16_OPERANDS.with(|flag| flag.set(self.0));
        }
    }
    let _restore = Restore(BF16_OPERANDS.with(|flag| flag.replace(on)));
    f()
}

/// Whether `mode` sends the products on `device` to the CPU BLAS: only on flex; `auto` when a
/// library loads; `blas` always, or an error when none loads.
pub fn serves(mode: MatmulMode, device: &Device) -> Result<bool, String> {
    let flex = matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Flex(_)
    );
    if !matches!(mode, MatmulMode::Blas | MatmulMode::Auto) || !flex {
        return Ok(false);
    }
    match (mode, library()) {
        (_, Ok(_)) => Ok(true),
        (MatmulMode::Auto, Err(why)) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::info!("{}=auto: {why}; products use cube", MatmulMode::VARIABLE)
            });
            Ok(false)
        }
        (_, Err(why)) => Err(format!(
            "{}=blas: {why}; set {LIBRARY_VARIABLE} to the library's file, or use {}=cube",
            MatmulMode::VARIABLE,
            MatmulMode::VARIABLE
        )),
    }
}

/// Whether the loaded BLAS computes `a · b`: operands of one dtype it has a product for, and
/// equal leading (batch) dimensions; burn's matmul takes the rest.
pub fn supports<const D: usize>(a: &Tensor<D>, b: &Tensor<D>) -> bool {
    super::same_batch(a, b) && library().is_ok_and(|blas| blas.computes(a.dtype()))
}

/// How one operand's storage reaches the BLAS: elements from `offset`, rows `ld` apart, holding
/// the transpose of the operand when `trans`, matrices `batch_stride` apart (0: shared).
#[derive(Clone, Copy, Debug)]
struct Operand {
    offset: usize,
    trans: bool,
    ld: usize,
    batch_stride: usize,
}

/// A flex tensor as an operand: as it is when its layout maps, else made contiguous first.
fn operand(tensor: FlexTensor, trans: bool) -> (FlexTensor, Option<Operand>) {
    if let Some(operand) = describe(tensor.layout(), trans) {
        return (tensor, Some(operand));
    }
    let tensor = tensor.to_contiguous();
    let operand = describe(tensor.layout(), trans);
    (tensor, operand)
}

fn describe(layout: &Layout, trans: bool) -> Option<Operand> {
    let shape = layout.shape();
    let strides: Vec<usize> = (layout.strides().iter())
        .map(|&s| usize::try_from(s).ok())
        .collect::<Option<_>>()?;
    let d = shape.num_dims();
    let (stored_transposed, ld) =
        operand_layout(shape[d - 2], shape[d - 1], strides[d - 2], strides[d - 1])?;
    Some(Operand {
        offset: layout.start_offset(),
        trans: trans ^ stored_transposed,
        ld: ld as usize,
        batch_stride: batch_stride(&shape[..d - 2], &strides[..d - 2])? as usize,
    })
}

/// `op(lhs) · op(rhs)` through the loaded BLAS into a new contiguous tensor, or the operands back
/// when it does not compute this product (no library, a dtype it lacks, broadcast batches, an
/// empty product).
pub(super) fn product(
    lhs: FloatTensor<Flex>,
    rhs: FloatTensor<Flex>,
    trans_lhs: bool,
    trans_rhs: bool,
) -> Result<FloatTensor<Flex>, (FloatTensor<Flex>, FloatTensor<Flex>)> {
    match library() {
        Ok(blas) => blas.product(lhs, rhs, trans_lhs, trans_rhs),
        Err(_) => Err((lhs, rhs)),
    }
}

impl Blas {
    /// [`product`] through this library.
    pub(super) fn product(
        &self,
        lhs: FloatTensor<Flex>,
        rhs: FloatTensor<Flex>,
        trans_lhs: bool,
        trans_rhs: bool,
    ) -> Result<FloatTensor<Flex>, (FloatTensor<Flex>, FloatTensor<Flex>)> {
        let dtype = lhs.dtype();
        let (ls, rs) = (lhs.layout().shape().clone(), rhs.layout().shape().clone());
        let d = ls.num_dims();
        let m = ls[if trans_lhs { d - 1 } else { d - 2 }];
        let k = ls[if trans_lhs { d - 2 } else { d - 1 }];
        let n = rs[if trans_rhs { d - 2 } else { d - 1 }];
        let batch: usize = ls[..d - 2].iter().product();
        let served = rhs.dtype() == dtype && self.computes(dtype) && rs.num_dims() == d;
        if !served || ls[..d - 2] != rs[..d - 2] || batch * m * n * k == 0 {
            return Err((lhs, rhs));
        }
        let shape = |a, b| Product {
            batch,
            m,
            n,
            k,
            a,
            b,
        };
        let output = |out| FlexTensor::new(out, Layout::contiguous(dims(&ls, m, n)), dtype);
        let narrow = dtype == DType::F32 && BF16_OPERANDS.with(|flag| flag.get());
        if let (true, Some(gemm)) = (narrow, self.bf16) {
            let (a_bits, a) = narrowed(lhs, trans_lhs);
            let (b_bits, b) = narrowed(rhs, trans_rhs);
            let out = shape(a, b).run(gemm, &a_bits, &b_bits);
            return Ok(output(Bytes::from_elems(out)));
        }
        let (lhs, a) = operand(lhs, trans_lhs);
        let (rhs, b) = operand(rhs, trans_rhs);
        let (Some(a), Some(b)) = (a, b) else {
            return Err((lhs, rhs));
        };
        let out = match dtype {
            DType::F32 => {
                let (a_values, b_values) = (lhs.storage::<f32>(), rhs.storage::<f32>());
                Bytes::from_elems(shape(a, b).run(self.sgemm, a_values, b_values))
            }
            _ => {
                let gemm = self.bf16.expect("computes() checked for a bf16 product");
                let as_bits = |t: &FlexTensor| -> &[u16] {
                    let values = t.storage::<bf16>();
                    // SAFETY: bf16 is a u16 bit pattern, same size and alignment.
                    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), values.len()) }
                };
                Bytes::from_elems(shape(a, b).run_bf16(gemm, as_bits(&lhs), as_bits(&rhs)))
            }
        };
        Ok(output(out))
    }
}

/// `shape` with its last two dimensions `[m, n]`: a product's output.
fn dims(shape: &Shape, m: usize, n: usize) -> Shape {
    let mut dims = shape.clone();
    let d = dims.num_dims();
    dims[d - 2] = m;
    dims[d - 1] = n;
    dims
}

/// An f32 operand as bf16 bit patterns (round to nearest even), laid out as it was stored: only
/// the storage it spans is narrowed, a transposed view (a tied head's decoder) as it is.
fn narrowed(tensor: FlexTensor, trans: bool) -> (Vec<u16>, Operand) {
    let (tensor, operand) = operand(tensor, trans);
    let operand = operand.expect("a contiguous operand maps onto a BLAS layout");
    let shape = tensor.layout().shape();
    let d = shape.num_dims();
    let (rows, cols) = (shape[d - 2], shape[d - 1]);
    let (stored_rows, stored_cols) = match operand.trans != trans {
        true => (cols, rows),
        false => (rows, cols),
    };
    let batch: usize = shape[..d - 2].iter().product();
    let extent = (batch - 1) * operand.batch_stride + (stored_rows - 1) * operand.ld + stored_cols;
    let values = &tensor.storage::<f32>()[operand.offset..operand.offset + extent];
    let mut bits = vec![0u16; extent];
    bits.par_chunks_mut(1 << 14)
        .zip(values.par_chunks(1 << 14))
        .for_each(|(bits, values)| {
            for (b, &x) in bits.iter_mut().zip(values) {
                *b = bf16_bits(x);
            }
        });
    (
        bits,
        Operand {
            offset: 0,
            ..operand
        },
    )
}

/// `bf16::from_f32(x).to_bits()` (round to nearest even, a NaN kept and made quiet) without
/// half's branches, so that a loop of it vectorises; the two agree bit for bit (tested).
#[inline(always)]
pub(super) fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
    let quiet_nan = (bits >> 16) | 0x40;
    (if bits & 0x7fff_ffff > 0x7f80_0000 {
        quiet_nan
    } else {
        rounded
    }) as u16
}

/// One strided-batched product `C[m, n] = op(A)[m, k] · op(B)[k, n]`, `C` dense.
#[derive(Clone, Copy, Debug)]
struct Product {
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: Operand,
    b: Operand,
}

/// Products below this many multiply-adds run on one thread (flex's own threshold, 192³).
const PARALLEL_WORK: usize = 192 * 192 * 192;

/// Rows or columns below this are not split further: a BLAS kernel's blocks are about this size.
const MIN_SPLIT: usize = 64;

/// The f32 elements of a bf16 product's block, computed then narrowed while in the core's cache
/// (half a 2 MiB L2), rather than written to memory whole and read back to be narrowed.
const BF16_BLOCK: usize = 1 << 18;

impl Product {
    /// Computes the product into a new f32 buffer, each task writing its block in place.
    fn run<T: Sync>(&self, gemm: Gemm<T>, a: &[T], b: &[T]) -> Vec<f32> {
        let len = self.batch * self.m * self.n;
        let mut out = Vec::<f32>::with_capacity(len);
        let c = out.as_mut_ptr() as usize;
        self.for_each_block(None, |matrix, rows, cols| {
            let at = matrix * self.m * self.n + rows.start * self.n + cols.start;
            // SAFETY: each block is its own rows and columns of its own matrix of `out`.
            unsafe {
                self.block(
                    gemm,
                    a,
                    b,
                    matrix,
                    rows,
                    cols,
                    (c as *mut f32).add(at),
                    self.n,
                )
            }
        });
        // SAFETY: the blocks cover every element of every matrix.
        unsafe { out.set_len(len) };
        out
    }

    /// The product as bf16 bit patterns: each block computed in f32 into a scratch buffer and
    /// narrowed (round to nearest even, as `half`) into the output.
    fn run_bf16(&self, gemm: Gemm<u16>, a: &[u16], b: &[u16]) -> Vec<bf16> {
        let len = self.batch * self.m * self.n;
        let mut out = Vec::<bf16>::with_capacity(len);
        let c = out.as_mut_ptr() as usize;
        self.for_each_block(Some(BF16_BLOCK), |matrix, rows, cols| {
            let width = cols.len();
            let mut scratch = Vec::<f32>::with_capacity(rows.len() * width);
            // SAFETY: the scratch holds the block, `width` apart; every element is written.
            unsafe {
                self.block(
                    gemm,
                    a,
                    b,
                    matrix,
                    rows.clone(),
                    cols.clone(),
                    scratch.as_mut_ptr(),
                    width,
                );
                scratch.set_len(rows.len() * width);
            }
            for (row, values) in rows.zip(scratch.chunks_exact(width)) {
                let at = matrix * self.m * self.n + row * self.n + cols.start;
                // SAFETY: each block is its own rows and columns of its own matrix of `out`.
                let out =
                    unsafe { std::slice::from_raw_parts_mut((c as *mut bf16).add(at), width) };
                for (o, &x) in out.iter_mut().zip(values) {
                    *o = bf16::from_bits(bf16_bits(x));
                }
            }
        });
        // SAFETY: the blocks cover every element of every matrix.
        unsafe { out.set_len(len) };
        out
    }

    /// Calls `each(matrix, rows, cols)` for blocks that cover every matrix, in parallel on
    /// rayon's pool: a product split over the threads by rows (or by columns when it is wider
    /// than tall), or a batch of small products one matrix a task; blocks of at most `elements`
    /// where that is given.
    fn for_each_block(
        &self,
        elements: Option<usize>,
        each: impl Fn(usize, Range<usize>, Range<usize>) + Sync,
    ) {
        let Self { batch, m, n, k, .. } = *self;
        let threads = rayon::current_num_threads();
        let by_rows = m >= n;
        let (long, short) = if by_rows { (m, n) } else { (n, m) };
        let mut parts = if batch * m * n * k < PARALLEL_WORK || batch >= threads {
            1
        } else {
            threads.div_ceil(batch).min(long.div_ceil(MIN_SPLIT))
        };
        if let Some(elements) = elements {
            parts = parts.max(
                (long * short)
                    .div_ceil(elements)
                    .min(long.div_ceil(MIN_SPLIT / 4)),
            );
        }
        let span = long.div_ceil(parts.max(1));
        let blocks = long.div_ceil(span);
        (0..batch * blocks).into_par_iter().for_each(|task| {
            let (matrix, part) = (task / blocks, task % blocks);
            let split = part * span..((part + 1) * span).min(long);
            match by_rows {
                true => each(matrix, split, 0..n),
                false => each(matrix, 0..m, split),
            }
        });
    }

    /// `C[rows, cols] = op(A)[rows, :] · op(B)[:, cols]` of one matrix of the batch, written at
    /// `c`, rows `ldc` apart.
    ///
    /// # Safety
    /// `a` and `b` hold the operands as `self` describes them; `c` has room for the block.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<T>(
        &self,
        gemm: Gemm<T>,
        a: &[T],
        b: &[T],
        matrix: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        c: *mut f32,
        ldc: usize,
    ) {
        let Self {
            k, a: oa, b: ob, ..
        } = *self;
        // Row r of op(A) starts at row r of A, or at column r of a transposed A; column j of
        // op(B) at column j of B, or at row j of a transposed B.
        let a_at =
            oa.offset + matrix * oa.batch_stride + rows.start * if oa.trans { 1 } else { oa.ld };
        let b_at =
            ob.offset + matrix * ob.batch_stride + cols.start * if ob.trans { ob.ld } else { 1 };
        // SAFETY: the caller's; the dimensions and leading dimensions describe the operands.
        unsafe {
            gemm.call(
                (oa.trans, ob.trans),
                (rows.len(), cols.len(), k),
                (a.as_ptr().add(a_at), oa.ld),
                (b.as_ptr().add(b_at), ob.ld),
                (c, ldc),
            )
        }
    }
}

thread_local! {
    /// Whether this thread has set its OpenMP thread count to 1 for oneDNN's products.
    static ONE_OPENMP_THREAD: Cell<bool> = const { Cell::new(false) };
}

impl<T> Gemm<T> {
    /// `C = op(A) · op(B)`, row-major, `C` of `m × n` written `ldc` apart, on the calling thread.
    ///
    /// # Safety
    /// `a` and `b` hold `op(A)` (`m × k`) and `op(B)` (`k × n`) as the transposes and leading
    /// dimensions say; `c` has room for the result.
    unsafe fn call(
        self,
        (trans_a, trans_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        (a, lda): (*const T, usize),
        (b, ldb): (*const T, usize),
        (c, ldc): (*mut f32, usize),
    ) {
        // One argument list for both interfaces, each with its own flags and integer width.
        macro_rules! product {
            ($gemm:expr, [$($order:expr)?], $flag:expr, $int:expr) => {
                $gemm(
                    $($order,)?
                    $flag(trans_a),
                    $flag(trans_b),
                    $int(m),
                    $int(n),
                    $int(k),
                    1.0,
                    a,
                    $int(lda),
                    b,
                    $int(ldb),
                    0.0,
                    c,
                    $int(ldc),
                )
            };
        }
        match self {
            Gemm::Cblas(gemm) => {
                let flag = |trans| if trans { TRANS } else { NO_TRANS };
                let int = |x: usize| c_int::try_from(x).expect("a BLAS dimension fits a C int");
                // SAFETY: the caller's.
                unsafe { product!(gemm, [ROW_MAJOR], flag, int) }
            }
            Gemm::Dnnl(gemm, threads) => {
                if let Some(set) = threads.filter(|_| !ONE_OPENMP_THREAD.replace(true)) {
                    // SAFETY: sets this thread's own OpenMP thread count.
                    unsafe { set(1) };
                }
                let flag = |trans| (if trans { b'T' } else { b'N' }) as c_char;
                let int = |x: usize| x as i64;
                // SAFETY: the caller's.
                let status = unsafe { product!(gemm, [], flag, int) };
                assert_eq!(
                    status, 0,
                    "oneDNN refused the product {m}x{n}x{k}: status {status}"
                );
            }
        }
    }
}
