//! The workloads' integration tests, one binary: each file is a module (`cargo test -p
//! cabprof-workloads --test it -- twins::` runs one).

mod evaluate_smoke;
mod twins;

use std::sync::{Mutex, MutexGuard};

/// One session per process: every test that runs a session (the evaluation harness runs
/// many) holds this, so no two overlap and none records another's instrumented workload.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
