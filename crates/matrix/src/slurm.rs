//! Scale-out on a lab cluster: an sbatch job array with one task per missing cell, each running
//! `lsr matrix run FILE --cell ID` into the same results layout, or (`--gpus-per-node N`) one
//! task per node of N GPUs, each running `lsr matrix run FILE --devices cuda:0,…` over them
//! until no cell is left (`devices.rs`), as many tasks as fill the missing cells. Ten minutes before its time
//! limit a task passes SIGUSR1 on to lsr, which checkpoints at its next step and exits with
//! code 75; the task then requeues itself and the new run resumes from that checkpoint.
//! Everything a task needs exists when the script is written: the folder of its log (Slurm
//! opens it before the task starts, and a missing one fails the task silently), and the working
//! directory the matrix's relative paths were resolved in, which the script runs in wherever
//! it is submitted from.

use std::fmt::Write;

use crate::error::{MatrixError, Result};
use crate::spec::Matrix;
use lsr_files::CellState;

/// How long before the time limit Slurm signals a task: time for a step and a checkpoint.
const SIGNAL_LEAD_SECONDS: u32 = 600;

/// The end of each task: Slurm signals only the batch shell (`B:`), which passes the signal on
/// to lsr; a wait that a trapped signal cut short is waited again for lsr's own exit code.
const FORWARD_AND_REQUEUE: &str = r#"pid=$!
trap 'interrupted=1; kill -USR1 "$pid" 2>/dev/null' USR1 TERM
while :; do
  interrupted=0
  wait "$pid"
  rc=$?
  if [ "$interrupted" = 0 ] || [ "$rc" -le 128 ]; then break; fi
done
if [ "$rc" -eq 75 ]; then
  echo "$WHAT stopped at a checkpoint; requeueing"
  scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
fi
exit "$rc"
"#;

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
    /// A task per node of this many GPUs, running the cells over all of them
    /// (`lsr matrix run --devices cuda:0,…`), instead of a task per cell; `gpus` is then this.
    pub gpus_per_node: Option<usize>,
}

/// The script, and the ids of the cells it runs (none: the matrix is complete); creates the
/// folder the tasks' logs go to.
pub fn job_array(matrix: &Matrix, options: &SlurmOptions) -> Result<(String, Vec<String>)> {
    let mut cells = Vec::new();
    for cell in &matrix.cells {
        if !matches!(cell.state()?, CellState::Done | CellState::Collapsed) {
            cells.push(cell.id.clone());
        }
    }
    let logs = &matrix.results;
    std::fs::create_dir_all(logs).map_err(|e| MatrixError::io(logs, e))?;
    let logs = std::path::absolute(logs).map_err(|e| MatrixError::io(logs, e))?;
    let workdir = std::env::current_dir().map_err(|e| MatrixError::io(".", e))?;
    let matrix_path: Vec<String> = matrix.arguments().iter().map(|a| shell_word(a)).collect();
    let matrix_path = matrix_path.join(" ");
    let (tasks, gpus) = match options.gpus_per_node {
        Some(n) => (cells.len().div_ceil(n), n),
        None => (cells.len(), options.gpus),
    };
    let mut s = header(&matrix_path, options.gpus_per_node.is_some());
    let last = tasks.saturating_sub(1);
    let limit = options
        .parallel
        .map(|n| format!("%{n}"))
        .unwrap_or_default();
    writeln!(s, "#SBATCH --job-name=lsr-{}", matrix.name).unwrap();
    writeln!(s, "#SBATCH --array=0-{last}{limit}").unwrap();
    if let Some(partition) = &options.partition {
        writeln!(s, "#SBATCH --partition={partition}").unwrap();
    }
    writeln!(s, "#SBATCH --nodes=1").unwrap();
    writeln!(s, "#SBATCH --gres=gpu:{gpus}").unwrap();
    writeln!(s, "#SBATCH --cpus-per-task={}", options.cpus).unwrap();
    writeln!(s, "#SBATCH --mem={}", options.memory).unwrap();
    writeln!(s, "#SBATCH --time={}", options.time).unwrap();
    writeln!(s, "#SBATCH --signal=B:USR1@{SIGNAL_LEAD_SECONDS}").unwrap();
    writeln!(s, "#SBATCH --requeue").unwrap();
    writeln!(s, "#SBATCH --open-mode=append").unwrap();
    writeln!(s, "#SBATCH --chdir={}", workdir.display()).unwrap();
    writeln!(s, "#SBATCH --output={}/slurm-%A_%a.out", logs.display()).unwrap();
    writeln!(s, "set -uo pipefail").unwrap();
    match options.gpus_per_node {
        Some(n) => node_task(&mut s, &options.lsr, &matrix_path, n),
        None => cell_task(&mut s, &options.lsr, &matrix_path, &cells),
    }
    s.push_str(FORWARD_AND_REQUEUE);
    Ok((s, cells))
}

/// The script's opening comment: what wrote it, what each task runs, how to submit it.
fn header(matrix_path: &str, per_node: bool) -> String {
    let each = match per_node {
        true => "one array task per node, running the cells not yet done over its GPUs",
        false => "one array task per cell not yet done",
    };
    format!(
        "#!/bin/bash\n\
         # Written by `lsr matrix slurm {matrix_path}`: {each}.\n\
         # Submit from anywhere: sbatch <this file>. It runs where it was written, where the\n\
         # matrix's relative paths were resolved. Re-running `lsr matrix slurm` after a partial\n\
         # run writes a script for what is still missing.\n"
    )
}

/// A task runs the cell its index names.
fn cell_task(s: &mut String, lsr: &str, matrix_path: &str, cells: &[String]) {
    writeln!(s, "CELLS=({})", cells.join(" ")).unwrap();
    writeln!(s, "CELL=${{CELLS[$SLURM_ARRAY_TASK_ID]}}").unwrap();
    writeln!(s, "WHAT=\"cell $CELL\"").unwrap();
    writeln!(s, "echo \"$WHAT on $(hostname)\"").unwrap();
    writeln!(s, "{lsr} matrix run {matrix_path} --cell \"$CELL\" &").unwrap();
}

/// A task runs whatever cells are left, a worker per GPU of its node: Slurm numbers a task's
/// GPUs from 0 (`CUDA_VISIBLE_DEVICES`), and the cells' locks keep two nodes off one cell.
fn node_task(s: &mut String, lsr: &str, matrix_path: &str, gpus: usize) {
    let devices: Vec<String> = (0..gpus).map(|i| format!("cuda:{i}")).collect();
    writeln!(s, "WHAT=\"the cells of task $SLURM_ARRAY_TASK_ID\"").unwrap();
    writeln!(s, "echo \"$WHAT on $(hostname), {gpus} GPUs\"").unwrap();
    let devices = devices.join(",");
    writeln!(s, "{lsr} matrix run {matrix_path} --devices {devices} &").unwrap();
}

/// `word` as one shell word: as it is when it holds nothing the shell reads, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}
