//! Stopping cleanly when asked: SIGTERM or SIGUSR1 (what Slurm sends before a time limit or a
//! preemption) sets a flag that training reads at each step boundary, where it writes a
//! checkpoint and ends the run as interrupted, and evaluation after each batch of documents,
//! where it keeps the corpus shards it finished and drops the one in progress. A second
//! SIGTERM ends the process at once (every file lsr writes is atomic, so nothing is left
//! half-written). A process whose workers do the work passes the signals on to them instead
//! ([`forward_stops`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};

/// The exit code of a run that stopped on request with a checkpoint to resume from: sysexits'
/// `EX_TEMPFAIL` ("try again later"), distinct from an error (1) and a collapse (3).
pub const INTERRUPTED_EXIT_CODE: u8 = 75;

static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

/// Makes SIGTERM and SIGUSR1 request a stop instead of ending the process. Called by the
/// programs that train or evaluate (a library must not take over a process's signals).
pub fn stop_on_signals() -> std::io::Result<()> {
    // Registered first, so it sees the flag as the previous signal left it.
    signal_hook::flag::register_conditional_shutdown(SIGTERM, 1, REQUESTED.clone())?;
    for signal in [SIGTERM, SIGUSR1] {
        signal_hook::flag::register(signal, REQUESTED.clone())?;
    }
    Ok(())
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// The worker processes a stop request is passed on to ([`forward_stops`]).
#[derive(Clone, Debug, Default)]
pub struct Workers(Arc<Mutex<Vec<u32>>>);

impl Workers {
    /// Adds a started worker; one added after a stop was requested is sent SIGTERM at once.
    /// The signal thread requests and forwards under the same lock, so either it or this
    /// sends the one SIGTERM (a second would end the worker at once).
    pub fn add(&self, pid: u32) {
        let mut workers = self.0.lock().expect("the workers' list");
        workers.push(pid);
        if requested() {
            send(pid, SIGTERM);
        }
    }

    /// Removes a worker that has ended.
    pub fn remove(&self, pid: u32) {
        self.0
            .lock()
            .expect("the workers' list")
            .retain(|&p| p != pid);
    }
}

/// For a process whose workers do the work (`lsr matrix run --devices`): SIGTERM, SIGUSR1 and
/// SIGINT request a stop here ([`requested`]) and are passed on to every worker, SIGINT as
/// SIGTERM, so that a Ctrl-C stops each at its next step as SIGTERM does, and a second one
/// ends them at once. This process itself is never ended by them: it waits for its workers.
pub fn forward_stops(workers: &Workers) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGUSR1, SIGINT])?;
    let workers = workers.clone();
    std::thread::spawn(move || {
        for signal in signals.forever() {
            let list = workers.0.lock().expect("the workers' list");
            REQUESTED.store(true, Ordering::SeqCst);
            let passed = if signal == SIGINT { SIGTERM } else { signal };
            for &pid in list.iter() {
                send(pid, passed);
            }
        }
    });
    Ok(())
}

fn send(pid: u32, signal: i32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill only sends a signal; a worker that has just ended makes it fail, harmlessly.
        unsafe { libc::kill(pid, signal) };
    }
}
