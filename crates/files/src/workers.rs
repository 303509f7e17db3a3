//! Worker processes, at most one per slot (a device) at a time: what `lsr matrix run --devices`
//! runs its cells in and `lsr eval --devices` its corpus parts. Each worker's output is
//! appended to its own log after a line naming the job and its slot; each runs in its own
//! process group, so that a terminal's Ctrl-C reaches the parent alone, which passes stop
//! requests on to every worker listed in its [`Workers`] (`stop::forward_stops`). A slot whose
//! device could not start, or whose last two jobs failed for reasons of the device, is retired:
//! it gets no more jobs, and the others finish the work.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::stop::{Workers, requested};
use crate::{FileError, Result};

/// The exit code of a worker whose device could not start: the job never began.
pub const DEVICE_EXIT_CODE: u8 = 76;

/// One worker's work: its name (a cell, a part), the command and the file of its output.
#[derive(Debug)]
pub struct Job {
    pub name: String,
    pub command: Command,
    pub log: PathBuf,
}

/// What a job's end says of its slot's device, as the caller of [`run_jobs`] judges it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blame {
    /// Done, stopped, or failed for reasons of its own (divergence, bad data).
    Job,
    /// Failed for reasons of the device (out of memory, a driver error, a lost device): why.
    Device(String),
}

/// A slot given no more jobs, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retired {
    pub slot: String,
    pub reason: String,
}

/// The items (cells, corpus parts) waiting for a slot. One whose job failed for reasons of its
/// slot's device waits, first in line, for a slot whose device has not failed it.
pub struct Queue<T> {
    waiting: VecDeque<T>,
    /// Per item, the slots whose devices failed it.
    failed: Vec<(T, Vec<usize>)>,
    slots: usize,
}

impl<T: Clone + PartialEq> Queue<T> {
    pub fn new(items: impl IntoIterator<Item = T>, slots: usize) -> Self {
        Self {
            waiting: items.into_iter().collect(),
            failed: Vec::new(),
            slots,
        }
    }

    /// The first waiting item `slot` has not failed.
    pub fn take(&mut self, slot: usize) -> Option<T> {
        let failed = &self.failed;
        let untried = |item: &T| !failed.iter().any(|(f, on)| f == item && on.contains(&slot));
        let position = self.waiting.iter().position(untried)?;
        self.waiting.remove(position)
    }

    /// Puts `item`, which `slot`'s device failed, back first in line; `false` (and not back)
    /// when every slot's device has failed it.
    pub fn retry(&mut self, item: T, slot: usize) -> bool {
        let on = match self.failed.iter_mut().find(|(f, _)| *f == item) {
            Some((_, on)) => on,
            None => {
                self.failed.push((item.clone(), Vec::new()));
                &mut self.failed.last_mut().expect("just pushed").1
            }
        };
        on.push(slot);
        if on.len() >= self.slots {
            return false;
        }
        self.waiting.push_front(item);
        true
    }

    /// The items no slot took.
    pub fn into_waiting(self) -> VecDeque<T> {
        self.waiting
    }
}

/// Whether a worker ended because its device could not start ([`DEVICE_EXIT_CODE`]).
pub fn device_did_not_start(status: ExitStatus) -> bool {
    status.code() == Some(DEVICE_EXIT_CODE.into())
}

/// Consecutive device failures that retire a slot.
const STRIKES: usize = 2;

/// How often the workers are looked at: a job takes minutes at the least.
const POLL: Duration = Duration::from_millis(100);

/// Runs jobs over `slots` until no free slot gets one from `next(slot)` and every worker has
/// ended, telling `ended(slot, job, status)` of each end, which says whom to blame; no job
/// starts once a stop was requested. A slot whose worker could not start its device, or whose
/// last two jobs the device was blamed for, is retired (said in the log, and returned): `next`
/// is not asked for it again. `workers` lists the running ones for the stop signals.
pub fn run_jobs<E: From<FileError>>(
    slots: &[String],
    workers: &Workers,
    mut next: impl FnMut(usize) -> std::result::Result<Option<Job>, E>,
    mut ended: impl FnMut(usize, Job, ExitStatus) -> Blame,
) -> std::result::Result<Vec<Retired>, E> {
    let mut running: Vec<Option<(Job, Child)>> = slots.iter().map(|_| None).collect();
    let mut strikes = vec![0; slots.len()];
    let mut retired: Vec<Retired> = Vec::new();
    let is_retired = |retired: &[Retired], slot: &str| retired.iter().any(|r| r.slot == slot);
    loop {
        for (slot, place) in running.iter_mut().enumerate() {
            if let Some((job, child)) = place
                && let Some(status) = child.try_wait().map_err(|e| FileError::io(&job.log, e))?
            {
                workers.remove(child.id());
                let (job, _) = place.take().expect("a running job");
                let did_not_start = device_did_not_start(status);
                let log = job.log.clone();
                match ended(slot, job, status) {
                    Blame::Job => strikes[slot] = 0,
                    Blame::Device(reason) => {
                        strikes[slot] += 1;
                        if did_not_start || strikes[slot] >= STRIKES {
                            let reason = format!("{reason} (log: {})", crate::resolved(&log));
                            retire(&mut retired, &slots[slot], reason);
                        }
                    }
                }
            }
            if place.is_none()
                && !requested()
                && !is_retired(&retired, &slots[slot])
                && let Some(mut job) = next(slot)?
            {
                let child = start(&mut job, &slots[slot])?;
                workers.add(child.id());
                *place = Some((job, child));
            }
        }
        if running.iter().all(Option::is_none) {
            return Ok(retired);
        }
        std::thread::sleep(POLL);
    }
}

fn retire(retired: &mut Vec<Retired>, slot: &str, reason: String) {
    eprintln!("== device {slot} retired: {reason}; the others take its work");
    retired.push(Retired {
        slot: slot.to_string(),
        reason,
    });
}

/// What the worker that ran `job` on `slot` wrote to its log (since the line [`start`] wrote).
pub fn output_of(job: &Job, slot: &str) -> String {
    let log = std::fs::read_to_string(&job.log).unwrap_or_default();
    let header = header(job, slot);
    log.rsplit_once(&header)
        .map_or(log.clone(), |(_, output)| output.to_string())
}

fn header(job: &Job, slot: &str) -> String {
    format!("== {} on {slot}\n", job.name)
}

/// Starts `job` with its output appended to its log after the line `== <name> on <slot>`.
fn start(job: &mut Job, slot: &str) -> Result<Child> {
    let io = |e| FileError::io(&job.log, e);
    let mut log = (OpenOptions::new().create(true).append(true))
        .open(&job.log)
        .map_err(io)?;
    write!(log, "{}", header(job, slot)).map_err(io)?;
    let output = log.try_clone().map_err(io)?;
    let command = job.command.stdin(Stdio::null()).stdout(output).stderr(log);
    let program = PathBuf::from(command.get_program());
    command
        .process_group(0)
        .spawn()
        .map_err(|e| FileError::io(program, e))
}
