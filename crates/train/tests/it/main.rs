//! One test binary for the crate, each file a module: the workspace then links one test
//! executable per crate, not one per file (each links the whole backend stack).

mod cached;
mod distillation;
mod optimizer;
mod parity;
mod tensorboard;
mod train;

/// Dropout masks come from the backend's generator, which is one per process and seeded at each
/// micro-batch; two tests that draw masks on parallel test threads would draw from it in turn.
/// Every test that trains with dropout holds this lock.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
