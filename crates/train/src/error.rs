//! The training crate's one error type.

use std::path::PathBuf;

use lsr_backbone::BackboneError;

/// What can stop training before it starts or while it runs. Every variant names the file (and
/// line, or config field) it concerns. A collapse is not an error: it is an [`crate::Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("{source_name}: {}{message}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Config {
        /// The config file, or `--set` for a command-line override.
        source_name: String,
        /// The field at fault (`recipe.lr`, `model.k`), when one is.
        field: Option<String>,
        message: String,
    },
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Data {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// A file that could not be read or written.
    #[error(transparent)]
    Files(#[from] lsr_files::FileError),
    #[error("{path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
    #[error(transparent)]
    Backbone(#[from] BackboneError),
    /// A device that does not start, or a setting it cannot use.
    #[error(transparent)]
    Compute(#[from] lsr_compute::ComputeError),
    /// A data file read through `lsr-data` (qrels, a teacher's scores).
    #[error(transparent)]
    DataSet(#[from] lsr_data::DataError),
    #[error("validation on {dataset} at step {step}: {message}")]
    Validation {
        dataset: String,
        step: usize,
        message: String,
    },
}

pub type Result<T, E = TrainError> = std::result::Result<T, E>;

impl TrainError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        lsr_files::FileError::io(path, source).into()
    }

    pub(crate) fn data(
        path: impl Into<PathBuf>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self::Data {
            path: path.into(),
            line,
            message: message.into(),
        }
    }

    /// A config error about the whole file, or about no one field.
    pub(crate) fn config(source_name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            source_name: source_name.into(),
            field: None,
            message: message.into(),
        }
    }

    pub(crate) fn checkpoint(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Checkpoint {
            path: path.into(),
            message: message.into(),
        }
    }
}
