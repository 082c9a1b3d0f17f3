//! Time per function, per call-graph edge and per calling context, from `Time` words.
//!
//! # The stream
//!
//! A timed call is `Call`, …, `TimedReturn(ticks)`: the producer read the clock at entry and at
//! exit and sends the difference with the return. It may also be `Call`, `Time(t0)`, …,
//! `Time(t1)`, `Return` (functions with `paths`): the stamp right after the `Call` opens the
//! frame, the one right before the `Return` closes it, so its inclusive time is `t1 - t0`
//! counter ticks (modulo 2^60). A call without stamps is counted but not timed: with
//! sampled timing (one call in K per function and thread) most are. An instrumented `async fn`
//! stamps each poll instead (`Poll`, `Time`, …, `Time`, `PollEnd`, the last poll's closing
//! stamp before its `Return`): its time is the **time polled**, the sum of its polls, not the
//! time it spent suspended between them.
//!
//! # What is computed
//!
//! All sums are exact integers of ticks; conversion to nanoseconds is the reader's (see
//! `cabprof_cab::clock::Calibration`).
//!
//! - Per function: calls, timed calls, the sum of the timed calls' inclusive ticks over every
//!   activation (`ticks_all`) and over the outermost activations only (`ticks_outer`: a
//!   recursive function's nested activations are inside an outer one's time, so this is the
//!   function's inclusive time), and a histogram of one call's inclusive ticks (all
//!   activations; [`hdrhistogram`], 2 significant digits).
//! - Per caller → callee edge: calls, timed calls, inclusive ticks.
//! - Per calling context (a path from the root, as in the calling-context tree): calls, timed
//!   calls, inclusive ticks.
//! - Everywhere, apart: the long calls (`LongReturn` words), each measured in full. With
//!   sampled timing the producer sends one for every call during which its coarse clock
//!   ticked many times (16 in the facade), timed or not, so they are all known: an estimate is their sum plus the other
//!   calls' estimated from the timed ones, which sample those alone (two strata), and its
//!   interval comes from that sample. A rare long call the sample missed is then in the
//!   estimate, not missing from it and from its interval.
//! - Exclusive (self) time is derived, never stored: a function's self time is its `ticks_all`
//!   minus the inclusive ticks of every call it made (its outgoing edges). In an exhaustive
//!   stream this is exactly the sum over its activations of (duration − callees' durations),
//!   so the self times of all functions add up to the inclusive time of the calls made from
//!   the root ([`TimeProfile::estimate`] computes it; with sampled timing each term is scaled
//!   by calls / timed calls first).
//!
//! "Outermost" is decided by what is open on the thread when the frame opens: each thread
//! keeps, per function, the depth of its outermost open activation (a future's frame is open
//! while it is being polled, not while it is suspended), and a call is outermost if there was
//! none. A future decides it again at each poll, and only the polls that were outermost add
//! to `ticks_outer`, so a future polled inside another activation of its own function (or one
//! that calls back into a function open below it) is counted once, whatever context its
//! first poll gave it.
//!
//! The table is kept lazily: a frame found through its caller's last call (a loop calling the
//! same function) takes that call's answer, since what is open below the caller has not
//! changed while the caller stayed open, and is written to the table only when a call that
//! is not a repeat, a poll or a resynchronisation needs the table right (then every frame not
//! yet written is, innermost first down to the first one written). A future's frame forgets
//! its last call at every later poll, as what is open below it is then another thread's
//! stack. So the common call costs no table access, and any other costs one load and store
//! per frame, whatever the depth.
//!
//! # Futures that move between threads
//!
//! Contexts belong to tasks, as in the call-tree analyses: a future's calling context is the
//! one of its first poll (the context of the `Call` right before it), and what its later polls
//! call is charged below it, on whatever thread they run. A stream that sees polls of a future
//! whose first poll it did not see (the task moved between threads, so between rings) collects
//! them below a detached node; [`TimeProfile::merge`] grafts that subtree, with its times,
//! onto the future's node once the instance that saw the first poll is merged in. The
//! future's own time (the sum of its polls, on every thread) is recorded once every poll is
//! accounted for; until then its polled ticks count in its function's `open_polled`, and
//! nowhere else.
//!
//! # Imperfect streams
//!
//! Sampled rings (gaps) resynchronise like the call-tree analyses: a `Return` below the top
//! closes the frames above it untimed, a `Return` matching no frame is counted and ignored, a
//! `Call` whose caller is not on top continues from the caller's innermost open frame. Any of
//! these sets `approximate`.

mod calls;
mod futures;
mod results;
mod stack;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_long;

pub use results::{
    Calibrations, Compensation, FunctionEstimate, FunctionTime, Long, TimeContext, Timed,
};

use cabprof_cab::event::{self, CallCosts, MethodId};
use hashbrown::HashMap;

use crate::call_tree::tasks;
use crate::call_tree::trie::Trie;
use crate::frame_tracker::FrameTracker;
use crate::EventAnalysis;

use futures::{combine, Task, TaskKey};
use results::{NodeTime, COST_ONE};
use stack::{Active, Callee, Stack};

/// One thread's state in the analysis beside its frames and polls (which the shared
/// [`FrameTracker`] keeps): the stamps and costs pending, and what is open on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ThreadState {
    /// The last word opened a frame or poll: a `Time` now is its start stamp.
    just_opened: bool,
    /// A closing stamp waiting for its `Return` or `PollEnd`; [`NO_STAMP`](stack::NO_STAMP) if
    /// none.
    pending_end: u64,
    /// [`cost`](Self::cost) at `pending_end`: what comes after the closing stamp (a stall
    /// while its word was pushed) is outside the frame.
    end_cost: u64,
    /// [`Open::last`](stack::Open::last) for calls from the root (an empty stack), and whether
    /// it was outermost ([`LAST_OUTER`](stack::LAST_OUTER) or 0).
    root_last: Callee,
    root_last_outer: u8,
    /// What is open on this thread, parked stacks included.
    active: Active,
    /// The depth of `stack`'s first frame on the thread: the frames of the parked stacks.
    base: u32,
    /// What the instrumentation and cabprof itself cost this thread so far, in 1/256 ticks
    /// (wrapping): every call adds its cost, every `Stall` its ticks. A frame loses what this
    /// grew by while it was open (see [`Compensation`]).
    cost: u64,
}

/// Time per function, edge and calling context; see the module docs.
#[derive(Clone, Debug)]
pub struct TimeProfile {
    /// By method id (ids are dense): timed calls, ticks, histograms. Calls are the tree's node
    /// counts, summed by [`functions`](Self::functions).
    functions: Vec<Option<FunctionTime>>,
    /// By method id: calls that were not outermost activations.
    nested: Vec<u64>,
    /// The calling contexts; a node's count is its calls. Edges and per-function calls are
    /// summed from it.
    tree: Trie,
    /// Per context node, same indices as the tree's nodes.
    node_time: Vec<NodeTime>,
    /// Per context node with long calls: those (rare, so apart from `node_time`).
    long_nodes: HashMap<u32, Long>,
    /// Per thread: the open frames, the polls in progress, and a [`ThreadState`]; whether a
    /// resynchronisation made the results approximate, and `Return`s that matched no frame.
    frames: FrameTracker<Stack>,
    /// Futures between polls, or finished but waiting for polls other streams saw.
    tasks: HashMap<TaskKey, Task>,
    /// `PollEnd`s that matched no poll.
    unmatched: u64,
    /// `Poll` words seen.
    polls: u64,
    /// What is taken out of the times; see [`Compensation`].
    compensation: Option<Compensation>,
    /// [`Compensation::inside`], and `untimed`, `timed − untimed` and `poll` in 1/256 ticks
    /// (wrapping).
    comp_inside: f64,
    comp_untimed: u64,
    comp_timed_extra: u64,
    comp_poll: u64,
    /// Ticks the threads spent inside cabprof, and the `Stall` words that said so.
    stalled: u64,
    stalls: u64,
    /// The latest calibration words of this stream (its thread's probes during the session),
    /// at most [`CALIBRATION_WINDOW`]: the compensation applied is their median.
    recent: Vec<CallCosts>,
    /// Where the next calibration word goes in `recent` once it is full.
    recent_next: usize,
    /// Every calibration word seen (merged over streams).
    calibrations: Calibrations,
    /// Tests: every call takes the uncached path.
    #[cfg(test)]
    test_uncached: bool,
}

impl Default for TimeProfile {
    fn default() -> Self {
        TimeProfile {
            functions: Vec::new(),
            nested: Vec::new(),
            tree: Trie::default(),
            node_time: vec![NodeTime::default()],
            long_nodes: HashMap::new(),
            frames: FrameTracker::default(),
            tasks: HashMap::new(),
            unmatched: 0,
            polls: 0,
            compensation: None,
            comp_inside: 0.0,
            comp_untimed: 0,
            comp_poll: 0,
            comp_timed_extra: 0,
            stalled: 0,
            stalls: 0,
            recent: Vec::new(),
            recent_next: 0,
            calibrations: Calibrations::default(),
            #[cfg(test)]
            test_uncached: false,
        }
    }
}

impl TimeProfile {
    /// An empty profile.
    pub fn new() -> TimeProfile {
        TimeProfile::default()
    }

    /// Take `c` out of the times from now on (see [`Compensation`]), until the stream's own
    /// calibration words say otherwise. Without it only the time spent inside cabprof
    /// (`Stall` words) is taken out, and calibration words are only counted.
    pub fn set_compensation(&mut self, c: Compensation) {
        self.compensation = Some(c);
        self.apply(c);
    }

    fn apply(&mut self, c: Compensation) {
        let fixed = |t: f64| (t.max(0.0) * COST_ONE).round() as u64;
        self.comp_inside = c.inside;
        self.comp_untimed = fixed(c.untimed);
        self.comp_timed_extra = fixed(c.timed).wrapping_sub(fixed(c.untimed));
        self.comp_poll = fixed(c.poll);
    }

    /// A calibration word: the thread measured its calls' costs again. With compensation on,
    /// the stream's calls from here on lose the median of its latest measurements (the one at
    /// the session's start among them until there are three): one probe disturbed by an
    /// interrupt moves nothing, a change of level that lasts is followed within a few laps.
    #[cold]
    fn on_calibration(&mut self, c: CallCosts) {
        self.calibrations.add(c);
        let Some(start) = self.compensation else {
            return;
        };
        if self.recent.len() < CALIBRATION_WINDOW {
            self.recent.push(c);
        } else {
            self.recent[self.recent_next] = c;
            self.recent_next = (self.recent_next + 1) % CALIBRATION_WINDOW;
        }
        let pick = |f: fn(&CallCosts) -> f64, first: f64| {
            let mut v: Vec<f64> = self.recent.iter().map(f).collect();
            if v.len() < 3 {
                v.push(first);
            }
            v.sort_by(f64::total_cmp);
            let n = v.len();
            if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            }
        };
        let c = Compensation {
            inside: pick(|c| c.inside, start.inside),
            timed: pick(|c| c.timed, start.timed),
            untimed: pick(|c| c.untimed, start.untimed),
            // Not in the calibration words: the start's.
            poll: start.poll,
        };
        self.apply(c);
    }

    /// The calibration words seen: the probes the program's threads ran during the session.
    pub fn calibrations(&self) -> &Calibrations {
        &self.calibrations
    }

    /// The compensation applied, if one was set.
    pub fn compensation(&self) -> Option<Compensation> {
        self.compensation
    }

    /// Ticks the application's threads spent inside cabprof (`Stall` words).
    pub fn stalled_ticks(&self) -> u64 {
        self.stalled
    }

    /// The `Stall` words seen: the times the application's threads entered cabprof.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }

    /// Mark the results approximate (sampled rings) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.frames.approximate = approximate;
    }

    /// Whether resynchronisations (or [`set_approximate`](Self::set_approximate)) make the
    /// results approximate.
    pub fn is_approximate(&self) -> bool {
        self.frames.approximate
    }

    /// Polls of instrumented futures seen.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// `Return`s and `PollEnd`s that matched no open frame or poll.
    pub fn unmatched(&self) -> u64 {
        self.frames.unmatched_returns + self.unmatched
    }

    fn function(&mut self, m: u32) -> &mut FunctionTime {
        let i = m as usize;
        if i >= self.functions.len() {
            self.functions.resize_with(i + 1, || None);
        }
        self.functions[i].get_or_insert_with(FunctionTime::default)
    }

    /// Give the nodes the tree made since the last call their (empty) [`NodeTime`].
    #[cold]
    fn grow_nodes(&mut self) {
        self.node_time
            .resize(self.tree.nodes.len(), NodeTime::default());
    }
}

/// Calibration words a stream's compensation is the median of.
const CALIBRATION_WINDOW: usize = 3;

fn method_id(m: u32) -> MethodId {
    MethodId::new(m).unwrap_or(MethodId::ROOT)
}

impl EventAnalysis for TimeProfile {
    fn consume(&mut self, words: &[u64]) {
        let mut rest = words;
        while let Some((&w, tail)) = rest.split_first() {
            rest = tail;
            // The words of a call first, without building an `EventKind`.
            if let Some((caller, callee)) = event::as_call(w) {
                // An untimed leaf: its `Return` is the next word (in this slice; a pair cut
                // by a chunk boundary goes the long way, to the same state).
                if let Some((&next, tail)) = rest.split_first() {
                    if event::as_return(next) == Some(callee) && self.on_leaf(caller, callee) {
                        rest = tail;
                        continue;
                    }
                }
                self.on_call(caller, callee);
                continue;
            }
            if let Some(callee) = event::as_return(w) {
                self.on_return(callee);
                continue;
            }
            if let Some((callee, ticks)) = event::as_timed_return(w) {
                self.on_timed_return(callee, ticks);
                continue;
            }
            if let Some(ticks) = event::as_time(w) {
                self.on_time(ticks);
                continue;
            }
            self.on_other(w);
        }
    }

    fn merge(&mut self, other: TimeProfile) {
        self.calibrations.merge(&other.calibrations);
        for (m, f) in other.functions.into_iter().enumerate() {
            let Some(f) = f else { continue };
            let mine = self.function(m as u32);
            mine.calls += f.calls;
            mine.timed += f.timed;
            mine.ticks_all = mine.ticks_all.saturating_add(f.ticks_all);
            mine.outer_calls += f.outer_calls;
            mine.outer_timed += f.outer_timed;
            mine.ticks_outer = mine.ticks_outer.saturating_add(f.ticks_outer);
            mine.open_polled = mine.open_polled.saturating_add(f.open_polled);
            mine.futures += f.futures;
            mine.wall = mine.wall.saturating_add(f.wall);
            mine.woken_polls += f.woken_polls;
            mine.wake_delay = mine.wake_delay.saturating_add(f.wake_delay);
            mine.comp_all += f.comp_all;
            mine.comp_outer += f.comp_outer;
            mine.comp_open_polled += f.comp_open_polled;
            mine.histogram
                .add(&f.histogram)
                .expect("auto-resizing histograms of the same precision add");
            mine.long.add(&f.long);
            mine.outer_long.add(&f.outer_long);
            if let Some(h) = &f.long_histogram {
                mine.long_histogram
                    .get_or_insert_with(results::new_histogram)
                    .add(h)
                    .expect("auto-resizing histograms of the same precision add");
            }
        }
        if self.nested.len() < other.nested.len() {
            self.nested.resize(other.nested.len(), 0);
        }
        for (mine, theirs) in self.nested.iter_mut().zip(&other.nested) {
            *mine += theirs;
        }
        // Contexts by path (calls summed by the trie), then their timed calls and ticks.
        let to_self = self.tree.merge(&other.tree);
        self.grow_nodes();
        for (i, o) in other.node_time.iter().enumerate() {
            self.node_time[to_self[i] as usize].add(*o);
        }
        for (n, l) in &other.long_nodes {
            self.long_nodes
                .entry(to_self[*n as usize])
                .or_default()
                .add(l);
        }
        // Futures seen in both: what one saw of it goes where the other placed it, and the
        // time of one whose every poll is now accounted for is recorded.
        let mut moved = HashMap::new();
        for (key, mut o) in other.tasks {
            o.open.node = tasks::resolve(&moved, to_self[o.open.node as usize]);
            o.open.last = Callee::default();
            let Some(mut t) = self.tasks.remove(&key) else {
                self.tasks.insert(key, o);
                continue;
            };
            t.open.node = tasks::resolve(&moved, t.open.node);
            let t = match (t.placed, o.placed) {
                // Two first polls: a task id reused (ids wrap); they are two futures.
                (true, true) => {
                    if o.finished() {
                        self.finish(o);
                    } else {
                        self.give_up(o);
                    }
                    t
                }
                (false, true) => {
                    self.graft(t.open.node, o.open.node, &mut moved);
                    combine(o, t)
                }
                _ => {
                    self.graft(o.open.node, t.open.node, &mut moved);
                    combine(t, o)
                }
            };
            if t.finished() {
                self.finish(t);
            } else {
                self.tasks.insert(key, t);
            }
        }
        if !moved.is_empty() {
            tasks::resolve_chains(&mut moved);
            self.forward(&moved);
        }
        self.frames.merge_counts(&other.frames);
        self.unmatched += other.unmatched;
        self.polls += other.polls;
        self.stalled = self.stalled.saturating_add(other.stalled);
        self.stalls += other.stalls;
        if self.compensation.is_none() {
            if let Some(c) = other.compensation {
                self.set_compensation(c);
            }
        }
    }
}
