//! Products through cuBLASLt on CUDA devices (`LSR_MATMUL=cublas|auto`, chosen per product by
//! [`super::matmul`]). cubecl's own matmul reached 0.12-0.35x of cuBLAS at the model's shapes on
//! an H200, so this module owns everything cuBLAS: whether it serves a device (here; the backend
//! extension every routed product goes through, with its backward, is `../backend.rs`), the mapping of burn's strided
//! row-major tensors onto cuBLASLt's column-major calls (`gemm.rs`), one product with its
//! fallback (`product.rs`), the ordering of each call with cubecl's stream (`stream.rs`), and
//! cuBLASLt's own objects: contexts, plans and refusals (`plans.rs`).
//!
//! Why cuBLASLt's raw API (`cudarc::cublaslt::result`) and not cudarc's safe `CudaBlasLT`: the
//! safe `Matmul::matmul` builds the descriptors and layouts and asks the heuristic again at
//! every call, where a plan per product shape is built once here; it takes operands as cudarc's
//! own `DevicePtr`s, tied to a cudarc stream, where ours are cubecl's allocations, reached as
//! raw device pointers; and it cannot tell the heuristic the operands' real alignment (cubecl's
//! slices sit at offsets below 256 bytes, which cuBLASLt otherwise assumes).
//!
//! Route A (`stream.rs`) is how a call is ordered with cubecl's work today: cubecl-cuda 0.11.3
//! keeps its CUDA stream private, so each call runs on a stream of lsr's own, with the host
//! waiting for cubecl's stream before it and for lsr's after it. Route B, a patch to cubecl-cuda
//! that hands its stream out, would replace `stream::on_own_stream` alone (docs/perf-gpu.md).

use std::sync::OnceLock;

use burn::backend::{CubeDevice, DispatchDevice};
use burn::prelude::*;
use burn_cubecl::tensor::CubeTensor;
use cudarc::cublaslt::sys;

use super::MatmulMode;
use crate::setting::Setting;
use gemm::GemmDtype;

mod gemm;
mod plans;
mod product;
mod stream;
#[cfg(test)]
mod tests;

pub use plans::REFUSE_VARIABLE;
pub use stream::{TIMING_VARIABLE, take_totals};

/// Whether `mode` sends the products on `device` to cuBLASLt: never off CUDA; `auto` when
/// libcublasLt loads; `cublas` always, or an error when libcublasLt does not load.
pub fn serves(mode: MatmulMode, device: &Device) -> Result<bool, String> {
    if !matches!(mode, MatmulMode::Cublas | MatmulMode::Auto) || cuda_index(device).is_none() {
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
    super::same_batch(a, b) && GemmDtype::of(a.dtype()).is_some()
}

/// `op(lhs) · op(rhs)` through cuBLASLt when both are CUDA tensors of a dtype it is asked for;
/// the operands back otherwise (WGPU, other dtypes).
pub(super) fn product_on_cuda(
    lhs: CubeTensor,
    rhs: CubeTensor,
    trans_lhs: bool,
    trans_rhs: bool,
) -> Result<CubeTensor, (CubeTensor, CubeTensor)> {
    let dtype = GemmDtype::of(lhs.dtype).filter(|_| rhs.dtype == lhs.dtype);
    match (&lhs.device, dtype) {
        (CubeDevice::Cuda(cuda), Some(dtype)) => {
            let index = cuda.index;
            Ok(product::product(
                lhs, rhs, trans_lhs, trans_rhs, dtype, index,
            ))
        }
        _ => Err((lhs, rhs)),
    }
}
