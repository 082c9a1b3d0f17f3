//! Allocation tracking: an opt-in global allocator wrapper that sends every allocation, free
//! and resize into the session's rings, for the [`Allocations`](crate::Analysis::Allocations)
//! analysis.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();
//!
//! let session = cabprof::Session::builder()
//!     .analyses(&[cabprof::Analysis::Allocations])
//!     .start()
//!     .unwrap();
//! let v: Vec<u64> = (0..1000).collect();
//! drop(v);
//! println!("{}", session.finish().text(10));
//! ```
//!
//! [`Tracked`] wraps [`System`] or any other [`GlobalAlloc`]. With no session running (and,
//! with `CABPROF=1`, before the first instrumented call starts the process-wide one), each
//! call costs one load and one branch more than the inner allocator. While a session runs,
//! each call also writes one event word (`Alloc { size }`, `Dealloc { size }` or
//! `Realloc { old, new }`, two words for a resize of half a gigabyte or more: frees carry the
//! layout's size, so a block freed on another thread than the one that made it still
//! balances) and updates the process-wide live-bytes counter, whose maximum is the report's
//! peak. Compiled out (without cabprof's `enabled` feature) it only forwards to the inner
//! allocator, so the `#[global_allocator]` line can stay.
//!
//! The event path never allocates, so it never recurses into the allocator: the runtime marks
//! its own work (making a thread's ring on its first event, sequential-mode analyses, the
//! analyzer threads, starting, snapshotting and finishing a session, registering a function's
//! name) with a thread-local flag ([`cabprof_cab::runtime::in_runtime_work`]), and
//! allocations made under it are counted apart, as the runtime's, and send no event. A thread
//! whose first event is an allocation makes its ring under that flag: no recursion, no lock
//! taken twice. What the runtime builds and hands over (reports, snapshots, a snapshotter's
//! hold on its session) is dropped under that flag too, whoever drops it and when
//! ([`RuntimeDrop`](cabprof_cab::runtime::RuntimeDrop)), so its frees are never counted as
//! the program's.
//!
//! Limits: blocks freed by thread-local destructors that run after the thread's ring has
//! closed are not seen; live bytes are counted from the session's start, so freeing blocks
//! made before it can make them negative. A part the program moves out of a report
//! (`let data = report.data`) is the program's from then on: its frees count as the
//! program's if a session runs when it is dropped.

#[cfg(feature = "enabled")]
use cabprof_cab::event::Event;
#[cfg(feature = "enabled")]
use cabprof_cab::runtime::{emit, in_runtime_work, recording};
use std::alloc::{GlobalAlloc, Layout, System};
#[cfg(feature = "enabled")]
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A global allocator that reports to the running cabprof session; see the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tracked<A = System> {
    inner: A,
}

impl Tracked<System> {
    /// The system allocator, tracked.
    pub const fn system() -> Tracked<System> {
        Tracked { inner: System }
    }
}

impl<A> Tracked<A> {
    /// `inner`, tracked.
    pub const fn new(inner: A) -> Tracked<A> {
        Tracked { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

// Every call asks `recording()`: one load and one compare, with no session and equally while
// nothing has decided whether the process-wide session runs. Undecided is not idle to `emit`
// (the first event must leave the idle path so that the process can decide, see
// `cabprof_cab::runtime::Activity`), but an allocation never decides: only an instrumented
// event starts the process-wide session (`CABPROF=1`), and an allocation cannot (it may come
// before `main`, inside the standard library's locks, or from a thread-local destructor,
// where starting analyzer threads is out of the question). With `CABPROF=1` and no
// instrumented call yet, every allocation used to take the event's slow path (a scope of the
// runtime's own work, the `CABPROF` check, an atomic add on the shared live counter) to
// deliver nothing: a `Box` made and freed took 17.1 ns instead of 10.8 on one thread, 36
// instead of 21 on two (release, 2-core host); now 10.7 either way.
//
// SAFETY: every call is forwarded unchanged to `inner`, which upholds `GlobalAlloc`'s
// contract; what is added only reads the layout and sizes, and never allocates (event words
// go into a ring that already exists, or are made under the runtime's own-work flag, whose
// allocations pass straight through).
unsafe impl<A: GlobalAlloc> GlobalAlloc for Tracked<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are passed on unchanged.
        let p = unsafe { self.inner.alloc(layout) };
        #[cfg(feature = "enabled")]
        if !p.is_null() && recording() {
            on_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        #[cfg(feature = "enabled")]
        if !p.is_null() && recording() {
            on_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator (so by `inner`)
        // with `layout`.
        unsafe { self.inner.dealloc(ptr, layout) };
        #[cfg(feature = "enabled")]
        if recording() {
            on_dealloc(layout.size());
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's guarantees for `ptr`, `layout` and `new_size` are passed on.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        #[cfg(feature = "enabled")]
        if !p.is_null() && recording() {
            on_realloc(layout.size(), new_size);
        }
        p
    }
}

/// The process-wide counters the wrapper keeps while a session runs.
#[cfg(feature = "enabled")]
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

#[cfg(feature = "enabled")]
static COUNTERS: Counters = Counters {
    live: AtomicI64::new(0),
    peak: AtomicI64::new(0),
    runtime_allocs: AtomicU64::new(0),
    runtime_bytes: AtomicU64::new(0),
    runtime_frees: AtomicU64::new(0),
    runtime_freed_bytes: AtomicU64::new(0),
};

#[cfg(feature = "enabled")]
#[inline]
fn grow(bytes: i64) {
    let live = COUNTERS.live.fetch_add(bytes, Ordering::Relaxed) + bytes;
    if live > COUNTERS.peak.load(Ordering::Relaxed) {
        COUNTERS.peak.fetch_max(live, Ordering::Relaxed);
    }
}

/// Count the runtime's own allocator call apart: `made` a block of that many bytes, `freed`
/// one of that many (a reallocation does both).
#[cfg(feature = "enabled")]
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

#[cfg(feature = "enabled")]
#[inline]
fn on_alloc(size: usize) {
    if in_runtime_work() {
        return runtime_call(Some(size), None);
    }
    emit(Event::alloc(size));
    grow(size as i64);
}

#[cfg(feature = "enabled")]
#[inline]
fn on_dealloc(size: usize) {
    if in_runtime_work() {
        return runtime_call(None, Some(size));
    }
    emit(Event::dealloc(size));
    COUNTERS.live.fetch_sub(size as i64, Ordering::Relaxed);
}

#[cfg(feature = "enabled")]
#[inline]
fn on_realloc(old: usize, new: usize) {
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
    if new >= old {
        grow((new - old) as i64);
    } else {
        COUNTERS
            .live
            .fetch_sub((old - new) as i64, Ordering::Relaxed);
    }
}

/// What the wrapper counted process-wide since the session started.
#[cfg(feature = "enabled")]
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

/// The wrapper's process-wide counters now (all zero without a [`Tracked`] global
/// allocator).
#[cfg(feature = "enabled")]
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
#[cfg(feature = "enabled")]
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
