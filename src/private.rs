//! What the code `#[cabprof::profile]` generates calls into. Not a public API.
//!
//! # Calls and returns
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
//! return more than an inlined entry would; `cargo bench -p cabprof-checks --bench per_call`
//! measures it.
//!
//! # `async fn`
//!
//! An `async fn`'s frame spans its whole future: from the first `poll` to completion (or to the
//! future being dropped unfinished). [`instrument`] wraps the body's future; the caller is the
//! frame active at the first poll, and during every poll the function is the innermost frame,
//! so functions it calls name it as their caller. Between polls it is not on the shadow stack.
//!
//! A thread's event stream interleaves the polls of many futures, and one future may be polled
//! on several threads, so the analyzer cannot rebuild a task's calling context from a
//! per-thread stack alone. Each poll is therefore bracketed: `Poll { method, task, first }`
//! before the body runs, `PollEnd { task, poll, done }` after it (emitted by a guard, so a
//! panicking poll closes too). `task` is an id drawn once per future (from a per-thread block of
//! ids: no shared write per future); `poll` numbers the future's polls so that an analysis can
//! order the pieces of one invocation seen on different threads. The frame opens at the first
//! poll that finds a session running: a future polled before the session started (an
//! instrumented `async fn main` that starts the session in its body) opens its frame at its
//! next poll, so it is counted and its later callees name it as their caller (callees run in
//! the very poll that started the session still count under the root). A synchronous function
//! cannot do this: its frame began before the session, so it is never counted in that session
//! and its callees are attributed to the root; checking for a late session would add work to
//! [`enter`]'s no-session path, which stays one load and one branch. The first poll's `Poll`
//! follows its `Call` directly, which is where the analyzer learns the future's calling
//! context; the `Return` comes inside the last poll, before its `PollEnd`. A future dropped
//! unfinished closes with an empty last poll (`Poll`, `Return`, `PollEnd`). That is two words
//! per poll and a few instructions; synchronous functions are untouched.
//!
//! # Timing
//!
//! When the session runs the time analysis, a timed call reads the clock (one plain counter
//! read, `cabprof_cab::clock::now`) after emitting its `Call` and again at its exit, and returns
//! with a `TimedReturn` word carrying the difference instead of a `Return`: a timed call is two
//! words, as an untimed one (with `paths` too: its last `Path` comes before). A timed future
//! stamps each poll's start (after `Poll`) and end (before its `Return`/`PollEnd`) with `Time`
//! words, so its time is the time polled. Which calls are timed is a session-wide
//! setting ([`TIME_PERIOD`]) read only on the active path, after the session check: the
//! no-session path stays one load and one branch. With sampled timing (one call in K per
//! function and thread) the others are counted only; a per-thread table of countdowns indexed
//! by function id decides.
//!
//! # Paths
//!
//! With `paths`, a [`PathGuard`] also carries the Ball-Larus path register: the generated code
//! only adds constants to it on branch edges ([`branch`], [`try_branch`], [`PathGuard::add`]),
//! and at loop back edges (and split points) [`PathGuard::back_edge`] emits the path and
//! restarts the register. On exit the guard emits the final path, then the `Return`. If the
//! function unwinds, the path emitted is `num_paths + register`, which decodes as "cut short by
//! a panic".

use cabprof_cab::clock;
use cabprof_cab::event::{Event, MethodId, MAX_METHOD_ID, MAX_PATH_NUMBER, MAX_TASK_ID};
use cabprof_cab::runtime::{activity_of, emit, emit_with, session_key, Activity};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

pub use cabprof_cab::registry::{
    PathEdge, PathMode, PathNode, PathNumbering, PathStep, Site, StepKind,
};

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
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// A method id from a raw value the registry handed out (always `<= MAX_METHOD_ID`; told to
/// the compiler, which then drops the range check and the masking).
#[inline(always)]
fn method(id: u32) -> MethodId {
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
fn push(callee: u32) -> u32 {
    CURRENT.with(|c| c.replace(callee))
}

#[inline(always)]
fn pop(caller: u32) {
    CURRENT.with(|c| c.set(caller));
}

/// Whether to record: a session runs, or this is the process's first event and it has just
/// started one (`CABPROF=1`, see [`crate::process`]). With no session: one load, one branch.
#[inline(always)]
pub(crate) fn recording() -> bool {
    recording_key() != 0
}

/// [`recording`], as the running session's key (0: not recording), for [`emit_with`].
#[inline(always)]
fn recording_key() -> u64 {
    let key = session_key();
    match activity_of(key) {
        Activity::Idle => 0,
        Activity::Recording => key,
        Activity::Undecided => decided_key(),
    }
}

/// The first event of the process: decide, then the key of the session that runs (0: none).
#[cold]
#[inline(never)]
fn decided_key() -> u64 {
    if !crate::process::decide() {
        return 0;
    }
    let key = session_key();
    match activity_of(key) {
        Activity::Recording => key,
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Timing

/// Which calls are stamped with `Time` words: 0 = none (the session does not run the time
/// analysis), 1 = every call, K = one call in K per function and thread. Set before a session
/// starts ([`set_time_period`]); read only on the active path, never when no session runs.
static TIME_PERIOD: AtomicU32 = AtomicU32::new(0);

/// Stamp calls from the next session on (see [`TIME_PERIOD`]); returns the previous setting.
pub(crate) fn set_time_period(k: u32) -> u32 {
    TIME_PERIOD.swap(k, Ordering::Relaxed)
}

/// The current [`TIME_PERIOD`].
pub(crate) fn time_period() -> u32 {
    TIME_PERIOD.load(Ordering::Relaxed)
}

/// Sampled timing's per-thread state: per function id, the calls to skip before the next
/// timed one, and a random-number state. It owns the countdowns; [`SKIP`] caches where they
/// are, and this table's drop clears that cache.
struct SkipTable {
    skip: Vec<u32>,
    rng: u64,
}

impl Drop for SkipTable {
    fn drop(&mut self) {
        let _ = SKIP.try_with(|c| {
            c.ptr.set(std::ptr::null_mut());
            c.len.set(0);
        });
    }
}

/// Where this thread's countdowns are, in a destructor-free thread-local: the inline check of
/// a sampled-timing call is two thread-local loads and a decrement, with no first-use
/// registration code (which made every instrumented function save three more registers, also
/// with no session running).
struct SkipCache {
    ptr: Cell<*mut u32>,
    len: Cell<usize>,
}

thread_local! {
    static SKIP: SkipCache = const {
        SkipCache { ptr: Cell::new(std::ptr::null_mut()), len: Cell::new(0) }
    };
    static SKIP_TABLE: RefCell<SkipTable> = const {
        RefCell::new(SkipTable { skip: Vec::new(), rng: 0 })
    };
}

/// Whether to stamp this call of `id` (a session runs).
#[inline(always)]
fn timed(id: u32) -> bool {
    match TIME_PERIOD.load(Ordering::Relaxed) {
        0 => false,
        1 => true,
        k => sample(id, k),
    }
}

/// One call in `k` of `id` on this thread: after a timed call, skip a number of calls drawn
/// uniformly from `0..=2k-2` (mean `k - 1`), so a function whose call durations repeat with
/// some period is not always timed at the same phase. Counting down is inline; drawing (and
/// growing the table) is not.
#[inline(always)]
fn sample(id: u32, k: u32) -> bool {
    let (ptr, len) = SKIP.with(|c| (c.ptr.get(), c.len.get()));
    let i = id as usize;
    if i < len {
        // SAFETY: `(ptr, len)` is this thread's `SKIP_TABLE.skip`, published by `draw` after
        // its last change to the table; `draw` clears it before changing the table (which may
        // run an instrumented allocator, and so this) and the table's drop clears it too;
        // `i < len`, so the slot is in it. Only this thread uses it, and while it is published
        // no borrow of the table is live.
        let n = unsafe { &mut *ptr.add(i) };
        if *n > 0 {
            *n -= 1;
            return false;
        }
    }
    draw(id, k)
}

/// [`sample`] for a countdown at 0 or not made yet: time this call and draw the next skip.
#[cold]
#[inline(never)]
fn draw(id: u32, k: u32) -> bool {
    // Forget where the table is until it is published again below: growing it reallocates,
    // and an instrumented allocator would otherwise count down in the block being freed.
    // Meanwhile `sample` comes here and finds the table borrowed.
    SKIP.with(|c| c.len.set(0));
    SKIP_TABLE
        .try_with(|t| {
            let Ok(mut t) = t.try_borrow_mut() else {
                return false;
            };
            let t = &mut *t;
            let i = id as usize;
            if i >= t.skip.len() {
                t.skip.resize(i + 1, 0);
            }
            let timed = if t.skip[i] > 0 {
                t.skip[i] -= 1;
                false
            } else {
                // xorshift64, seeded from the table's address (distinct per thread).
                let mut x = t.rng;
                if x == 0 {
                    x = (t as *const SkipTable as u64) | 1;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t.rng = x;
                t.skip[i] = (x % (2 * k as u64 - 1)) as u32;
                true
            };
            let (ptr, len) = (t.skip.as_mut_ptr(), t.skip.len());
            SKIP.with(|c| {
                c.ptr.set(ptr);
                c.len.set(len);
            });
            timed
        })
        .unwrap_or(false)
}

/// A `Time` word of now.
#[inline(always)]
fn stamp() {
    emit(Event::time(clock::now()));
}

// ---------------------------------------------------------------------------------------------
// Calls

/// An instrumented function's frame; emits `Return` (or, timed, `TimedReturn`) when dropped.
#[must_use]
#[derive(Debug)]
pub struct FrameGuard {
    /// This function's id, or 0 if no session ran at entry (then the guard does nothing).
    callee: u32,
    /// The frame that was innermost at entry, restored on drop.
    caller: u32,
    /// The clock at entry if this call is timed, else [`UNTIMED`].
    start: u64,
}

/// [`FrameGuard::start`] of a call that is not timed.
const UNTIMED: u64 = u64::MAX;

/// Enter the function of `site`: with no session, one load and one branch.
///
/// Only that load and branch are inlined into the instrumented function; the work of a
/// recorded call is one out-of-line call ([`enter_recorded`]). Inlined, that work (shadow
/// stack, ring push, timing decision: about a hundred instructions) made every annotated
/// function too big for the compiler to inline into its callers, so an accessor marked
/// through its `impl` became a real call even with no session running (a recursive-descent
/// parser of small accessors ran 7.8 times slower idle; `cargo bench -p cabprof-checks
/// --bench idle_cost`).
#[inline(always)]
pub fn enter(site: &'static Site) -> FrameGuard {
    let key = session_key();
    let e = if key == 0 {
        Entry::IDLE
    } else {
        enter_recorded::<true>(site, key)
    };
    FrameGuard {
        callee: e.callee(),
        caller: e.caller(),
        start: e.start,
    }
}

/// What entering a function left for its exit: a [`FrameGuard`]'s fields, without its drop.
/// Two words, so that [`enter_recorded`] returns it in two registers (a struct of three
/// fields is returned through memory).
#[derive(Clone, Copy)]
#[repr(C)]
struct Entry {
    /// `callee | caller << 32`.
    ids: u64,
    start: u64,
}

impl Entry {
    /// Nothing recorded: the exit does nothing.
    const IDLE: Entry = Entry {
        ids: 0,
        start: UNTIMED,
    };

    #[inline(always)]
    fn callee(self) -> u32 {
        self.ids as u32
    }

    #[inline(always)]
    fn caller(self) -> u32 {
        (self.ids >> 32) as u32
    }
}

/// The entry of `site`'s function with a session running or undecided (`key`, non-zero):
/// the `Call`, and the clock if this call is timed. Returned in two registers.
///
/// `extern "C"`, with any panic contained: a function that cannot unwind needs no landing
/// pad in its callers, and an instrumented function whose body calls nothing else then has
/// none at all, which keeps it small enough to inline.
///
/// `IN_CALLER` (always `true`) makes the out-of-line entry and exit generic (the paths exit is
/// generic already): a generic function is compiled in the crate that calls it, so the
/// instrumented function calls its own crate's copy directly. A plain function of this crate
/// is reached through the GOT in a position-independent executable built without LTO (the
/// default `--release` of a crate depending on cabprof), and that indirect call cost about
/// 1.9 ns per recorded call on AMD EPYC (`per_call`'s `(release)` rows: 7.93 ns/call against
/// 6.02 with the same code linked without the GOT).
#[inline(never)]
#[allow(improper_ctypes_definitions)] // Called from Rust only; the ABI is for `nounwind`.
extern "C" fn enter_recorded<const IN_CALLER: bool>(site: &'static Site, key: u64) -> Entry {
    // Which session records, and this function's id (its first call registers it): a panic
    // here records nothing and leaves the shadow stack as it was.
    let recorded = contained(
        || {
            let key = match activity_of(key) {
                Activity::Recording => key,
                Activity::Undecided => decided_key(),
                Activity::Idle => 0,
            };
            (key != 0).then(|| (key, site.id()))
        },
        None,
    );
    let Some((key, callee)) = recorded else {
        return Entry::IDLE;
    };
    let caller = push(callee);
    // The frame is on the shadow stack now: whatever happens below, the exit must pop it, so a
    // panic here still returns the ids (its `Return` may then close a frame whose `Call` was
    // not emitted; every later frame still names the right caller).
    let start = contained(
        || {
            emit_with(key, Event::call(method(caller), method(callee)));
            if timed(callee) {
                clock::now()
            } else {
                UNTIMED
            }
        },
        UNTIMED,
    );
    Entry {
        ids: u64::from(callee) | u64::from(caller) << 32,
        start,
    }
}

/// Run `f`; if it panics, return `or` instead of unwinding into the instrumented function (a
/// bug in cabprof then loses an event, never the program's own control flow).
#[inline(always)]
fn contained<R>(f: impl FnOnce() -> R, or: R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(or)
}

impl Drop for FrameGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.callee != 0 {
            leave::<true>(self.callee, self.caller, self.start);
        }
    }
}

/// The `Return` of a frame entered while a session ran; a timed one (`start` read at entry)
/// returns with its duration in one `TimedReturn` word. Out of line so that the guard's drop
/// stays one compare: the compiler inlines a small drop into every instrumented function, and
/// calls a large one, which was most of the no-session cost. `extern "C"` with panics
/// contained, as [`enter_recorded`]: no landing pad in the caller.
#[inline(never)]
extern "C" fn leave<const IN_CALLER: bool>(callee: u32, caller: u32, start: u64) {
    contained(|| leave_inner(callee, caller, start, emit), ());
}

/// The exit, its words going to `emit`.
#[inline(always)]
fn leave_inner(callee: u32, caller: u32, start: u64, emit: impl Fn(Event)) {
    if start == UNTIMED {
        pop(caller);
        emit(Event::ret(method(callee)));
    } else {
        // An exit reading below the entry one (reordered reads, or counters that disagree
        // across cores) counts as 0, not as a wrapped 2^64 − 1.
        let ticks = clock::now().saturating_sub(start);
        pop(caller);
        emit(Event::timed_return(method(callee), ticks));
    }
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
        entry: enter_recorded::<true>(site, key),
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

// ---------------------------------------------------------------------------------------------
// Paths

/// A frame with a Ball-Larus path register. `CALLS`: also emit `Call`/`Return` (false inside an
/// `async fn`, whose frame is the [`Instrumented`] future).
#[must_use]
#[derive(Debug)]
pub struct PathGuard<const CALLS: bool> {
    /// This function's id, or 0 if no session ran at entry (then nothing is emitted).
    method: u32,
    /// The frame that was innermost at entry, restored on drop (`CALLS` only).
    caller: u32,
    /// The path register: the sum of the edge values taken since the path began. Below
    /// `unwound` for exact numberings; wrapping for [`PathMode::Hashed`] ones, whose sums may
    /// exceed 64 bits.
    register: u64,
    /// `num_paths` of the numbering: added to the register of a path cut short by a panic.
    unwound: u64,
    /// The numbering is [`PathMode::Hashed`]: emit a hash of the register.
    hashed: bool,
    /// The clock at entry if this call is timed (`CALLS` only), else [`UNTIMED`].
    start: u64,
}

/// Enter the function of `site`, instrumented with `paths`.
#[inline(always)]
pub fn enter_paths(site: &'static Site, num_paths: u64, hashed: bool) -> PathGuard<true> {
    let key = session_key();
    let e = if key == 0 {
        Entry::IDLE
    } else {
        enter_recorded::<true>(site, key)
    };
    PathGuard {
        method: e.callee(),
        caller: e.caller(),
        register: 0,
        unwound: num_paths,
        hashed,
        start: e.start,
    }
}

/// The path register of an `async fn` body (its frame is the [`Instrumented`] future).
#[inline(always)]
pub fn async_paths(site: &'static Site, num_paths: u64, hashed: bool) -> PathGuard<false> {
    PathGuard {
        method: if recording() { site.id() } else { 0 },
        caller: 0,
        register: 0,
        unwound: num_paths,
        hashed,
        start: UNTIMED,
    }
}

/// 30 bits of a 64-bit register, for [`PathMode::Hashed`] (Fibonacci hashing: the top bits of
/// a multiply by 2^64 / φ).
#[inline(always)]
fn hash_path(r: u64) -> u32 {
    (r.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 34) as u32
}

impl<const CALLS: bool> PathGuard<CALLS> {
    /// Take an edge of value `value`.
    #[inline(always)]
    pub fn add(&mut self, value: u64) {
        self.register = self.register.wrapping_add(value);
    }

    /// A back edge (or split point): the running path ends with an edge of value `end`, and
    /// a new one starts with the value `restart` of its entry edge.
    #[inline(always)]
    pub fn back_edge(&mut self, end: u64, restart: u64) {
        if self.method != 0 {
            emit_path(self.method, self.register.wrapping_add(end), self.hashed);
        }
        self.register = restart;
    }
}

/// The `Path` event of path `path` (a register value) of `method_id`.
#[inline(always)]
fn emit_path(method_id: u32, path: u64, hashed: bool) {
    let number = if hashed {
        hash_path(path)
    } else {
        debug_assert!(
            path <= MAX_PATH_NUMBER as u64,
            "path number {path} too large"
        );
        path as u32
    };
    if let Ok(e) = Event::path(method(method_id), number & MAX_PATH_NUMBER) {
        emit(e);
    }
}

/// Exit of a [`PathGuard`]: the last path (marked if unwinding), then the `Return` if `calls`.
/// Cannot unwind, as [`leave`].
#[inline(never)]
#[allow(improper_ctypes_definitions)] // Called from Rust only; the ABI is for `nounwind`.
extern "C" fn exit_paths<const CALLS: bool>(guard: &PathGuard<CALLS>) {
    let (method_id, caller, hashed) = (guard.method, guard.caller, guard.hashed);
    // Contained apart, so that the frame is popped and closed even if the path's word fails.
    contained(
        || {
            let mut path = guard.register;
            if !hashed && std::thread::panicking() {
                path = path.wrapping_add(guard.unwound);
            }
            emit_path(method_id, path, hashed);
        },
        (),
    );
    if CALLS {
        contained(|| leave_inner(method_id, caller, guard.start, emit), ());
    }
}

impl<const CALLS: bool> Drop for PathGuard<CALLS> {
    #[inline(always)]
    fn drop(&mut self) {
        // Out of line for the same reason as `leave`.
        if self.method != 0 {
            exit_paths(self);
        }
    }
}

/// A boolean decision: add `if_true` or `if_false` to the register, return `cond`. The
/// condition comes first so that it is evaluated before the guard is borrowed.
#[inline(always)]
pub fn branch<const CALLS: bool>(
    cond: bool,
    guard: &mut PathGuard<CALLS>,
    if_true: u64,
    if_false: u64,
) -> bool {
    guard.add(if cond { if_true } else { if_false });
    cond
}

/// The decision of `value?`: add `if_error` when `?` will return early, else `if_ok`.
#[inline(always)]
pub fn try_branch<T: TryBranch, const CALLS: bool>(
    value: T,
    guard: &mut PathGuard<CALLS>,
    if_ok: u64,
    if_error: u64,
) -> T {
    guard.add(if value.is_residual() { if_error } else { if_ok });
    value
}

/// Types `?` applies to on stable Rust: whether `?` returns early on this value.
pub trait TryBranch {
    /// `?` would return early.
    fn is_residual(&self) -> bool;
}

impl<T, E> TryBranch for Result<T, E> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        self.is_err()
    }
}

impl<T> TryBranch for Option<T> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        self.is_none()
    }
}

impl<B, C> TryBranch for ControlFlow<B, C> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        self.is_break()
    }
}

impl<T, E> TryBranch for Poll<Result<T, E>> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        matches!(self, Poll::Ready(Err(_)))
    }
}

impl<T, E> TryBranch for Poll<Option<Result<T, E>>> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        matches!(self, Poll::Ready(Some(Err(_))))
    }
}

// ---------------------------------------------------------------------------------------------
// async fn

/// The future of an instrumented `async fn` body: its frame spans first poll to completion.
#[must_use = "futures do nothing unless polled"]
pub struct Instrumented<F> {
    /// Structurally pinned: never moved out of, and only ever exposed as `Pin<&mut F>`.
    inner: F,
    site: &'static Site,
    /// This function's id from the first poll that found a session running until completion;
    /// 0 before that (no session yet) and after.
    callee: u32,
    /// The future has completed (or its frame was closed): no later poll opens it again.
    finished: bool,
    /// This future's id in `Poll`/`PollEnd` words (valid while `callee != 0`).
    task: u32,
    /// Polls so far (the number of the next one).
    polls: u32,
    /// Its polls are timed (decided at the first poll).
    timed: bool,
}

impl<F> std::fmt::Debug for Instrumented<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instrumented")
            .field("callee", &self.callee)
            .field("task", &self.task)
            .field("polls", &self.polls)
            .finish_non_exhaustive()
    }
}

/// Wrap the future of an `async fn` body. `T` is spelled out by the generated code where it can
/// be, so that `?` inside the body knows its error type.
#[inline(always)]
pub fn instrument<T, F: Future<Output = T>>(site: &'static Site, inner: F) -> Instrumented<F> {
    Instrumented {
        inner,
        site,
        callee: 0,
        finished: false,
        task: 0,
        polls: 0,
        timed: false,
    }
}

/// Task ids are handed out in blocks, so a thread touches the shared counter once per
/// `TASK_BLOCK` futures.
const TASK_BLOCK: u32 = 1024;

/// The next task id for the shared counter to hand out (a block's first id).
static NEXT_TASK_BLOCK: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread's next task id and the end of its block (equal: the block is used up).
    static TASK_IDS: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// An id for a new future, distinct from the ids of the other futures alive (ids wrap at
/// `MAX_TASK_ID`, so only a future outliving 2^30 newer ones can share one).
#[inline]
fn next_task() -> u32 {
    TASK_IDS.with(|c| {
        let (mut next, mut end) = c.get();
        if next == end {
            next = NEXT_TASK_BLOCK.fetch_add(TASK_BLOCK, Ordering::Relaxed);
            end = next.wrapping_add(TASK_BLOCK);
        }
        c.set((next.wrapping_add(1), end));
        next & MAX_TASK_ID
    })
}

/// One poll of an active [`Instrumented`] future: the function is the innermost frame until
/// it is dropped, which also closes the poll in the event stream, even if the poll panics.
struct PollScope {
    callee: u32,
    caller: u32,
    task: u32,
    poll: u32,
    /// The future completed in this poll: emit its `Return` before the `PollEnd`.
    done: bool,
    /// Stamp the poll's end.
    timed: bool,
}

impl Drop for PollScope {
    #[inline(always)]
    fn drop(&mut self) {
        pop(self.caller);
        if self.timed {
            stamp();
        }
        if self.done {
            emit(Event::ret(method(self.callee)));
        }
        emit(Event::poll_end(self.task, self.poll, self.done));
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: it is only reached through the `Pin` made
        // below and never moved, including by `Drop` (which touches only the other fields);
        // the other fields are plain data that is never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let mut first = false;
        // The frame opens at the first poll that finds a session running, not only at the
        // very first poll: a future that started the session itself (`#[profile] async fn
        // main` whose body calls `start`) is counted from its next poll on, and what it calls
        // from then on names it as the caller. With no session this is one load and a branch.
        if this.callee == 0 && !this.finished && recording() {
            // The caller is the frame polling us; we become innermost just below.
            let callee = this.site.id();
            let caller = CURRENT.with(Cell::get);
            emit(Event::call(method(caller), method(callee)));
            this.callee = callee;
            this.task = next_task();
            this.timed = timed(callee);
            first = true;
        }
        let mut scope = (this.callee != 0).then(|| {
            emit(Event::poll(method(this.callee), this.task, first));
            if this.timed {
                stamp();
            }
            let poll = this.polls;
            this.polls = this.polls.saturating_add(1);
            PollScope {
                callee: this.callee,
                caller: push(this.callee),
                task: this.task,
                poll,
                done: false,
                timed: this.timed,
            }
        });
        // SAFETY: see above; `this` came from a `Pin<&mut Self>`, so `inner` stays put.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let out = inner.poll(cx);
        if out.is_ready() {
            this.finished = true;
            if let Some(s) = &mut scope {
                s.done = true;
                this.callee = 0;
            }
        }
        drop(scope);
        out
    }
}

impl<F> Drop for Instrumented<F> {
    fn drop(&mut self) {
        // Dropped after its first poll but before completion: the frame ends here, in a last,
        // empty poll so that the `Return` lands in the future's own context.
        if self.callee != 0 {
            emit(Event::poll(method(self.callee), self.task, false));
            emit(Event::ret(method(self.callee)));
            emit(Event::poll_end(self.task, self.polls, true));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory

/// A read of the place `x` refers to (`a[i]` read); returns `x`.
#[inline(always)]
pub fn load<T: ?Sized>(x: &T) -> &T {
    crate::mem::record(x, false);
    x
}

/// A read of a place borrowed mutably (the container in `a[i][j] = v`); returns `x`.
#[inline(always)]
pub fn load_mut<T: ?Sized>(x: &mut T) -> &mut T {
    crate::mem::record(&*x, false);
    x
}

/// A write of the place `x` refers to (`a[i] = v`, `&mut a[i]`); returns `x`.
#[inline(always)]
pub fn store<T: ?Sized>(x: &mut T) -> &mut T {
    crate::mem::record(&*x, true);
    x
}

/// A read and a write (`a[i] += v`); returns `x`.
#[inline(always)]
pub fn update<T: ?Sized>(x: &mut T) -> &mut T {
    crate::mem::record(&*x, false);
    crate::mem::record(&*x, true);
    x
}

/// A read of `x`, for places whose use the macro cannot classify (method receivers, `match`
/// scrutinees): the address is taken before the original expression runs.
#[inline(always)]
pub fn touch<T: ?Sized>(x: &T) {
    crate::mem::record(x, false);
}
