//! `lsr matrix`: list an experiment matrix's cells and their status, probe each backbone's k,
//! run the cells, or write a Slurm job array. The matrix itself is `lsr-matrix`; every
//! subcommand but `list` first checks all the matrix names (`Matrix::open`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use lsr_files::resolved;
use lsr_matrix::probe::{ProbeState, finished, run_probes};
use lsr_matrix::slurm::{SlurmOptions, job_array};
use lsr_matrix::{CellState, Matrix, RunOptions, run_cells};
use lsr_train::stop::{INTERRUPTED_EXIT_CODE, requested, stop_on_signals};

#[derive(Subcommand)]
pub enum MatrixCommand {
    /// The cells of a matrix: id, backbone, k, checkpoint.
    List { file: PathBuf },
    /// Each cell's state (done, running, interrupted, collapsed, failed or missing) and each
    /// finished probe's k.
    Status {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Train and evaluate the cells not done yet, in order; finished and collapsed cells are
    /// skipped, interrupted ones resume, failures are recorded and the next cell runs. SIGTERM
    /// or SIGUSR1 checkpoints the cell in training at its next step and exits with code 75.
    Run(RunArgs),
    /// The beginning of every cell of each backbone's grid, stopped after `[probe] fraction`
    /// of its steps (default 0.05) with a checkpoint, scored on the `[validation]` set there:
    /// the k of the best nDCG@10 (ties to the smaller k) goes to
    /// `<results>/probe/<backbone>/probe.json`, beside the head-norm rule's. Stops like `run`.
    Probe {
        file: PathBuf,
        /// Only this backbone.
        #[arg(long)]
        backbone: Option<String>,
    },
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
    /// `probe`: only each backbone's k chosen by `lsr matrix probe`, continued from where the
    /// probe stopped it.
    #[arg(long, value_parser = ["probe"])]
    k_from: Option<String>,
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
    #[arg(long, default_value_t = 8, value_parser = crate::values::at_least_one)]
    cpus: usize,
    #[arg(long, default_value = "64G")]
    mem: String,
    #[arg(long, default_value = "48:00:00")]
    time: String,
    /// The `lsr` binary as the cluster nodes see it.
    #[arg(long, default_value = "target/release/lsr")]
    lsr: String,
    /// At most this many cells at once.
    #[arg(long, value_parser = crate::values::at_least_one)]
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
        MatrixCommand::Status { file, json } => status(&file, json)?,
        MatrixCommand::Probe { file, backbone } => {
            let matrix = Matrix::open(&file)?;
            stop_on_signals()?;
            for (name, state) in run_probes(&matrix, backbone.as_deref())? {
                match state {
                    ProbeState::Done(p) => eprintln!(
                        "== probe {name}: k = {} (head-norm rule: k = {})",
                        p.chosen_k, p.norm_rule.k
                    ),
                    ProbeState::Busy => eprintln!("== probe {name}: another process has it"),
                    ProbeState::Interrupted => eprintln!("== probe {name}: interrupted"),
                }
            }
            if requested() {
                eprintln!("stopped on request; run again to continue");
                return Ok(ExitCode::from(INTERRUPTED_EXIT_CODE));
            }
        }
        MatrixCommand::Run(args) => {
            let matrix = Matrix::open(&args.file)?;
            eprintln!("results: {}", resolved(&matrix.results));
            let options = RunOptions {
                cell: args.cell,
                force: args.force,
                k_from_probe: args.k_from.is_some(),
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
            let matrix = Matrix::open(&args.file)?;
            if !Path::new(&args.lsr).is_file() {
                eprintln!(
                    "warning: no lsr binary at {}; the tasks run `--lsr` as the nodes see it",
                    resolved(Path::new(&args.lsr))
                );
            }
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
                    lsr_files::write_bytes(&path, script.as_bytes())?;
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

/// `lsr matrix status`: a line per cell, the count done in the results folder it looked in, a
/// line per finished probe; or one JSON object
/// `{"cells": {id: state}, "probes": {backbone: k}, "results": "<absolute folder>"}`.
fn status(file: &Path, json: bool) -> Result<()> {
    let matrix = Matrix::open(file)?;
    let mut states = Vec::new();
    for cell in &matrix.cells {
        states.push((cell.id.clone(), cell.state()?));
    }
    let probes = finished(&matrix)?;
    if json {
        let cells: serde_json::Map<String, serde_json::Value> = states
            .iter()
            .map(|(id, state)| (id.clone(), serde_json::to_value(state).expect("a state")))
            .collect();
        let chosen: serde_json::Map<String, serde_json::Value> = probes
            .iter()
            .map(|p| (p.backbone.clone(), p.chosen_k.into()))
            .collect();
        let results = std::path::absolute(&matrix.results)?;
        println!(
            "{}",
            serde_json::json!({ "cells": cells, "probes": chosen, "results": results })
        );
        return Ok(());
    }
    for (id, state) in &states {
        println!("{id}\t{state}");
    }
    let done = states.iter().filter(|(_, s)| *s == CellState::Done).count();
    println!(
        "{done}/{} done in {}",
        states.len(),
        resolved(&matrix.results)
    );
    for p in &probes {
        let scores: Vec<String> = p
            .runs
            .iter()
            .map(|r| match r.ndcg_at_10 {
                Some(score) => format!("k{} {score:.3}", r.k),
                None => format!("k{} -", r.k),
            })
            .collect();
        println!(
            "probe {}\tk = {}\t(head-norm rule k = {}; {} nDCG@10 after {} steps: {})",
            p.backbone,
            p.chosen_k,
            p.norm_rule.k,
            p.dataset,
            p.runs.first().map_or(0, |r| r.steps),
            scores.join(", ")
        );
    }
    Ok(())
}
