//! Sampled timing with an instrumented global allocator: growing a thread's countdown table
//! reallocates it, and the allocator's own `#[profile]` function then asks whether to time its
//! call. That call must not touch the table's old block, which the allocator is freeing.
//!
//! The allocator here moves every block it reallocates on an armed thread, fills the old one
//! with a marker before the instrumented call and checks the marker after it: a write into
//! the old block (a countdown decremented through a stale pointer) is caught.
//!
//! Its own test binary, not a module of `tests/it/`: its global allocator is one of its own,
//! which moves blocks and checks markers.

use cabprof::{profile, Analysis, RunMode, Session};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const MARK: u8 = 0x07;

/// Reallocations that ran the instrumented hook.
static HOOKED: AtomicU64 = AtomicU64::new(0);
/// A freed block was written to during the hook.
static WRITTEN_AFTER_FREE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Run the hook on this thread's reallocations.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Inside the hook (no nesting).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

#[profile]
fn in_allocator() -> u64 {
    std::hint::black_box(1)
}

struct Moving;

// SAFETY: every block comes from `System` with the caller's layout; `realloc` on an armed
// thread allocates the new block from `System`, copies the smaller size, and frees the old
// block with its own layout, as `GlobalAlloc::realloc` may.
unsafe impl GlobalAlloc for Moving {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let armed = ARMED.try_with(Cell::get).unwrap_or(false)
            && !IN_HOOK.try_with(Cell::get).unwrap_or(true);
        if !armed {
            // SAFETY: the caller's guarantees, passed on.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        IN_HOOK.with(|h| h.set(true));
        // SAFETY: `new_size` is non-zero and, rounded to the alignment, fits an `isize` (the
        // caller's guarantee); the copy is within both blocks; `ptr` is the caller's live
        // block of `layout`, written and freed only here.
        let new = unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = System.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                std::ptr::write_bytes(ptr, MARK, layout.size());
                std::hint::black_box(in_allocator());
                HOOKED.fetch_add(1, Ordering::Relaxed);
                let old = std::slice::from_raw_parts(ptr, layout.size());
                if old.iter().any(|&b| b != MARK) {
                    WRITTEN_AFTER_FREE.store(true, Ordering::Relaxed);
                }
                System.dealloc(ptr, layout);
            }
            new
        };
        IN_HOOK.with(|h| h.set(false));
        new
    }
}

#[global_allocator]
static ALLOC: Moving = Moving;

macro_rules! functions {
    ($($f:ident)*) => {
        $(
            #[profile]
            fn $f() -> u64 {
                std::hint::black_box(2)
            }
        )*
        /// Call each once, in order: each is a new id, one more slot in the countdown table.
        fn call_each() {
            $( std::hint::black_box($f()); )*
        }
    };
}

functions!(f01 f02 f03 f04 f05 f06 f07 f08 f09 f10 f11 f12 f13 f14 f15 f16);

#[test]
fn growing_the_countdown_table_never_writes_to_its_freed_block() {
    let session = Session::builder()
        .analyses(&[Analysis::Time])
        .time_sample(4)
        .mode(RunMode::Exhaustive)
        .pin(false)
        .start()
        .unwrap();
    std::thread::spawn(|| {
        // The hook's function gets its countdown (the smallest id of the ones called here)
        // before the table is grown by new functions.
        std::hint::black_box(in_allocator());
        ARMED.with(|a| a.set(true));
        call_each();
        ARMED.with(|a| a.set(false));
    })
    .join()
    .unwrap();
    drop(session.finish());
    assert!(
        HOOKED.load(Ordering::Relaxed) > 0,
        "the table never grew by a reallocation: the test checks nothing"
    );
    assert!(
        !WRITTEN_AFTER_FREE.load(Ordering::Relaxed),
        "a reallocated countdown table's old block was written after it was given up"
    );
}
