//! Scale-out on a lab cluster: an sbatch job array with one task per missing cell, each running
//! `lsr matrix run FILE --cell ID` into the same results layout.

use std::fmt::Write;

use crate::error::Result;
use crate::spec::Matrix;
use lsr_files::CellState;

/// What the array tasks request.
#[derive(Clone, Debug)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    /// `--gres=gpu:<gpus>`.
    pub gpus: usize,
    pub cpus: usize,
    pub memory: String,
    pub time: String,
    /// Path of the `lsr` binary on the cluster.
    pub lsr: String,
    /// At most this many tasks at once (`%N` of `--array`).
    pub parallel: Option<usize>,
}

/// The script, and the ids of the cells it runs (none: the matrix is complete).
pub fn job_array(matrix: &Matrix, options: &SlurmOptions) -> Result<(String, Vec<String>)> {
    let mut cells = Vec::new();
    for cell in &matrix.cells {
        if !matches!(cell.state()?, CellState::Done | CellState::Collapsed) {
            cells.push(cell.id.clone());
        }
    }
    let mut s = String::new();
    let last = cells.len().saturating_sub(1);
    let limit = options
        .parallel
        .map(|n| format!("%{n}"))
        .unwrap_or_default();
    let matrix_path = matrix.path.display();
    writeln!(s, "#!/bin/bash").unwrap();
    writeln!(
        s,
        "# Written by `lsr matrix slurm {matrix_path}`: one array task per cell not yet done."
    )
    .unwrap();
    writeln!(
        s,
        "# Submit from the repository root: sbatch <this file>. Re-running `lsr matrix slurm`"
    )
    .unwrap();
    writeln!(
        s,
        "# after a partial run writes a script for what is still missing."
    )
    .unwrap();
    writeln!(s, "#SBATCH --job-name=lsr-{}", matrix.name).unwrap();
    writeln!(s, "#SBATCH --array=0-{last}{limit}").unwrap();
    if let Some(partition) = &options.partition {
        writeln!(s, "#SBATCH --partition={partition}").unwrap();
    }
    writeln!(s, "#SBATCH --gres=gpu:{}", options.gpus).unwrap();
    writeln!(s, "#SBATCH --cpus-per-task={}", options.cpus).unwrap();
    writeln!(s, "#SBATCH --mem={}", options.memory).unwrap();
    writeln!(s, "#SBATCH --time={}", options.time).unwrap();
    writeln!(
        s,
        "#SBATCH --output={}/slurm-%A_%a.out",
        matrix.results.display()
    )
    .unwrap();
    writeln!(s, "set -euo pipefail").unwrap();
    writeln!(s, "CELLS=({})", cells.join(" ")).unwrap();
    writeln!(s, "CELL=${{CELLS[$SLURM_ARRAY_TASK_ID]}}").unwrap();
    writeln!(s, "echo \"cell $CELL on $(hostname)\"").unwrap();
    writeln!(
        s,
        "{} matrix run {matrix_path} --cell \"$CELL\"",
        options.lsr
    )
    .unwrap();
    Ok((s, cells))
}
