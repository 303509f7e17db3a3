//! The report crate's one error type.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file that could not be read or written.
    #[error(transparent)]
    Files(#[from] lsr_files::FileError),
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// `how`: the command that produces them (`results::how_to_run`).
    #[error("{dir}: no results yet (no matrix.json); {how}")]
    NoResults { dir: PathBuf, how: String },
    #[error("{path}: drawing failed: {message}")]
    Plot { path: PathBuf, message: String },
    /// A significance test that cannot be run on what it was given (`comparison` names it).
    #[error("{comparison}: {message}")]
    Test { comparison: String, message: String },
    /// A part of the report with no row to show: refused rather than written empty.
    #[error("{part}: nothing to report: {why}")]
    Nothing { part: &'static str, why: String },
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

impl ReportError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        lsr_files::FileError::io(path, source).into()
    }

    pub(crate) fn test(comparison: &str, message: String) -> Self {
        Self::Test {
            comparison: comparison.to_string(),
            message,
        }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, message: impl ToString) -> Self {
        Self::Parse {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
