//! `async fn`: a frame that spans its future's polls.
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
//! [`enter`](super::enter)'s no-session path, which stays one load and one branch. The first
//! poll's `Poll` follows its `Call` directly, which is where the analyzer learns the future's
//! calling context; the `Return` comes inside the last poll, before its `PollEnd`. A future
//! dropped unfinished closes with an empty last poll (`Poll`, `Return`, `PollEnd`). That is two
//! words per poll and a few instructions; synchronous functions are untouched.
//!
//! A timed future also hands its body a waker of cabprof's, which notes the first wake since
//! the latest poll began and wakes the executor's (outside its lock: an executor may poll the
//! task inside its wake), so that the next poll can say how long the executor took to poll it
//! again (a wake delay word after its start stamp). The note is held by the wakers the body
//! stored, not by the future (it holds the executor's waker, which may hold the future's task),
//! so a poll after they are all gone makes a new one: an allocation, a waker clone and a lock
//! per timed poll at most, none for untimed ones but a branch. A wake during a poll counts for
//! the next one, from the wake: its delay then includes the rest of the poll it came in.

use super::timing::{mark_after_exit, stamp_after, timed, timeline};
use super::{method, pop, push, recording, Site, CURRENT};
use cabprof_cab::clock;
use cabprof_cab::event::{Event, MAX_TASK_ID};
use cabprof_cab::runtime::{emit, emit_with};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

/// The future of an instrumented `async fn` body: its frame spans first poll to completion.
/// `KEYED`: it records into the private session of `key` (the time analysis' calibration of
/// its own cost), not the running one.
#[must_use = "futures do nothing unless polled"]
pub struct Instrumented<F, const KEYED: bool = false> {
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
    /// The private session recorded into, if `KEYED`.
    key: u64,
    /// A timed future's: when its waker was first woken since its latest poll began (0: not
    /// since), shared with the waker's note; and that note, if some waker the body handed out
    /// still holds it. Weak: the note holds the executor's waker, which may hold this future's
    /// task, and an executor that frees a pending task when its last waker goes must still.
    wake: Option<(Arc<AtomicU64>, Weak<WakeNote>)>,
}

/// What a timed future's waker notes: when it was first woken since the future's latest poll
/// began, so that the next poll can say how long the executor took to poll it again (its
/// scheduling delay). Waking it wakes the executor's waker of the latest poll.
struct WakeNote {
    /// The clock at the first wake since the latest poll began; 0: none.
    woken: Arc<AtomicU64>,
    /// The executor's waker, as the latest poll was given it.
    inner: std::sync::Mutex<Waker>,
}

impl std::task::Wake for WakeNote {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Relaxed: a time, read by the next poll, which the executor's wake below orders
        // after this anyway.
        let _ = self.woken.compare_exchange(
            0,
            clock::now().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        // Woken outside the lock: an executor may poll the task inside its wake, and that
        // poll takes the lock to hand over its waker.
        let executor = self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone();
        executor.wake();
    }
}

impl<F, const KEYED: bool> std::fmt::Debug for Instrumented<F, KEYED> {
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
    Instrumented::new(site, 0, inner)
}

/// [`instrument`] for the private session of `key`.
#[inline(always)]
pub(crate) fn instrument_keyed<F: Future>(
    site: &'static Site,
    key: u64,
    inner: F,
) -> Instrumented<F, true> {
    Instrumented::new(site, key, inner)
}

impl<F, const KEYED: bool> Instrumented<F, KEYED> {
    #[inline(always)]
    fn new(site: &'static Site, key: u64, inner: F) -> Self {
        Instrumented {
            inner,
            site,
            callee: 0,
            finished: false,
            task: 0,
            polls: 0,
            timed: false,
            key,
            wake: None,
        }
    }
}

/// Emit `e` into the running session, or into the private one of `key` if `KEYED`.
#[inline(always)]
fn send<const KEYED: bool>(key: u64, e: Event) {
    if KEYED {
        emit_with(key, e);
    } else {
        emit(e);
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
struct PollScope<const KEYED: bool> {
    key: u64,
    callee: u32,
    caller: u32,
    task: u32,
    poll: u32,
    /// The future completed in this poll: emit its `Return` before the `PollEnd`.
    done: bool,
    /// Stamp the poll's end.
    timed: bool,
}

impl<const KEYED: bool> Drop for PollScope<KEYED> {
    #[inline(always)]
    fn drop(&mut self) {
        pop(self.caller);
        if self.timed {
            send::<KEYED>(self.key, stamp_after());
        }
        if self.done {
            send::<KEYED>(self.key, Event::ret(method(self.callee)));
        }
        send::<KEYED>(self.key, Event::poll_end(self.task, self.poll, self.done));
        if self.timed && timeline() {
            // The thread's mark, as after a timed call's exit: a thread that only polls
            // futures is then named on the timeline.
            let key = self.key;
            mark_after_exit(&|e| send::<KEYED>(key, e));
        }
    }
}

/// The waker a timed future's body polls with, noting its first wake since this poll began in
/// `wake` (made at the first timed poll), and the wake noted since the previous poll began (0:
/// none). The note wraps the poller's waker, kept current.
fn noting_waker(
    wake: &mut Option<(Arc<AtomicU64>, Weak<WakeNote>)>,
    cx: &Context<'_>,
) -> (Waker, u64) {
    let _work = cabprof_cab::runtime::runtime_work();
    let (at, weak) = wake.get_or_insert_with(|| (Arc::new(AtomicU64::new(0)), Weak::new()));
    let woken = at.swap(0, Ordering::Relaxed);
    let note = match weak.upgrade() {
        Some(note) => {
            let mut inner = note.inner.lock().unwrap_or_else(|e| e.into_inner());
            if !inner.will_wake(cx.waker()) {
                *inner = cx.waker().clone();
            }
            drop(inner);
            note
        }
        None => {
            let note = Arc::new(WakeNote {
                woken: at.clone(),
                inner: std::sync::Mutex::new(cx.waker().clone()),
            });
            *weak = Arc::downgrade(&note);
            note
        }
    };
    (Waker::from(note), woken)
}

impl<F: Future, const KEYED: bool> Future for Instrumented<F, KEYED> {
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
        if this.callee == 0 && !this.finished && (KEYED || recording(this.site)) {
            // The caller is the frame polling us; we become innermost just below.
            let callee = this.site.id();
            let caller = CURRENT.with(Cell::get);
            send::<KEYED>(this.key, Event::call(method(caller), method(callee)));
            this.callee = callee;
            this.task = next_task();
            // Timed or not for all its polls. An untimed future is not checked for long polls
            // as a synchronous call is (`ticker`): its time is a sum of polls that may run on
            // several threads, and a check at every poll would cost every poll; so a rare
            // long future the sample missed is estimated, not measured.
            this.timed = timed(callee);
            first = true;
        }
        // A timed future's body gets a waker that notes when it is woken, set up before the
        // poll's words and stamp, as the poller's cost (and as cabprof's work: its memory is not
        // the program's). The note lives as long as a waker the body handed out holds it; a
        // poll after the last was dropped (or woken) makes a new one. The first wake since the
        // last poll began is taken now: a wake from here on counts for the next poll.
        let (waker, woken) = if this.callee != 0 && this.timed {
            let (waker, woken) = noting_waker(&mut this.wake, cx);
            (Some(waker), woken)
        } else {
            (None, 0)
        };
        let mut scope = (this.callee != 0).then(|| {
            send::<KEYED>(this.key, Event::poll(method(this.callee), this.task, first));
            if this.timed {
                let now = clock::now_before();
                send::<KEYED>(this.key, Event::time(now));
                // Woken since the last poll began: how long until this one.
                if woken != 0 && !first {
                    send::<KEYED>(this.key, Event::wake_delay(now.saturating_sub(woken)));
                }
            }
            let poll = this.polls;
            this.polls = this.polls.saturating_add(1);
            PollScope::<KEYED> {
                key: this.key,
                callee: this.callee,
                caller: push(this.callee),
                task: this.task,
                poll,
                done: false,
                timed: this.timed,
            }
        });
        // The poll's work between its stamps: the future's state is reached through a
        // `&mut` the compiler knows nothing else touches, so without these barriers it could
        // move the body's register arithmetic across the stamps (see `run_recorded`). Its
        // state escapes after the entry stamp, and the output and state are in memory before
        // the exit stamp.
        if scope.is_some() {
            std::hint::black_box(&mut this.inner);
        }
        // SAFETY: see above; `this` came from a `Pin<&mut Self>`, so `inner` stays put.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let out = match &waker {
            Some(waker) => inner.poll(&mut Context::from_waker(waker)),
            None => inner.poll(cx),
        };

        if scope.is_some() {
            std::hint::black_box(&mut this.inner);
            std::hint::black_box(&out);
        }
        if out.is_ready() {
            this.finished = true;
            if let Some(s) = &mut scope {
                s.done = true;
                this.callee = 0;
            }
        }
        drop(scope);
        if let Some(waker) = waker {
            // After the poll's end stamp: the note's last reference may go here.
            let _work = cabprof_cab::runtime::runtime_work();
            drop(waker);
        }
        out
    }
}

impl<F, const KEYED: bool> Drop for Instrumented<F, KEYED> {
    fn drop(&mut self) {
        if self.wake.is_some() {
            // The wake time's memory is cabprof's: freed as its own work.
            let _work = cabprof_cab::runtime::runtime_work();
            self.wake = None;
        }
        // Dropped after its first poll but before completion: the frame ends here, in a last,
        // empty poll so that the `Return` lands in the future's own context.
        if self.callee != 0 {
            send::<KEYED>(self.key, Event::poll(method(self.callee), self.task, false));
            send::<KEYED>(self.key, Event::ret(method(self.callee)));
            send::<KEYED>(self.key, Event::poll_end(self.task, self.polls, true));
        }
    }
}
