//! What the cuBLASLt route did, in a module of its own: the route fills it (`cublas/stream.rs`)
//! and the product entry point hands it out, also in builds without CUDA.

/// What the cuBLASLt route did since the last [`super::take_cublas_totals`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CublasTotals {
    /// Products cuBLASLt computed.
    pub products: u64,
    /// Products it refused, which burn's matmul computed.
    pub fallbacks: u64,
    /// Host time spent waiting in Route A's two syncs around each product.
    pub host_sync_seconds: f64,
    /// Device time of the products (CUDA events), when `LSR_CUBLAS_TIMING=1`.
    pub device_seconds: Option<f64>,
}
