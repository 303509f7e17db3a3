//! `lsr matrix`: list an experiment matrix's cells and their status, probe each backbone's k,
//! run the cells, write a Slurm job array, or verify the results. Each takes the matrix file
//! as a variant may change it (`--set`, `--results`). The matrix itself is `lsr-matrix`; every
//! subcommand but `list` and `verify` first checks all the matrix names (`Matrix::open`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use lsr_backbone::Pinning;
use lsr_files::Probe;
use lsr_files::lock::Holder;
use lsr_files::resolved;
use lsr_files::stop::{INTERRUPTED_EXIT_CODE, Workers, forward_stops, requested, stop_on_signals};
use lsr_matrix::devices::{self, DeviceRun};
use lsr_matrix::pins::{BackbonePin, DataPin};
use lsr_matrix::probe::{ProbeState, finished, run_probes};
use lsr_matrix::slurm::{SlurmOptions, job_array};
use lsr_matrix::{CellState, Matrix, RunOptions, Variant, run_cells};

#[derive(Subcommand)]
pub enum MatrixCommand {
    /// The cells of a matrix: id, backbone, k, checkpoint.
    List(SpecArgs),
    /// Each cell's state (done, running, interrupted, collapsed, failed or missing) and each
    /// finished probe's k.
    Status {
        #[command(flatten)]
        spec: SpecArgs,
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
        #[command(flatten)]
        spec: SpecArgs,
        /// Only this backbone.
        #[arg(long)]
        backbone: Option<String>,
    },
    /// Write an sbatch job array with one task per cell not done yet, or one per node of
    /// `--gpus-per-node` GPUs running the cells over them.
    Slurm(SlurmArgs),
    /// Check the results as runs killed and restarted any number of times must leave them:
    /// each cell's train.csv logs its steps once each and in order; a cell still in training
    /// has logged at most `checkpoint_every` steps past its last checkpoint; with --against,
    /// every cell finished there logged the same steps here, to byte-identical weights and
    /// runs and equal measures. Exits 1, listing every problem, if one is found.
    Verify {
        #[command(flatten)]
        spec: SpecArgs,
        /// The results of the same matrix run undisturbed (e.g. with `--results`).
        #[arg(long, value_name = "RESULTS")]
        against: Option<PathBuf>,
    },
}

/// A matrix file, and what this invocation changes in it: a variant without a copy of the file.
#[derive(Args)]
pub struct SpecArgs {
    file: PathBuf,
    /// Change one setting of the file, as TOML: `recipe.lr=2e-3`, `eval.precision=bf16-mixed`,
    /// `k=[1, 2, 4]`, `backbone.bert.checkpoint=DIR` (a `[[backbone]]` by its name). A value
    /// that is not TOML is a string. Repeatable; matrix.json records them.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Results in this folder instead of the file's (checkpoints under the file's results move
    /// with them), the matrix named after it: a variant never touches the original's cells.
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,
}

impl SpecArgs {
    fn variant(&self) -> Variant {
        Variant {
            set: self.set.clone(),
            results: self.results.clone(),
        }
    }

    /// The matrix, validated, without looking at what it names on disk.
    fn load(&self) -> Result<Matrix> {
        Ok(Matrix::load_variant(&self.file, &self.variant())?)
    }

    /// The matrix, validated, with everything it names on disk checked.
    fn open(&self) -> Result<Matrix> {
        Ok(Matrix::open(&self.file, &self.variant())?)
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    spec: SpecArgs,
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
    /// Run on this device instead of the file's `device` (`cuda:1`, `flex`).
    #[arg(long, conflicts_with = "devices")]
    device: Option<String>,
    /// A worker process per device (`cuda:0,cuda:1,cuda:2`; `flex,flex` too), each taking the
    /// next cell not done and not held, its output in `<results>/<cell>.log`. SIGTERM, SIGUSR1
    /// and SIGINT reach every worker (SIGINT as SIGTERM); exit code 75 if a cell stopped.
    #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with = "cell")]
    devices: Vec<String>,
}

#[derive(Args)]
pub struct SlurmArgs {
    #[command(flatten)]
    spec: SpecArgs,
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
    /// At most this many tasks at once.
    #[arg(long, value_parser = crate::values::at_least_one)]
    parallel: Option<usize>,
    /// One task per node of this many GPUs, running the cells over all of them (`lsr matrix
    /// run --devices cuda:0,…`), instead of one task per cell.
    #[arg(long, value_parser = crate::values::at_least_one, conflicts_with = "gpus")]
    gpus_per_node: Option<usize>,
}

/// Runs the subcommand; the exit code is 75 when a stop request ended `run` or `probe` early.
pub fn run(command: MatrixCommand) -> Result<ExitCode> {
    match command {
        MatrixCommand::List(spec) => list(&spec.load()?),
        MatrixCommand::Status { spec, json } => status(&spec, json)?,
        MatrixCommand::Probe { spec, backbone } => {
            return probe(&spec.open()?, backbone.as_deref());
        }
        MatrixCommand::Run(args) => return run_matrix(args),
        MatrixCommand::Verify { spec, against } => verify(&spec.load()?, against.as_deref())?,
        MatrixCommand::Slurm(args) => slurm(args)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn list(matrix: &Matrix) {
    for cell in &matrix.cells {
        let checkpoint = &cell.config.model.checkpoint;
        println!("{}\t{}\t{}\t{checkpoint}", cell.id, cell.backbone, cell.k());
    }
}

/// Code 75 where a stop request ended the work early, else success.
fn stopped_or_done() -> ExitCode {
    if requested() {
        eprintln!("stopped on request; run again to continue");
        return ExitCode::from(INTERRUPTED_EXIT_CODE);
    }
    ExitCode::SUCCESS
}

fn probe(matrix: &Matrix, backbone: Option<&str>) -> Result<ExitCode> {
    stop_on_signals()?;
    for (name, state) in run_probes(matrix, backbone)? {
        match state {
            ProbeState::Done(p) => eprintln!(
                "== probe {name}: k = {} (head-norm rule: k = {})",
                p.chosen_k, p.norm_rule.k
            ),
            ProbeState::Busy => eprintln!("== probe {name}: another process has it"),
            ProbeState::Interrupted => eprintln!("== probe {name}: interrupted"),
        }
    }
    Ok(stopped_or_done())
}

fn run_matrix(args: RunArgs) -> Result<ExitCode> {
    let mut matrix = args.spec.open()?;
    eprintln!("results: {}", resolved(&matrix.results));
    if !args.devices.is_empty() {
        return run_on_devices(&matrix, args);
    }
    if let Some(device) = &args.device {
        // Before any cell: a device that cannot start fails no cell (exit code 76).
        lsr_compute::parse_device(Some(device))?;
        matrix.on_device(device);
    }
    let options = RunOptions {
        cell: args.cell,
        force: args.force,
        k_from_probe: args.k_from.is_some(),
    };
    stop_on_signals()?;
    let states = run_cells(&matrix, &options)?;
    ended(states.iter().map(|(id, state)| (id.as_str(), *state)), "")
}

/// A worker per device: the cells as each ended, with the device and log of each.
fn run_on_devices(matrix: &Matrix, args: RunArgs) -> Result<ExitCode> {
    let run = DeviceRun {
        lsr: std::env::current_exe()?,
        devices: args.devices,
        force: args.force,
        k_from_probe: args.k_from.is_some(),
    };
    let workers = Workers::default();
    forward_stops(&workers)?;
    let run = devices::run_on_devices(matrix, &run, &workers)?;
    for cell in &run.worked {
        let log = resolved(&cell.log);
        eprintln!("{}\t{}\t{}\t{log}", cell.cell, cell.device, cell.state);
    }
    for device in &run.retired {
        eprintln!("retired\t{}\t{}", device.slot, device.reason);
    }
    if !run.left.is_empty() && !requested() {
        bail!(
            "no device was left for {} cell(s): {} (every device retired: see above)",
            run.left.len(),
            run.left.join(", ")
        );
    }
    let states = run
        .worked
        .iter()
        .map(|cell| (cell.cell.as_str(), cell.state));
    ended(states, "; each cell's output is <results>/<cell>.log")
}

/// Code 75 where a stop request ended the run early (or stopped a cell), an error naming the
/// failed cells, else success.
fn ended<'a>(
    states: impl Iterator<Item = (&'a str, CellState)> + Clone,
    logs: &str,
) -> Result<ExitCode> {
    if requested() || states.clone().any(|(_, s)| s == CellState::Interrupted) {
        eprintln!("stopped on request; run again to continue");
        return Ok(ExitCode::from(INTERRUPTED_EXIT_CODE));
    }
    let failed: Vec<&str> = (states.filter(|(_, s)| *s == CellState::Failed))
        .map(|(id, _)| id)
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} cell(s) failed: {} (see failure.json in their results directories{logs})",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn slurm(args: SlurmArgs) -> Result<()> {
    let matrix = args.spec.open()?;
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
        gpus_per_node: args.gpus_per_node,
    };
    let (script, cells) = job_array(&matrix, &options)?;
    match (cells.is_empty(), args.out) {
        (true, _) => eprintln!("every cell is done or collapsed: nothing to submit"),
        (false, Some(path)) => {
            lsr_files::write_bytes(&path, script.as_bytes())?;
            let (n, path) = (cells.len(), path.display());
            let tasks = match args.gpus_per_node {
                Some(gpus) => format!(", {} tasks of {gpus} GPUs", n.div_ceil(gpus)),
                None => String::new(),
            };
            eprintln!("{n} cells{tasks} → {path} (submit with: sbatch {path})");
        }
        (false, None) => print!("{script}"),
    }
    Ok(())
}

/// `lsr matrix verify`: what was checked on stderr, each problem on stdout.
fn verify(matrix: &Matrix, against: Option<&Path>) -> Result<()> {
    let found = lsr_matrix::verify::verify(matrix, against)?;
    eprintln!(
        "{} of {} cells started (logs checked: train.csv and the TensorBoard event files in \
         each cell's directory under {}); {} steps to redo past their last checkpoints",
        found.started,
        matrix.cells.len(),
        resolved(&matrix.results),
        found.to_redo
    );
    if let Some(reference) = against {
        eprintln!(
            "{} cells compared with {}",
            found.compared,
            resolved(reference)
        );
    }
    for problem in &found.problems {
        println!("{problem}");
    }
    if !found.problems.is_empty() {
        bail!(
            "{} problem(s) in {}",
            found.problems.len(),
            resolved(&matrix.results)
        );
    }
    Ok(())
}

/// `lsr matrix status`: a line per backbone and data set saying what the file pins (before
/// the check of what it names on disk, which they do not need), a line per cell, the count done
/// in the results folder it looked in, the TensorBoard command that shows the cells' training, a
/// line per finished probe; or one JSON object
/// `{"backbones": {name: {"checkpoint", "commit"}}, "data": {name: {"pinned", "pins"}},
/// "cells": {id: state}, "running": {id: {"device", "pid"}}, "probes": {backbone: k},
/// "results": "<absolute folder>"}`. A cell a live process holds says which, and on which device.
fn status(spec: &SpecArgs, json: bool) -> Result<()> {
    let matrix = spec.load()?;
    let (backbones, data) = (matrix.backbone_pins(), matrix.data_pins());
    if !json {
        // Before the inputs are checked, so that a missing one is shown beside the pins.
        print_pins(&backbones, &data);
    }
    matrix.check_inputs()?;
    let states = cell_states(&matrix)?;
    let probes = finished(&matrix)?;
    if json {
        return status_json(&matrix, &backbones, &data, &states, &probes);
    }
    print_cells(&matrix, &states);
    print_probes(&probes);
    for device in devices::retired_devices(&matrix)? {
        println!(
            "device {} retired by the last run: {}",
            device.slot, device.reason
        );
    }
    Ok(())
}

fn print_pins(backbones: &[BackbonePin], data: &[DataPin]) {
    for pin in backbones {
        println!("{pin}");
    }
    let pinned = backbones.iter().filter(|p| p.pinning.is_commit()).count();
    println!(
        "{pinned}/{} backbones pinned to a hub commit",
        backbones.len()
    );
    for pin in data {
        println!("{pin}");
    }
}

fn print_cells(matrix: &Matrix, states: &[CellStatus]) {
    for cell in states {
        match &cell.running {
            Some(on) => println!(
                "{}\t{} on {} (pid {})",
                cell.id, cell.state, on.note, on.pid
            ),
            None => println!("{}\t{}", cell.id, cell.state),
        }
    }
    let done = states.iter().filter(|c| c.state == CellState::Done).count();
    println!(
        "{done}/{} done in {}",
        states.len(),
        resolved(&matrix.results)
    );
    println!(
        "training curves, a run per cell: tensorboard --logdir {}",
        matrix.results.display()
    );
}

/// Each finished probe's choice of k and the scores it chose from.
fn print_probes(probes: &[Probe]) {
    for p in probes {
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
}

/// A cell's state, and the live process of this machine running it, if one is.
struct CellStatus {
    id: String,
    state: CellState,
    running: Option<Holder>,
}

fn cell_states(matrix: &Matrix) -> Result<Vec<CellStatus>> {
    let mut states = Vec::new();
    for cell in &matrix.cells {
        states.push(CellStatus {
            id: cell.id.clone(),
            state: cell.state()?,
            running: matrix.running(cell),
        });
    }
    Ok(states)
}

/// `lsr matrix status --json`.
fn status_json(
    matrix: &Matrix,
    backbones: &[BackbonePin],
    data: &[DataPin],
    states: &[CellStatus],
    probes: &[Probe],
) -> Result<()> {
    type Map = serde_json::Map<String, serde_json::Value>;
    let cells: Map = (states.iter())
        .map(|c| {
            (
                c.id.clone(),
                serde_json::to_value(c.state).expect("a state"),
            )
        })
        .collect();
    let running: Map = (states.iter())
        .filter_map(|c| {
            let on = c.running.as_ref()?;
            Some((
                c.id.clone(),
                serde_json::json!({ "device": on.note, "pid": on.pid }),
            ))
        })
        .collect();
    let chosen: Map = (probes.iter())
        .map(|p| (p.backbone.clone(), p.chosen_k.into()))
        .collect();
    let backbones: Map = (backbones.iter())
        .map(|pin| {
            let commit = match &pin.pinning {
                Pinning::Commit { commit, .. } => Some(commit),
                _ => None,
            };
            let record = serde_json::json!({ "checkpoint": pin.checkpoint, "commit": commit });
            (pin.backbone.clone(), record)
        })
        .collect();
    let data: Map = (data.iter())
        .map(|pin| {
            let record = match &pin.pins {
                Ok(pins) => {
                    serde_json::json!({ "pinned": pins.all_pinned(), "pins": pins.to_string() })
                }
                Err(why) => serde_json::json!({ "pinned": false, "pins": why }),
            };
            (pin.dataset.clone(), record)
        })
        .collect();
    let results = std::path::absolute(&matrix.results)?;
    let retired: Map = (devices::retired_devices(matrix)?.into_iter())
        .map(|device| (device.slot, device.reason.into()))
        .collect();
    let status = serde_json::json!({
        "backbones": backbones, "data": data, "cells": cells, "running": running,
        "probes": chosen, "results": results, "retired_devices": retired,
    });
    println!("{status}");
    Ok(())
}
