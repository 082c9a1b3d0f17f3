//! Whether this thread's ring has lapped since it last asked: the cue for the time analysis'
//! calibration probe to run again on this thread (`cabprof`'s `private::probe`). A lap is a
//! ring's worth of events, so a thread is probed in proportion to what it writes, and the
//! producer's fast path pays nothing: only its wrap, out of line, sets the flag.

use std::cell::Cell;

thread_local! {
    /// Set by the producer's wrap, cleared by [`take`].
    static LAPPED: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's ring wrapped.
pub(crate) fn note() {
    let _ = LAPPED.try_with(|c| c.set(true));
}

/// Whether the calling thread's ring wrapped since the last [`take`]: one thread-local load.
#[inline(always)]
pub fn pending() -> bool {
    LAPPED.try_with(Cell::get).unwrap_or(false)
}

/// [`pending`], and clear it.
pub fn take() -> bool {
    LAPPED.try_with(|c| c.replace(false)).unwrap_or(false)
}
