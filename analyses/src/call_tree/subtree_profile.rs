//! The depth-two call-tree profile; see the parent module for the contract.

use cabprof_cab::event::MethodId;
use hashbrown::{HashMap, HashTable};

use super::tasks::TaskKey;
use crate::frame_tracker::{CallFrom, FrameTracker, Frames};
use crate::{EventAnalysis, MethodCount};

/// How often each function ran with each ordered list of direct callees.
///
/// Only invocations seen whole are recorded: from their `Call` to their `Return` with no
/// resynchronisation in between. A resynchronisation means events were lost, so every frame it
/// touches is closed without being recorded: the frames it pops (they lost their `Return`), and
/// the frame it leaves on top (its callee list may miss calls). A frame that was already open
/// when the stream started (made for the caller of a `Call` with no open frame) is not recorded
/// either. Frames still open when
/// the stream ends are not recorded either ([`open_frames`](Self::open_frames) counts them).
///
/// A pattern's key holds the invocation's whole callee list, so an invocation that makes many
/// calls costs memory in proportion; each list is stored once however often it recurs. An
/// invocation that makes more than [`MAX_CALLEES`] calls (a service's main loop, open for the
/// whole session) is not recorded ([`overlong`](Self::overlong) counts them) and its list
/// stops growing there: without that bound its list grew with every call it made, and every
/// snapshot copied it.
///
/// Each open frame hashes its callee list as the calls arrive, so a `Return` looks its pattern
/// up without rehashing the list (one comparison of the list on a hit). Leaf invocations (no
/// callees), at least half of all invocations in any call tree, skip the table: they are
/// counted per method in a [`MethodCount`] (an array indexed by method id).
#[derive(Clone, Debug, Default)]
pub struct CallTreeProfile {
    /// Count per distinct (function, ordered, non-empty callee list).
    subtrees: HashTable<Subtree>,
    /// Invocations per method that called nothing.
    leaves: MethodCount,
    /// Per thread: the open invocations and the polls in progress; what resynchronising cost.
    frames: FrameTracker<OpenCalls>,
    /// The `async fn` invocations seen polled and not recorded yet: their callees so far.
    tasks: HashMap<TaskKey, TaskCalls>,
    /// Invocations not recorded for making more than [`MAX_CALLEES`] calls.
    overlong: u64,
}

/// The most direct calls of one invocation a pattern holds.
pub const MAX_CALLEES: usize = 1 << 16;

/// The open invocations of one context (a thread's, or a poll's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct OpenCalls {
    /// Innermost last.
    frames: Vec<Frame>,
    /// The callee lists of all open frames, back to back: frame `i`'s list is
    /// `callees[frames[i].start..frames[i + 1].start - 1]` (the slot before a frame's start holds
    /// its own entry in its parent's list), and the innermost frame's runs to the end. Stack
    /// discipline keeps every open frame's list contiguous.
    callees: Vec<MethodId>,
    /// In a poll: the callees of the future's own frame in this poll, once its `Return` closed
    /// it, and whether that frame was overlong.
    ended: Option<Vec<MethodId>>,
    ended_overlong: bool,
    /// In a poll: a resynchronisation touched it, so its piece of the callee list may be wrong.
    damaged: bool,
}

/// An `async fn` invocation whose frame spans polls, possibly seen by several instances.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TaskCalls {
    /// Its first poll (where its `Call` is) was seen here.
    first_seen: bool,
    /// No piece of it is known to be damaged.
    complete: bool,
    /// Its direct callees, one piece per poll that called something: (poll number, callees).
    pieces: Vec<(u32, Vec<MethodId>)>,
    /// Polls of it seen here.
    polls: u32,
    /// How many polls it had in all, once its last poll was seen.
    total: Option<u32>,
    /// It made more than [`MAX_CALLEES`] calls over its polls: its pieces are dropped and it
    /// will be counted as overlong, not recorded.
    overlong: bool,
}

impl TaskCalls {
    /// Add `piece` (poll number `poll`), or give up on the list once it is overlong.
    fn add_piece(&mut self, poll: u32, piece: Vec<MethodId>, overlong: bool) {
        let held: usize = self.pieces.iter().map(|p| p.1.len()).sum();
        if overlong || self.overlong || held + piece.len() > MAX_CALLEES {
            self.overlong = true;
            self.pieces = Vec::new();
        } else if !piece.is_empty() {
            self.pieces.push((poll, piece));
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    method: MethodId,
    /// Where this frame's callee list starts in [`OpenCalls::callees`]; `<= callees.len()`.
    start: usize,
    /// `false` if part of this invocation may be missing (opened before the stream started,
    /// or passed through by a resynchronisation): it will not be recorded. Also `false` for
    /// the frame of a future being polled, whose invocation is recorded from its pieces.
    complete: bool,
    /// The frame of the future being polled (the bottom frame of a poll).
    task: bool,
    /// The running hash of `method` and the callees so far ([`seed`], [`step`]).
    hash: u64,
    /// It made more than [`MAX_CALLEES`] calls: its list stopped growing, it will not be
    /// recorded.
    overlong: bool,
}

/// `callee` joins `parent`'s callee list (the back of `callees`), unless the list holds
/// [`MAX_CALLEES`] already: then the invocation is overlong and not recorded (a future's too:
/// its pieces across polls are bounded the same way, [`TaskCalls::add_piece`]).
#[inline(always)]
fn add_callee(parent: &mut Frame, callees: &mut Vec<MethodId>, callee: MethodId) {
    if callees.len() - parent.start < MAX_CALLEES {
        parent.hash = step(parent.hash, callee);
        callees.push(callee);
    } else if !parent.overlong {
        parent.overlong = true;
        parent.complete = false;
    }
}

impl Frames for OpenCalls {
    type Thread = ();
    #[inline(always)]
    fn depth(&self) -> usize {
        self.frames.len()
    }
    #[inline(always)]
    fn method(&self, i: usize) -> MethodId {
        self.frames[i].method
    }
    /// Drop frames `n..` (they lost their `Return`s) and their callee lists.
    fn truncate(&mut self, n: usize, _: &mut ()) {
        if let Some(f) = self.frames.get(n) {
            self.callees.truncate(f.start);
            self.frames.truncate(n);
        }
    }
}

/// A stored pattern: `method`, the ordered methods it called directly, and its count.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Subtree {
    /// `finish` of the running hash: what the table is keyed by.
    hash: u64,
    method: MethodId,
    callees: Box<[MethodId]>,
    count: u64,
}

/// The running hash of a pattern starts from its method…
#[inline]
fn seed(method: MethodId) -> u64 {
    (u64::from(method.get()) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// …takes each callee in order…
#[inline]
fn step(h: u64, callee: MethodId) -> u64 {
    (h.rotate_left(5) ^ u64::from(callee.get())).wrapping_mul(0x517C_C1B7_2722_0A95)
}

/// …and is mixed at the end (the MurmurHash3 finalizer) so every bit of it reaches the bits
/// the table uses.
#[inline]
fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

fn hash_of(method: MethodId, callees: &[MethodId]) -> u64 {
    finish(callees.iter().fold(seed(method), |h, &c| step(h, c)))
}

/// Count `n` invocations of `method` with callees `callees` (whose hash is `hash`) in `table`.
fn add_pattern(
    table: &mut HashTable<Subtree>,
    hash: u64,
    method: MethodId,
    callees: &[MethodId],
    n: u64,
) {
    match table.find_mut(hash, |s| s.method == method && *s.callees == *callees) {
        Some(s) => s.count += n,
        None => {
            table.insert_unique(
                hash,
                Subtree {
                    hash,
                    method,
                    callees: callees.into(),
                    count: n,
                },
                |s| s.hash,
            );
        }
    }
}

impl PartialEq for CallTreeProfile {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(m, callees, n)| other.count(m, callees) == n)
            && self.frames == other.frames
            && self.tasks == other.tasks
            && self.overlong == other.overlong
    }
}

impl Eq for CallTreeProfile {}

impl CallTreeProfile {
    /// An empty profile.
    pub fn new() -> CallTreeProfile {
        CallTreeProfile::default()
    }

    /// How many recorded invocations of `method` called exactly `callees`, in that order.
    pub fn count(&self, method: MethodId, callees: &[MethodId]) -> u64 {
        if callees.is_empty() {
            return self.leaves.count(method);
        }
        self.subtrees
            .find(hash_of(method, callees), |s| {
                s.method == method && *s.callees == *callees
            })
            .map_or(0, |s| s.count)
    }

    /// Every pattern `(function, callees, count)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (MethodId, &[MethodId], u64)> + '_ {
        let leaves = self.leaves.iter().map(|(m, n)| (m, &[][..], n));
        self.subtrees
            .iter()
            .map(|s| (s.method, &*s.callees, s.count))
            .chain(leaves)
    }

    /// The patterns of `method`, most frequent first (ties in callee-list order).
    pub fn patterns_of(&self, method: MethodId) -> Vec<(&[MethodId], u64)> {
        let mut out: Vec<(&[MethodId], u64)> = self
            .iter()
            .filter(|&(m, _, _)| m == method)
            .map(|(_, callees, c)| (callees, c))
            .collect();
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        out
    }

    /// Every pattern sorted by `(function, callees)`; handy for reports and comparisons.
    pub fn sorted(&self) -> Vec<(MethodId, Vec<MethodId>, u64)> {
        let mut out: Vec<_> = self.iter().map(|(m, cs, c)| (m, cs.to_vec(), c)).collect();
        out.sort_unstable();
        out
    }

    /// Number of distinct patterns.
    pub fn len(&self) -> usize {
        self.subtrees.len() + self.leaves.len()
    }

    /// `true` if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Recorded invocations (the sum of all pattern counts).
    pub fn total(&self) -> u64 {
        self.subtrees.iter().map(|s| s.count).sum::<u64>() + self.leaves.total()
    }

    /// Invocations of the current thread still open (their `Return` not seen yet).
    pub fn open_frames(&self) -> usize {
        self.frames.stack().frames.len()
    }

    /// `true` if the profile may differ from the exact one: set by a resynchronisation or an
    /// unmatched `Return`, or by [`set_approximate`](Self::set_approximate).
    pub fn is_approximate(&self) -> bool {
        self.frames.approximate
    }

    /// Mark the profile approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.frames.approximate = approximate;
    }

    /// `Call`s whose caller was not the innermost open frame, and `Return`s that closed frames
    /// above their own.
    pub fn resyncs(&self) -> u64 {
        self.frames.resyncs
    }

    /// Invocations not recorded because they made more than [`MAX_CALLEES`] calls.
    pub fn overlong(&self) -> u64 {
        self.overlong
    }

    /// `Return`s that matched no open frame and were ignored.
    pub fn unmatched_returns(&self) -> u64 {
        self.frames.unmatched_returns
    }

    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        if !self.frames.calls_from_top(caller) {
            self.resync_call(caller);
        }
        let open = self.frames.stack_mut();
        if let Some(parent) = open.frames.last_mut() {
            add_callee(parent, &mut open.callees, callee);
        }
        open.frames.push(Frame {
            method: callee,
            start: open.callees.len(),
            complete: true,
            task: false,
            hash: seed(callee),
            overlong: false,
        });
    }

    /// `caller` is not on top: the tracker continues from its innermost open frame, which will
    /// not be recorded, or from the root, or (when it has no open frame) from a new,
    /// incomplete frame for it at the bottom.
    #[cold]
    fn resync_call(&mut self, caller: MethodId) {
        let from = self.frames.resync_call(caller);
        let open = self.frames.stack_mut();
        open.damaged = true;
        match from {
            CallFrom::Caller => {
                if let Some(f) = open.frames.last_mut() {
                    f.complete = false;
                }
            }
            CallFrom::Root => {}
            CallFrom::Missing => open.frames.push(Frame {
                method: caller,
                start: open.callees.len(),
                complete: false,
                task: false,
                hash: seed(caller),
                overlong: false,
            }),
        }
    }

    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        if !self.frames.returns_top(callee) {
            return self.resync_return(callee);
        }
        let open = &mut self.frames.threads.current.stack;
        let Some(f) = open.frames.pop() else {
            return;
        };
        if f.task {
            // The future's frame: its piece for this poll, recorded at the poll's end.
            open.ended = Some(if f.overlong {
                Vec::new()
            } else {
                open.callees[f.start..].to_vec()
            });
            open.ended_overlong = f.overlong;
        } else if f.overlong {
            self.overlong += 1;
        } else if f.complete && f.start == open.callees.len() {
            self.leaves.record(callee);
        } else if f.complete {
            let callees = &open.callees[f.start..];
            add_pattern(&mut self.subtrees, finish(f.hash), callee, callees, 1);
        }
        open.callees.truncate(f.start);
    }

    /// `callee` is not on top: the tracker closes its innermost open frame and everything
    /// above it unrecorded, and the frame left on top will not be recorded either; or it
    /// ignores the `Return` if `callee` has no open frame.
    #[cold]
    fn resync_return(&mut self, callee: MethodId) {
        let closed = self.frames.resync_return(callee);
        let open = self.frames.stack_mut();
        open.damaged = true;
        if closed {
            if let Some(f) = open.frames.last_mut() {
                f.complete = false;
            }
        }
    }
}

impl CallTreeProfile {
    /// A poll of future `task` of `method` begins: park the thread's frames and continue from
    /// the future's own frame, whose callees in this poll are one piece of its callee list.
    fn on_poll(&mut self, method: MethodId, task: u32, first: bool) {
        let key = (method, task);
        let open = &mut self.frames.threads.current.stack;
        let entry = self.tasks.entry(key).or_insert_with(|| TaskCalls {
            complete: true,
            ..TaskCalls::default()
        });
        if first {
            // Its `Call` just opened its frame in the polling context (and listed it among the
            // caller's callees); from now on the frame lives in the polls.
            entry.first_seen = true;
            match open.frames.last() {
                Some(f) if f.method == method && f.start == open.callees.len() => {
                    entry.complete &= f.complete;
                    open.frames.pop();
                }
                _ => {
                    self.frames.approximate = true;
                    entry.complete = false;
                }
            }
        }
        let poll = OpenCalls {
            frames: vec![Frame {
                method,
                start: 0,
                complete: false,
                task: true,
                hash: seed(method),
                overlong: false,
            }],
            ..OpenCalls::default()
        };
        self.frames.park(key, poll);
    }

    /// The innermost poll ends: keep the future's piece of callees and go back to the frames
    /// it parked.
    fn on_poll_end(&mut self, task: u32, poll: u32, done: bool) {
        let Some((key, this)) = self.frames.unpark(task) else {
            return;
        };
        let (piece, intact, overlong) = match (this.ended, this.frames.first()) {
            (Some(callees), _) => (
                callees,
                !this.damaged && this.frames.is_empty(),
                this.ended_overlong,
            ),
            (None, Some(f)) if f.task => (
                if f.overlong {
                    Vec::new()
                } else {
                    this.callees[f.start..].to_vec()
                },
                !this.damaged && this.frames.len() == 1,
                f.overlong,
            ),
            _ => (Vec::new(), false, false),
        };
        let t = self.tasks.entry(key).or_default();
        t.complete &= intact && key.1 == task;
        t.add_piece(poll, piece, overlong);
        t.polls += 1;
        if done {
            t.total = Some(poll.saturating_add(1));
        }
        self.finish_task(key);
    }

    /// Record `key`'s invocation if every piece of it is here.
    fn finish_task(&mut self, key: TaskKey) {
        let Some(t) = self.tasks.get(&key) else {
            return;
        };
        if !(t.first_seen && t.total == Some(t.polls)) {
            return;
        }
        let Some(mut t) = self.tasks.remove(&key) else {
            return;
        };
        if t.overlong {
            self.overlong += 1;
            return;
        }
        if !t.complete {
            return;
        }
        let method = key.0;
        if t.pieces.is_empty() {
            self.leaves.record(method);
            return;
        }
        t.pieces.sort_unstable_by_key(|p| p.0);
        let callees: Vec<MethodId> = t.pieces.into_iter().flat_map(|p| p.1).collect();
        add_pattern(
            &mut self.subtrees,
            hash_of(method, &callees),
            method,
            &callees,
            1,
        );
    }

    /// `async fn` invocations seen polled here and not recorded yet (still running, or with
    /// pieces in a stream not merged in yet).
    pub fn pending_tasks(&self) -> usize {
        self.tasks.len()
    }
}

impl super::CallEvents for CallTreeProfile {
    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        CallTreeProfile::on_call(self, caller, callee);
    }
    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        CallTreeProfile::on_return(self, callee);
    }
    /// The leaf joins its caller's callee list and is counted as a leaf; no frame is pushed.
    /// On a caller that is not on top, the resynchronising path.
    #[inline]
    fn on_leaf(&mut self, caller: MethodId, callee: MethodId) {
        let open = &mut self.frames.threads.current.stack;
        match open.frames.last_mut() {
            Some(parent) if parent.method == caller => {
                add_callee(parent, &mut open.callees, callee);
            }
            None if caller == MethodId::ROOT => {}
            _ => {
                CallTreeProfile::on_call(self, caller, callee);
                CallTreeProfile::on_return(self, callee);
                return;
            }
        }
        self.leaves.record(callee);
    }
    fn on_thread(&mut self, id: u64) {
        self.frames.on_thread(id);
    }
    fn on_poll(&mut self, method: MethodId, task: u32, first: bool) {
        CallTreeProfile::on_poll(self, method, task, first);
    }
    fn on_poll_end(&mut self, task: u32, poll: u32, done: bool) {
        CallTreeProfile::on_poll_end(self, task, poll, done);
    }
}

impl EventAnalysis for CallTreeProfile {
    fn consume(&mut self, words: &[u64]) {
        super::feed(self, words);
    }

    fn merge(&mut self, other: CallTreeProfile) {
        for s in &other.subtrees {
            add_pattern(&mut self.subtrees, s.hash, s.method, &s.callees, s.count);
        }
        self.leaves.merge(other.leaves);
        for (key, o) in other.tasks {
            let t = self.tasks.entry(key).or_insert_with(|| TaskCalls {
                complete: true,
                ..TaskCalls::default()
            });
            t.first_seen |= o.first_seen;
            t.complete &= o.complete;
            for (poll, piece) in o.pieces {
                t.add_piece(poll, piece, false);
            }
            if o.overlong {
                t.add_piece(0, Vec::new(), true);
            }
            t.polls += o.polls;
            t.total = t.total.or(o.total);
            self.finish_task(key);
        }
        self.frames.merge_counts(&other.frames);
        self.overlong += other.overlong;
    }
}
