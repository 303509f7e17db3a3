//! The one entry point of every product a model computes ([`matmul`]), and the choice it makes
//! per product: burn's matmul (cubecl's kernels on a GPU), or cuBLASLt on CUDA devices
//! (`cublas/`), as `LSR_MATMUL` says (`mode.rs`); with what the cuBLASLt route did
//! (`totals.rs`).

use burn::prelude::*;

#[cfg(feature = "cuda")]
pub mod cublas;
mod mode;
mod totals;

pub use mode::{MatmulMode, matmul_mode};
pub use totals::CublasTotals;

/// `a · b` over the last two dimensions: every product of the model (linear maps, attention,
/// the MLM head) goes through here, the one place that chooses how a product is computed:
/// cuBLASLt where [`products_on`] says so, else burn's own matmul.
pub fn matmul<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "cuda")]
    if products_on(&a.device()) == MatmulMode::Cublas && cublas::supports(&a, &b) {
        return cublas::matmul(a, b);
    }
    a.matmul(b)
}

/// Whether products on `device` run `cube` or `cublas` under `LSR_MATMUL` (never `auto`: what
/// it resolved to), or why the setting cannot work there (a bad value; `cublas` on a CUDA
/// device without libcublasLt).
pub fn products_route(device: &Device) -> std::result::Result<MatmulMode, String> {
    let mode = matmul_mode()?;
    #[cfg(feature = "cuda")]
    if cublas::serves(mode, device)? {
        return Ok(MatmulMode::Cublas);
    }
    let _ = (mode, device);
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
