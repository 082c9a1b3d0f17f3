//! Sequential mode's registry: each thread analyzes its own events inline (no ring, no
//! analyzer thread), and the session merges the threads' results: those of ended threads as
//! they retire, those of live threads at a snapshot (copied) or at `finish` (taken).

use super::merge::merge_into;
use super::pending::{self, Pending};
use super::report::{push_thread, ThreadStats};
use super::tls::InlineSink;
use super::EventAnalysis;
use parking_lot::Mutex;
use std::sync::Arc;

/// Sequential mode: one thread's inline analysis and its event count.
struct InlineState<A> {
    analysis: A,
    events: u64,
    thread: String,
    /// The words the thread has emitted and not yet handed over (see [`Pending`]).
    pending: Arc<Pending>,
    /// How many of them a snapshot or `finish` has already analyzed.
    consumed: usize,
}

impl<A: EventAnalysis> InlineState<A> {
    /// Analyze the pending words not yet analyzed (the slot's lock is held: `self` is in it).
    fn drain(&mut self) {
        let (analysis, events) = (&mut self.analysis, &mut self.events);
        pending::drain(&self.pending, &mut self.consumed, |words| {
            analysis.consume(words);
            *events += words.len() as u64;
        });
    }
}

impl<A> InlineState<A> {
    fn stats(&self) -> ThreadStats {
        ThreadStats {
            thread: self.thread.clone(),
            threads: 1,
            events: self.events,
            analyzed: self.events,
            rate: 1.0,
            ..Default::default()
        }
    }
}

/// A live thread's inline analysis. The owning thread locks it for each buffer of events
/// ([`Pending`]); the session locks it only to copy it (a snapshot) or take it (`finish`),
/// analyzing the words pending first, so a thread that never exits (a pool worker) is still
/// reported. `None` once its results were merged.
type InlineSlot<A> = Arc<Mutex<Option<InlineState<A>>>>;

/// What a thread-local holds in sequential mode: its slot, registered with the session.
struct InlineAnalysis<A> {
    id: u64,
    slot: InlineSlot<A>,
    shared: Arc<InlineShared<A>>,
    pending: Arc<Pending>,
}

/// Sequential mode: the merged results of threads that have ended, and the slots of the
/// threads still live. Lock order: `state`, then a slot.
pub(super) struct InlineShared<A> {
    state: Mutex<InlineRegistry<A>>,
}

struct InlineRegistry<A> {
    merged: Option<A>,
    threads: Vec<ThreadStats>,
    live: Vec<(u64, InlineSlot<A>)>,
    /// Ids in `live` of threads that exited with too little stack to merge their results
    /// (see `InlineAnalysis::retire`): merged by the next thread that attaches or retires with
    /// room, so that a program spawning many such threads keeps one result each only until
    /// then. Also the threads that exit while a snapshot runs.
    exited: Vec<u64>,
    next_id: u64,
    /// Snapshots copying the slots of `live` without this lock: while one does, no slot may be
    /// emptied into `merged` (it would be counted twice, or missed), so a thread that exits
    /// leaves its results in its slot and its id in `exited`.
    snapshots: usize,
}

impl<A: EventAnalysis> InlineShared<A> {
    pub(super) fn new() -> Self {
        InlineShared {
            state: Mutex::new(InlineRegistry {
                merged: None,
                threads: Vec::new(),
                live: Vec::new(),
                exited: Vec::new(),
                next_id: 0,
                snapshots: 0,
            }),
        }
    }

    /// Register a thread that starts analyzing its events inline with `analysis`.
    pub(super) fn attach(self: &Arc<Self>, analysis: A, thread: String) -> Box<dyn InlineSink> {
        let pending = Arc::new(Pending::new(Pending::CAPACITY));
        let slot = Arc::new(Mutex::new(Some(InlineState {
            analysis,
            events: 0,
            thread,
            pending: pending.clone(),
            consumed: 0,
        })));
        let mut reg = self.state.lock();
        reg.merge_exited();
        let id = reg.next_id;
        reg.next_id += 1;
        reg.live.push((id, slot.clone()));
        Box::new(InlineAnalysis {
            id,
            slot,
            shared: self.clone(),
            pending,
        })
    }

    /// Sequential mode at `finish`: ended threads' results, and live threads' taken from their
    /// slots (a pool worker never exits; events it emits from now on are not counted).
    pub(super) fn finish_into(&self, analysis: &mut Option<A>, threads: &mut Vec<ThreadStats>) {
        let mut reg = self.state.lock();
        reg.take_live();
        merge_into(analysis, reg.merged.take());
        for t in reg.threads.drain(..) {
            push_thread(threads, t);
        }
    }
}

impl<A: EventAnalysis + Clone> InlineShared<A> {
    /// A snapshot: ended threads' merged results, then a copy of each live thread's so far.
    ///
    /// The registry is locked only to copy the ended threads' results and the list of live
    /// slots, and each slot only while its thread's pending words are drained and its results
    /// copied: a thread's first event or exit (which lock the registry) never waits for the
    /// copies of the other threads, and a thread's next buffer waits for its own copy only.
    pub(super) fn snapshot_into(&self, analysis: &mut A, threads: &mut Vec<ThreadStats>) {
        let (merged, live) = {
            let mut reg = self.state.lock();
            reg.snapshots += 1;
            threads.extend(reg.threads.iter().cloned());
            (reg.merged.clone(), reg.live.clone())
        };
        // Released however the copies end, so that exiting threads merge again.
        struct Done<'a, A>(&'a InlineShared<A>);
        impl<A> Drop for Done<'_, A> {
            fn drop(&mut self) {
                self.0.state.lock().snapshots -= 1;
            }
        }
        let _done = Done(self);
        if let Some(a) = merged {
            analysis.merge(a);
        }
        for (_, slot) in &live {
            let copy = slot.lock().as_mut().map(|state| {
                state.drain();
                (state.analysis.clone(), state.stats())
            });
            if let Some((copy, stats)) = copy {
                analysis.merge(copy);
                push_thread(threads, stats);
            }
        }
    }
}

impl<A: EventAnalysis> InlineRegistry<A> {
    fn merge(&mut self, state: InlineState<A>) {
        push_thread(&mut self.threads, state.stats());
        merge_into(&mut self.merged, Some(state.analysis));
    }

    /// Merge the results of the threads in `exited` (their slots are final: they emit no
    /// more), unless a snapshot is copying the slots.
    fn merge_exited(&mut self) {
        if self.snapshots > 0 {
            return;
        }
        for id in std::mem::take(&mut self.exited) {
            if let Some(i) = self.live.iter().position(|(l, _)| *l == id) {
                let (_, slot) = self.live.swap_remove(i);
                let state = slot.lock().take();
                if let Some(state) = state {
                    self.merge(state);
                }
            }
        }
    }

    /// Merge every live thread's results now; their later events are not counted.
    fn take_live(&mut self) {
        self.exited.clear();
        for (_, slot) in std::mem::take(&mut self.live) {
            // Drain before unlocking: the owner may empty its buffer once the lock is free.
            let mut guard = slot.lock();
            if let Some(mut state) = guard.take() {
                state.drain();
                drop(guard);
                self.merge(state);
            }
        }
    }
}

/// An instrument-only thread's buffer: appended to as in sequential mode, emptied unread.
pub(super) struct Discard(pub(super) Pending);

impl InlineSink for Discard {
    fn consume(&mut self, _words: &[u64]) {
        self.0.reset();
    }

    fn pending(&self) -> &Pending {
        &self.0
    }

    fn retire(self: Box<Self>) {}
}

impl<A: EventAnalysis> InlineSink for InlineAnalysis<A> {
    fn consume(&mut self, words: &[u64]) {
        // Uncontended but for a snapshot or `finish`: one atomic exchange to lock and one to
        // unlock (parking_lot's fast paths), once per buffer of events.
        let mut slot = self.slot.lock();
        match &mut *slot {
            Some(state) => {
                let (analysis, events) = (&mut state.analysis, &mut state.events);
                pending::flush(&self.pending, &mut state.consumed, |pending| {
                    analysis.consume(pending);
                    *events += pending.len() as u64;
                });
                state.events += words.len() as u64;
                state.analysis.consume(words);
            }
            // Taken by `finish`: what is pending is no longer counted, as with later events.
            None => self.pending.reset(),
        }
    }

    fn pending(&self) -> &Pending {
        &self.pending
    }

    fn retire(mut self: Box<Self>) {
        self.consume(&[]);
        // Merging moves analyses by value, more stack than a small thread may have left at
        // its exit (this runs in its thread-local destructor, where no helper thread is
        // spawned): then the results stay in their slot, which the session merges at finish
        // and copies into snapshots as it does a live thread's.
        if super::stack::stack_left().is_some_and(|left| left < super::stack::ROOM) {
            self.shared.state.lock().exited.push(self.id);
            return;
        }
        let mut reg = self.shared.state.lock();
        if reg.snapshots > 0 {
            reg.exited.push(self.id);
            return;
        }
        reg.merge_exited();
        if let Some(i) = reg.live.iter().position(|(id, _)| *id == self.id) {
            reg.live.swap_remove(i);
        }
        if let Some(state) = self.slot.lock().take() {
            reg.merge(state);
        }
    }
}
