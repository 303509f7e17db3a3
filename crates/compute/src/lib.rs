//! How lsr computes on a device, below every model: the choice of burn device (`device.rs`),
//! the erf GELU with its exact gradient on every backend (`activation.rs`), flex's element-wise
//! and row operations split over its threads (`cpu.rs`), AdamW's update as one operation
//! (`adamw.rs`), blocks of a matrix whose gradient is placed in one pass (`block.rs`),
//! the one entry point of every product and how it is computed (`matmul/`: `LSR_MATMUL`, burn's
//! matmul, cuBLASLt on CUDA or a CPU BLAS on flex), attention and its fused kernels (`attention/`: `LSR_ATTENTION`),
//! dropout and the seeding of its masks (`dropout.rs`), the arithmetic a model runs in
//! (`precision.rs`: f32, bf16-mixed or bf16, and the linear map and residual add in it), LayerNorm
//! and the bias add as operations with their own backward (`norm/`), what a pass launches and
//! keeps on a GPU (`launches.rs`), where the GPU backends keep their tuning and compiled kernels
//! between processes (`kernel_cache.rs`), and the environment settings (`setting.rs`). It knows
//! no architecture: it has the operations layers are made of (a linear map, a norm, attention),
//! and the backbones assemble them.

pub mod activation;
pub mod adamw;
pub mod attention;
pub mod block;
pub mod cpu;
pub mod device;
pub mod dropout;
mod erf;
pub mod kernel_cache;
pub mod launches;
pub mod matmul;
pub mod norm;
pub mod precision;
pub mod setting;

pub use device::{compiled_backends, parse_device, test_devices};
pub use matmul::MatmulMode;
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
