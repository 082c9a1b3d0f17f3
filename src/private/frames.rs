//! Calls and returns: an instrumented function's frame.
//!
//! [`enter`] runs at the top of an instrumented function and returns a [`FrameGuard`] that lives
//! until everything the body made is dropped, the temporaries of its tail expression included
//! (the guard is the scrutinee of a `match` around the body). Entering emits `Call { caller, callee }`; dropping the guard emits
//! `Return { callee }`, so early `return`, `?` and unwinding panics all close the frame.
//!
//! The caller comes from a shadow stack that lives in the guards themselves: one thread-local
//! `Cell<u32>` holds the id of the innermost active frame, each guard saves the value it
//! replaced and puts it back when dropped. That is one thread-local access at entry and one at
//! exit (a `const`, destructor-free thread-local: a plain `%fs`-relative load or store), no
//! allocation, no lock. The function's own id is a `Relaxed` load from its `static` [`Site`];
//! only the first call of each function takes the registry's lock.
//!
//! With no session running, [`enter`] does one load and one branch and returns an inactive
//! guard; the shadow stack is not touched, so it always holds the innermost frame entered
//! while a session ran. Only that load and branch are inlined into the instrumented
//! function: a recorded entry is one out-of-line call, and so is the exit (the guard's drop
//! calls `leave` when the entry recorded). Inlined, the recorded path (about a hundred
//! instructions) kept annotated accessors from being inlined into their callers. Both calls
//! are `extern "C"` with panics contained, so they cannot unwind and the instrumented
//! function needs no landing pad for them. With a session the call then costs one call and
//! return more than an inlined entry would; `cargo bench -p cabprof-per-call --bench per_call`
//! measures it.

use super::timing::{
    check_trigger, entry_start, mark_after_exit, timeline, COARSE, SAMPLED, UNTIMED,
};
use super::{contained, decided_key, method, pop, probe, push, ticker, Site};
use cabprof_cab::clock;
use cabprof_cab::event::Event;
use cabprof_cab::runtime::{activity_of, emit, emit_with, session_key, Activity};

/// An instrumented function's frame; emits `Return` (or, timed, `TimedReturn`) when dropped.
#[must_use]
#[derive(Debug)]
pub struct FrameGuard {
    /// This function's id, or 0 if no session ran at entry (then the guard does nothing).
    callee: u32,
    /// The frame that was innermost at entry, restored on drop.
    caller: u32,
    /// The clock at entry if this call is timed, else [`UNTIMED`]; with sampled timing,
    /// marked (see [`entry_start`]).
    start: u64,
}

/// Enter the function of `site`: with no session, one load and one branch.
///
/// Only that load and branch are inlined into the instrumented function; the work of a
/// recorded call is one out-of-line call (`enter_recorded`). Inlined, that work (shadow
/// stack, ring push, timing decision: about a hundred instructions) made every annotated
/// function too big for the compiler to inline into its callers, so an accessor marked
/// through its `impl` became a real call even with no session running, several times slower
/// idle on a parser of small accessors (`cargo bench -p cabprof-checks --bench idle_cost`).
#[inline(always)]
pub fn enter(site: &'static Site) -> FrameGuard {
    let key = session_key();
    FrameGuard::from(if key == 0 {
        Entry::IDLE
    } else {
        enter_recorded::<false>(site, key)
    })
}

/// Run the body of `site`'s function, the form `#[profile]` gives most functions: with no
/// session, one load and one branch, then the body, with no guard to set up or test at the
/// exit; with one, the body inside a recorded frame.
///
/// The body is a closure called at two places, so the compiler compiles it twice: an idle
/// copy that is the plain function behind the check, and a recorded one. A guard around a
/// single body costs more with no session running, since the guard's state lives across the
/// body in a saved register and is tested at every exit: on small methods that is most of the
/// idle cost (`cargo bench -p cabprof-checks --bench idle_cost`; figures in
/// docs/PERFORMANCE.md).
///
/// The attribute marks the closure `#[inline(always)]` (where debug assertions are off: in a
/// debug build that would put the body's frame on the stack twice under a session), and the
/// recorded copy lives in `run_recorded`, out of line. Left to choose, the compiler inlines a
/// small body into both places and a larger one into neither, and the idle path of a larger
/// method is then the check plus a call of the body with its captures passed by reference
/// (figures: docs/PERFORMANCE.md, "Profiling off, on a real crate"). So the idle copy is the
/// body inline, and the function grows only by the check and one cold call.
#[inline(always)]
pub fn run<R, F: FnOnce() -> R>(site: &'static Site, body: F) -> R {
    let key = session_key();
    if key == 0 {
        return body();
    }
    // The closure first: when it holds a single argument of the function, that argument
    // stays in its register and the call is a conditional tail jump.
    run_recorded(body, site, key)
}

/// The recorded copy of a body: out of line, so that the function that calls [`run`] holds the
/// idle copy alone, and generic, so that it is compiled in the user's crate and called
/// directly (see [`enter_recorded`] on the GOT).
#[cold]
#[inline(never)]
fn run_recorded<R, F: FnOnce() -> R>(mut body: F, site: &'static Site, key: u64) -> R {
    let _frame = FrameGuard::from(enter_recorded::<false>(site, key));
    // The body between the stamps. The entry and exit are opaque calls, which order memory
    // effects but not register arithmetic: a pure body (a hash, a checksum) was otherwise
    // moved past the exit stamp, its time landing in the caller. The inputs are the closure's
    // captures: once its address has escaped here, the body must read them after this point.
    std::hint::black_box(&mut body);
    let result = body();
    // The result must be in memory before the exit's clock read (the guard drops after this).
    std::hint::black_box(&result);
    result
}

/// What entering a function left for its exit: a [`FrameGuard`]'s fields, without its drop.
/// Two words, so that [`enter_recorded`] returns it in two registers (a struct of three
/// fields is returned through memory).
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct Entry {
    /// `callee | caller << 32`.
    ids: u64,
    pub(super) start: u64,
}

impl Entry {
    /// Nothing recorded: the exit does nothing.
    pub(super) const IDLE: Entry = Entry {
        ids: 0,
        start: UNTIMED,
    };

    #[inline(always)]
    pub(super) fn callee(self) -> u32 {
        self.ids as u32
    }

    #[inline(always)]
    pub(super) fn caller(self) -> u32 {
        (self.ids >> 32) as u32
    }
}

impl From<Entry> for FrameGuard {
    #[inline(always)]
    fn from(e: Entry) -> FrameGuard {
        FrameGuard {
            callee: e.callee(),
            caller: e.caller(),
            start: e.start,
        }
    }
}

/// The entry of `site`'s function with a session running or undecided (`key`, non-zero):
/// the `Call`, and the clock if this call is timed. Returned in two registers.
///
/// `extern "C"`, with any panic contained: a function that cannot unwind needs no landing
/// pad in its callers, and an instrumented function whose body calls nothing else then has
/// none at all, which keeps it small enough to inline.
///
/// `PROBE` is the calibration probe's entry (`probe.rs`): the same code, writing a probe word
/// where a call writes its `Call`, and timed as the probe asks. Being generic also makes the
/// out-of-line entry and exit compiled in the crate that calls them, so the instrumented
/// function calls its own crate's copy directly. A plain function of this crate is reached
/// through the GOT in a position-independent executable built without LTO (the default
/// `--release` of a crate depending on cabprof), and that indirect call costs every recorded
/// call (`per_call`'s `(release)` rows).
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)] // Called from Rust only; the ABI is for `nounwind`.
pub(super) extern "C" fn enter_recorded<const PROBE: bool>(site: &'static Site, key: u64) -> Entry {
    // Which session records, and this function's id (its first call registers it): a panic
    // here records nothing and leaves the shadow stack as it was.
    let recorded = contained(
        || {
            let key = match activity_of(key) {
                Activity::Recording => key,
                Activity::Undecided => decided_key(site),
                Activity::Idle => 0,
            };
            (key != 0).then(|| (key, site.id()))
        },
        None,
    );
    let Some((key, callee)) = recorded else {
        return Entry::IDLE;
    };
    // This thread's ring lapped: the time analysis measures its cost again, here, before the
    // call (its time is then taken out of the frames open around it). The probe's own calls
    // make the same check, so that they cost what a call costs; the lap was taken before they
    // run, and a lap during them finds the last probe too recent.
    if cabprof_cab::lap::pending() {
        contained(|| probe::on_lap(key), ());
    }
    let caller = push(callee);
    // The frame is on the shadow stack now: whatever happens below, the exit must pop it, so a
    // panic here still returns the ids (its `Return` may then close a frame whose `Call` was
    // not emitted; every later frame still names the right caller).
    let start = contained(
        || {
            if PROBE {
                emit_with(key, Event::probe());
                probe::entry_start()
            } else {
                emit_with(key, Event::call(method(caller), method(callee)));
                entry_start(callee)
            }
        },
        UNTIMED,
    );
    Entry {
        ids: u64::from(callee) | u64::from(caller) << 32,
        start,
    }
}

impl Drop for FrameGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.callee != 0 {
            leave::<false>(self.callee, self.caller, self.start);
        }
    }
}

/// The `Return` of a frame entered while a session ran; a timed one (`start` read at entry)
/// returns with its duration in one `TimedReturn` word. Out of line so that the guard's drop
/// stays one compare: the compiler inlines a small drop into every instrumented function, and
/// calls a large one, which was most of the no-session cost. `extern "C"` with panics
/// contained, as [`enter_recorded`]: no landing pad in the caller. `PROBE`: the calibration
/// probe's exit, which writes a probe word and keeps the duration for the probe.
#[inline(never)]
pub(super) extern "C" fn leave<const PROBE: bool>(callee: u32, caller: u32, start: u64) {
    if PROBE {
        contained(|| leave_inner(callee, caller, start, probe::exit_word), ());
    } else {
        contained(|| leave_inner(callee, caller, start, emit), ());
    }
}

/// The exit, its words going to `emit`.
#[inline(always)]
pub(super) fn leave_inner(callee: u32, caller: u32, start: u64, emit: impl Fn(Event)) {
    if start == UNTIMED {
        pop(caller);
        emit(Event::ret(method(callee)));
    } else if start & COARSE != 0 {
        // Untimed, with sampled timing: long if the coarse clock ticked LONG_TICKS times
        // meanwhile.
        let entered = start & !COARSE;
        let last = ticker::seq();
        let word = if last.wrapping_sub(entered) < ticker::LONG_TICKS {
            Event::ret(method(callee))
        } else {
            long_untimed(callee, entered, last)
        };
        pop(caller);
        emit(word);
    } else if start & SAMPLED == 0 {
        // An exit reading below the entry one (reordered reads, or counters that disagree
        // across cores) counts as 0, not as a wrapped 2^64 − 1.
        let end = clock::now_after();
        let ticks = end.saturating_sub(start);
        pop(caller);
        if timeline() {
            emit(Event::time(end));
            emit(Event::timed_return(method(callee), ticks));
            mark_after_exit(&emit);
            check_trigger(ticks);
        } else {
            emit(Event::timed_return(method(callee), ticks));
        }
    } else {
        let start = start & !SAMPLED;
        let end = clock::now_after();
        let ticks = (end & (SAMPLED - 1)).saturating_sub(start);
        let timeline = timeline();
        if timeline {
            emit(Event::time(end));
        }
        let word = if ticker::long_since(start) {
            Event::long_return(method(callee), ticks, true)
        } else {
            Event::timed_return(method(callee), ticks)
        };
        pop(caller);
        emit(word);
        if timeline {
            mark_after_exit(&emit);
            check_trigger(ticks);
        }
    }
}

/// The `LongReturn` of an untimed call entered after tick `entered` that returns now, tick
/// `last` being the latest: measured from the middle of the tick interval it entered in.
#[cold]
#[inline(never)]
fn long_untimed(callee: u32, entered: u64, last: u64) -> Event {
    let end = clock::now();
    let ticks = end.saturating_sub(ticker::entry_estimate(entered, last));
    Event::long_return(method(callee), ticks, false)
}

/// The calibration probe's frame: an instrumented function's, recording into the private
/// session of `key` (whatever session runs, or none) through the same out-of-line entry and
/// exit code.
pub(crate) struct KeyedFrame {
    entry: Entry,
    key: u64,
}

/// Enter `site`'s function for the private session of `key`.
#[inline(always)]
pub(crate) fn enter_keyed(site: &'static Site, key: u64) -> KeyedFrame {
    KeyedFrame {
        entry: enter_recorded::<false>(site, key),
        key,
    }
}

impl Drop for KeyedFrame {
    #[inline(always)]
    fn drop(&mut self) {
        let e = self.entry;
        if e.callee() != 0 {
            leave_keyed(e.callee(), e.caller(), e.start, self.key);
        }
    }
}

#[inline(never)]
extern "C" fn leave_keyed(callee: u32, caller: u32, start: u64, key: u64) {
    contained(
        || leave_inner(callee, caller, start, |e| emit_with(key, e)),
        (),
    );
}
