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
//!   activations; [`hdrhistogram`], 3 significant digits).
//! - Per caller → callee edge: calls, timed calls, inclusive ticks.
//! - Per calling context (a path from the root, as in the calling-context tree): calls, timed
//!   calls, inclusive ticks.
//! - Exclusive (self) time is derived, never stored: a function's self time is its `ticks_all`
//!   minus the inclusive ticks of every call it made (its outgoing edges). In an exhaustive
//!   stream this is exactly the sum over its activations of (duration − callees' durations),
//!   so the self times of all functions add up to the inclusive time of the calls made from
//!   the root ([`TimeProfile::estimate`] computes it; with sampled timing each term is scaled
//!   by calls / timed calls first).
//!
//! # Imperfect streams
//!
//! Sampled rings (gaps) resynchronise like the call-tree analyses: a `Return` below the top
//! closes the frames above it untimed, a `Return` matching no frame is counted and ignored, a
//! `Call` whose caller is not on top continues from the caller's innermost open frame. Any of
//! these sets `approximate`. A future polled in several streams (a task that moved between
//! threads) is completed by the stream that sees its last poll, with the polls that stream
//! saw; the polled time other streams saw is added to its function's totals when the
//! instances are merged ([`TimeProfile::merge`]) or at the end (`open_polled`), but not to its
//! edge, context or per-call histogram, which that stream could not attribute.

use cabprof_cab::event::{self, decode, EventKind, MethodId, MAX_PAYLOAD};
use hashbrown::HashMap;
use hdrhistogram::Histogram;

use crate::call_tree::trie::{Trie, NONE, ROOT as ROOT_NODE};
use crate::thread_stacks::ThreadStacks;
use crate::EventAnalysis;

/// An unknown caller or context (a fragment of a future first polled in another stream, and
/// the calls made inside it).
const UNKNOWN: u32 = NONE;
/// The same, for a call that is an outermost activation of its function.
const UNKNOWN_OUTER: u32 = NONE - 1;

/// Per-function time.
#[derive(Clone, Debug)]
pub struct FunctionTime {
    /// Calls seen.
    pub calls: u64,
    /// Calls with both stamps.
    pub timed: u64,
    /// Inclusive ticks of the timed calls, every activation.
    pub ticks_all: u64,
    /// Calls not nested in another activation of the same function.
    pub outer_calls: u64,
    /// Of those, the timed ones.
    pub outer_timed: u64,
    /// Inclusive ticks of the timed outermost calls.
    pub ticks_outer: u64,
    /// Polled ticks of futures completed in another stream (or still running).
    pub open_polled: u64,
    /// One timed call's inclusive ticks.
    pub histogram: Histogram<u64>,
}

impl Default for FunctionTime {
    fn default() -> Self {
        FunctionTime {
            calls: 0,
            timed: 0,
            ticks_all: 0,
            outer_calls: 0,
            outer_timed: 0,
            ticks_outer: 0,
            open_polled: 0,
            histogram: Histogram::new(3).expect("3 significant digits is in 0..=5"),
        }
    }
}

/// Calls, timed calls and their inclusive ticks (an edge or a context).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timed {
    /// Calls seen.
    pub calls: u64,
    /// Calls with both stamps.
    pub timed: u64,
    /// Their inclusive ticks.
    pub ticks: u64,
}

impl Timed {
    /// The estimated inclusive ticks of all calls: `ticks × calls / timed` (exact when every
    /// call was timed; 0 when none was).
    pub fn estimate(&self) -> f64 {
        scale(self.ticks, self.calls, self.timed)
    }

    fn add(&mut self, o: &Timed) {
        self.calls += o.calls;
        self.timed += o.timed;
        self.ticks += o.ticks;
    }
}

fn scale(ticks: u64, calls: u64, timed: u64) -> f64 {
    if timed == 0 || timed == calls {
        ticks as f64
    } else {
        ticks as f64 * calls as f64 / timed as f64
    }
}

/// One open frame: a call, or a future (whose frame spans its polls). An untimed call, most
/// calls under sampled timing, costs a push and a pop of this, and the count of its context.
#[derive(Clone, Copy, Debug)]
struct Open {
    method: u32,
    /// Its context node; [`UNKNOWN`] or [`UNKNOWN_OUTER`] outside the context tree.
    node: u32,
    /// The callee this frame called last and that call's context node: a loop calling the
    /// same function finds its context here, without a walk of the tree.
    last: Callee,
}

/// A callee and its context node (`method` 0: none yet).
#[derive(Clone, Copy, Debug, Default)]
struct Callee {
    method: u32,
    node: u32,
}

impl Open {
    fn new(method: u32, node: u32) -> Open {
        Open {
            method,
            node,
            last: Callee::default(),
        }
    }
}

/// The timing of the open frame at `depth` of the same stack (timed frames only).
#[derive(Clone, Copy, Debug)]
struct Stamp {
    depth: u32,
    /// Start stamp of the call (or of the current poll of a future); [`NO_STAMP`] if none.
    start: u64,
    /// A future's ticks polled before the current poll.
    polled: u64,
}

/// A future between polls.
#[derive(Clone, Copy, Debug)]
struct Suspended {
    open: Open,
    /// Its ticks polled so far, if it was timed.
    polled: Option<u64>,
}

/// No stamp: stamps are 60-bit, so this is never one.
const NO_STAMP: u64 = u64::MAX;

type TaskKey = (u32, u32);

/// A stack of open frames and the stamps of its timed ones (innermost last, depths rising).
#[derive(Clone, Debug, Default)]
struct Stack {
    open: Vec<Open>,
    stamps: Vec<Stamp>,
}

impl Stack {
    /// Keep the `n` outermost frames (and their stamps).
    fn truncate(&mut self, n: usize) {
        self.open.truncate(n);
        while self.stamps.last().is_some_and(|s| s.depth as usize >= n) {
            self.stamps.pop();
        }
    }

    /// The stamp of the frame at `depth`, if it is timed (it is then the last stamp).
    #[inline]
    fn take_stamp(&mut self, depth: usize) -> Option<Stamp> {
        match self.stamps.last() {
            Some(s) if s.depth as usize == depth => self.stamps.pop(),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct ThreadState {
    stack: Stack,
    /// Polls in progress, innermost last: the future and the stack it parked.
    polls: Vec<(TaskKey, Stack)>,
    /// The last word opened a frame or poll: a `Time` now is its start stamp.
    just_opened: bool,
    /// A closing stamp waiting for its `Return` or `PollEnd`; [`NO_STAMP`] if none.
    pending_end: u64,
    /// [`Open::last`] for calls from the root (an empty stack).
    root_last: Callee,
}

impl ThreadState {
    /// Whether an activation of `method` is open on this thread (the recursion test for a
    /// frame outside the context tree; frames in it know from their node).
    fn is_open(&self, method: u32) -> bool {
        self.stack.open.iter().any(|f| f.method == method)
            || self
                .polls
                .iter()
                .any(|(_, parked)| parked.open.iter().any(|f| f.method == method))
    }
}

/// Per context node: timed calls, their ticks, and whether the node's method appears nowhere
/// above it (its calls are outermost activations).
#[derive(Clone, Copy, Debug, Default)]
struct NodeTime {
    timed: u64,
    ticks: u64,
    outer: bool,
}

/// Time per function, edge and calling context; see the module docs.
#[derive(Clone, Debug)]
pub struct TimeProfile {
    /// By method id (ids are dense). `calls` and `outer_calls` here count only the calls made
    /// outside the context tree (fragments of futures first polled elsewhere); the tree's node
    /// counts hold the rest, and [`functions`](Self::functions) adds the two.
    functions: Vec<Option<FunctionTime>>,
    /// The calling contexts; a node's count is its calls. Edges and per-function calls are
    /// summed from it.
    tree: Trie,
    /// Per context node, same indices as the tree's nodes.
    node_time: Vec<NodeTime>,
    threads: ThreadStacks<ThreadState>,
    /// Futures between polls.
    tasks: HashMap<TaskKey, Suspended>,
    approximate: bool,
    unmatched: u64,
}

impl Default for TimeProfile {
    fn default() -> Self {
        TimeProfile {
            functions: Vec::new(),
            tree: Trie::default(),
            node_time: vec![NodeTime::default()],
            threads: ThreadStacks::default(),
            tasks: HashMap::new(),
            approximate: false,
            unmatched: 0,
        }
    }
}

/// One calling context as a node ([`TimeProfile::context_nodes`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeContext {
    /// Its index in the profile's context tree (never 0, the root's).
    pub node: u32,
    /// The index of its calling context (0: the root), which comes earlier in the list.
    pub parent: u32,
    /// The method called in this context: the innermost frame of its stack.
    pub method: MethodId,
    /// Calls made in exactly this context, timed calls and their inclusive ticks.
    pub time: Timed,
    /// Estimated self ticks: the inclusive estimate minus those of the contexts directly
    /// below (never negative).
    pub exclusive: f64,
}

/// A function's estimated times, in ticks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FunctionEstimate {
    /// Inclusive ticks of all its outermost calls (timed ones scaled by calls / timed).
    pub inclusive: f64,
    /// Self ticks: inclusive ticks of every activation minus those of the calls it made.
    pub exclusive: f64,
    /// Half-width of the 95% confidence interval of `inclusive` (0 when every call was timed):
    /// `1.96 × calls × s / √timed × √(1 − timed / calls)`, `s` the standard deviation of one
    /// call's ticks.
    pub inclusive_ci: f64,
}

impl TimeProfile {
    /// An empty profile.
    pub fn new() -> TimeProfile {
        TimeProfile::default()
    }

    /// Mark the results approximate (sampled rings) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.approximate = approximate;
    }

    /// Whether resynchronisations (or [`set_approximate`](Self::set_approximate)) make the
    /// results approximate.
    pub fn is_approximate(&self) -> bool {
        self.approximate
    }

    /// `Return`s and `PollEnd`s that matched no open frame or poll.
    pub fn unmatched(&self) -> u64 {
        self.unmatched
    }

    /// Per-function time, by method id, every function called (timed or not).
    pub fn functions(&self) -> Vec<(MethodId, FunctionTime)> {
        let mut all = self.functions.clone();
        for (n, t) in self.tree.nodes.iter().zip(&self.node_time).skip(1) {
            if n.count == 0 {
                continue;
            }
            let i = n.method.get() as usize;
            if i >= all.len() {
                all.resize_with(i + 1, || None);
            }
            let f = all[i].get_or_insert_with(FunctionTime::default);
            f.calls += n.count;
            if t.outer {
                f.outer_calls += n.count;
            }
        }
        all.into_iter()
            .enumerate()
            .filter_map(|(m, f)| Some((method_id(m as u32), f?)))
            .collect()
    }

    fn function(&mut self, m: u32) -> &mut FunctionTime {
        let i = m as usize;
        if i >= self.functions.len() {
            self.functions.resize_with(i + 1, || None);
        }
        self.functions[i].get_or_insert_with(FunctionTime::default)
    }

    /// A context node's calls, timed calls and ticks.
    fn timed_at(&self, n: usize) -> Timed {
        let t = self.node_time.get(n).copied().unwrap_or_default();
        Timed {
            calls: self.tree.nodes[n].count,
            timed: t.timed,
            ticks: t.ticks,
        }
    }

    /// Fill in [`NodeTime`] for nodes the tree made since the last call: whether each one's
    /// method appears on the path above it (parents precede children, so one pass suffices).
    #[cold]
    fn grow_nodes(&mut self) {
        for i in self.node_time.len()..self.tree.nodes.len() {
            let n = &self.tree.nodes[i];
            let mut outer = true;
            let mut p = n.parent;
            while p != NONE && p != ROOT_NODE {
                let up = &self.tree.nodes[p as usize];
                if up.method == n.method {
                    outer = false;
                    break;
                }
                p = up.parent;
            }
            self.node_time.push(NodeTime {
                timed: 0,
                ticks: 0,
                outer,
            });
        }
    }

    /// Per-edge time: (caller, callee) → calls, timed calls, ticks, summed over the contexts
    /// where the caller calls the callee. Caller 0 is the root.
    pub fn edges(&self) -> Vec<((MethodId, MethodId), Timed)> {
        let mut e: HashMap<(MethodId, MethodId), Timed> = HashMap::new();
        for (i, n) in self.tree.nodes.iter().enumerate().skip(1) {
            if n.parent == NONE {
                continue;
            }
            let caller = self.tree.nodes[n.parent as usize].method;
            e.entry((caller, n.method))
                .or_default()
                .add(&self.timed_at(i));
        }
        let mut v: Vec<_> = e.into_iter().collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v
    }

    /// Every calling context (root excluded) with its time, sorted by path. Each path is
    /// copied in full, so this costs the sum of all depths (quadratic in a deep recursion):
    /// use [`context_nodes`](Self::context_nodes) for reports.
    pub fn contexts(&self) -> Vec<(Vec<MethodId>, Timed)> {
        let mut out: Vec<_> = (1..self.tree.nodes.len())
            .filter(|&i| self.tree.nodes[i].parent != NONE)
            .map(|i| {
                (
                    self.tree.path_between(ROOT_NODE, i as u32),
                    self.timed_at(i),
                )
            })
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The estimated inclusive and exclusive ticks of `method` (see [`FunctionEstimate`]).
    pub fn estimate(&self, method: MethodId) -> FunctionEstimate {
        self.estimates()
            .into_iter()
            .find(|(m, _)| *m == method)
            .map_or(
                FunctionEstimate {
                    inclusive: 0.0,
                    exclusive: 0.0,
                    inclusive_ci: 0.0,
                },
                |(_, e)| e,
            )
    }

    /// [`estimate`](Self::estimate) of every function, in one pass over the contexts.
    pub fn estimates(&self) -> Vec<(MethodId, FunctionEstimate)> {
        let callees = self.callee_ticks();
        self.functions()
            .into_iter()
            .map(|(m, f)| {
                let e = estimate_with(&f, callees.get(&m).copied().unwrap_or(0.0));
                (m, e)
            })
            .collect()
    }

    /// Per caller: the estimated inclusive ticks of the calls it made.
    fn callee_ticks(&self) -> HashMap<MethodId, f64> {
        let mut out = HashMap::new();
        for (i, n) in self.tree.nodes.iter().enumerate().skip(1) {
            if n.parent != NONE {
                *out.entry(self.tree.nodes[n.parent as usize].method)
                    .or_insert(0.0) += self.timed_at(i).estimate();
            }
        }
        out
    }
}

/// A function's estimate, given the estimated ticks of the calls it made.
fn estimate_with(f: &FunctionTime, callees: f64) -> FunctionEstimate {
    let all = scale(f.ticks_all, f.calls, f.timed) + f.open_polled as f64;
    let inclusive = scale(f.ticks_outer, f.outer_calls, f.outer_timed) + f.open_polled as f64;
    let (n, k) = (f.outer_calls as f64, f.outer_timed as f64);
    let inclusive_ci = if f.outer_timed == 0 || f.outer_timed >= f.outer_calls {
        0.0
    } else {
        1.96 * n * f.histogram.stdev() / k.sqrt() * (1.0 - k / n).sqrt()
    };
    let exclusive = all - callees;
    FunctionEstimate {
        inclusive,
        // Sampled estimates can undershoot; exact sums never do.
        exclusive: if exclusive < 0.0 { 0.0 } else { exclusive },
        inclusive_ci,
    }
}

impl TimeProfile {
    /// Every calling context (root excluded) as a node linked to its parent, with its time
    /// and its estimated self ticks, parents before their children. Unlike
    /// [`contexts`](Self::contexts), this is linear in the number of contexts.
    pub fn context_nodes(&self) -> Vec<TimeContext> {
        let nodes = &self.tree.nodes;
        let attached = self.tree.attached();
        // Each node's inclusive estimate minus its children's, in one pass.
        let mut own: Vec<f64> = (0..nodes.len())
            .map(|i| self.timed_at(i).estimate())
            .collect();
        for (i, n) in nodes.iter().enumerate().skip(1) {
            if attached[i] {
                own[n.parent as usize] -= self.timed_at(i).estimate();
            }
        }
        (1..nodes.len())
            .filter(|&i| attached[i])
            .map(|i| TimeContext {
                node: i as u32,
                parent: nodes[i].parent,
                method: nodes[i].method,
                time: self.timed_at(i),
                exclusive: own[i].max(0.0),
            })
            .collect()
    }

    /// The context node for a call of `method` under `parent`, made if new; under an unknown
    /// parent, [`UNKNOWN`] or [`UNKNOWN_OUTER`], the call counted with its function.
    #[inline]
    fn child(&mut self, parent: u32, method: u32) -> u32 {
        if parent >= UNKNOWN_OUTER {
            return self.unknown_child(method);
        }
        let node = self.tree.child(parent, method_id(method));
        if node as usize >= self.node_time.len() {
            self.grow_nodes();
        }
        self.tree.nodes[node as usize].count += 1;
        node
    }

    #[cold]
    fn unknown_child(&mut self, method: u32) -> u32 {
        let outer = !self.threads.current.is_open(method);
        let f = self.function(method);
        f.calls += 1;
        f.outer_calls += outer as u64;
        if outer {
            UNKNOWN_OUTER
        } else {
            UNKNOWN
        }
    }

    /// Whether a frame at `node` is an outermost activation of its function.
    #[inline]
    fn is_outer(&self, node: u32) -> bool {
        match node {
            UNKNOWN => false,
            UNKNOWN_OUTER => true,
            n => self.node_time[n as usize].outer,
        }
    }

    #[inline]
    fn on_call(&mut self, caller: u32, callee: u32) {
        let st = &mut self.threads.current;
        let last = match st.stack.open.last() {
            Some(f) if f.method == caller => f.last,
            None if caller == 0 => st.root_last,
            _ => Callee::default(),
        };
        let node = if last.method == callee && callee != 0 {
            if last.node < UNKNOWN_OUTER {
                self.tree.nodes[last.node as usize].count += 1;
            }
            last.node
        } else {
            self.call_uncached(caller, callee)
        };
        let st = &mut self.threads.current;
        st.stack.open.push(Open::new(callee, node));
        st.just_opened = true;
        st.pending_end = NO_STAMP;
    }

    /// A call whose context the caller's frame did not have at hand: find (or make) it, and
    /// remember it there.
    #[inline(never)]
    fn call_uncached(&mut self, caller: u32, callee: u32) -> u32 {
        let parent = match self.threads.current.stack.open.last() {
            Some(f) if f.method == caller => f.node,
            None if caller == 0 => ROOT_NODE,
            _ => self.resync_call(caller),
        };
        let node = self.child(parent, callee);
        // An unknown context depends on what is open, not only on the caller: not cached.
        if node < UNKNOWN_OUTER {
            let st = &mut self.threads.current;
            let remembered = Callee {
                method: callee,
                node,
            };
            match st.stack.open.last_mut() {
                Some(f) => f.last = remembered,
                None => st.root_last = remembered,
            }
        }
        node
    }

    /// A `Call` whose caller is not on top: continue from the caller's innermost open frame
    /// (or the root), closing what is above it. Returns the parent node.
    #[cold]
    fn resync_call(&mut self, caller: u32) -> u32 {
        self.approximate = true;
        let st = &mut self.threads.current;
        let keep = st
            .stack
            .open
            .iter()
            .rposition(|f| f.method == caller)
            .map_or(0, |i| i + 1);
        st.stack.truncate(keep);
        st.stack.open.last().map_or(ROOT_NODE, |f| f.node)
    }

    #[inline]
    fn on_time(&mut self, ticks: u64) {
        let st = &mut self.threads.current;
        if std::mem::take(&mut st.just_opened) {
            let Some(top) = st.stack.open.len().checked_sub(1) else {
                return;
            };
            match st.stack.stamps.last_mut() {
                // A future resumed: its stamp carries what it polled before.
                Some(s) if s.depth as usize == top => s.start = ticks,
                _ => st.stack.stamps.push(Stamp {
                    depth: top as u32,
                    start: ticks,
                    polled: 0,
                }),
            }
        } else {
            st.pending_end = ticks;
        }
    }

    #[inline]
    fn on_return(&mut self, callee: u32) {
        if let Some((f, Some(stamp), end)) = self.pop_frame(callee) {
            self.close_timed(f, stamp, end);
        }
    }

    /// The `TimedReturn` of a call that took `ticks` (a start stamp for it, which this
    /// protocol does not send, is superseded by the duration).
    #[inline]
    fn on_timed_return(&mut self, callee: u32, ticks: u64) {
        if let Some((f, _, _)) = self.pop_frame(callee) {
            self.record(f, ticks);
        }
    }

    /// Close `callee`'s frame for its `Return` or `TimedReturn`: the frame, its start stamp if
    /// it has one, and the closing stamp pending ([`NO_STAMP`] if none); `None` if no open
    /// frame matches.
    #[inline]
    fn pop_frame(&mut self, callee: u32) -> Option<(Open, Option<Stamp>, u64)> {
        let st = &mut self.threads.current;
        st.just_opened = false;
        let end = std::mem::replace(&mut st.pending_end, NO_STAMP);
        let f = match st.stack.open.last() {
            Some(&f) if f.method == callee => {
                st.stack.open.pop();
                f
            }
            _ => self.unwind_to(callee)?,
        };
        let st = &mut self.threads.current;
        let depth = st.stack.open.len();
        Some((f, st.stack.take_stamp(depth), end))
    }

    /// A `Return` below the top: close the frames above it untimed and pop it; `None` (and
    /// counted) if no open frame matches.
    #[cold]
    fn unwind_to(&mut self, callee: u32) -> Option<Open> {
        self.approximate = true;
        let st = &mut self.threads.current;
        let Some(i) = st.stack.open.iter().rposition(|f| f.method == callee) else {
            self.unmatched += 1;
            return None;
        };
        st.stack.truncate(i + 1);
        st.stack.open.pop()
    }

    /// A timed frame closes with closing stamp `end` ([`NO_STAMP`] if none).
    fn close_timed(&mut self, f: Open, s: Stamp, end: u64) {
        match (s.start != NO_STAMP, end != NO_STAMP) {
            (true, true) => self.record(f, s.polled.saturating_add(elapsed(s.start, end))),
            // A future dropped between polls: its last poll is an empty one, unstamped.
            (false, false) if s.polled > 0 => self.record(f, s.polled),
            _ => self.approximate = true,
        }
    }

    fn record(&mut self, f: Open, ticks: u64) {
        let outer = self.is_outer(f.node);
        let ft = self.function(f.method);
        ft.timed += 1;
        ft.ticks_all = ft.ticks_all.saturating_add(ticks);
        // Auto-resizing: `record` grows the range (`saturating_record` would clamp to it).
        if ft.histogram.record(ticks).is_err() {
            ft.histogram.saturating_record(ticks);
        }
        if outer {
            ft.outer_timed += 1;
            ft.ticks_outer = ft.ticks_outer.saturating_add(ticks);
        }
        if f.node < UNKNOWN_OUTER {
            let t = &mut self.node_time[f.node as usize];
            t.timed += 1;
            t.ticks = t.ticks.saturating_add(ticks);
        }
    }

    fn on_poll(&mut self, method: u32, task: u32, first: bool) {
        let key = (method, task);
        let st = &mut self.threads.current;
        let resumed = if first {
            match st.stack.open.last() {
                Some(&f) if f.method == method => {
                    st.stack.open.pop();
                    let depth = st.stack.open.len();
                    // A stamp between its `Call` and first `Poll` is not ours to make.
                    st.stack.take_stamp(depth);
                    Suspended {
                        open: f,
                        polled: None,
                    }
                }
                _ => {
                    // Its `Call` was lost (sampling).
                    self.approximate = true;
                    fragment(method)
                }
            }
        } else {
            self.tasks.remove(&key).unwrap_or_else(|| fragment(method))
        };
        let mut stack = Stack {
            open: vec![resumed.open],
            stamps: Vec::new(),
        };
        if let Some(polled) = resumed.polled {
            stack.stamps.push(Stamp {
                depth: 0,
                start: NO_STAMP,
                polled,
            });
        }
        let st = &mut self.threads.current;
        let parked = std::mem::replace(&mut st.stack, stack);
        st.polls.push((key, parked));
        st.just_opened = true;
        st.pending_end = NO_STAMP;
    }

    fn on_poll_end(&mut self, task: u32, done: bool) {
        let st = &mut self.threads.current;
        st.just_opened = false;
        let end = std::mem::replace(&mut st.pending_end, NO_STAMP);
        let Some((key, parked)) = st.polls.pop() else {
            self.unmatched += 1;
            self.approximate = true;
            return;
        };
        if key.1 != task {
            self.approximate = true;
        }
        let mut stack = std::mem::replace(&mut st.stack, parked);
        // Frames left open above the future's own (lost `Return`s).
        if stack.open.len() > 1 {
            stack.truncate(1);
            self.approximate = true;
        }
        let Some(f) = stack.open.pop() else {
            return; // completed in this poll: its `Return` recorded it
        };
        if f.method != key.0 {
            self.approximate = true;
            return;
        }
        let polled = stack.take_stamp(0).map(|s| {
            if s.start != NO_STAMP && end != NO_STAMP {
                s.polled.saturating_add(elapsed(s.start, end))
            } else {
                s.polled
            }
        });
        if done {
            // Dropped or completed without a `Return` seen: what was polled still counts.
            self.approximate = true;
            if let Some(p) = polled {
                self.record(f, p);
            }
        } else {
            self.tasks.insert(key, Suspended { open: f, polled });
        }
    }
}

/// A future whose `Call` this stream did not see: its method, nothing else.
fn fragment(method: u32) -> Suspended {
    Suspended {
        open: Open::new(method, UNKNOWN),
        polled: None,
    }
}

fn method_id(m: u32) -> MethodId {
    MethodId::new(m).unwrap_or(MethodId::ROOT)
}

/// Ticks from `start` to `end`, counters taken modulo 2^60.
///
/// An end stamp below its start (two unserialised reads reordered, or a thread moved between
/// cores whose counters disagree) would wrap to about 2^60: it counts as 0 instead, so one bad
/// pair cannot swamp a function's total.
fn elapsed(start: u64, end: u64) -> u64 {
    let d = end.wrapping_sub(start) & MAX_PAYLOAD;
    if d > MAX_PAYLOAD / 2 {
        0
    } else {
        d
    }
}

impl EventAnalysis for TimeProfile {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            // The three words of a timed call first, without building an `EventKind`.
            if let Some((caller, callee)) = event::as_call(w) {
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
            match decode(w) {
                Some(EventKind::Call { caller, callee }) => {
                    self.on_call(caller.get(), callee.get())
                }
                Some(EventKind::Return { callee }) => self.on_return(callee.get()),
                Some(EventKind::Time { ticks }) => self.on_time(ticks),
                Some(EventKind::Thread { id }) => {
                    self.threads.switch_to(id);
                }
                Some(EventKind::Poll {
                    method,
                    task,
                    first,
                }) => self.on_poll(method.get(), task, first),
                Some(EventKind::PollEnd { task, done, .. }) => self.on_poll_end(task, done),
                _ => {}
            }
        }
    }

    fn merge(&mut self, other: TimeProfile) {
        for (m, f) in other.functions.into_iter().enumerate() {
            let Some(f) = f else { continue };
            let mine = self.function(m as u32);
            mine.calls += f.calls;
            mine.timed += f.timed;
            mine.ticks_all += f.ticks_all;
            mine.outer_calls += f.outer_calls;
            mine.outer_timed += f.outer_timed;
            mine.ticks_outer += f.ticks_outer;
            mine.open_polled += f.open_polled;
            mine.histogram
                .add(&f.histogram)
                .expect("auto-resizing histograms of the same precision add");
        }
        // Contexts by path (calls summed by the trie), then their timed calls and ticks.
        let to_self = self.tree.merge(&other.tree);
        self.grow_nodes();
        for (i, o) in other.node_time.iter().enumerate() {
            let t = &mut self.node_time[to_self[i] as usize];
            t.timed += o.timed;
            t.ticks += o.ticks;
        }
        // Futures between polls in both: one frame, both polled times; one only in `other`
        // keeps its time as polled time of its function (its completion, if any, is elsewhere).
        for (key, f) in other.tasks {
            let theirs = f.polled.unwrap_or(0);
            match self.tasks.get_mut(&key) {
                Some(mine) => {
                    if theirs > 0 || mine.polled.is_some() {
                        mine.polled = Some(mine.polled.unwrap_or(0) + theirs);
                    }
                }
                None => {
                    self.function(f.open.method).open_polled += theirs;
                }
            }
        }
        self.approximate |= other.approximate;
        self.unmatched += other.unmatched;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cabprof_cab::event::Event;

    fn m(i: u32) -> MethodId {
        MethodId::new(i).unwrap()
    }

    fn words(events: &[Event]) -> Vec<u64> {
        events.iter().map(|e| e.word()).collect()
    }

    /// main [0, 100) calls a [10, 40) (which calls b [20, 30)) and b [50, 60); ticks in
    /// units of 10^6, beyond a fresh histogram's initial range.
    fn tree() -> Vec<u64> {
        const U: u64 = 1_000_000;
        unit(&tree_units(), U)
    }

    fn unit(w: &[u64], u: u64) -> Vec<u64> {
        w.iter()
            .map(|&w| match decode(w) {
                Some(EventKind::Time { ticks }) => Event::time(ticks * u).word(),
                _ => w,
            })
            .collect()
    }

    fn tree_units() -> Vec<u64> {
        let (main, a, b) = (m(1), m(2), m(3));
        words(&[
            Event::call(MethodId::ROOT, main),
            Event::time(0),
            Event::call(main, a),
            Event::time(10),
            Event::call(a, b),
            Event::time(20),
            Event::time(30),
            Event::ret(b),
            Event::time(40),
            Event::ret(a),
            Event::call(main, b),
            Event::time(50),
            Event::time(60),
            Event::ret(b),
            Event::time(100),
            Event::ret(main),
        ])
    }

    #[test]
    fn inclusive_and_exclusive_ticks_of_a_known_tree() {
        let w = tree();
        for cut in 0..w.len() {
            let mut p = TimeProfile::new();
            p.consume(&w[..cut]);
            p.consume(&w[cut..]);
            let e = |i| p.estimate(m(i));
            let u = 1e6;
            assert_eq!(e(1).inclusive, 100.0 * u);
            assert_eq!(e(1).exclusive, (100.0 - 30.0 - 10.0) * u);
            assert_eq!(e(2).inclusive, 30.0 * u);
            assert_eq!(e(2).exclusive, 20.0 * u);
            assert_eq!(e(3).inclusive, 20.0 * u);
            assert_eq!(e(3).exclusive, 20.0 * u);
            let (_, b) = p
                .functions()
                .into_iter()
                .find(|(id, _)| *id == m(3))
                .unwrap();
            assert_eq!(b.histogram.len(), 2);
            let p50 = b.histogram.value_at_quantile(0.5);
            assert!(p50.abs_diff(10_000_000) < 10_000, "{p50}");
            let self_sum: f64 = (1..=3).map(|i| e(i).exclusive).sum();
            assert_eq!(self_sum, e(1).inclusive);
            let ctx = p.contexts();
            let main_a_b = ctx.iter().find(|(s, _)| s == &[m(1), m(2), m(3)]).unwrap();
            assert_eq!(main_a_b.1.ticks, 10_000_000);
            assert!(!p.is_approximate());
        }
    }

    /// The known tree with durations carried by `TimedReturn` words (as `#[profile]` sends
    /// them), one call still stamped with `Time` words: the same times.
    #[test]
    fn timed_returns_give_the_same_times_as_stamps() {
        let (main, a, b) = (m(1), m(2), m(3));
        let w = words(&[
            Event::call(MethodId::ROOT, main),
            Event::call(main, a),
            Event::call(a, b),
            Event::timed_return(b, 10),
            Event::timed_return(a, 30),
            Event::call(main, b),
            Event::time(50),
            Event::time(60),
            Event::ret(b),
            Event::timed_return(main, 100),
        ]);
        for cut in 0..w.len() {
            let mut p = TimeProfile::new();
            p.consume(&w[..cut]);
            p.consume(&w[cut..]);
            assert_eq!(p.estimate(main).inclusive, 100.0);
            assert_eq!(p.estimate(main).exclusive, 60.0);
            assert_eq!(p.estimate(a).exclusive, 20.0);
            assert_eq!(p.estimate(b).inclusive, 20.0);
            assert!(!p.is_approximate());
        }
    }

    /// The nodes say what the whole paths say, parents first, with each context's self ticks.
    #[test]
    fn context_nodes_match_the_paths() {
        let mut p = TimeProfile::new();
        p.consume(&unit(&tree_units(), 1));
        let nodes = p.context_nodes();
        let mut path_of: HashMap<u32, Vec<MethodId>> = HashMap::new();
        let mut from_nodes = Vec::new();
        for n in &nodes {
            let mut path = if n.parent == 0 {
                Vec::new()
            } else {
                path_of.get(&n.parent).expect("parent listed first").clone()
            };
            path.push(n.method);
            path_of.insert(n.node, path.clone());
            from_nodes.push((path, n.time, n.exclusive));
        }
        from_nodes.sort_by(|a, b| a.0.cmp(&b.0));
        let paths: Vec<_> = from_nodes.iter().map(|(s, t, _)| (s.clone(), *t)).collect();
        assert_eq!(paths, p.contexts());
        let own: Vec<(Vec<u32>, f64)> = from_nodes
            .iter()
            .map(|(s, _, e)| (s.iter().map(|m| m.get()).collect(), *e))
            .collect();
        assert_eq!(
            own,
            vec![
                (vec![1], 100.0 - 30.0 - 10.0),
                (vec![1, 2], 30.0 - 10.0),
                (vec![1, 2, 3], 10.0),
                (vec![1, 3], 10.0),
            ]
        );
    }

    /// Saturated durations (a `TimedReturn` of a huge or wrapped difference) and an end
    /// stamp below its start neither panic nor wrap the sums.
    #[test]
    fn absurd_durations_saturate_and_backward_stamps_count_zero() {
        let (f, g) = (m(1), m(2));
        let mut ev = Vec::new();
        for _ in 0..20 {
            ev.push(Event::call(MethodId::ROOT, f));
            ev.push(Event::timed_return(f, u64::MAX));
        }
        ev.extend([
            Event::call(MethodId::ROOT, g),
            Event::time(1_000),
            Event::time(400),
            Event::ret(g),
        ]);
        let mut p = TimeProfile::new();
        p.consume(&words(&ev));
        let fs = p.functions();
        let ff = &fs.iter().find(|(id, _)| *id == f).unwrap().1;
        assert_eq!(ff.ticks_all, u64::MAX);
        let fg = &fs.iter().find(|(id, _)| *id == g).unwrap().1;
        assert_eq!((fg.timed, fg.ticks_all), (1, 0));
    }

    #[test]
    fn recursion_counts_outermost_activations_once() {
        let f = m(1);
        let w = words(&[
            Event::call(MethodId::ROOT, f),
            Event::time(0),
            Event::call(f, f),
            Event::time(10),
            Event::time(20),
            Event::ret(f),
            Event::time(50),
            Event::ret(f),
        ]);
        let mut p = TimeProfile::new();
        p.consume(&w);
        let e = p.estimate(f);
        assert_eq!(e.inclusive, 50.0);
        assert_eq!(e.exclusive, 50.0);
    }

    #[test]
    fn mutual_recursion_counts_the_outer_activation_only() {
        // a [0, 100) calls b [10, 90), which calls a [20, 30) and then a [40, 50) untimed.
        let (a, b) = (m(1), m(2));
        let w = words(&[
            Event::call(MethodId::ROOT, a),
            Event::time(0),
            Event::call(a, b),
            Event::time(10),
            Event::call(b, a),
            Event::time(20),
            Event::time(30),
            Event::ret(a),
            Event::call(b, a),
            Event::ret(a),
            Event::time(90),
            Event::ret(b),
            Event::time(100),
            Event::ret(a),
        ]);
        let mut p = TimeProfile::new();
        p.consume(&w);
        let (_, fa) = p.functions().into_iter().find(|(id, _)| *id == a).unwrap();
        assert_eq!((fa.calls, fa.outer_calls, fa.timed), (3, 1, 2));
        assert_eq!((fa.ticks_all, fa.ticks_outer), (110, 100));
        assert_eq!(p.estimate(a).inclusive, 100.0);
        // b's self time: its 80 minus the two nested calls of a, one timed at 10 and one
        // estimated like it (context a→b→a: 2 calls, 1 timed, 10 ticks).
        assert_eq!(p.estimate(b).inclusive, 80.0);
        assert_eq!(p.estimate(b).exclusive, 60.0);
    }

    #[test]
    fn sampled_calls_scale_by_calls_over_timed() {
        let (main, a) = (m(1), m(2));
        let mut ev = vec![Event::call(MethodId::ROOT, main), Event::time(0)];
        for i in 0..4u64 {
            ev.push(Event::call(main, a));
            if i == 0 {
                ev.push(Event::time(10));
                ev.push(Event::time(20));
            }
            ev.push(Event::ret(a));
        }
        ev.push(Event::time(100));
        ev.push(Event::ret(main));
        let mut p = TimeProfile::new();
        p.consume(&words(&ev));
        assert_eq!(p.estimate(a).inclusive, 40.0);
        assert_eq!(p.estimate(main).exclusive, 60.0);
    }

    #[test]
    fn a_future_counts_the_time_polled_not_the_time_suspended() {
        let (main, fut) = (m(1), m(2));
        let w = words(&[
            Event::call(MethodId::ROOT, main),
            Event::time(0),
            Event::call(main, fut),
            Event::poll(fut, 7, true),
            Event::time(10),
            Event::time(15),
            Event::poll_end(7, 0, false),
            // suspended 15..100
            Event::poll(fut, 7, false),
            Event::time(100),
            Event::time(120),
            Event::ret(fut),
            Event::poll_end(7, 1, true),
            Event::time(200),
            Event::ret(main),
        ]);
        for cut in 0..w.len() {
            let mut p = TimeProfile::new();
            p.consume(&w[..cut]);
            p.consume(&w[cut..]);
            assert_eq!(p.estimate(fut).inclusive, 25.0);
            assert_eq!(p.estimate(main).inclusive, 200.0);
            assert_eq!(p.estimate(main).exclusive, 175.0);
            assert!(!p.is_approximate());
        }
    }

    #[test]
    fn merging_streams_adds_their_times() {
        let w = tree();
        let mut a = TimeProfile::new();
        a.consume(&w);
        let mut b = TimeProfile::new();
        b.consume(&w);
        a.merge(b);
        assert_eq!(a.estimate(m(1)).inclusive, 200e6);
        assert_eq!(a.estimate(m(2)).exclusive, 40e6);
        assert_eq!(a.contexts().len(), 4);
    }
}
