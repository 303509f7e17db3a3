//! Reporting: everything here reads the results directory of an experiment matrix and nothing
//! else. Through the results layout (`lsr-files`: which files make a cell done, collapsed,
//! failed) it turns the cells' metrics and training logs into the paper's Table 1 (Markdown, CSV, LaTeX, with the
//! paper's numbers beside ours, the best k per backbone in bold and the cells that differ
//! significantly from their backbone's k = 1 marked), a per-dataset table, loss
//! curves per backbone and the nDCG-vs-FLOPs trade-off (PNG and SVG, text drawn with a bundled
//! font so no system fonts are needed); over one run or several (seeds), how well the head-norm
//! rule and the probe chose k against the full grid; and the paired significance tests between
//! two systems' per-query values (`significance`) that `lsr compare` runs on TREC runs.

pub mod compare;
pub mod error;
pub mod kchoice;
mod marks;
pub mod plots;
pub mod results;
pub mod significance;
pub mod table;

pub use error::{ReportError, Result};
pub use results::MatrixResults;

use std::path::{Path, PathBuf};

/// What `write_report` produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Table,
    Losses,
    Tradeoff,
    /// The rule and the probe against the full grid (needs `lsr matrix probe`'s results).
    KChoice,
}

/// Writes the asked parts of the report of `results` into `out`; returns the files written.
pub fn write_report(results: &Path, out: &Path, parts: &[Part]) -> Result<Vec<PathBuf>> {
    let matrix = MatrixResults::read(results)?;
    std::fs::create_dir_all(out).map_err(|e| ReportError::io(out, e))?;
    let mut written = Vec::new();
    for part in parts {
        match part {
            Part::Table => written.extend(table::write_tables(&matrix, out)?),
            Part::Losses => {
                written.extend(plots::loss_curves(&matrix, out)?);
                written.extend(plots::validation_curves(&matrix, out)?);
            }
            Part::Tradeoff => written.extend(plots::tradeoff(&matrix, out)?),
            Part::KChoice => written.extend(k_choice_files(std::slice::from_ref(&matrix), out)?),
        }
    }
    Ok(written)
}

/// The runs in `results` side by side, the `noise` run (the first again under another
/// data-order seed) last where there is one ([`compare::compare`]).
pub fn comparison(results: &[PathBuf], noise: Option<&Path>) -> Result<compare::Comparison> {
    let runs: Vec<MatrixResults> = (results.iter().map(PathBuf::as_path).chain(noise))
        .map(MatrixResults::read)
        .collect::<Result<_>>()?;
    compare::compare(&runs, noise.is_some())
}

/// Writes `k-choice.md`, `k-choice.csv` and the figure of the runs in `results` (one matrix
/// under several seeds), each read once; refuses (`ReportError::Nothing`) when no backbone of
/// any run has a row.
pub fn write_k_choice(results: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>> {
    let runs: Vec<MatrixResults> = results
        .iter()
        .map(|dir| MatrixResults::read(dir))
        .collect::<Result<_>>()?;
    k_choice_files(&runs, out)
}

/// The choice of k over `runs`: its tables, then its figure from the same rows.
fn k_choice_files(runs: &[MatrixResults], out: &Path) -> Result<Vec<PathBuf>> {
    let choice = kchoice::choose(runs)?;
    let mut written = kchoice::write_tables(&choice, out)?;
    written.extend(plots::k_choice(&choice.rows, out)?);
    Ok(written)
}
