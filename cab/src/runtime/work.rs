//! The runtime's own work: what a thread does inside a [`RuntimeWork`] scope, or on one of the
//! runtime's threads, is cabprof's, and an allocation-tracking global allocator counts its
//! allocations apart instead of sending them as events ([`in_runtime_work`]).

use std::cell::Cell;
use std::fmt;

thread_local! {
    /// How many [`RuntimeWork`] scopes are open on this thread (a large constant on the
    /// runtime's own threads). A `const`, destructor-free thread-local: reading it never
    /// allocates and works even while the thread's other thread-locals are being destroyed.
    static RUNTIME_WORK: Cell<u32> = const { Cell::new(0) };
}

/// Marks what the calling thread does until it is dropped as cabprof's own work (attaching a
/// ring, an inline analysis, starting, snapshotting or finishing a session, building a
/// report): an allocation-tracking global allocator asks [`in_runtime_work`] and counts such
/// allocations apart instead of sending them as events. Scopes nest.
#[must_use = "the scope ends when this is dropped"]
#[derive(Debug)]
pub struct RuntimeWork {
    /// Tied to the thread whose flag it raised.
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Open a [`RuntimeWork`] scope on the calling thread.
#[inline]
pub fn runtime_work() -> RuntimeWork {
    let _ = RUNTIME_WORK.try_with(|w| w.set(w.get().saturating_add(1)));
    RuntimeWork {
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for RuntimeWork {
    #[inline]
    fn drop(&mut self) {
        let _ = RUNTIME_WORK.try_with(|w| w.set(w.get().saturating_sub(1)));
    }
}

/// One of the two brackets ([`drop_as_runtime_work`]) that make the fields between them be
/// dropped as the runtime's own work: `OPENS` for the first field, which opens a
/// [`RuntimeWork`] scope when it is dropped, `false` for the last, which closes it.
///
/// Why: what the runtime builds and hands to the program (a report, a session's shared state)
/// holds blocks it allocated inside a [`RuntimeWork`] scope, which an allocation-tracking
/// allocator counted as the runtime's. The program drops them outside any scope, and the
/// allocator, which sees only a pointer and a layout at a free, would count those frees as
/// the program's (a program that allocates nothing showed thousands of frees and negative
/// live bytes after taking and dropping snapshots). Telling blocks apart at the free itself
/// would take a header on every block or a lookup on every free, for every program, session
/// or not. Instead the value's drop glue says whose blocks these are: Rust drops a struct's
/// fields in declaration order, so with an opening bracket first and a closing one last,
/// every field in between is dropped inside the scope, on whichever thread drops the value.
/// Unlike a `Drop` impl, brackets leave the other fields movable (`let data = report.data`):
/// a field moved out belongs to the program from then on, and so do its frees.
///
/// A bracket is armed only if it was made inside a scope: a copy the program makes (a
/// `Clone` of a report) holds blocks the program allocated, whose frees are its own.
pub struct RuntimeDrop<const OPENS: bool> {
    armed: bool,
}

/// The first field of a value whose fields are dropped as the runtime's work.
pub type RuntimeDropStart = RuntimeDrop<true>;
/// The last field of such a value.
pub type RuntimeDropEnd = RuntimeDrop<false>;

/// The two brackets for a value made now: armed if the calling thread is doing the runtime's
/// own work (see [`RuntimeDrop`]). One decision for both, so they always match.
#[inline]
pub fn drop_as_runtime_work() -> (RuntimeDropStart, RuntimeDropEnd) {
    runtime_drop_brackets(in_runtime_work())
}

/// Brackets armed or not whoever makes them: armed for a handle the program makes to state
/// the runtime made (a session's [`Snapshotter`](super::Snapshotter)), which only ever holds
/// the runtime's blocks.
#[inline]
pub(super) fn runtime_drop_brackets(armed: bool) -> (RuntimeDropStart, RuntimeDropEnd) {
    (RuntimeDrop { armed }, RuntimeDrop { armed })
}

impl<const OPENS: bool> Clone for RuntimeDrop<OPENS> {
    /// Armed if the copy is made inside a scope: whoever clones allocates the copy's blocks.
    /// (Both brackets of a derived `Clone` see the same scope: field clones open and close
    /// scopes only in pairs.)
    fn clone(&self) -> Self {
        RuntimeDrop {
            armed: in_runtime_work(),
        }
    }
}

impl<const OPENS: bool> fmt::Debug for RuntimeDrop<OPENS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if OPENS {
            "RuntimeDropStart"
        } else {
            "RuntimeDropEnd"
        })
    }
}

impl<const OPENS: bool> Drop for RuntimeDrop<OPENS> {
    #[inline]
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // The same counter `RuntimeWork` keeps: the fields dropped between the brackets see
        // an open scope, and one opened around the whole value nests.
        let _ = RUNTIME_WORK.try_with(|w| {
            w.set(if OPENS {
                w.get().saturating_add(1)
            } else {
                w.get().saturating_sub(1)
            })
        });
    }
}

/// Whether the calling thread is doing cabprof's own work: inside a [`RuntimeWork`] scope, or
/// on one of the runtime's threads (analyzers, the Ctrl-C handler).
#[inline(always)]
pub fn in_runtime_work() -> bool {
    RUNTIME_WORK.try_with(|w| w.get() != 0).unwrap_or(true)
}

/// The calling thread is one of the runtime's own, for the rest of its life (its exit and
/// thread-local destructors included).
pub(super) fn mark_runtime_thread() {
    let _ = RUNTIME_WORK.try_with(|w| w.set(u32::MAX / 2));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records, when dropped, whether the thread was doing the runtime's work.
    struct Probe<'a>(&'a Cell<Option<bool>>);

    impl Drop for Probe<'_> {
        fn drop(&mut self) {
            self.0.set(Some(in_runtime_work()));
        }
    }

    struct Bracketed<'a> {
        _start: RuntimeDropStart,
        _inner: Probe<'a>,
        moved: Probe<'a>,
        _end: RuntimeDropEnd,
    }

    fn bracketed<'a>(
        inner: &'a Cell<Option<bool>>,
        moved: &'a Cell<Option<bool>>,
    ) -> Bracketed<'a> {
        let (_start, _end) = drop_as_runtime_work();
        Bracketed {
            _start,
            _inner: Probe(inner),
            moved: Probe(moved),
            _end,
        }
    }

    #[test]
    fn fields_between_the_brackets_are_dropped_as_the_runtime_s_work() {
        let (inner, moved) = (Cell::new(None), Cell::new(None));
        let made = {
            let _work = runtime_work();
            bracketed(&inner, &moved)
        };
        assert!(!in_runtime_work());
        // A field moved out is dropped later, as the program's; the rest, between the
        // brackets, as the runtime's; and the scope is closed afterwards.
        let out = {
            let made = made;
            made.moved
        };
        assert_eq!(inner.get(), Some(true));
        drop(out);
        assert_eq!(moved.get(), Some(false));
        assert!(!in_runtime_work());
        // Made by the program: not armed.
        let (inner, moved) = (Cell::new(None), Cell::new(None));
        drop(bracketed(&inner, &moved));
        assert_eq!((inner.get(), moved.get()), (Some(false), Some(false)));
        // Inside an open scope the brackets nest and leave it open.
        let (inner, moved) = (Cell::new(None), Cell::new(None));
        let made = {
            let _work = runtime_work();
            bracketed(&inner, &moved)
        };
        let work = runtime_work();
        drop(made);
        assert!(in_runtime_work());
        drop(work);
        assert!(!in_runtime_work());
    }

    #[test]
    fn a_copy_is_armed_only_if_made_as_the_runtime_s_work() {
        let (start, _end) = drop_as_runtime_work();
        assert!(!start.armed && !start.clone().armed);
        let _work = runtime_work();
        assert!(start.clone().armed);
    }
}
