//! The evaluation crate's one error type.

use std::path::PathBuf;

/// Errors name the file and, for content errors, the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file that could not be read or written.
    #[error(transparent)]
    Files(#[from] lsr_files::FileError),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A file whose checksum does not match its contents: damaged since it was written.
    #[error("{path}: damaged since it was written: {found}")]
    Damaged { path: PathBuf, found: String },
    #[error(transparent)]
    Data(#[from] lsr_data::DataError),
    #[error(transparent)]
    Model(#[from] lsr_backbone::BackboneError),
    #[error(transparent)]
    Index(#[from] crate::index::IndexError),
    #[error(
        "unknown measure `{0}`; expected e.g. mrr@10, ndcg@10, recall@1000, p@10, map, or trec_eval names (recip_rank, ndcg_cut_10, recall_100, P_10)"
    )]
    UnknownMeasure(String),
    #[error("{0}")]
    Invalid(String),
    /// A stop request ended a sharded corpus pass; its complete shards are kept.
    #[error(
        "stopped on request while encoding the corpus: {complete} complete shards kept in {}; run again to resume",
        shards.display()
    )]
    Interrupted { shards: PathBuf, complete: usize },
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;

impl EvalError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        lsr_files::FileError::io(path, source).into()
    }
}
