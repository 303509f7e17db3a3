//! Stopping cleanly when asked: SIGTERM or SIGUSR1 (what Slurm sends before a time limit or a
//! preemption) sets a flag that training reads at each step boundary, where it writes a
//! checkpoint and ends the run as interrupted, and evaluation after each batch of documents,
//! where it keeps the corpus shards it finished and drops the one in progress. A second
//! SIGTERM ends the process at once (every file lsr writes is atomic, so nothing is left
//! half-written).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use signal_hook::consts::{SIGTERM, SIGUSR1};

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
