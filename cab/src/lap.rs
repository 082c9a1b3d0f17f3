//! Whether this thread's ring has lapped since it last asked: the cue for the time analysis'
//! calibration probe to run again on this thread (`cabprof`'s `private::probe`). A lap is a
//! ring's worth of events, so a thread is probed in proportion to what it writes, and the
//! producer's fast path pays nothing: only its wrap, out of line, sets the flag.

use std::cell::Cell;

thread_local! {
    /// Set by the producer's wrap, cleared by [`take`].
    static LAPPED: Cell<bool> = const { Cell::new(false) };
    /// Clock ticks this thread's producer has told in `Stall` words (wrapping).
    static STALLED: Cell<u64> = const { Cell::new(0) };
}

/// The calling thread's producer wrote a `Stall` word of `ticks`.
pub(crate) fn note_stall(ticks: u64) {
    let _ = STALLED.try_with(|c| c.set(c.get().wrapping_add(ticks)));
}

/// Clock ticks the calling thread's producer has told in `Stall` words so far (wrapping): a
/// probe takes out of its own `Stall` what the producer already told while it ran.
pub fn stalled() -> u64 {
    STALLED.try_with(Cell::get).unwrap_or(0)
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
