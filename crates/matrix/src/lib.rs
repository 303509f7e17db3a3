//! The experiment matrix: a TOML file naming backbones, a k grid, one recipe with per-backbone
//! overrides, the training data and the evaluation sets. It is validated as a whole (errors
//! name the line), expanded into cells `(backbone, k)` with stable ids (`modernbert-k16`), and
//! run cell by cell — train, then evaluate the trained model — into `results/<matrix>/<cell>/`,
//! skipping finished cells, resuming interrupted ones, recording collapsed and failed ones and
//! going on; a cell's `[validation]` set is scored during training through this crate's
//! validator. It also runs a matrix over several devices, a worker process per device
//! (`devices`), writes a Slurm job array that runs the missing cells in parallel, and
//! probes each backbone's grid with the beginnings of its cells to choose one k before the
//! full runs. Before any of that starts, everything a matrix names is checked (`preflight`).
//! A variant (`variant`: `--set`, `--results`) is the file changed for one invocation, and
//! `verify` checks that results are what killed and restarted runs must leave; `pins` says
//! which backbones and data sets the file pins.
//! What it writes is all the report needs: it never reads this crate.

pub mod cell;
pub mod devices;
pub mod error;
pub mod pins;
pub mod preflight;
pub mod probe;
pub mod runner;
pub mod slurm;
pub mod spec;
pub mod validation;
pub mod variant;
pub mod verify;

pub use cell::Cell;
pub use error::{MatrixError, Result};
pub use lsr_files::CellState;
pub use runner::{RunOptions, run_cells};
pub use spec::Matrix;
pub use variant::Variant;
