//! What [`Tracked`](super::Tracked) does with an allocator call while a session records:
//! the event, and the process-wide live, peak and runtime counters. Built with cabprof's
//! `enabled` feature only; compiled out, `Tracked` forwards and nothing here exists.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, in_runtime_work};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The process-wide counters the wrapper keeps while a session runs.
struct Counters {
    /// Bytes allocated minus bytes freed by the program since the session started.
    live: AtomicI64,
    /// The largest `live` seen.
    peak: AtomicI64,
    /// The runtime's own allocations (counted apart, never sent as events).
    runtime_allocs: AtomicU64,
    runtime_bytes: AtomicU64,
    runtime_frees: AtomicU64,
    runtime_freed_bytes: AtomicU64,
}

static COUNTERS: Counters = Counters {
    live: AtomicI64::new(0),
    peak: AtomicI64::new(0),
    runtime_allocs: AtomicU64::new(0),
    runtime_bytes: AtomicU64::new(0),
    runtime_frees: AtomicU64::new(0),
    runtime_freed_bytes: AtomicU64::new(0),
};

#[inline]
fn grow(bytes: i64) {
    let live = COUNTERS.live.fetch_add(bytes, Ordering::Relaxed) + bytes;
    if live > COUNTERS.peak.load(Ordering::Relaxed) {
        COUNTERS.peak.fetch_max(live, Ordering::Relaxed);
    }
}

/// Count the runtime's own allocator call apart: `made` a block of that many bytes, `freed`
/// one of that many (a reallocation does both).
#[cold]
fn runtime_call(made: Option<usize>, freed: Option<usize>) {
    let c = &COUNTERS;
    if let Some(size) = made {
        c.runtime_allocs.fetch_add(1, Ordering::Relaxed);
        c.runtime_bytes.fetch_add(size as u64, Ordering::Relaxed);
    }
    if let Some(size) = freed {
        c.runtime_frees.fetch_add(1, Ordering::Relaxed);
        c.runtime_freed_bytes
            .fetch_add(size as u64, Ordering::Relaxed);
    }
}

#[inline]
pub(super) fn on_alloc(size: usize, addr: usize) {
    if in_runtime_work() {
        return runtime_call(Some(size), None);
    }
    emit(Event::alloc(size));
    emit(Event::block(addr));
    grow(size as i64);
}

#[inline]
pub(super) fn on_dealloc(size: usize, addr: usize) {
    if in_runtime_work() {
        return runtime_call(None, Some(size));
    }
    emit(Event::dealloc(size));
    emit(Event::block(addr));
    COUNTERS.live.fetch_sub(size as i64, Ordering::Relaxed);
}

#[inline]
pub(super) fn on_realloc(old: usize, new: usize, old_addr: usize, new_addr: usize) {
    if in_runtime_work() {
        return runtime_call(Some(new), Some(old));
    }
    match Event::realloc(old, new) {
        Ok(e) => emit(e),
        // Too large for one word: `ReallocFrom` then `ReallocTo`, back to back, which the
        // analysis counts as one resize.
        Err([from, to]) => {
            emit(from);
            emit(to);
        }
    }
    emit(Event::block(old_addr));
    emit(Event::block(new_addr));
    if new >= old {
        grow((new - old) as i64);
    } else {
        COUNTERS
            .live
            .fetch_sub((old - new) as i64, Ordering::Relaxed);
    }
}

/// What the wrapper counted process-wide since the session started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalCounts {
    /// The program's bytes allocated minus bytes freed since the session started.
    pub live_bytes: i64,
    /// The largest `live_bytes` reached.
    pub peak_bytes: i64,
    /// The runtime's own allocations and resizes (not in the analysis' counts).
    pub runtime_allocs: u64,
    /// Bytes of those.
    pub runtime_bytes: u64,
    /// The runtime's own frees and resizes.
    pub runtime_frees: u64,
    /// Bytes of those.
    pub runtime_freed_bytes: u64,
}

/// The wrapper's process-wide counters now (all zero without a [`Tracked`](super::Tracked) global
/// allocator).
pub fn global_counts() -> GlobalCounts {
    let c = &COUNTERS;
    GlobalCounts {
        live_bytes: c.live.load(Ordering::Relaxed),
        peak_bytes: c.peak.load(Ordering::Relaxed),
        runtime_allocs: c.runtime_allocs.load(Ordering::Relaxed),
        runtime_bytes: c.runtime_bytes.load(Ordering::Relaxed),
        runtime_frees: c.runtime_frees.load(Ordering::Relaxed),
        runtime_freed_bytes: c.runtime_freed_bytes.load(Ordering::Relaxed),
    }
}

/// Zero the counters: a session is starting.
pub(crate) fn reset() {
    let c = &COUNTERS;
    for a in [&c.live, &c.peak] {
        a.store(0, Ordering::Relaxed);
    }
    for a in [
        &c.runtime_allocs,
        &c.runtime_bytes,
        &c.runtime_frees,
        &c.runtime_freed_bytes,
    ] {
        a.store(0, Ordering::Relaxed);
    }
}
