use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: drawing failed: {message}")]
    Plot { path: PathBuf, message: String },
    #[error(transparent)]
    Train(#[from] lsr_train::TrainError),
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

impl ReportError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, message: impl ToString) -> Self {
        Self::Parse {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
