//! The matrix crate's one error type.

use std::path::PathBuf;

/// Errors of a matrix file or of running it. Cell failures are not errors of the matrix: they
/// are recorded in the cell's directory and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Spec {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// A file that could not be read or written.
    #[error(transparent)]
    Files(#[from] lsr_files::FileError),
    #[error("no cell `{0}` in the matrix; `lsr matrix list FILE` shows the ids")]
    UnknownCell(String),
    #[error(transparent)]
    Train(#[from] lsr_train::TrainError),
    #[error(transparent)]
    Data(#[from] lsr_data::DataError),
    #[error(transparent)]
    Eval(#[from] lsr_eval::EvalError),
    #[error(transparent)]
    Backbone(#[from] lsr_backbone::BackboneError),
    /// A device that does not start, or a setting it cannot use.
    #[error(transparent)]
    Compute(#[from] lsr_compute::ComputeError),
    #[error("{0}")]
    Validation(String),
}

pub type Result<T, E = MatrixError> = std::result::Result<T, E>;

impl MatrixError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        lsr_files::FileError::io(path, source).into()
    }
}
