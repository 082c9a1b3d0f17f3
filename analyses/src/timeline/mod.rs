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
//! The open frames and polls are the shared frame tracker's (`crate::frame_tracker`), as in
//! the other stack analyses: a poll parks its poller's frames (a slice's depth counts them),
//! and a `Return` or `PollEnd` of a stream that lost words resynchronises by the same rules. A
//! `Call` is not tested against the frame on top (see `on_call`).
//!
//! A thread is known by its **thread mark** (the number its first timed exit sends); the
//! facade keeps the numbers' names. A stream whose thread sent none has thread `None`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use cabprof_cab::event::{self, decode, EventKind, MethodId, WaitKind, WaitWord, MAX_PAYLOAD};

use crate::frame_tracker::{self, FrameTracker};
use crate::EventAnalysis;

#[cfg(test)]
mod tests;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    method: u32,
    opened: Opened,
    /// Its start stamp, if one came right after it opened.
    start: Option<u64>,
}

/// The open frames of one context: a thread's own, or a poll's (whose first frame is the
/// poll's own), innermost last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Stack(Vec<Frame>);

/// The shared tracker's view of the frames.
impl frame_tracker::Frames for Stack {
    type Thread = Track;
    #[inline(always)]
    fn depth(&self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn method(&self, i: usize) -> MethodId {
        method_id(self.0[i].method)
    }
    /// The frames above lost their closing words: they are not on the timeline, and neither
    /// is the record of their children.
    fn truncate(&mut self, n: usize, t: &mut Track) {
        self.0.truncate(n);
        t.children_from.truncate(t.base + n + 1);
    }
}

/// One thread's state beside its frames (which the shared [`FrameTracker`] keeps): the stamp
/// pending, and what it recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Track {
    /// The frames of the stacks its polls parked: the depth of the current stack's first.
    base: usize,
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
    /// Per thread: the open frames and the polls in progress, and a [`Track`].
    frames: FrameTracker<Stack>,
    /// What merged instances recorded.
    merged: Vec<ThreadTimeline>,
    /// `PollEnd`s that matched no poll (the tracker counts the `Return`s).
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
            frames: FrameTracker::default(),
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
        self.unmatched + self.frames.unmatched_returns
    }

    /// Every thread's timeline, ordered by thread number (threads without one last); a
    /// thread seen by several streams is one entry.
    pub fn threads(&self) -> Vec<ThreadTimeline> {
        let mut out: Vec<ThreadTimeline> = Vec::new();
        let own = std::iter::once(&self.frames.threads.current)
            .chain(self.frames.threads.parked())
            .map(|t| &t.thread.recorded);
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
        let t = &mut self.frames.threads.current.thread;
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
        t.recorded.push(s, capacity);
        if !s.poll {
            self.check_trigger(&s);
        }
        self.frames.threads.current.thread.last_stamp = s.start.wrapping_add(s.ticks) & MAX_PAYLOAD;
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
                thread: self.frames.threads.current.thread.recorded.thread,
                start: s.start,
                ticks: s.ticks,
            });
        }
    }

    /// A `Call`: a frame opens. The timeline does not test the caller (the test costs the
    /// per-call path as much as the rest of a call): after a lost `Return` the frame it did not
    /// close stays open below the new ones until a `Return` of a frame below it closes both.
    #[inline]
    fn on_call(&mut self, callee: u32) {
        self.open(callee, Opened::Call);
    }

    #[inline]
    fn open(&mut self, method: u32, opened: Opened) {
        let open = &mut self.frames.threads.current;
        open.stack.0.push(Frame {
            method,
            opened,
            start: None,
        });
        open.thread.just_opened = true;
        open.thread.pending_end = None;
    }

    /// Close the innermost frame of `callee` (and what is above it, which a gap left open);
    /// its depth, start stamp and its children's first start. `None` if it has no open frame
    /// (counted by the tracker), or if it is a poll's own frame (then it returned: its
    /// `PollEnd` closes the slice).
    #[inline]
    fn close_call(&mut self, callee: u32) -> Option<(usize, Option<u64>, Option<u64>)> {
        let open = &mut self.frames.threads.current;
        match open.stack.0.last() {
            Some(&f) if f.method == callee && f.opened == Opened::Call => {
                open.stack.0.pop();
                let depth = open.thread.base + open.stack.0.len();
                let children = open.thread.closed(depth);
                Some((depth, f.start, children))
            }
            _ => self.close_below(callee),
        }
    }

    /// [`close_call`](Self::close_call) where the top frame is not `callee`'s call.
    #[cold]
    #[inline(never)]
    fn close_below(&mut self, callee: u32) -> Option<(usize, Option<u64>, Option<u64>)> {
        let on_top = self.frames.stack().0.last().map(|f| f.method) == Some(callee);
        if !on_top && !self.frames.unwind_to(method_id(callee)) {
            return None;
        }
        let open = &mut self.frames.threads.current;
        let top = open.stack.0.last_mut()?;
        if let Opened::Poll { task, .. } = top.opened {
            top.opened = Opened::Poll {
                task,
                returned: true,
            };
            return None;
        }
        let f = *top;
        open.stack.0.pop();
        let depth = open.thread.base + open.stack.0.len();
        let children = open.thread.closed(depth);
        Some((depth, f.start, children))
    }

    #[inline]
    fn on_timed_return(&mut self, callee: u32, ticks: u64) {
        let t = &mut self.frames.threads.current.thread;
        t.just_opened = false;
        let end = t.pending_end.take();
        if let Some((depth, _, children)) = self.close_call(callee) {
            if let Some(end) = end {
                let span = (end.wrapping_sub(ticks), ticks);
                self.record(callee, depth, None, span, children);
            }
        }
    }

    #[inline]
    fn on_return(&mut self, callee: u32) {
        let open = &mut self.frames.threads.current;
        open.thread.just_opened = false;
        // A future's last poll: its `Return` comes before the `PollEnd`, which closes the
        // poll with the stamp before both.
        if let Some(top) = open.stack.0.last_mut() {
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
        let end = open.thread.pending_end.take();
        if let Some((depth, Some(start), children)) = self.close_call(callee) {
            if let Some(end) = end {
                let span = (start, elapsed(start, end));
                self.record(callee, depth, None, span, children);
            }
        }
    }

    /// A poll begins: the shared tracker parks the thread's frames, and the poll's own frame
    /// opens, as deep as the parked frames.
    fn on_poll(&mut self, method: u32, task: u32, first: bool) {
        let open = &mut self.frames.threads.current;
        // The first poll directly follows its future's `Call`: the poll stands for that frame.
        if first
            && open
                .stack
                .0
                .last()
                .is_some_and(|f| f.method == method && f.opened == Opened::Call)
        {
            open.stack.0.pop();
        }
        open.thread.base += open.stack.0.len();
        self.frames
            .park((method_id(method), task), Stack::default());
        self.open(
            method,
            Opened::Poll {
                task,
                returned: false,
            },
        );
    }

    /// The poll of `task` ends: its slice, and back to the frames it parked (the frames its
    /// poll left open lost their closing words). Polls inside it, whose own ends were lost,
    /// end first, without slices.
    fn on_poll_end(&mut self, task: u32) {
        let t = &mut self.frames.threads.current.thread;
        t.just_opened = false;
        let end = t.pending_end.take();
        let polls = &self.frames.threads.current.polls;
        let inside = polls
            .iter()
            .rposition(|(key, _)| key.1 == task)
            .map_or(0, |i| polls.len() - 1 - i);
        for _ in 0..inside {
            self.end_poll(task, None);
        }
        self.end_poll(task, end);
    }

    /// The innermost poll ends (a `PollEnd` naming `task`), with its slice if its end stamp
    /// `end` is known.
    fn end_poll(&mut self, task: u32, end: Option<u64>) {
        let Some(((_, task), poll)) = self.frames.unpark(task) else {
            self.unmatched += 1;
            return;
        };
        let open = &mut self.frames.threads.current;
        let depth = open.thread.base;
        open.thread.base = depth.saturating_sub(open.stack.0.len());
        let children = open.thread.closed(depth);
        // Its own frame, unless a resynchronisation inside the poll closed it.
        let Some(f) = poll.0.first().filter(|f| f.opened != Opened::Call) else {
            return;
        };
        if let (Some(start), Some(end)) = (f.start, end) {
            self.record(
                f.method,
                depth,
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
        let open = &mut self.frames.threads.current;
        let t = &mut open.thread;
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
                let depth = t.base + open.stack.0.len();
                let method = open
                    .stack
                    .0
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
        let open = &mut self.frames.threads.current;
        let t = &mut open.thread;
        t.last_stamp = ticks;
        // Right after its frame opened it is the frame's start, or, if a `TimedReturn`
        // follows, a leaf's exit stamp: kept as both until the next word says which.
        if std::mem::take(&mut t.just_opened) {
            if let Some(top) = open.stack.0.last_mut() {
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

fn method_id(m: u32) -> MethodId {
    MethodId::new(m).unwrap_or(MethodId::ROOT)
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

impl Timeline {
    /// A word other than the four of the per-call path; out of line, so that the per-call
    /// loop keeps its state in registers.
    #[inline(never)]
    fn on_other(&mut self, w: u64) {
        if let Some(n) = event::as_thread_mark(w) {
            self.frames.threads.current.thread.recorded.thread = Some(n);
            return;
        }
        if let Some(wait) = event::as_wait(w) {
            return self.on_wait(wait);
        }
        match decode(w) {
            Some(EventKind::Call { callee, .. }) => self.on_call(callee.get()),
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
                self.frames.threads.current.thread.pending_end = None;
                self.close_call(callee.get());
            }
            Some(EventKind::Return { callee }) => self.on_return(callee.get()),
            Some(EventKind::Poll {
                method,
                task,
                first,
            }) => self.on_poll(method.get(), task, first),
            Some(EventKind::PollEnd { task, .. }) => self.on_poll_end(task),
            Some(EventKind::Thread { id }) => self.frames.on_thread(id),
            _ => {}
        }
    }
}

impl EventAnalysis for Timeline {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            // The words of a timed call first, without building an `EventKind`.
            if let Some((_, callee)) = event::as_call(w) {
                self.on_call(callee);
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
            if let Some(callee) = event::as_return(w) {
                self.on_return(callee);
                continue;
            }
            self.on_other(w);
        }
    }

    fn merge(&mut self, other: Timeline) {
        self.unmatched += other.unmatched;
        self.frames.merge_counts(&other.frames);
        let theirs = other.threads();
        self.merged.extend(theirs);
    }
}
