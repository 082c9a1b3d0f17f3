//! The `cabprof` tool's integration tests, one binary: each file is a module (`cargo test -p
//! cabprof-cli --test it -- diff_reports::` runs one). They run the built tool
//! (`CARGO_BIN_EXE_cabprof`) on reports made here.

mod cachegrind_counts;
mod cli;
mod cli_outputs;
mod diff_reports;

use std::sync::{Mutex, MutexGuard};

/// One session per process: the tests that make a report in this process hold this while
/// their session runs, so neither records the other's events or finds it running.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
