//! One cell of the matrix; the files of its results directory are described in
//! `lsr_files::layout`.

use std::path::{Path, PathBuf};

use lsr_files::{CellState, cell_state};
use lsr_train::TrainConfig;

use crate::error::Result;

#[derive(Clone, Debug)]
pub struct Cell {
    /// `<backbone>-k<k>`, stable across runs: the name of its directories.
    pub id: String,
    pub backbone: String,
    pub config: TrainConfig,
}

impl Cell {
    /// The rescaling constant, held once: in the cell's training config.
    pub fn k(&self) -> f64 {
        self.config.model.k.get()
    }

    pub fn dir(&self) -> &Path {
        &self.config.output
    }

    pub fn checkpoint_dir(&self) -> PathBuf {
        self.config.checkpoint_dir()
    }

    pub fn state(&self) -> Result<CellState> {
        Ok(cell_state(self.dir())?)
    }
}
