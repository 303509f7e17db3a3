//! The backbone crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong between a checkpoint on disk and a usable model. Every variant
/// names the file it concerns, and the tensor or field where there is one.
#[derive(Debug, thiserror::Error)]
pub enum BackboneError {
    /// A file that could not be read or written.
    #[error(transparent)]
    Files(#[from] lsr_files::FileError),
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("{path}: unsupported model_type `{model_type}`; supported: {supported}")]
    UnknownModelType {
        path: PathBuf,
        model_type: String,
        supported: String,
    },
    #[error("{path}: tensor `{name}` is missing")]
    MissingTensor { path: PathBuf, name: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, expected {expected:?}")]
    Shape {
        path: PathBuf,
        name: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("{path}: tensor `{name}` has dtype {found}, expected F32, F16, BF16 or F64")]
    Dtype {
        path: PathBuf,
        name: String,
        found: String,
    },
    #[error("{path}: not a readable checkpoint file: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error(
        "{path}: no masked-LM head (tensor `{name}` is absent); SPLADE needs a *ForMaskedLM \
         checkpoint, not a bare encoder such as a sentence-transformers model"
    )]
    NoMlmHead { path: PathBuf, name: String },
    #[error("{path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("k must be finite and > 0, got {0}")]
    InvalidScale(f64),
    #[error(
        "{}: this checkpoint's MLM head is already divided by k = {recorded} (by lsr, recorded \
         in lsr-rescale.json), and k = {asked} would divide it a second time; use it with k = 1",
        path.display()
    )]
    AlreadyRescaled {
        path: PathBuf,
        recorded: f64,
        asked: f64,
    },
    #[error("{0}")]
    Checkpoint(String),
    /// A device that does not start, or a setting (e.g. `LSR_MATMUL`) it cannot use.
    #[error(transparent)]
    Compute(#[from] lsr_compute::ComputeError),
}

pub type Result<T, E = BackboneError> = std::result::Result<T, E>;

impl BackboneError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        lsr_files::FileError::io(path, source).into()
    }

    pub(crate) fn config(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Config {
            path: path.into(),
            message: message.into(),
        }
    }
}
