//! A per-thread timeline: which call ran when, on which thread, at what depth, and a flight
//! recorder bound on how much of it is kept.
//!
//! # The stream
//!
//! Timeline mode (see `cabprof_cab::event`'s `timeline.rs`) gives every timed call its exit
//! stamp: `Call`, …, `Time(end)`, `TimedReturn(ticks)`, so the call ran from `end - ticks` to
//! `end`. Functions stamped at both ends (`paths`: `Call`, `Time(t0)`, …, `Time(t1)`, `Return`)
//! give their two stamps. An instrumented `async fn` gives one slice per poll, on the thread
//! that ran it: `Poll`, `Time(t0)`, …, `Time(t1)`, `PollEnd` (its last poll's `Return` comes
//! between the closing stamp and the `PollEnd`). A call without stamps (untimed, with sampled
//! timing) is not on the timeline; neither is a `LongReturn` of an untimed call, whose start is
//! an estimate.
//!
//! # What is kept
//!
//! Per thread, the last [`capacity`](Timeline::new) slices in the order they closed (a parent
//! closes after its children): the oldest are overwritten and counted
//! ([`ThreadTimeline::overwritten`]), so the memory is bounded by the capacity whatever the
//! run's length. Slices hold the raw clock readings: the instrumentation's own cost is inside
//! them, as in the time analysis' raw figures (not its compensated ones); a stall inside cabprof
//! (a `Stall` word) is inside the slices open around it.
//!
//! A wait at a `cabprof::sync` lock or channel (with the waits analysis' wrappers, in timeline
//! mode) is a slice of its own, one deeper than the frame it waited in, from the stamps its
//! wait words carry (`cabprof_cab::event`'s `wait.rs`).
//!
//! A thread is known by its **thread mark** (the number its first timed exit sends); the
//! facade keeps the numbers' names. A stream whose thread sent none has thread `None`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use cabprof_cab::event::{self, decode, EventKind, MethodId, WaitKind, WaitWord, MAX_PAYLOAD};

use crate::thread_stacks::ThreadStacks;
use crate::EventAnalysis;

/// Slices a thread keeps by default: 131,072 of 32 bytes, 4 MiB.
pub const DEFAULT_SLICES: usize = 1 << 17;
/// Largest number of slices per thread accepted (16,777,216: 384 MiB per thread).
pub const MAX_SLICES: usize = 1 << 24;
/// Bytes one kept slice takes.
pub const SLICE_BYTES: usize = std::mem::size_of::<Slice>();

/// One call (or one poll of a future) on a thread's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// The function.
    pub method: MethodId,
    /// Frames open below it on the thread when it started (0: called from the root).
    pub depth: u16,
    /// A poll of an `async fn`'s future rather than a whole call.
    pub poll: bool,
    /// A wait at a `cabprof::sync` lock or channel rather than a call: its kind (`task`
    /// then holds the creation site's number), inside the call `method` at `depth - 1` (or
    /// outside every call: `method` is then the root's id).
    pub wait: Option<WaitKind>,
    /// For a poll, its future's task id (unique among the futures alive), which ties the
    /// future's polls together; for a wait, its site.
    pub task: Option<u32>,
    /// Its start: clock ticks modulo 2^60 (`cabprof_cab::clock`).
    pub start: u64,
    /// Its duration in clock ticks.
    pub ticks: u64,
}

/// One thread's slices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadTimeline {
    /// The thread's number (its thread mark), if it sent one.
    pub thread: Option<u64>,
    /// The last slices, in the order they closed.
    pub slices: VecDeque<Slice>,
    /// Slices that were overwritten to keep within the capacity.
    pub overwritten: u64,
}

impl ThreadTimeline {
    fn push(&mut self, s: Slice, capacity: usize) {
        if self.slices.len() >= capacity {
            self.slices.pop_front();
            self.overwritten += 1;
        }
        self.slices.push_back(s);
    }
}

/// What opened a frame on a thread's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opened {
    Call,
    /// A poll of future `task`; `returned` once its function's `Return` came (its last poll).
    Poll {
        task: u32,
        returned: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    method: u32,
    opened: Opened,
    /// Its start stamp, if one came right after it opened.
    start: Option<u64>,
}

/// One thread's state: its open frames, the stamp pending, and what it recorded.
#[derive(Clone, Debug, Default)]
struct Track {
    open: Vec<Frame>,
    /// The last word opened a frame: a `Time` now is its start.
    just_opened: bool,
    /// A closing stamp waiting for the word that closes its frame.
    pending_end: Option<u64>,
    /// By depth: the earliest start among the slices recorded at that depth since the frame
    /// below them closed (its children's), if any.
    children_from: Vec<Option<u64>>,
    recorded: ThreadTimeline,
    /// The wait word last seen (kind and site), its stamps to come; and its start.
    wait: Option<(WaitKind, u32)>,
    wait_from: Option<u64>,
    /// The latest full clock reading seen on the thread (0: none yet): a wait's stamps take
    /// their high bits from it.
    last_stamp: u64,
}

impl Track {
    /// The frame at `depth` closed: the earliest start of its children's slices (and the
    /// record of what is deeper is dropped).
    fn closed(&mut self, depth: usize) -> Option<u64> {
        let first = self.children_from.get(depth + 1).copied().flatten();
        self.children_from.truncate(depth + 1);
        first
    }
}

/// A call that fired the [`Trigger`]: of the watched function, at least its threshold long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The function.
    pub method: MethodId,
    /// Its thread's number (thread mark), if the thread sent one.
    pub thread: Option<u64>,
    /// Its start, clock ticks modulo 2^60.
    pub start: u64,
    /// Its duration in ticks.
    pub ticks: u64,
}

/// The flight recorder's trigger: a call of a watched function lasting at least `min_ticks`
/// is handed to `fire` as it closes, on the analyzer's thread (so `fire` must not wait for
/// the session: it may queue the call for a writer, never take a snapshot itself).
#[derive(Clone)]
pub struct Trigger {
    /// Whether a function is watched: asked once per function, at its first call that is
    /// long enough, so it may look names up.
    pub watched: Arc<dyn Fn(MethodId) -> bool + Send + Sync>,
    /// Calls at least this long fire.
    pub min_ticks: u64,
    /// Takes each firing call.
    pub fire: Arc<dyn Fn(Fired) + Send + Sync>,
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger")
            .field("min_ticks", &self.min_ticks)
            .finish_non_exhaustive()
    }
}

/// The timeline analysis; see the module docs.
#[derive(Clone, Debug)]
pub struct Timeline {
    capacity: usize,
    threads: ThreadStacks<Track>,
    /// What merged instances recorded.
    merged: Vec<ThreadTimeline>,
    /// Closing words that matched no open frame.
    unmatched: u64,
    trigger: Option<Trigger>,
    /// Per function asked, whether the trigger watches it.
    watched: HashMap<u32, bool>,
    /// The clock when this instance was made: a wait's stamps take their high bits from it
    /// on a thread that has shown no full reading yet.
    made_at: u64,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new(DEFAULT_SLICES)
    }
}

impl Timeline {
    /// A timeline keeping the last `capacity` slices per thread (at least 1).
    pub fn new(capacity: usize) -> Timeline {
        Timeline {
            capacity: capacity.max(1),
            threads: ThreadStacks::default(),
            merged: Vec::new(),
            unmatched: 0,
            trigger: None,
            watched: HashMap::new(),
            made_at: cabprof_cab::clock::now() & MAX_PAYLOAD,
        }
    }

    /// The same timeline, handing the calls that fire `trigger` to it as they close.
    pub fn with_trigger(mut self, trigger: Trigger) -> Timeline {
        self.trigger = Some(trigger);
        self
    }

    /// Slices kept per thread.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Closing words (`Return`, `TimedReturn`, `PollEnd`) that matched no open frame: a
    /// stream with gaps.
    pub fn unmatched(&self) -> u64 {
        self.unmatched
    }

    /// Every thread's timeline, ordered by thread number (threads without one last); a
    /// thread seen by several streams is one entry.
    pub fn threads(&self) -> Vec<ThreadTimeline> {
        let mut out: Vec<ThreadTimeline> = Vec::new();
        let own = std::iter::once(&self.threads.current)
            .chain(self.threads.parked())
            .map(|t| &t.recorded);
        for t in self.merged.iter().chain(own) {
            if t.slices.is_empty() && t.overwritten == 0 {
                continue;
            }
            match out
                .iter_mut()
                .find(|o| o.thread.is_some() && o.thread == t.thread)
            {
                Some(o) => absorb(o, t, self.capacity),
                None => out.push(t.clone()),
            }
        }
        out.sort_by_key(|t| (t.thread.is_none(), t.thread));
        out
    }

    /// Record a slice of the frame at `depth` that closed (`closed` gave `children`).
    ///
    /// A duration longer than the `TimedReturn` word carries exactly is truncated, so such a
    /// call's start comes out a little late; its children then stick out before it. The
    /// slice is widened to start with its first child: towards its true start, and every
    /// child stays inside its parent.
    fn record(
        &mut self,
        method: u32,
        depth: usize,
        task: Option<u32>,
        (mut start, mut ticks): (u64, u64),
        children: Option<u64>,
    ) {
        if let Some(c) = children {
            let early = elapsed(c, start);
            if early > 0 {
                start = c;
                ticks += early;
            }
        }
        let t = &mut self.threads.current;
        if t.children_from.len() <= depth {
            t.children_from.resize(depth + 1, None);
        }
        let first = &mut t.children_from[depth];
        *first = Some(match *first {
            Some(f) if elapsed(f, start) > 0 => f,
            _ => start,
        });
        let s = Slice {
            method: MethodId::new(method).unwrap_or(MethodId::ROOT),
            depth: depth.min(u16::MAX as usize) as u16,
            poll: task.is_some(),
            wait: None,
            task,
            start: start & MAX_PAYLOAD,
            ticks,
        };
        let capacity = self.capacity;
        self.threads.current.recorded.push(s, capacity);
        if !s.poll {
            self.check_trigger(&s);
        }
        self.threads.current.last_stamp = s.start.wrapping_add(s.ticks) & MAX_PAYLOAD;
    }

    /// Hand `s` to the trigger if it fires it.
    fn check_trigger(&mut self, s: &Slice) {
        let Some(trigger) = &self.trigger else {
            return;
        };
        if s.ticks < trigger.min_ticks {
            return;
        }
        let watched = *self
            .watched
            .entry(s.method.get())
            .or_insert_with(|| (trigger.watched)(s.method));
        if watched {
            (trigger.fire)(Fired {
                method: s.method,
                thread: self.threads.current.recorded.thread,
                start: s.start,
                ticks: s.ticks,
            });
        }
    }

    fn open(&mut self, method: u32, opened: Opened) {
        let t = &mut self.threads.current;
        t.open.push(Frame {
            method,
            opened,
            start: None,
        });
        t.just_opened = true;
        t.pending_end = None;
    }

    /// Pop the innermost call frame of `callee` (and what is above it, which a gap left open);
    /// its depth, start stamp and its children's first start.
    fn close_call(&mut self, callee: u32) -> Option<(usize, Option<u64>, Option<u64>)> {
        let t = &mut self.threads.current;
        let Some(i) = t
            .open
            .iter()
            .rposition(|f| f.method == callee && f.opened == Opened::Call)
        else {
            self.unmatched += 1;
            return None;
        };
        let f = t.open[i];
        t.open.truncate(i);
        let children = t.closed(i);
        Some((i, f.start, children))
    }

    fn on_timed_return(&mut self, callee: u32, ticks: u64) {
        let t = &mut self.threads.current;
        t.just_opened = false;
        let end = t.pending_end.take();
        if let Some((depth, _, children)) = self.close_call(callee) {
            if let Some(end) = end {
                let span = (end.wrapping_sub(ticks), ticks);
                self.record(callee, depth, None, span, children);
            }
        }
    }

    fn on_return(&mut self, callee: u32) {
        let t = &mut self.threads.current;
        t.just_opened = false;
        // A future's last poll: its `Return` comes before the `PollEnd`, which closes the
        // poll with the stamp before both.
        if let Some(top) = t.open.last_mut() {
            if let Opened::Poll { task, .. } = top.opened {
                if top.method == callee {
                    top.opened = Opened::Poll {
                        task,
                        returned: true,
                    };
                    return;
                }
            }
        }
        let end = t.pending_end.take();
        if let Some((depth, Some(start), children)) = self.close_call(callee) {
            if let Some(end) = end {
                let span = (start, elapsed(start, end));
                self.record(callee, depth, None, span, children);
            }
        }
    }

    fn on_poll(&mut self, method: u32, task: u32, first: bool) {
        let t = &mut self.threads.current;
        // The first poll directly follows its future's `Call`: the poll stands for that frame.
        if first
            && t.open
                .last()
                .is_some_and(|f| f.method == method && f.opened == Opened::Call)
        {
            t.open.pop();
        }
        self.open(
            method,
            Opened::Poll {
                task,
                returned: false,
            },
        );
    }

    fn on_poll_end(&mut self, task: u32) {
        let t = &mut self.threads.current;
        t.just_opened = false;
        let end = t.pending_end.take();
        let Some(i) = t
            .open
            .iter()
            .rposition(|f| matches!(f.opened, Opened::Poll { task: k, .. } if k == task))
        else {
            self.unmatched += 1;
            return;
        };
        let f = t.open[i];
        t.open.truncate(i);
        let children = t.closed(i);
        if let (Some(start), Some(end)) = (f.start, end) {
            self.record(
                f.method,
                i,
                Some(task),
                (start, elapsed(start, end)),
                children,
            );
        }
    }

    /// A wait word, its time word or its stamps: the stamps make a slice of the wait, one
    /// deeper than the innermost open frame. Holds (the mutex profile's) are not waits of
    /// this thread and have no stamps.
    #[cold]
    fn on_wait(&mut self, w: WaitWord) {
        let made_at = self.made_at;
        let t = &mut self.threads.current;
        let near = if t.last_stamp != 0 {
            t.last_stamp
        } else {
            made_at
        };
        match w {
            WaitWord::Wait { kind, site, .. } => {
                // Only the block profile's waits have stamps to draw.
                t.wait = matches!(kind, WaitKind::Lock | WaitKind::Send | WaitKind::Receive)
                    .then_some((kind, site));
                t.wait_from = None;
            }
            WaitWord::Nanos(_) => {}
            WaitWord::From(low) => t.wait_from = Some(event::widen_stamp(low, near)),
            WaitWord::To(low) => {
                let (Some((kind, site)), Some(from)) = (t.wait.take(), t.wait_from.take()) else {
                    return;
                };
                let to = event::widen_stamp(low, from);
                t.last_stamp = to;
                let depth = t.open.len();
                let method = t
                    .open
                    .last()
                    .and_then(|f| MethodId::new(f.method).ok())
                    .unwrap_or(MethodId::ROOT);
                let s = Slice {
                    method,
                    depth: depth.min(u16::MAX as usize) as u16,
                    poll: false,
                    wait: Some(kind),
                    task: Some(site),
                    start: from,
                    ticks: elapsed(from, to),
                };
                let capacity = self.capacity;
                t.recorded.push(s, capacity);
            }
        }
    }

    fn on_time(&mut self, ticks: u64) {
        let t = &mut self.threads.current;
        t.last_stamp = ticks;
        // Right after its frame opened it is the frame's start, or, if a `TimedReturn`
        // follows, a leaf's exit stamp: kept as both until the next word says which.
        if std::mem::take(&mut t.just_opened) {
            if let Some(top) = t.open.last_mut() {
                top.start = Some(ticks);
            }
        }
        t.pending_end = Some(ticks);
    }
}

/// Add `t`'s slices to `o`'s (the same thread, seen by another stream), keeping the last
/// `capacity` by end.
fn absorb(o: &mut ThreadTimeline, t: &ThreadTimeline, capacity: usize) {
    o.overwritten += t.overwritten;
    let mut all: Vec<Slice> = o.slices.drain(..).chain(t.slices.iter().copied()).collect();
    all.sort_by_key(|s| s.start.wrapping_add(s.ticks) & MAX_PAYLOAD);
    let drop = all.len().saturating_sub(capacity);
    o.overwritten += drop as u64;
    o.slices = all.into_iter().skip(drop).collect();
}

/// Ticks from `start` to `end`, modulo 2^60; an end below its start counts as 0 (as in the
/// time analysis).
fn elapsed(start: u64, end: u64) -> u64 {
    let d = end.wrapping_sub(start) & MAX_PAYLOAD;
    if d > MAX_PAYLOAD / 2 {
        0
    } else {
        d
    }
}

impl EventAnalysis for Timeline {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            // The words of a timed call first, without building an `EventKind`.
            if let Some((_, callee)) = event::as_call(w) {
                self.open(callee, Opened::Call);
                continue;
            }
            if let Some(ticks) = event::as_time(w) {
                self.on_time(ticks);
                continue;
            }
            if let Some((callee, ticks)) = event::as_timed_return(w) {
                self.on_timed_return(callee, ticks);
                continue;
            }
            if let Some(n) = event::as_thread_mark(w) {
                self.threads.current.recorded.thread = Some(n);
                continue;
            }
            if let Some(wait) = event::as_wait(w) {
                self.on_wait(wait);
                continue;
            }
            match decode(w) {
                Some(EventKind::Call { callee, .. }) => self.open(callee.get(), Opened::Call),
                Some(EventKind::Time { ticks }) => self.on_time(ticks),
                Some(EventKind::TimedReturn { callee, ticks }) => {
                    self.on_timed_return(callee.get(), ticks)
                }
                Some(EventKind::LongReturn {
                    callee,
                    ticks,
                    timed: true,
                }) => self.on_timed_return(callee.get(), ticks),
                Some(EventKind::LongReturn { callee, .. }) => {
                    self.threads.current.pending_end = None;
                    self.close_call(callee.get());
                }
                Some(EventKind::Return { callee }) => self.on_return(callee.get()),
                Some(EventKind::Poll {
                    method,
                    task,
                    first,
                }) => self.on_poll(method.get(), task, first),
                Some(EventKind::PollEnd { task, .. }) => self.on_poll_end(task),
                Some(EventKind::Thread { id }) => {
                    self.threads.switch_to(id);
                }
                _ => {}
            }
        }
    }

    fn merge(&mut self, other: Timeline) {
        self.unmatched += other.unmatched;
        let theirs = other.threads();
        self.merged.extend(theirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cabprof_cab::event::Event;

    fn id(n: u32) -> MethodId {
        MethodId::new(n).unwrap()
    }

    fn call(a: u32, b: u32) -> u64 {
        Event::call(id(a), id(b)).word()
    }

    fn timed_ret(m: u32, ticks: u64) -> u64 {
        Event::timed_return(id(m), ticks).word()
    }

    fn time(t: u64) -> u64 {
        Event::time(t).word()
    }

    /// A lock wait inside a call is a slice one deeper, from its stamps, high bits and all; a
    /// hold is none.
    #[test]
    fn a_wait_is_a_slice_inside_its_caller() {
        let base = 5 << 48;
        let [from, to] = Event::wait_span(base + 120, base + 180);
        let [hold_from, hold_to] = Event::wait_span(base + 181, base + 182);
        let words = vec![
            Event::thread_mark(7).word(),
            call(0, 1),
            call(1, 2),
            time(base + 110),
            timed_ret(2, 5),
            Event::wait(WaitKind::Lock, 1, 9).word(),
            Event::wait_ns(60).word(),
            from.word(),
            to.word(),
            // A hold's stamps would not come; if they did, there is no wait to draw.
            Event::wait(WaitKind::Hold, 2, 9).word(),
            Event::wait_ns(1).word(),
            hold_from.word(),
            hold_to.word(),
            time(base + 200),
            timed_ret(1, 100),
        ];
        let mut t = Timeline::new(16);
        t.consume(&words);
        let th = t.threads();
        let slices = &th[0].slices;
        let waits: Vec<&Slice> = slices.iter().filter(|s| s.wait.is_some()).collect();
        assert_eq!(waits.len(), 1, "{slices:?}");
        let w = waits[0];
        assert_eq!(
            (w.method, w.depth, w.wait, w.task, w.start, w.ticks),
            (id(1), 1, Some(WaitKind::Lock), Some(9), base + 120, 60)
        );
        let outer = slices
            .iter()
            .find(|s| s.method == id(1) && s.wait.is_none())
            .unwrap();
        assert!(outer.start <= w.start && w.start + w.ticks <= outer.start + outer.ticks);
        assert_eq!(SLICE_BYTES, 32);
    }

    /// outer(1) from 100 to 200 calls inner(2) twice: 110..130 and 150..170.
    fn nested() -> Vec<u64> {
        vec![
            Event::thread_mark(7).word(),
            call(0, 1),
            call(1, 2),
            time(130),
            timed_ret(2, 20),
            call(1, 2),
            time(170),
            timed_ret(2, 20),
            time(200),
            timed_ret(1, 100),
        ]
    }

    #[test]
    fn timed_calls_become_nested_slices_from_their_exit_stamps() {
        let mut t = Timeline::default();
        t.consume(&nested());
        let threads = t.threads();
        assert_eq!(threads.len(), 1);
        assert_eq!(threads[0].thread, Some(7));
        let s: Vec<_> = threads[0]
            .slices
            .iter()
            .map(|s| (s.method.get(), s.depth, s.start, s.ticks))
            .collect();
        assert_eq!(s, [(2, 1, 110, 20), (2, 1, 150, 20), (1, 0, 100, 100)]);
    }

    #[test]
    fn a_parent_whose_truncated_duration_starts_after_its_child_is_widened_to_hold_it() {
        // outer's true start is 100; its word says it took 95 ticks (truncated), inner 101..130.
        let mut t = Timeline::default();
        t.consume(&[call(0, 1), call(1, 2), time(130), timed_ret(2, 29)]);
        t.consume(&[time(200), timed_ret(1, 95)]);
        let s: Vec<_> = t.threads()[0]
            .slices
            .iter()
            .map(|s| (s.method.get(), s.start, s.ticks))
            .collect();
        assert_eq!(s, [(2, 101, 29), (1, 101, 99)]);
    }

    #[test]
    fn without_exit_stamps_nothing_is_on_the_timeline() {
        let mut t = Timeline::default();
        t.consume(&[
            call(0, 1),
            timed_ret(1, 50),
            call(0, 1),
            Event::ret(id(1)).word(),
        ]);
        assert!(t.threads().is_empty());
        assert_eq!(t.unmatched(), 0);
    }

    #[test]
    fn the_flight_recorder_keeps_the_last_slices_and_counts_the_rest() {
        let mut t = Timeline::new(2);
        t.consume(&nested());
        let th = &t.threads()[0];
        assert_eq!(th.overwritten, 1);
        let starts: Vec<_> = th.slices.iter().map(|s| s.start).collect();
        assert_eq!(starts, [150, 100]);
    }

    #[test]
    fn polls_are_slices_and_a_futures_call_is_not_left_open() {
        let poll = |first, task| Event::poll(id(3), task, first).word();
        let end = |task, n, done| Event::poll_end(task, n, done).word();
        let mut t = Timeline::default();
        t.consume(&[
            call(0, 3),
            poll(true, 9),
            time(10),
            time(15),
            end(9, 0, false),
            call(0, 1),
            time(40),
            timed_ret(1, 10),
            poll(false, 9),
            time(50),
            time(58),
            Event::ret(id(3)).word(),
            end(9, 1, true),
        ]);
        let s: Vec<_> = t.threads()[0]
            .slices
            .iter()
            .map(|s| (s.method.get(), s.depth, s.poll, s.start, s.ticks))
            .collect();
        assert_eq!(
            s,
            [
                (3, 0, true, 10, 5),
                (1, 0, false, 30, 10),
                (3, 0, true, 50, 8)
            ]
        );
        let tasks: Vec<_> = t.threads()[0].slices.iter().map(|s| s.task).collect();
        assert_eq!(tasks, [Some(9), None, Some(9)]);
        assert_eq!(t.unmatched(), 0);
    }

    #[test]
    fn only_a_long_enough_call_of_the_watched_function_fires_the_trigger() {
        use std::sync::Mutex;
        let fired = Arc::new(Mutex::new(Vec::new()));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (f, a) = (fired.clone(), asked.clone());
        let trigger = |watch: u32, min_ticks| Trigger {
            watched: Arc::new({
                let a = a.clone();
                move |m: MethodId| {
                    a.lock().unwrap().push(m.get());
                    m.get() == watch
                }
            }),
            min_ticks,
            fire: Arc::new({
                let f = f.clone();
                move |x| f.lock().unwrap().push(x)
            }),
        };
        // outer (1) lasts 100 ticks, each inner (2) 20.
        let mut t = Timeline::default().with_trigger(trigger(1, 90));
        t.consume(&nested());
        t.consume(&nested());
        let outer = Fired {
            method: id(1),
            thread: Some(7),
            start: 100,
            ticks: 100,
        };
        assert_eq!(*fired.lock().unwrap(), [outer, outer]);
        // The short inner calls are never looked up; outer once.
        assert_eq!(*asked.lock().unwrap(), [1]);
        // Watched but too short; long enough but not watched.
        for (watch, min) in [(2, 21), (2, 101), (3, 1)] {
            fired.lock().unwrap().clear();
            let mut t = Timeline::default().with_trigger(trigger(watch, min));
            t.consume(&nested());
            assert!(fired.lock().unwrap().is_empty(), "{watch} {min}");
        }
    }

    #[test]
    fn merged_streams_of_one_thread_are_one_entry() {
        let mut a = Timeline::default();
        a.consume(&nested());
        let mut b = Timeline::default();
        b.consume(&[
            Event::thread_mark(7).word(),
            call(0, 1),
            time(400),
            timed_ret(1, 50),
        ]);
        let mut c = Timeline::default();
        c.consume(&[
            Event::thread_mark(2).word(),
            call(0, 1),
            time(9),
            timed_ret(1, 4),
        ]);
        let mut all = Timeline::default();
        all.merge(b);
        all.merge(c);
        all.merge(a);
        let threads = all.threads();
        assert_eq!(
            threads.iter().map(|t| t.thread).collect::<Vec<_>>(),
            [Some(2), Some(7)]
        );
        assert_eq!(threads[1].slices.len(), 4);
        assert_eq!(threads[1].slices.back().unwrap().start, 350);
    }
}
