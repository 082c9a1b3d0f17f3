//! The thread-local hot path: [`emit`], what each application thread keeps (`FAST`, `LOCAL`)
//! and how a thread attaches to the running session on its first event.
//!
//! The one global `SESSION` word holds `epoch << 3 | kind`: one relaxed load tells `emit`
//! whether a session runs, whether the thread's cached producer belongs to it, and how to push
//! (the kind). CAB producers, the hot design, are pushed inline; every other design through
//! its `push_erased` function, cached next to the producer pointer.

use super::design::{push_nothing, ThreadProducer};
use super::pending::Pending;
use super::work::runtime_work;
use super::{BufferDesign, RunMode};
use crate::event::Event;
use crate::ring::Producer;
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `0` when no session runs, else `epoch << 3 | kind` of the running session; [`UNDECIDED`]
/// until the process has decided whether to start a session by itself.
static SESSION: AtomicU64 = AtomicU64::new(UNDECIDED);
/// `SESSION` before the first event: not 0, so the first event leaves the idle path and the
/// process can decide whether to start a process-wide session (`CABPROF=1`); of a kind no
/// session has, so nothing is delivered.
const UNDECIDED: u64 = 7;
/// Sequential: no producer, the analysis runs inline.
const KIND_SEQUENTIAL: u64 = 1;
/// The producer is a CAB `Producer<false>`.
const KIND_CAB: u64 = 2;
/// The producer is a CAB `Producer<true>` (sampling and enqueue-only sessions).
const KIND_CAB_SAMPLING: u64 = 3;
/// Any other design: pushed through the cached `push_erased`.
const KIND_ERASED: u64 = 5;
const KIND_MASK: u64 = 7;
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The running session's registrar. Locked only when a thread attaches or a session starts
/// or ends.
pub(super) static HUB: Mutex<Option<Arc<dyn Hub>>> = Mutex::new(None);
static THREAD_SEQ: AtomicU64 = AtomicU64::new(0);

/// Time the calling thread spent inside cabprof since the clock read `started` (registering a
/// name, taking a snapshot): told to the time analysis in a `Stall` word, if a session times.
/// A thread that has sent no event to the session has no frame open to take the time out of:
/// it sends nothing, and so never attaches for this alone (a thread that only takes snapshots,
/// such as a server answering scrapes, gets no ring).
pub fn stalled_since(started: u64) {
    if crate::event::stall_words() && attached() {
        emit(Event::stall(crate::clock::now().saturating_sub(started)));
    }
}

/// Whether the calling thread has a producer or an inline analysis of the running session
/// (when that cannot be told, because its state is in use, it is taken as attached).
fn attached() -> bool {
    let key = SESSION.load(Ordering::Relaxed);
    LOCAL
        .try_with(|local| match local.try_borrow() {
            Ok(l) => l.key == key && (l.producer.is_some() || l.inline.is_some()),
            Err(_) => true,
        })
        .unwrap_or(false)
}

thread_local! {
    /// An unnamed thread's number in reports (0: none given yet).
    static UNNAMED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calling thread's name in reports: its own, or `thread-N` for an unnamed thread, the same
/// `N` every time it is asked (a per-test report finds its thread's counters by it).
pub fn thread_name() -> String {
    if let Some(name) = std::thread::current().name() {
        return name.to_owned();
    }
    let n = UNNAMED
        .try_with(|c| {
            if c.get() == 0 {
                c.set(THREAD_SEQ.fetch_add(1, Ordering::Relaxed) + 1);
            }
            c.get()
        })
        .unwrap_or(0);
    format!("thread-{n}")
}

/// The `SESSION` key for a new session of this mode and design (which the config has
/// validated: only CAB samples).
pub(super) fn new_session_key(mode: RunMode, design: BufferDesign) -> u64 {
    let kind = match mode {
        // Instrument-only sessions append to the same buffer, whose inline sink discards it.
        RunMode::Sequential | RunMode::InstrumentOnly => KIND_SEQUENTIAL,
        RunMode::Sampling { .. } | RunMode::EnqueueOnly => KIND_CAB_SAMPLING,
        RunMode::Exhaustive if design == BufferDesign::Cab => KIND_CAB,
        RunMode::Exhaustive => KIND_ERASED,
    };
    let epoch = EPOCH.fetch_add(1, Ordering::Relaxed) + 1;
    // Epochs start at 1, so every session's key is above `UNDECIDED` (see `recording`).
    let key = epoch << 3 | kind;
    debug_assert!(key > UNDECIDED);
    key
}

/// Make `key` the running session's: from now on `emit` delivers to it.
pub(super) fn open(key: u64) {
    SESSION.store(key, Ordering::Release);
}

/// Stop delivering: from now on `emit` is one load and one branch again.
pub(super) fn close() {
    SESSION.store(0, Ordering::Release);
}

/// Register (once per process) the `fork` handler that turns profiling off in the child.
///
/// A child of `fork` has one thread, a copy of the rings and no analyzer: a thread of it that
/// kept emitting would fill its ring copy and wait for ever. So in the child `emit` returns at
/// once, as with no session; the session's `finish` there returns an empty report naming the
/// fork (the parent's session is unaffected and counts only the parent's events).
pub(super) fn install_fork_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        extern "C" fn in_child() {
            // One atomic store: async-signal-safe, as a handler in the child must be.
            close();
        }
        // SAFETY: `pthread_atfork` only records the handler; `in_child` is a plain function
        // that lives for the whole program and does nothing but an atomic store.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        if rc != 0 {
            tracing::warn!(rc, "cabprof: could not register the fork handler");
        }
    });
}

/// Whether `producer` is of the type the fast path assumes for `key`'s kind.
fn kind_matches(key: u64, producer: &ThreadProducer) -> bool {
    match key & KIND_MASK {
        KIND_CAB => producer.is::<Producer<false>>(),
        KIND_CAB_SAMPLING => producer.is::<Producer<true>>(),
        KIND_ERASED => true,
        _ => false,
    }
}

/// What a thread-local needs from the running session, without knowing its analysis type.
pub(super) trait Hub: Send + Sync {
    fn key(&self) -> u64;
    /// Make a ring for a new producer thread and give its consumer to an analyzer.
    fn attach_ring(&self, thread: String) -> ThreadProducer;
    /// A sequential-mode inline analysis for a new thread.
    fn attach_inline(&self, thread: String) -> Box<dyn InlineSink>;
    /// A sink that drops and counts, for a thread that could not attach.
    fn ringless(&self) -> ThreadProducer;
}

/// A sequential-mode analysis instance living in a thread-local. `Send`: it may be made on a
/// helper thread (see `stack`).
pub(super) trait InlineSink: Send {
    /// Analyze the thread's pending words, then `words`.
    fn consume(&mut self, words: &[u64]);
    /// The buffer the hot path appends to.
    fn pending(&self) -> &Pending;
    /// The thread ended (or the session is finishing on it): merge its results into its
    /// session's, which it holds a handle to, so this works even after the session has
    /// stopped taking new threads.
    fn retire(self: Box<Self>);
}

struct Local {
    /// The `SESSION` value this thread's producer or inline analysis belongs to.
    key: u64,
    /// Concurrent modes: this thread's producer.
    producer: Option<ThreadProducer>,
    /// Sequential mode: this thread's inline analysis.
    inline: Option<Box<dyn InlineSink>>,
}

impl Local {
    fn retire(&mut self) {
        // Dropping a producer frees its share of the ring: the runtime's own work.
        let _work = runtime_work();
        // Forget the cached producer before it goes away.
        let _ = FAST.try_with(|f| {
            f.key.set(0);
            f.ring.set(std::ptr::null_mut());
            f.push.set(push_nothing);
        });
        if let Some(inline) = self.inline.take() {
            inline.retire();
        }
        // Dropping a producer closes it: the analyzer drains the ring and frees it.
        self.producer = None;
        self.key = 0;
    }

    /// Point `FAST` at this thread's producer, if it has one of the type the session's kind
    /// names. A thread without a ring (its counting sink) stays on the slow path.
    fn publish_fast(&mut self) {
        if let Some(inline) = &self.inline {
            let ring = (inline.pending() as *const Pending).cast_mut().cast::<()>();
            let key = self.key;
            let _ = FAST.try_with(|f| {
                f.ring.set(ring);
                f.push.set(push_nothing);
                f.key.set(key);
            });
            return;
        }
        let Some(producer) = &self.producer else {
            return;
        };
        if !kind_matches(self.key, producer) {
            return;
        }
        let (ring, push) = producer.raw();
        let key = self.key;
        let _ = FAST.try_with(|f| {
            f.ring.set(ring);
            f.push.set(push);
            f.key.set(key);
        });
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.retire();
    }
}

/// The hot path's view of this thread's producer. No destructor, so access is a plain
/// thread-local load with no lazy-init or registration check.
///
/// Invariant: when `key` is non-zero and equals the running session's key, `ring` points to
/// the producer owned by this thread's `LOCAL`, whose type is the one `key & KIND_MASK` names
/// (checked by `publish_fast`), and `push` is that producer's `push_erased`; for a sequential
/// session, `ring` points to the [`Pending`] buffer of this thread's inline analysis.
/// `Local::retire` zeroes `key` before the producer or inline analysis is dropped.
struct Fast {
    key: Cell<u64>,
    ring: Cell<*mut ()>,
    push: Cell<unsafe fn(*mut (), Event)>,
}

thread_local! {
    static FAST: Fast = const {
        Fast {
            key: Cell::new(0),
            ring: Cell::new(std::ptr::null_mut()),
            push: Cell::new(push_nothing),
        }
    };
    static LOCAL: RefCell<Local> =
        const { RefCell::new(Local { key: 0, producer: None, inline: None }) };
}

/// Record one event from the calling thread. With no session running this is one load and
/// one branch. Never blocks in sampling mode; in exhaustive mode it waits while the thread's
/// ring is full (and drops, counted, if its analyzer is gone).
#[inline(always)]
pub fn emit(event: Event) {
    let key = SESSION.load(Ordering::Relaxed);
    if key != 0 {
        emit_to(key, event);
    }
}

/// Whether a session is running (instrumentation may skip work when not). Also true before the
/// process has decided whether to start a session by itself (see [`activity`]).
#[inline(always)]
pub fn active() -> bool {
    SESSION.load(Ordering::Relaxed) != 0
}

/// Whether a session records now ([`Activity::Recording`]), in one load and one compare: a
/// session's key is above both idle (0) and undecided. For code that must never decide, only
/// deliver (an allocator: see `cabprof::alloc`), to which undecided is the same as idle.
#[inline(always)]
pub fn recording() -> bool {
    SESSION.load(Ordering::Relaxed) > UNDECIDED
}

/// What instrumentation should do now, from one load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// No session: emit nothing.
    Idle,
    /// The first event of the process: nobody has decided yet whether a process-wide session
    /// runs (`CABPROF=1`). Decide (the `cabprof` facade starts one), or [`settle_idle`].
    Undecided,
    /// A session runs.
    Recording,
}

/// The running session's key (0: none; see [`activity`] for the other special value), for
/// [`emit_with`]: instrumentation that emits right after checking for a session reads it once.
#[inline(always)]
pub fn session_key() -> u64 {
    SESSION.load(Ordering::Relaxed)
}

/// [`Activity`] of a [`session_key`].
#[inline(always)]
pub fn activity_of(key: u64) -> Activity {
    match key {
        0 => Activity::Idle,
        UNDECIDED => Activity::Undecided,
        _ => Activity::Recording,
    }
}

/// [`emit`] with the key read by [`session_key`], which found [`Activity::Recording`]: one
/// load of the session's key fewer. (If the session ends in between, the event goes where
/// one emitted just before its end would: to this thread's producer, which only this thread
/// drops, or to the slow path.)
#[inline(always)]
pub fn emit_with(key: u64, event: Event) {
    emit_to(key, event);
}

/// What instrumentation should do now.
#[inline(always)]
pub fn activity() -> Activity {
    match SESSION.load(Ordering::Relaxed) {
        0 => Activity::Idle,
        UNDECIDED => Activity::Undecided,
        _ => Activity::Recording,
    }
}

/// The variable that asks for a process-wide session: set and not `0`.
pub const PROCESS_VAR: &str = "CABPROF";

/// Whether `CABPROF` asks for a process-wide session (read once).
pub fn process_session_requested() -> bool {
    static ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASKED.get_or_init(|| std::env::var_os(PROCESS_VAR).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Leave the undecided state for idle: no process-wide session. Does nothing if a session has
/// started meanwhile.
pub fn settle_idle() {
    let _ = SESSION.compare_exchange(UNDECIDED, 0, Ordering::Relaxed, Ordering::Relaxed);
}

#[inline(always)]
fn emit_to(key: u64, event: Event) {
    // Only loads inside `with`, so it stays a one-instruction TLS access after inlining.
    let (fast_key, ring, push) = FAST.with(|f| (f.key.get(), f.ring.get(), f.push.get()));
    if fast_key != key {
        emit_slow(key, event);
        return;
    }
    // The three common kinds by compares, the rest out of line: a `match` over every kind
    // compiles to a jump table, eight instructions and an indirect jump per event.
    let kind = key & KIND_MASK;
    // SAFETY: by `Fast`'s invariant, a key equal to the running session's means `ring` is this
    // thread's live producer, of the type the key's kind names (for `KIND_ERASED`, the type
    // `push` was made for); only this thread touches it, and nothing borrows it now (the slow
    // path's `LOCAL` borrow is not held while we are here).
    unsafe {
        if kind == KIND_CAB {
            (*ring.cast::<Producer<false>>()).push(event);
        } else if kind == KIND_CAB_SAMPLING {
            (*ring.cast::<Producer<true>>()).push(event);
        } else if kind == KIND_SEQUENTIAL {
            if !(*ring.cast::<Pending>()).push(event.word()) {
                // Full: the slow path analyzes what is pending, then this word.
                emit_slow(key, event);
            }
        } else {
            emit_erased(ring, push, event);
        }
    }
}

/// `emit_to` for the erased (FastForward, N-way) producers, measured only in benches.
///
/// # Safety
/// As in `emit_to`: `ring` is the live producer `push` was made for, not borrowed elsewhere.
#[inline(never)]
unsafe fn emit_erased(ring: *mut (), push: unsafe fn(*mut (), Event), event: Event) {
    // SAFETY: the caller's guarantee.
    unsafe { push(ring, event) }
}

/// First event of a thread in this session, sequential mode, or a thread being torn down.
#[cold]
#[inline(never)]
fn emit_slow(key: u64, event: Event) {
    // Deciding (reading `CABPROF`), making a ring or an inline analysis, and running that
    // analysis allocate: the runtime's own allocations, which an allocation-tracking allocator
    // must neither report as the program's nor turn into events (that would recurse into the
    // decision, or find the thread's sink borrowed here).
    let _work = runtime_work();
    if key == UNDECIDED {
        // Events before a process-wide session starts are not recorded. Without `CABPROF`
        // there will be none: go idle, so later events cost one load again.
        if !process_session_requested() {
            settle_idle();
        }
        return;
    }
    // `try_with`: events from TLS destructors after `LOCAL` is gone are dropped.
    // `try_borrow_mut`: an event emitted from inside an inline analysis (re-entrancy) is
    // dropped rather than corrupting the analysis.
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            if local.key != key {
                // Attaching is cabprof's time, not the frames': a `Stall` before the event
                // takes it out of the frames already open (a thread that entered an
                // instrumented function before the session started).
                let started = crate::clock::now();
                attach(&mut local, key);
                if crate::event::stall_words() {
                    let stall = Event::stall(crate::clock::now().saturating_sub(started));
                    local.push(stall);
                }
            }
            local.push(event);
        }
    });
}

impl Local {
    /// One event into the thread's inline analysis or ring (the slow path's push).
    fn push(&mut self, event: Event) {
        if let Some(inline) = &mut self.inline {
            if crate::event::stall_words() {
                // Sequential mode analyzes on the application's thread: that time is
                // cabprof's, told in a `Stall` word placed as the ring's waits are.
                let started = crate::clock::now();
                inline.consume(&[]);
                let stall = Event::stall(crate::clock::now().saturating_sub(started)).word();
                let w = event.word();
                let words = if crate::event::opens_frame(w) {
                    [stall, w]
                } else {
                    [w, stall]
                };
                inline.consume(&words);
            } else {
                inline.consume(&[event.word()]);
            }
        } else if let Some(producer) = &mut self.producer {
            producer.push(event);
        }
    }
}

#[cold]
#[inline(never)]
fn attach(local: &mut Local, key: u64) {
    local.retire();
    let hub = HUB.lock().clone();
    let Some(hub) = hub.filter(|h| h.key() == key) else {
        return;
    };
    let name = thread_name();
    let sequential = key & KIND_MASK == KIND_SEQUENTIAL;
    // Making a ring and an analysis instance takes more stack than a small thread has (they
    // are built by value): with little left, a helper thread makes them.
    let made = super::stack::with_room({
        let hub = hub.clone();
        move || {
            if sequential {
                Sink::Inline(hub.attach_inline(name))
            } else {
                Sink::Ring(hub.attach_ring(name))
            }
        }
    });
    match made {
        Ok(Sink::Inline(inline)) => local.inline = Some(inline),
        Ok(Sink::Ring(producer)) => local.producer = Some(producer),
        Err(e) => {
            attach_failed(&e);
            local.producer = Some(hub.ringless());
        }
    }
    local.key = key;
    local.publish_fast();
}

/// What a thread attaches to the session with.
enum Sink {
    Ring(ThreadProducer),
    Inline(Box<dyn InlineSink>),
}

/// Out of line: a `tracing` call's frame is large in a debug build, and the thread may have
/// little stack.
#[cold]
#[inline(never)]
fn attach_failed(e: &str) {
    tracing::warn!(
        error = e,
        "cabprof: could not attach this thread to the session; its events are dropped and counted"
    );
}

/// Hand the calling thread's buffered events to its analyzer now (for instance before a
/// thread parks for a long time). Cheap; optional.
pub fn flush_current_thread() {
    let _work = runtime_work();
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            if let Some(producer) = &mut local.producer {
                producer.flush();
            }
            if let Some(inline) = &mut local.inline {
                inline.consume(&[]);
            }
        }
    });
}

/// The session `key` is finishing on this thread: merge this thread's inline results, or
/// close its producer so its tail is published.
pub(super) fn retire_current_thread(key: u64) {
    let _work = runtime_work();
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            if local.key == key {
                local.retire();
            }
        }
    });
}
