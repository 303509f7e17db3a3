//! One matrix over several devices at once (`lsr matrix run FILE --devices cuda:0,cuda:1`): a
//! worker process per device, each running the next cell that is not done (`lsr matrix run
//! FILE --cell ID --device D`, which skips a cell another process holds: the runner's lock per
//! cell keeps two processes off one cell, however and wherever they were started) until none is
//! left. The processes are `lsr_files::workers`'s: a stop request reaches every worker, and each
//! cell's worker writes its output to `<results>/<cell>.log`, beside the cell. A worker that
//! fails or dies leaves its cell recorded as failed, and its device takes the next cell; one
//! that failed for reasons of its device gives the cell to another device, and a device that
//! keeps failing is retired.

use std::cell::RefCell;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};

use lsr_compute::device::device_blame;
use lsr_files::layout::FAILURE;
use lsr_files::stop::{INTERRUPTED_EXIT_CODE, Workers};
use lsr_files::workers::{Blame, Job, Queue, Retired, output_of, run_jobs};
use lsr_files::{CellState, resolved};

use crate::cell::Cell;
use crate::error::{MatrixError, Result};
use crate::runner::{RunOptions, selected, write_json, write_summary};
use crate::spec::Matrix;

/// How the workers are started.
#[derive(Clone, Debug)]
pub struct DeviceRun {
    /// The `lsr` binary each worker runs.
    pub lsr: PathBuf,
    /// A worker per device, in this order.
    pub devices: Vec<String>,
    /// Delete and rerun the cells that are done or collapsed.
    pub force: bool,
    /// Only each backbone's k chosen by its probe.
    pub k_from_probe: bool,
}

/// A cell one worker ran, and how it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Worked {
    pub cell: String,
    pub device: String,
    pub state: CellState,
    /// The worker's output.
    pub log: PathBuf,
}

/// What a run over several devices did: each run cell's end, and the devices it retired.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DevicesRun {
    pub worked: Vec<Worked>,
    pub retired: Vec<Retired>,
    /// The cells no device was left to run (every one retired, or stopped first).
    pub left: Vec<String>,
}

/// Runs the cells not done over `run.devices`, a worker per device at a time, until every cell
/// is taken or a stop was requested and every worker has ended; returns each run cell's end,
/// the retired devices and the cells left.
/// A cell whose worker failed for reasons of the device (`lsr_compute::device::device_blame`) goes
/// back to the queue for a device that has not tried it; a device that could not start, or
/// failed its last two cells so, is retired (`lsr_files::workers`), and recorded in
/// `<results>/retired-devices.json` for `lsr matrix status`. `workers` is where the started
/// workers are listed for the stop signals.
pub fn run_on_devices(matrix: &Matrix, run: &DeviceRun, workers: &Workers) -> Result<DevicesRun> {
    write_summary(matrix)?;
    let record = matrix.results.join(RETIRED);
    remove_if_there(&record)?;
    let options = RunOptions {
        cell: None,
        force: run.force,
        k_from_probe: run.k_from_probe,
    };
    let cells = selected(matrix, &options)?
        .into_iter()
        .map(|cell| cell.id.as_str());
    let queue = RefCell::new(Queue::new(cells, run.devices.len()));
    let mut worked = Vec::new();
    let next = |slot: usize| -> Result<Option<Job>> {
        let device = &run.devices[slot];
        let Some(cell) = next_cell(matrix, &mut queue.borrow_mut(), slot, run.force)? else {
            return Ok(None);
        };
        eprintln!(
            "== {} on {device} (log: {})",
            cell.id,
            resolved(&log_of(matrix, cell))
        );
        Ok(Some(job(matrix, run, cell, device)))
    };
    let ended = |slot: usize, job: Job, status: ExitStatus| {
        let cell = matrix.cell(&job.name).expect("a cell of the matrix");
        let device = &run.devices[slot];
        let blame = device_blame(status, &output_of(&job, device));
        if let Blame::Device(why) = &blame
            && queue.borrow_mut().retry(cell.id.as_str(), slot)
        {
            eprintln!("== {} on {device}: {why}; another device takes it", cell.id);
            return blame;
        }
        worked.push(end(cell, device, job.log, status));
        blame
    };
    let retired = run_jobs(&run.devices, workers, next, ended)?;
    if !retired.is_empty() {
        write_json(&record, &retired_json(&retired))?;
    }
    let mut left = Vec::new();
    for id in queue.into_inner().into_waiting() {
        let cell = matrix.cell(id)?;
        if !matches!(cell.state()?, CellState::Done | CellState::Collapsed) {
            left.push(cell.id.clone());
        }
    }
    Ok(DevicesRun {
        worked,
        retired,
        left,
    })
}

/// The devices the last run over several devices retired, beside the results.
pub const RETIRED: &str = "retired-devices.json";

/// The devices `<results>/retired-devices.json` records, with why.
pub fn retired_devices(matrix: &Matrix) -> Result<Vec<Retired>> {
    let path = matrix.results.join(RETIRED);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(MatrixError::io(&path, e)),
    };
    let entries: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| MatrixError::io(&path, std::io::Error::other(e)))?;
    Ok(entries
        .iter()
        .map(|entry| Retired {
            slot: entry["device"].as_str().unwrap_or_default().to_string(),
            reason: entry["reason"].as_str().unwrap_or_default().to_string(),
        })
        .collect())
}

fn retired_json(retired: &[Retired]) -> serde_json::Value {
    (retired.iter())
        .map(|r| serde_json::json!({ "device": r.slot, "reason": r.reason }))
        .collect()
}

fn remove_if_there(path: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(MatrixError::io(path, e)),
        _ => Ok(()),
    }
}

/// The next cell of `queue` that `slot` may run: not done (unless forced), and not one its
/// device failed. Whether another process holds it is the worker's to find, through the cell's
/// lock: a process on another node (`lsr matrix slurm --gpus-per-node`) has a process id this
/// one cannot check.
fn next_cell<'m>(
    matrix: &'m Matrix,
    queue: &mut Queue<&'m str>,
    slot: usize,
    force: bool,
) -> Result<Option<&'m Cell>> {
    while let Some(id) = queue.take(slot) {
        let cell = matrix.cell(id)?;
        let state = cell.state()?;
        if matches!(state, CellState::Done | CellState::Collapsed) && !force {
            tracing::info!("{}: {state}, skipped", cell.id);
            continue;
        }
        return Ok(Some(cell));
    }
    Ok(None)
}

/// A cell's worker output, beside the cell's directory.
fn log_of(matrix: &Matrix, cell: &Cell) -> PathBuf {
    matrix.results.join(format!("{}.log", cell.id))
}

/// `lsr matrix run FILE … --cell ID --device D`.
fn job(matrix: &Matrix, run: &DeviceRun, cell: &Cell, device: &str) -> Job {
    let mut command = Command::new(&run.lsr);
    command
        .args(["matrix", "run"])
        .args(matrix.arguments())
        .args(["--cell", &cell.id, "--device", device])
        .args(run.force.then_some("--force"));
    Job {
        name: cell.id.clone(),
        command,
        log: log_of(matrix, cell),
    }
}

/// The cell's state after its worker ended. A worker that ended otherwise than by finishing
/// or stopping on request (code 75), without recording a failure itself (a crash, a kill, an
/// error before the cell started), has one recorded for it.
fn end(cell: &Cell, device: &str, log: PathBuf, status: ExitStatus) -> Worked {
    let recorded = cell.state();
    let stopped = status.success() || status.code() == Some(INTERRUPTED_EXIT_CODE.into());
    let state = match recorded {
        Ok(state) if stopped || state == CellState::Failed => state,
        recorded => {
            let detail = recorded.err().map(|e| format!("; its state: {e}"));
            let error = format!(
                "the worker on {device} ended with {status}{}; its output: {}",
                detail.unwrap_or_default(),
                resolved(&log)
            );
            record_failure(cell, &error)
        }
    };
    eprintln!("== {} on {device}: {state}", cell.id);
    Worked {
        cell: cell.id.clone(),
        device: device.to_string(),
        state,
        log,
    }
}

fn record_failure(cell: &Cell, error: &str) -> CellState {
    eprintln!("{}: failed: {error}", cell.id);
    let record = serde_json::json!({ "cell": cell.id, "error": error });
    let written = std::fs::create_dir_all(cell.dir())
        .map_err(|e| MatrixError::io(cell.dir(), e))
        .and_then(|()| write_json(&cell.dir().join(FAILURE), &record));
    if let Err(e) = written {
        eprintln!("{}: the failure could not be recorded: {e}", cell.id);
    }
    CellState::Failed
}
