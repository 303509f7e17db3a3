//! Worker processes, at most one per slot (a device) at a time: what `lsr matrix run --devices`
//! runs its cells in and `lsr eval --devices` its corpus parts. Each worker's output is
//! appended to its own log after a line naming the job and its slot; each runs in its own
//! process group, so that a terminal's Ctrl-C reaches the parent alone, which passes stop
//! requests on to every worker listed in its [`Workers`] (`stop::forward_stops`).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::stop::{Workers, requested};
use crate::{FileError, Result};

/// One worker's work: its name (a cell, a part), the command and the file of its output.
#[derive(Debug)]
pub struct Job {
    pub name: String,
    pub command: Command,
    pub log: PathBuf,
}

/// How often the workers are looked at: a job takes minutes at the least.
const POLL: Duration = Duration::from_millis(100);

/// Runs jobs over `slots` until no free slot gets one from `next(slot)` and every worker has
/// ended, telling `ended(slot, job, status)` of each end; no job starts once a stop was
/// requested. `workers` lists the running ones for the stop signals.
pub fn run_jobs<E: From<FileError>>(
    slots: &[String],
    workers: &Workers,
    mut next: impl FnMut(usize) -> std::result::Result<Option<Job>, E>,
    mut ended: impl FnMut(usize, Job, ExitStatus),
) -> std::result::Result<(), E> {
    let mut running: Vec<Option<(Job, Child)>> = slots.iter().map(|_| None).collect();
    loop {
        for (slot, place) in running.iter_mut().enumerate() {
            if let Some((job, child)) = place
                && let Some(status) = child.try_wait().map_err(|e| FileError::io(&job.log, e))?
            {
                workers.remove(child.id());
                let (job, _) = place.take().expect("a running job");
                ended(slot, job, status);
            }
            if place.is_none()
                && !requested()
                && let Some(mut job) = next(slot)?
            {
                let child = start(&mut job, &slots[slot])?;
                workers.add(child.id());
                *place = Some((job, child));
            }
        }
        if running.iter().all(Option::is_none) {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

/// Starts `job` with its output appended to its log after the line `== <name> on <slot>`.
fn start(job: &mut Job, slot: &str) -> Result<Child> {
    let io = |e| FileError::io(&job.log, e);
    let mut log = (OpenOptions::new().create(true).append(true))
        .open(&job.log)
        .map_err(io)?;
    writeln!(log, "== {} on {slot}", job.name).map_err(io)?;
    let output = log.try_clone().map_err(io)?;
    let command = job.command.stdin(Stdio::null()).stdout(output).stderr(log);
    let program = PathBuf::from(command.get_program());
    command
        .process_group(0)
        .spawn()
        .map_err(|e| FileError::io(program, e))
}
