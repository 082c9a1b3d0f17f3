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
mod counts;

#[cfg(feature = "enabled")]
use cabprof_cab::runtime::recording;
#[cfg(feature = "enabled")]
pub(crate) use counts::reset;
#[cfg(feature = "enabled")]
pub use counts::{global_counts, GlobalCounts};
#[cfg(feature = "enabled")]
use counts::{on_alloc, on_dealloc, on_realloc};
use std::alloc::{GlobalAlloc, Layout, System};

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
// deliver nothing, which made a small allocation cost half as much again as without
// cabprof.
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
            on_alloc(layout.size(), p as usize);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        #[cfg(feature = "enabled")]
        if !p.is_null() && recording() {
            on_alloc(layout.size(), p as usize);
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
            on_dealloc(layout.size(), ptr as usize);
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's guarantees for `ptr`, `layout` and `new_size` are passed on.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        #[cfg(feature = "enabled")]
        if !p.is_null() && recording() {
            on_realloc(layout.size(), new_size, ptr as usize, p as usize);
        }
        p
    }
}
