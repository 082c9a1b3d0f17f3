//! What the code `#[cabprof::profile]` generates calls into. Not a public API.
//!
//! One file per job: `frames` (entering and leaving a function: the shadow stack, `Call` and
//! `Return`), `timing` (which calls are timed), `paths` (the Ball-Larus path register),
//! `future` (an `async fn`'s frame across its polls), `memory` (the accesses
//! `#[profile(memory)]` marks) and `probe` (the time analysis' measure of its own cost, on the
//! program's threads). This file holds what they share: the shadow stack's
//! thread-local and the check whether a session records.

use cabprof_cab::event::{MethodId, MAX_METHOD_ID};
use cabprof_cab::runtime::{activity_of, session_key, Activity};
use std::cell::Cell;

mod frames;
mod future;
mod memory;
mod paths;
mod probe;
mod ticker;
mod timing;

/// The process-wide session's starter, named through this module so that `crate = path`
/// reaches it as it reaches the rest.
pub use crate::__first_event as first_event;
pub use cabprof_cab::registry::{
    PathEdge, PathMode, PathNode, PathNumbering, PathStep, Site, StepKind,
};
/// The standard items the attribute's code names, through this crate: `::core` is not a path
/// an edition-2015 crate can name (its `::` is its own root), `::cabprof` is, once it has
/// `extern crate cabprof;`.
pub use core::option::Option;
pub use core::{file, line, module_path};
pub(crate) use frames::enter_keyed;
pub use frames::{enter, run, FrameGuard};
pub(crate) use future::instrument_keyed;
pub use future::{instrument, Instrumented};
pub use memory::{load, load_mut, store, touch, update};
pub use paths::{async_paths, branch, enter_paths, try_branch, PathGuard, TryBranch};
pub(crate) use probe::{
    batch as probe_batch, body as probe_body, median as probe_median, plain as probe_plain,
    PROBE_SITE,
};
pub(crate) use ticker::{
    intervals as tick_intervals, start as start_ticker, stop as stop_ticker, LONG_TICKS,
};
pub(crate) use timing::{
    set_time_period, set_timeline, set_trigger_ticks, thread_names, time_period, timeline,
};

/// The inputs of a function that keeps one body behind a guard (see `run_recorded` for the
/// closure form), passed after the entry stamp: once their addresses have escaped here, the
/// compiler must read them after this point, so a pure body cannot be hoisted above the stamp.
/// By reference, so a large argument is not copied.
#[inline(always)]
pub fn hold<T: ?Sized>(inputs: &T) {
    std::hint::black_box(inputs);
}

/// The value of a guarded body's tail, in memory before the guard's exit stamp, so that the
/// compiler cannot sink the arithmetic that makes it past the stamp. The type is spelled out
/// by the generated code, so the tail keeps its expected type and its coercions.
#[inline(always)]
pub fn settle<T>(value: T) -> T {
    std::hint::black_box(&value);
    value
}

/// `std::any::type_name_of_val`, for the generated `Site` (see `Site::new`): called here, in
/// cabprof's crate, so that the user's crate, whatever its `rust-version`, expands no std API
/// newer than its own (clippy's `incompatible_msrv` would point at the attribute).
#[inline]
pub fn type_name_of<T: ?Sized>(_: &T) -> &'static str {
    std::any::type_name::<T>()
}

thread_local! {
    /// Id of the innermost instrumented frame of this thread entered while a session ran
    /// (0 = none: the root).
    pub(super) static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// A method id from a raw value the registry handed out (always `<= MAX_METHOD_ID`; told to
/// the compiler, which then drops the range check and the masking).
#[inline(always)]
pub(super) fn method(id: u32) -> MethodId {
    // SAFETY: every id passed here is a `Site`'s (the registry hands out ids up to
    // `MAX_METHOD_ID` and no others) or the shadow stack's, which holds only those and 0.
    unsafe { std::hint::assert_unchecked(id <= MAX_METHOD_ID) };
    match MethodId::new(id) {
        Ok(m) => m,
        Err(_) => MethodId::ROOT,
    }
}

/// Make `callee` the innermost frame; returns its caller.
#[inline(always)]
pub(super) fn push(callee: u32) -> u32 {
    CURRENT.with(|c| c.replace(callee))
}

#[inline(always)]
pub(super) fn pop(caller: u32) {
    CURRENT.with(|c| c.set(caller));
}

/// Whether to record the event of `site`'s function: a session runs, or this is the process's
/// first event and the site's [`first_event`](Site::first_event) has just started one. With
/// no session: one load, one branch.
#[inline(always)]
pub(crate) fn recording(site: &Site) -> bool {
    recording_key(site) != 0
}

/// [`recording`], as the running session's key (0: not recording), for
/// [`emit_with`](cabprof_cab::runtime::emit_with).
#[inline(always)]
fn recording_key(site: &Site) -> u64 {
    let key = session_key();
    match activity_of(key) {
        Activity::Idle => 0,
        Activity::Recording => key,
        Activity::Undecided => decided_key(site),
    }
}

/// The first event of the process: `site`'s starter decides, then the key of the session
/// that runs (0: none).
#[cold]
#[inline(never)]
pub(super) fn decided_key(site: &Site) -> u64 {
    if !site.first_event() {
        return 0;
    }
    let key = session_key();
    match activity_of(key) {
        Activity::Recording => key,
        _ => 0,
    }
}

/// Run `f`; if it panics, return `or` instead of unwinding into the instrumented function (a
/// bug in cabprof then loses an event, never the program's own control flow).
#[inline(always)]
pub(super) fn contained<R>(f: impl FnOnce() -> R, or: R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(or)
}
