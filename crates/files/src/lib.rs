//! The files lsr's stages hand each other, and the one rule for writing them: a file or a directory
//! appears complete under its name or not at all. It owns that rule (`atomic`), a training run's
//! `status.json` (`status`), a cell's results directory with the state its files imply (`layout`),
//! the rule of one writer per output (`lock`), SHA-256 digests and a staged directory's record of
//! its files, checked before it is read again (`digest`), a backbone's choice of k before its full
//! runs (`probe`), how a path relative to the working directory is shown (`resolved`), the commit
//! lsr was built from (`provenance`), what a matrix's results hold for the report (`results`: the
//! expanded matrix, a cell's metrics, per-query measures, the training log), a run's TensorBoard
//! event files, written as it trains and read back (`tensorboard`), how a number is written as
//! text (`number`), the stop a signal requests (`stop`) and worker processes that a parent runs
//! one per device and passes stop requests on to (`workers`). It compiles no tensor code, so the report reads results without burn. For
//! tests: the rule for one that cannot set up its environment (`ci`, which the devices tests
//! compare on use too) and, with the `testing` feature, a file damaged in place (`damage`) and
//! a small tmpfs to fill (`small_disk`).

pub mod atomic;
pub mod ci;
#[cfg(feature = "testing")]
pub mod damage;
pub mod digest;
pub mod layout;
pub mod lock;
pub mod number;
pub mod probe;
pub mod provenance;
pub mod results;
#[cfg(feature = "testing")]
pub mod small_disk;
pub mod status;
pub mod stop;
pub mod tensorboard;
pub mod workers;

pub use atomic::{
    AtomicFile, write_atomically, write_bytes, write_directory, write_json, write_through_path,
};
pub use layout::{CellInfo, CellState, cell_state};
pub use lock::OutputLock;
pub use probe::{KSuggestion, Probe, ProbeRun};
pub use provenance::{BuiltFrom, built_from, set_built_from};
pub use results::{
    CellEntry, CellMetrics, DatasetSummary, MatrixSummary, PaperResult, PerQuery, Sparsity,
    TrainCsv,
};
pub use status::{CollapseRule, RunStatus, StatusFile};

use std::path::{Path, PathBuf};

/// A file that could not be written or read back, by path.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error(
        "{}: another process{} is writing this output; wait for it to end, or choose another output",
        path.display(),
        holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    Busy { path: PathBuf, holder: Option<u32> },
}

pub type Result<T, E = FileError> = std::result::Result<T, E>;

/// `path` as given, followed by the absolute path it names when it is relative: every relative
/// path lsr takes (an argument or a matrix file's) is relative to the working directory, and a
/// message about one says where that was.
pub fn resolved(path: &Path) -> String {
    match std::path::absolute(path) {
        Ok(absolute) if path.is_relative() => {
            format!("{} ({})", path.display(), absolute.display())
        }
        _ => path.display().to_string(),
    }
}

/// The JSON file at `path`, `None` if there is none; one that does not parse is an error
/// naming it.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| FileError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::io(path, e)),
    }
}

impl FileError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
