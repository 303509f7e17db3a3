//! The one entry point of every product a model computes ([`matmul`]), and the choice it makes
//! per product: burn's matmul (cubecl's kernels on a GPU, gemm on flex), cuBLASLt on CUDA
//! devices (`cublas/`) or a CPU BLAS on flex (`blas.rs`), as `LSR_MATMUL` says (`mode.rs`). The
//! routed products share one backend extension with its backward (`backend.rs`), burn's matmul
//! for what they do not take (`fallback.rs`) and one description of operand layouts
//! (`layout.rs`); `totals.rs` keeps what the cuBLASLt route did.

use burn::backend::Dispatch;
use burn::prelude::*;

use backend::RoutedMatmul;

mod backend;
pub mod blas;
#[cfg(feature = "cuda")]
pub mod cublas;
mod fallback;
mod layout;
mod mode;
#[cfg(test)]
mod tests;
mod totals;

pub use mode::{MatmulMode, matmul_mode};
pub use totals::CublasTotals;

/// `a · b` over the last two dimensions: every product of the model (linear maps, attention,
/// the MLM head) goes through here, the one place that chooses how a product is computed:
/// cuBLASLt or the CPU BLAS where [`products_on`] says so and the route takes the operands, else
/// burn's own matmul.
pub fn matmul<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    let routed = match products_on(&a.device()) {
        MatmulMode::Blas => blas::supports(&a, &b),
        #[cfg(feature = "cuda")]
        MatmulMode::Cublas => cublas::supports(&a, &b),
        _ => false,
    };
    if !routed {
        return a.matmul(b);
    }
    Tensor::from_dispatch(<Dispatch as RoutedMatmul>::routed_matmul(
        a.into_dispatch(),
        b.into_dispatch(),
        false,
        false,
    ))
}

/// Whether `a` and `b` are matrices, or batches of them with equal leading dimensions, of one
/// dtype: what the routed products take (burn's matmul also broadcasts).
fn same_batch<const D: usize>(a: &Tensor<D>, b: &Tensor<D>) -> bool {
    D >= 2 && a.dtype() == b.dtype() && a.dims()[..D - 2] == b.dims()[..D - 2]
}

/// Whether products on `device` run `cube`, `cublas` or `blas` under `LSR_MATMUL` (never
/// `auto`: what it resolved to), or why the setting cannot work there (a bad value; `cublas` on
/// a CUDA device without libcublasLt; `blas` on flex without a BLAS library).
pub fn products_route(device: &Device) -> std::result::Result<MatmulMode, String> {
    let mode = matmul_mode()?;
    #[cfg(feature = "cuda")]
    if cublas::serves(mode, device)? {
        return Ok(MatmulMode::Cublas);
    }
    if blas::serves(mode, device)? {
        return Ok(MatmulMode::Blas);
    }
    Ok(MatmulMode::Cube)
}

/// [`products_route`] for a device that [`crate::parse_device`] accepted, which checks the
/// setting first: a failure here is a device made some other way, and panics with the reason.
pub fn products_on(device: &Device) -> MatmulMode {
    products_route(device).unwrap_or_else(|message| panic!("{message}"))
}

/// What the cuBLASLt route did since the last call, which starts the totals again; `None` in a
/// build without CUDA.
pub fn take_cublas_totals() -> Option<CublasTotals> {
    #[cfg(feature = "cuda")]
    return Some(cublas::take_totals());
    #[cfg(not(feature = "cuda"))]
    None
}

/// The libcublasLt file this process loaded, once a product has loaded it; `None` before, and
/// in a build without CUDA.
pub fn cublaslt_library() -> Option<String> {
    #[cfg(feature = "cuda")]
    return cublas::loaded_library();
    #[cfg(not(feature = "cuda"))]
    None
}
