//! Timing: which calls read the clock.
//!
//! When the session runs the time analysis, a timed call reads the clock after emitting its
//! `Call` (`cabprof_cab::clock::now_before`: once the caller's work has executed) and again at
//! its exit (`now_after`: once the body's has), and returns
//! with a `TimedReturn` word carrying the difference instead of a `Return`: a timed call is two
//! words, as an untimed one (with `paths` too: its last `Path` comes before). A timed future
//! stamps each poll's start (after `Poll`) and end (before its `Return`/`PollEnd`) with `Time`
//! words, so its time is the time polled. Which calls are timed is a session-wide
//! setting ([`TIME_PERIOD`]) read only on the active path, after the session check: the
//! no-session path stays one load and one branch. With sampled timing (one call in K per
//! function and thread) the others are counted only; a per-thread table of countdowns indexed
//! by function id decides. An untimed call of such a session still keeps the coarse clock's
//! tick number (see [`ticker`](super::ticker)), so that a long call the sample missed is
//! measured at its exit all the same.

use cabprof_cab::clock;
use cabprof_cab::event::Event;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};

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

/// [`Entry::start`](super::frames::Entry) of a call that is not timed (no time analysis runs).
pub(super) const UNTIMED: u64 = u64::MAX;
/// [`Entry::start`](super::frames::Entry) of a timed call of a sampled session: its clock
/// reading (below 2^62: decades of a counter's ticks) with this bit set, so that its exit
/// also asks whether it was long.
pub(super) const SAMPLED: u64 = 1 << 62;
/// [`Entry::start`](super::frames::Entry) of an untimed call of a sampled session: the
/// coarse clock's tick number with this bit set.
pub(super) const COARSE: u64 = 1 << 63;

/// What a call of `id` keeps from its entry for its exit (a session runs, its `Call` is
/// emitted): the clock reading if it is timed; with sampled timing, that reading marked
/// [`SAMPLED`], or for an untimed call the coarse clock's tick marked [`COARSE`]; with no
/// timing, [`UNTIMED`].
#[inline(always)]
pub(super) fn entry_start(id: u32) -> u64 {
    match TIME_PERIOD.load(Ordering::Relaxed) {
        0 => UNTIMED,
        1 => clock::now_before(),
        k => {
            if sample(id, k) {
                (clock::now_before() & (SAMPLED - 1)) | SAMPLED
            } else {
                super::ticker::seq() | COARSE
            }
        }
    }
}

/// Whether to stamp this call of `id` (a session runs).
#[inline(always)]
pub(super) fn timed(id: u32) -> bool {
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
pub(super) fn sample(id: u32, k: u32) -> bool {
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

/// A `Time` word of now, read after the work before it has finished (see
/// `clock::now_after`): at a poll's end, where a plain `rdtsc` could run before the last of
/// the poll's arithmetic.
#[inline(always)]
pub(super) fn stamp_after() -> Event {
    Event::time(clock::now_after())
}

/// Timeline mode: every timed exit also writes its exit stamp, a `Time` word before its
/// `TimedReturn` (see `cabprof_cab::event`'s `timeline.rs`). Set before a session starts, with
/// [`TIME_PERIOD`]; read only on the timed path.
static TIMELINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write exit stamps from the next session on (or stop); returns the previous setting.
pub(crate) fn set_timeline(on: bool) -> bool {
    TIMELINE.swap(on, Ordering::Relaxed)
}

/// Whether timed exits write their exit stamps (and waits theirs: `cabprof::sync`).
#[inline(always)]
pub(crate) fn timeline() -> bool {
    TIMELINE.load(Ordering::Relaxed)
}

/// The timeline trigger's threshold in ticks (`u64::MAX`: no trigger). A timed exit in
/// timeline mode at least this long publishes its thread's events, so that the analyzer sees
/// the call, and fires the trigger, without waiting for the chunk to fill: a thread that goes
/// quiet after a slow call would otherwise hold it until the session ends.
static TRIGGER_TICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// Set the trigger's threshold (`u64::MAX`: none).
pub(crate) fn set_trigger_ticks(ticks: u64) {
    TRIGGER_TICKS.store(ticks, Ordering::Relaxed);
}

/// A timed exit in timeline mode that lasted `ticks`: publish the thread's events if it is
/// long enough for the trigger.
#[inline(always)]
pub(super) fn check_trigger(ticks: u64) {
    if ticks >= TRIGGER_TICKS.load(Ordering::Relaxed) {
        publish_for_trigger();
    }
}

#[cold]
#[inline(never)]
fn publish_for_trigger() {
    cabprof_cab::runtime::flush_current_thread();
}

thread_local! {
    /// The session key this thread last sent its thread mark to (0: none).
    static MARKED: Cell<u64> = const { Cell::new(0) };
}

/// The names of the threads that sent thread marks, by thread number (the index).
static THREAD_NAMES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

thread_local! {
    /// This thread's number in [`THREAD_NAMES`], once it has one.
    static NUMBER: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The name of thread number `n` (see [`thread_names`]).
pub(crate) fn thread_names() -> Vec<String> {
    THREAD_NAMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// A timed exit in timeline mode, after its exit stamp and closing word: at the thread's first
/// such exit in the running session, its thread mark. After, not before: the mark's time (a
/// `Stall`) is outside the interval the exit stamp closed, so it must not be taken out of the
/// frame that closed; it falls in its caller's, as it does on the clock.
#[inline(always)]
pub(super) fn mark_after_exit(emit: &impl Fn(Event)) {
    let key = cabprof_cab::runtime::session_key();
    if key != 0 && MARKED.with(|m| m.get()) != key {
        emit(mark_thread(key));
    }
}

/// This thread's mark for session `key`: its number, given (with its name kept) on its first
/// mark in the process. The time it takes is a `Stall`, outside the frames around it.
#[cold]
#[inline(never)]
fn mark_thread(key: u64) -> Event {
    let started = clock::now();
    MARKED.with(|m| m.set(key));
    let n = NUMBER.with(|c| match c.get() {
        Some(n) => n,
        None => {
            let _work = cabprof_cab::runtime::runtime_work();
            let mut names = THREAD_NAMES.lock().unwrap_or_else(|e| e.into_inner());
            let n = names.len() as u64;
            names.push(cabprof_cab::runtime::thread_name());
            c.set(Some(n));
            n
        }
    });
    cabprof_cab::runtime::stalled_since(started);
    Event::thread_mark(n)
}
