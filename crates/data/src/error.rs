//! The data crate's one error type.

use std::path::PathBuf;

/// Errors name the file and, for content errors, the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file that could not be read or written.
    #[error(transparent)]
    Files(#[from] lsr_files::FileError),
    #[error("{path}:{line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = DataError> = std::result::Result<T, E>;

impl DataError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        lsr_files::FileError::io(path, source).into()
    }

    pub(crate) fn line(path: &std::path::Path, line: usize, message: impl Into<String>) -> Self {
        Self::Line {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}
