//! The runtime's integration tests, one binary: each file is a module (`cargo test -p
//! cabprof-cab --test it -- runtime::` runs one). The tests that need a process of their own
//! are separate binaries, each saying why at its top: `ctrlc.rs`, `fork.rs`, `loom.rs`,
//! `ring_memory.rs`, `ring_reuse.rs`.

mod event_words;
mod hw;
mod limits;
mod ring_exhaustive;
mod ring_growth;
mod runtime;
mod sampling;
mod sequential_snapshot;
mod small_stack_attach;
mod snapshot_backlog;
mod stress;
mod transports;

#[path = "../support/mod.rs"]
mod support;

use std::sync::{Mutex, MutexGuard};

/// One session per process: every test that starts one, or emits into the running one, holds
/// this, so none finds another's session running or counts another's events.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
