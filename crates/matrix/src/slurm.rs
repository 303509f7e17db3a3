//! Scale-out on a lab cluster: an sbatch job array with one task per missing cell, each running
//! `lsr matrix run FILE --cell ID` into the same results layout. Ten minutes before its time
//! limit a task passes SIGUSR1 on to lsr, which checkpoints at its next step and exits with
//! code 75; the task then requeues itself and the new run resumes from that checkpoint.

use std::fmt::Write;

use crate::error::Result;
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
  echo "cell $CELL stopped at a checkpoint; requeueing"
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
    writeln!(s, "#SBATCH --signal=B:USR1@{SIGNAL_LEAD_SECONDS}").unwrap();
    writeln!(s, "#SBATCH --requeue").unwrap();
    writeln!(s, "#SBATCH --open-mode=append").unwrap();
    writeln!(
        s,
        "#SBATCH --output={}/slurm-%A_%a.out",
        matrix.results.display()
    )
    .unwrap();
    writeln!(s, "set -uo pipefail").unwrap();
    writeln!(s, "CELLS=({})", cells.join(" ")).unwrap();
    writeln!(s, "CELL=${{CELLS[$SLURM_ARRAY_TASK_ID]}}").unwrap();
    writeln!(s, "echo \"cell $CELL on $(hostname)\"").unwrap();
    writeln!(
        s,
        "{} matrix run {matrix_path} --cell \"$CELL\" &",
        options.lsr
    )
    .unwrap();
    s.push_str(FORWARD_AND_REQUEUE);
    Ok((s, cells))
}
