//! `lsr matrix`: list an experiment matrix's cells and their status, run them, or write a
//! Slurm job array. The matrix itself is `lsr-matrix`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use lsr_matrix::slurm::{SlurmOptions, job_array};
use lsr_matrix::{CellState, Matrix, RunOptions, run_cells};
use lsr_train::stop::{INTERRUPTED_EXIT_CODE, requested, stop_on_signals};

#[derive(Subcommand)]
pub enum MatrixCommand {
    /// The cells of a matrix: id, backbone, k, checkpoint.
    List { file: PathBuf },
    /// Each cell's state: done, running, collapsed, failed or missing.
    Status {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Train and evaluate the cells not done yet, in order; finished and collapsed cells are
    /// skipped, interrupted ones resume, failures are recorded and the next cell runs. SIGTERM
    /// or SIGUSR1 checkpoints the cell in training at its next step and exits with code 75.
    Run(RunArgs),
    /// Write an sbatch job array with one task per cell not done yet.
    Slurm(SlurmArgs),
}

#[derive(Args)]
pub struct RunArgs {
    file: PathBuf,
    /// Only this cell (e.g. `modernbert-k16`).
    #[arg(long)]
    cell: Option<String>,
    /// Delete and rerun cells that are done or collapsed.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
pub struct SlurmArgs {
    file: PathBuf,
    /// Where to write the script (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    partition: Option<String>,
    #[arg(long, default_value_t = 1)]
    gpus: usize,
    #[arg(long, default_value_t = 8)]
    cpus: usize,
    #[arg(long, default_value = "64G")]
    mem: String,
    #[arg(long, default_value = "48:00:00")]
    time: String,
    /// The `lsr` binary as the cluster nodes see it.
    #[arg(long, default_value = "target/release/lsr")]
    lsr: String,
    /// At most this many cells at once.
    #[arg(long)]
    parallel: Option<usize>,
}

/// Runs the subcommand; the exit code is 75 when a stop request ended `run` early.
pub fn run(command: MatrixCommand) -> Result<ExitCode> {
    match command {
        MatrixCommand::List { file } => {
            let matrix = Matrix::load(&file)?;
            for cell in &matrix.cells {
                println!(
                    "{}\t{}\t{}\t{}",
                    cell.id, cell.backbone, cell.k, cell.config.model.checkpoint
                );
            }
        }
        MatrixCommand::Status { file, json } => {
            let matrix = Matrix::load(&file)?;
            let mut states = Vec::new();
            for cell in &matrix.cells {
                states.push((cell.id.clone(), cell.state()?));
            }
            if json {
                let map: serde_json::Map<String, serde_json::Value> = states
                    .iter()
                    .map(|(id, state)| {
                        (
                            id.clone(),
                            serde_json::to_value(state).expect("a state serialises"),
                        )
                    })
                    .collect();
                println!("{}", serde_json::Value::Object(map));
            } else {
                for (id, state) in &states {
                    println!("{id}\t{state}");
                }
                let done = states.iter().filter(|(_, s)| *s == CellState::Done).count();
                println!("{done}/{} done", states.len());
            }
        }
        MatrixCommand::Run(args) => {
            let matrix = Matrix::load(&args.file)?;
            let options = RunOptions {
                cell: args.cell,
                force: args.force,
            };
            stop_on_signals()?;
            let states = run_cells(&matrix, &options)?;
            if requested() {
                eprintln!("stopped on request; run again to continue");
                return Ok(ExitCode::from(INTERRUPTED_EXIT_CODE));
            }
            let failed: Vec<&str> = states
                .iter()
                .filter(|(_, s)| *s == CellState::Failed)
                .map(|(id, _)| id.as_str())
                .collect();
            if !failed.is_empty() {
                bail!(
                    "{} cell(s) failed: {} (see failure.json in their results directories)",
                    failed.len(),
                    failed.join(", ")
                );
            }
        }
        MatrixCommand::Slurm(args) => {
            let matrix = Matrix::load(&args.file)?;
            let options = SlurmOptions {
                partition: args.partition,
                gpus: args.gpus,
                cpus: args.cpus,
                memory: args.mem,
                time: args.time,
                lsr: args.lsr,
                parallel: args.parallel,
            };
            let (script, cells) = job_array(&matrix, &options)?;
            if cells.is_empty() {
                eprintln!("every cell is done or collapsed: nothing to submit");
                return Ok(ExitCode::SUCCESS);
            }
            match args.out {
                Some(path) => {
                    std::fs::write(&path, script)?;
                    eprintln!(
                        "{} cells → {} (submit with: sbatch {})",
                        cells.len(),
                        path.display(),
                        path.display()
                    );
                }
                None => print!("{script}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
