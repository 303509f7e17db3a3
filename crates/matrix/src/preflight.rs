//! What a matrix names on disk, checked before any cell starts, by `lsr matrix status`, `run`,
//! `probe` and `slurm` alike ([`Matrix::open`]): each evaluated data set's files under the data
//! root, the validation set's, the training files, every backbone's checkpoint, and that the
//! matrix it is to be compared with (`compare_with`) trains the same checkpoints. The names
//! themselves (data sets, measures, the trade-off set, `[[paper]]`) are checked when the file
//! is read ([`Matrix::load`]). Every problem is reported at once: one round trip, not one per
//! mistake, before days of GPU time.

use std::path::Path;

use lsr_backbone::Checkpoint;
use lsr_data::Dataset;
use lsr_files::resolved;

use crate::error::{MatrixError, Result};
use crate::spec::Matrix;
use crate::validation::validation_set;
use crate::variant::Variant;

impl Matrix {
    /// Reads and validates `path` as `variant` changes it ([`Matrix::load_variant`]) and checks what it names on disk
    /// ([`Matrix::check_inputs`]).
    pub fn open(path: &Path, variant: &Variant) -> Result<Self> {
        let matrix = Self::load_variant(path, variant)?;
        matrix.check_inputs()?;
        Ok(matrix)
    }

    /// Every file the cells will read is there, every checkpoint loadable (a hub id: cached,
    /// or downloadable when not offline); nothing is loaded or downloaded.
    pub fn check_inputs(&self) -> Result<()> {
        let mut problems = Vec::new();
        let root = &self.eval.data_root;
        for name in &self.eval.datasets {
            if let Err(e) = Dataset::resolve(name, root) {
                problems.push(format!(
                    "eval.datasets `{name}` under eval.data_root {}: {e}",
                    resolved(root)
                ));
            }
        }
        // Data and validation are the matrix's, the same in every cell.
        let config = &self.cells[0].config;
        if let Some(spec) = &config.validation
            && let Err(e) = validation_set(spec)
        {
            problems.push(format!(
                "validation.dataset under validation.data_root {}: {e}",
                resolved(&spec.data_root)
            ));
        }
        for file in config.data.files() {
            if !file.is_file() {
                problems.push(format!("[data]: no such file: {}", resolved(file)));
            }
        }
        let mut checked: Vec<&str> = Vec::new();
        for cell in &self.cells {
            let checkpoint = cell.config.model.checkpoint.as_str();
            if !checked.contains(&checkpoint) {
                checked.push(checkpoint);
                if let Err(e) = Checkpoint::check(checkpoint) {
                    problems.push(format!("backbone `{}`: {e}", cell.backbone));
                }
            }
        }
        problems.extend(self.comparable());
        if problems.is_empty() {
            return Ok(());
        }
        let cwd = std::env::current_dir().map_or_else(|_| "?".into(), |d| d.display().to_string());
        Err(MatrixError::Spec {
            path: self.path.clone(),
            line: None,
            message: format!(
                "no cell started; what the matrix names is not all there:\n  - {}\n(relative \
                 paths in a matrix are relative to the working directory, here {cwd})",
                problems.join("\n  - ")
            ),
        })
    }

    /// The problems of reading this matrix beside its `compare_with`: each backbone it trains
    /// differently, or why that file cannot be read.
    fn comparable(&self) -> Vec<String> {
        let Some(path) = &self.compare_with else {
            return Vec::new();
        };
        let problem = |d: String| format!("compare_with {}: {d}", resolved(path));
        match Matrix::load(path) {
            Ok(other) => (self.backbone_differences(&other).into_iter())
                .map(problem)
                .collect(),
            Err(e) => vec![problem(e.to_string())],
        }
    }
}
