//! The facade's tests that run with `cabprof::alloc::Tracked` as the global allocator, one
//! binary: each file is a module (`cargo test -p cabprof --test tracked -- moved_futures::`
//! runs one). A binary has one global allocator, and `tests/it/`'s tests expect none (an
//! allocation analysis there would count the test harness's allocations, and some compare
//! runs bit for bit). These tests read per-thread and per-context counts, which other tests'
//! threads do not reach (what they allocate goes under the root, which the checks allow);
//! the tests whose counts are process-wide stay in binaries of their own.

mod deep_and_odd_reports;
mod moved_futures;
#[cfg(feature = "pprof")]
mod pprof_windows;
#[cfg(feature = "serve")]
mod serve_bounds;
#[cfg(feature = "serve")]
mod serve_http;
#[cfg(feature = "serve")]
mod serve_inflight;

#[path = "../support/deep.rs"]
mod deep;
#[cfg(feature = "pprof")]
#[path = "../go_pprof/mod.rs"]
mod go_pprof;
#[cfg(feature = "serve")]
#[path = "../serve_support/mod.rs"]
mod serve_support;

use std::sync::{Mutex, MutexGuard};

#[global_allocator]
static ALLOC: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();

/// One session per process: every test that starts one holds this meanwhile (a session
/// counts the calls and allocations of every thread).
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
