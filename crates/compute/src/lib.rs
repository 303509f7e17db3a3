//! How lsr computes on a device, below every model: the choice of burn device (`device.rs`),
//! the arithmetic a model runs in (`precision.rs`: f32 or bf16-mixed, and the one entry point
//! every product of a model goes through), how products are computed (`LSR_MATMUL`,
//! `matmul_mode.rs`; cuBLASLt on CUDA, `cublas.rs`), parameter vectors broadcast over rows with
//! gradients that reduce in two short passes (`norm/`), what a pass launches and keeps on a GPU
//! (`launches.rs`), and where the GPU backends keep their
//! tuning and compiled kernels between processes (`kernel_cache.rs`). It knows no model: the
//! backbones call it, and it never names a layer or a checkpoint.

#[cfg(feature = "cuda")]
pub mod cublas;
pub mod device;
pub mod kernel_cache;
pub mod launches;
pub mod matmul_mode;
pub mod norm;
pub mod precision;

pub use device::{compiled_backends, parse_device, test_devices};
pub use matmul_mode::MatmulMode;
pub use precision::Precision;

/// What can stop a device from being used: a backend that does not start, or a setting (an
/// environment variable lsr reads, e.g. `LSR_MATMUL`) with a value it cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputeError {
    #[error("device `{spec}`: {message}")]
    Device { spec: String, message: String },
    #[error("{0}")]
    Setting(String),
}

pub type Result<T, E = ComputeError> = std::result::Result<T, E>;
