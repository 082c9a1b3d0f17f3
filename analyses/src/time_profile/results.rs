//! What the profile reports: the per-function, per-edge and per-context times, and the
//! estimates derived from them.

use cabprof_cab::event::MethodId;
use hashbrown::HashMap;
use hdrhistogram::Histogram;

use crate::call_tree::trie::{NONE, ROOT as ROOT_NODE};

use super::{method_id, TimeProfile};

/// Calls measured in full because they were long (`LongReturn` words: with sampled timing, a
/// call during which the coarse clock ticked many times, timed or not), and their
/// inclusive ticks. They are added as they are to a sampled estimate, never scaled: the
/// timed calls ([`FunctionTime::timed`], [`Timed::timed`]) are the sample of the other calls
/// only.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Long {
    /// Long calls.
    pub calls: u64,
    /// Of those, the ones in the timed sample (measured exactly; the others from the middle
    /// of the coarse clock's interval they entered in).
    pub timed: u64,
    /// Their inclusive ticks.
    pub ticks: u64,
    /// The same, compensated (see [`Compensation`]).
    pub comp: f64,
}

impl Long {
    pub(super) fn add(&mut self, o: &Long) {
        self.calls += o.calls;
        self.timed += o.timed;
        self.ticks = self.ticks.saturating_add(o.ticks);
        self.comp += o.comp;
    }

    /// One long call of `raw` ticks, `comp` compensated.
    pub(super) fn one(raw: u64, comp: f64, timed: bool) -> Long {
        Long {
            calls: 1,
            timed: u64::from(timed),
            ticks: raw,
            comp,
        }
    }
}

/// Per-function time.
#[derive(Clone, Debug)]
pub struct FunctionTime {
    /// Calls seen.
    pub calls: u64,
    /// Calls with both stamps, long ones apart (the sample of the calls that were not long).
    pub timed: u64,
    /// Inclusive ticks of the timed calls, every activation.
    pub ticks_all: u64,
    /// Calls not nested in another activation of the same function.
    pub outer_calls: u64,
    /// Of those, the timed ones.
    pub outer_timed: u64,
    /// Inclusive ticks of the timed outermost calls.
    pub ticks_outer: u64,
    /// Ticks polled by futures whose polls are not all accounted for (still running, or
    /// polled in streams not merged in): in the inclusive time, not in `ticks_all`.
    pub open_polled: u64,
    /// Futures of it whose every poll was timed and accounted for, and their wall time in
    /// ticks (first poll's start to last poll's end, polled and suspended).
    pub futures: u64,
    /// See [`futures`](Self::futures).
    pub wall: u64,
    /// Polls of its timed futures that began after a wake (the future's waker was woken
    /// since its previous poll began), and the ticks from those wakes to those polls: the
    /// executor's scheduling delay.
    pub woken_polls: u64,
    /// See [`woken_polls`](Self::woken_polls).
    pub wake_delay: u64,
    /// `ticks_all` compensated (see [`Compensation`]): what the calls cost without the
    /// profiler. Signed sums: a call cheaper than the calibration's figures subtracts, so
    /// that the errors of many calls cancel rather than add up.
    pub comp_all: f64,
    /// `ticks_outer` compensated.
    pub comp_outer: f64,
    /// `open_polled` compensated.
    pub comp_open_polled: f64,
    /// One timed call's compensated inclusive ticks (a call below 0 counts as 0: the
    /// quantiles of the clamped values are the clamped quantiles).
    pub histogram: Histogram<u64>,
    /// The long calls, every activation.
    pub long: Long,
    /// The long calls that were outermost activations (their ticks are `ticks_outer`'s).
    pub outer_long: Long,
    /// One long call's compensated inclusive ticks, as `histogram` (`None`: no long call).
    pub long_histogram: Option<Histogram<u64>>,
}

/// Significant digits of a function's call-duration histogram: quantiles within 1 %. Each
/// decade of durations costs 128 counters at 2 digits and 1,024 at 3: with thousands of
/// functions, each with a tail reaching milliseconds, 3 digits held hundreds of megabytes per
/// analysis instance, copied again by every snapshot.
const HISTOGRAM_DIGITS: u8 = 2;

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
            futures: 0,
            wall: 0,
            woken_polls: 0,
            wake_delay: 0,
            comp_all: 0.0,
            comp_outer: 0.0,
            comp_open_polled: 0.0,
            histogram: new_histogram(),
            long: Long::default(),
            outer_long: Long::default(),
            long_histogram: None,
        }
    }
}

pub(super) fn new_histogram() -> Histogram<u64> {
    Histogram::new(HISTOGRAM_DIGITS).expect("2 significant digits is in 0..=5")
}

impl FunctionTime {
    /// The estimated number of calls not long, over the timed ones that stand for them: the
    /// weight of one timed call in the distribution of all calls (1 when every call was
    /// timed).
    fn sample_weight(&self) -> f64 {
        let rest = self.calls.saturating_sub(self.long.calls);
        if self.timed == 0 || self.timed >= rest {
            1.0
        } else {
            rest as f64 / self.timed as f64
        }
    }

    /// The `q` quantile (0..=1) of one call's compensated ticks: of the timed calls, each
    /// standing for the calls not long it samples, and of the long calls, each for itself.
    /// With no long call, `histogram`'s quantile.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        let Some(long) = self.long_histogram.as_ref().filter(|h| !h.is_empty()) else {
            return self.histogram.value_at_quantile(q);
        };
        let w = self.sample_weight();
        let total = w * self.histogram.len() as f64 + long.len() as f64;
        let target = q.clamp(0.0, 1.0) * total;
        // Both histograms' recorded values in ascending order, each with its weight.
        let mut a = self.histogram.iter_recorded().peekable();
        let mut b = long.iter_recorded().peekable();
        let mut seen = 0.0;
        let mut last = 0;
        loop {
            let take_a = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.value_iterated_to() <= y.value_iterated_to(),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return last,
            };
            let (v, weight) = if take_a {
                let x = a.next().expect("peeked");
                (x.value_iterated_to(), w * x.count_at_value() as f64)
            } else {
                let y = b.next().expect("peeked");
                (y.value_iterated_to(), y.count_at_value() as f64)
            };
            seen += weight;
            last = v;
            if seen >= target {
                return v;
            }
        }
    }

    /// The longest call's compensated ticks, timed or long (0 if none).
    pub fn max(&self) -> u64 {
        let long = self.long_histogram.as_ref().map_or(0, |h| h.max());
        let timed = if self.histogram.is_empty() {
            0
        } else {
            self.histogram.max()
        };
        timed.max(long)
    }

    /// Whether any call's duration is known (timed or long).
    pub fn has_durations(&self) -> bool {
        !self.histogram.is_empty() || self.long.calls > 0
    }
}

/// Calls, timed calls and their inclusive ticks (an edge or a context). The long calls
/// ([`Long`]) are kept apart: [`estimate_with`](Self::estimate_with) adds them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timed {
    /// Calls seen.
    pub calls: u64,
    /// Calls with both stamps, long ones apart.
    pub timed: u64,
    /// Their inclusive ticks.
    pub ticks: u64,
    /// The same, compensated (see [`Compensation`]).
    pub comp: f64,
}

impl Timed {
    /// The estimated compensated inclusive ticks of all calls, none of them long: `comp ×
    /// calls / timed` (exact when every call was timed; 0 when none was).
    pub fn estimate(&self) -> f64 {
        self.estimate_with(&Long::default())
    }

    /// [`estimate`](Self::estimate) of the raw ticks.
    pub fn raw_estimate(&self) -> f64 {
        self.raw_estimate_with(&Long::default())
    }

    /// The estimated compensated inclusive ticks of all calls, `long` of them long: the long
    /// calls' as they are, plus `comp × (calls − long calls) / timed` (exact when every call
    /// was timed or long; the long calls' alone when no other was timed).
    pub fn estimate_with(&self, long: &Long) -> f64 {
        long.comp + scale(self.comp, self.calls.saturating_sub(long.calls), self.timed)
    }

    /// [`estimate_with`](Self::estimate_with) of the raw ticks.
    pub fn raw_estimate_with(&self, long: &Long) -> f64 {
        long.ticks as f64
            + scale(
                self.ticks as f64,
                self.calls.saturating_sub(long.calls),
                self.timed,
            )
    }

    fn add(&mut self, o: &Timed) {
        self.calls += o.calls;
        self.timed += o.timed;
        self.ticks += o.ticks;
        self.comp += o.comp;
    }
}

fn scale(ticks: f64, calls: u64, timed: u64) -> f64 {
    if timed == 0 || timed == calls {
        ticks
    } else {
        ticks * calls as f64 / timed as f64
    }
}

/// The calibrated cost of the instrumentation, in clock ticks, taken out of the times
/// (overhead compensation, after Malony and Shende, "Overhead Compensation in Performance
/// Profiling", Euro-Par 2004): a timed call's duration loses `inside`; every frame open
/// around a call loses `timed` for a timed call and `untimed` for an untimed one, and the
/// ticks of each `Stall` (time spent inside cabprof itself).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Compensation {
    /// The part of a timed call's probe inside its own interval.
    pub inside: f64,
    /// What a timed call adds to the frames around it.
    pub timed: f64,
    /// What an untimed call adds to them.
    pub untimed: f64,
    /// What a poll of an instrumented future adds to them beyond a call's cost (its `Poll`
    /// and `PollEnd` words and the wrapper's work).
    pub poll: f64,
}

/// The calibration words of a session: the probes its threads ran while it ran, each the
/// cost of a timed and an untimed call and the part of a timed call inside its own interval,
/// in ticks. Their count, and every result up to [`Calibrations::KEPT`] (the report's spread).
#[derive(Clone, Debug, Default)]
pub struct Calibrations {
    /// Calibration words seen.
    pub count: u64,
    /// The first [`KEPT`](Self::KEPT) of them.
    pub kept: Vec<cabprof_cab::event::CallCosts>,
    /// The words the probes wrote: their probe words (two per probe call) and calibration
    /// words. Events of the stream, but no calls.
    pub words: u64,
}

impl Calibrations {
    /// Results kept.
    pub const KEPT: usize = 4096;

    pub(super) fn add(&mut self, c: cabprof_cab::event::CallCosts) {
        self.count += 1;
        if self.kept.len() < Self::KEPT {
            self.kept.push(c);
        }
    }

    pub(super) fn merge(&mut self, other: &Calibrations) {
        self.count += other.count;
        self.words += other.words;
        let room = Self::KEPT.saturating_sub(self.kept.len());
        self.kept.extend(other.kept.iter().take(room));
    }
}

/// Fixed-point scale of the per-thread cost counter ([`ThreadState::cost`]).
///
/// [`ThreadState::cost`]: super::ThreadState::cost
pub(super) const COST_ONE: f64 = 256.0;

/// A closed frame's (or a future's polls') ticks: all of them, those of outermost
/// activations, and both compensated.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Ticks {
    pub(super) all: u64,
    pub(super) outer: u64,
    pub(super) comp: f64,
    pub(super) comp_outer: f64,
}

impl Ticks {
    /// One interval of `raw` ticks, `comp` compensated, outermost if `outer`.
    pub(super) fn one(raw: u64, comp: f64, outer: bool) -> Ticks {
        Ticks {
            all: raw,
            outer: if outer { raw } else { 0 },
            comp,
            comp_outer: if outer { comp } else { 0.0 },
        }
    }

    pub(super) fn plus(self, o: Ticks) -> Ticks {
        Ticks {
            all: self.all.saturating_add(o.all),
            outer: self.outer.saturating_add(o.outer),
            comp: self.comp + o.comp,
            comp_outer: self.comp_outer + o.comp_outer,
        }
    }
}

/// Per context node: timed calls and their ticks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeTime {
    pub(super) timed: u64,
    pub(super) ticks: u64,
    pub(super) comp: f64,
}

impl NodeTime {
    pub(super) fn add(&mut self, o: NodeTime) {
        self.timed += o.timed;
        self.ticks = self.ticks.saturating_add(o.ticks);
        self.comp += o.comp;
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
    /// Of those calls, the long ones (in `time.calls`, not in `time.timed`).
    pub long: Long,
    /// Estimated self ticks, compensated: the inclusive estimate minus those of the contexts
    /// directly below (never negative).
    pub exclusive: f64,
    /// The same from the raw ticks.
    pub raw_exclusive: f64,
    /// `exclusive` came out below 0 and is shown as 0: what compensation took out of the
    /// context exceeds what it measured, so its self time is below the calibration's error.
    pub exclusive_clipped: bool,
}

/// A function's estimated times, in ticks, compensated (see [`Compensation`]) but for the
/// `raw_` ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FunctionEstimate {
    /// Inclusive ticks of all its outermost calls (timed ones scaled by calls / timed).
    pub inclusive: f64,
    /// Self ticks: inclusive ticks of every activation minus those of the calls it made
    /// (never negative).
    pub exclusive: f64,
    /// `exclusive` came out below 0 (a difference of two compensated or estimated sums) and
    /// is 0: the function's self time is below what the calibration or the sample resolves.
    pub exclusive_clipped: bool,
    /// `inclusive` from the raw ticks.
    pub raw_inclusive: f64,
    /// `exclusive` from the raw ticks.
    pub raw_exclusive: f64,
    /// Half-width of the 95% confidence interval of `inclusive` (0 when every call was timed
    /// or long), from the sample of the calls that were not long: `1.96 × n × s / √timed ×
    /// √(1 − timed / n)`, `n` the outermost calls not long, `s` the standard deviation of one
    /// timed call's ticks. The long calls add nothing to it but their entries' placement
    /// (see `long_untimed`).
    pub inclusive_ci: f64,
    /// Outermost long calls that were not timed: each one's entry is placed in the middle of
    /// the coarse clock's interval it fell in, an error the reader adds to the interval
    /// from that clock's intervals.
    pub long_untimed: u64,
}

impl TimeProfile {
    /// Per-function time, by method id, every function called (timed or not).
    pub fn functions(&self) -> Vec<(MethodId, FunctionTime)> {
        let mut all = self.functions.clone();
        fn slot(all: &mut Vec<Option<FunctionTime>>, i: usize) -> &mut FunctionTime {
            if i >= all.len() {
                all.resize_with(i + 1, || None);
            }
            all[i].get_or_insert_with(FunctionTime::default)
        }
        for n in self.tree.nodes.iter().skip(1) {
            if n.count > 0 {
                slot(&mut all, n.method.get() as usize).calls += n.count;
            }
        }
        // Futures whose polls are not all accounted for: their time polled so far.
        for t in self.tasks.values() {
            if let Some(p) = t.polled.filter(|p| p.all > 0) {
                let f = slot(&mut all, t.open.method as usize);
                f.open_polled = f.open_polled.saturating_add(p.all);
                f.comp_open_polled += p.comp;
            }
        }
        for (m, f) in all.iter_mut().enumerate() {
            if let Some(f) = f {
                let nested = self.nested.get(m).copied().unwrap_or(0);
                f.outer_calls = f.calls.saturating_sub(nested);
            }
        }
        all.into_iter()
            .enumerate()
            .filter_map(|(m, f)| Some((method_id(m as u32), f?)))
            .collect()
    }

    /// Calls per function, as [`MethodCount`](crate::MethodCount) counts them from the same
    /// stream (every `Call` once, lost words or not): a session running both analyses takes
    /// its method counts from here rather than counting every call twice.
    pub fn call_counts(&self) -> crate::MethodCount {
        self.tree
            .nodes
            .iter()
            .skip(1)
            .filter(|n| n.count > 0)
            .map(|n| (n.method, n.count))
            .collect()
    }

    /// For each node, whether it is reported: below the root (not a detached root's) and with
    /// calls or time at it or below it. Grafts of a lossy stream can leave empty nodes (made
    /// where the path was missing, their counts moved on), and which they leave depends on the
    /// order futures are merged in; they are not listed.
    fn reported(&self) -> Vec<bool> {
        let nodes = &self.tree.nodes;
        let mut keep = self.tree.attached();
        let mut used: Vec<bool> = (0..nodes.len())
            .map(|i| self.timed_at(i) != Timed::default())
            .collect();
        // Children come after their parents in the arena.
        for i in (1..nodes.len()).rev() {
            if used[i] && nodes[i].parent != NONE {
                used[nodes[i].parent as usize] = true;
            }
        }
        keep.iter_mut().zip(&used).for_each(|(k, &u)| *k &= u);
        keep
    }

    /// A context node's calls, timed calls and ticks.
    fn timed_at(&self, n: usize) -> Timed {
        let t = self.node_time.get(n).copied().unwrap_or_default();
        Timed {
            calls: self.tree.nodes[n].count,
            timed: t.timed,
            ticks: t.ticks,
            comp: t.comp,
        }
    }

    /// A context node's long calls.
    fn long_at(&self, n: usize) -> Long {
        self.long_nodes
            .get(&(n as u32))
            .copied()
            .unwrap_or_default()
    }

    /// The estimated compensated and raw inclusive ticks of a context node's calls.
    fn estimate_at(&self, n: usize) -> (f64, f64) {
        let (t, l) = (self.timed_at(n), self.long_at(n));
        (t.estimate_with(&l), t.raw_estimate_with(&l))
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

    /// The long calls per edge (see [`Long`]), for the edges that have some, sorted as
    /// [`edges`](Self::edges): an edge's estimate is
    /// [`Timed::estimate_with`] its long calls.
    pub fn long_edges(&self) -> Vec<((MethodId, MethodId), Long)> {
        let mut e: HashMap<(MethodId, MethodId), Long> = HashMap::new();
        for (&i, l) in &self.long_nodes {
            let n = &self.tree.nodes[i as usize];
            if n.parent == NONE || i == ROOT_NODE {
                continue;
            }
            let caller = self.tree.nodes[n.parent as usize].method;
            e.entry((caller, n.method)).or_default().add(l);
        }
        let mut v: Vec<_> = e.into_iter().collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v
    }

    /// Every calling context (root excluded) with its time, sorted by path. Each path is
    /// copied in full, so this costs the sum of all depths (quadratic in a deep recursion):
    /// use [`context_nodes`](Self::context_nodes) for reports.
    pub fn contexts(&self) -> Vec<(Vec<MethodId>, Timed)> {
        let reported = self.reported();
        let mut out: Vec<_> = (1..self.tree.nodes.len())
            .filter(|&i| reported[i])
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
                    exclusive_clipped: false,
                    raw_inclusive: 0.0,
                    raw_exclusive: 0.0,
                    inclusive_ci: 0.0,
                    long_untimed: 0,
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
                let e = estimate_with(&f, callees.get(&m).copied().unwrap_or_default());
                (m, e)
            })
            .collect()
    }

    /// Per caller: the estimated inclusive ticks of the calls it made (compensated, raw).
    fn callee_ticks(&self) -> HashMap<MethodId, (f64, f64)> {
        let mut out = HashMap::new();
        for (i, n) in self.tree.nodes.iter().enumerate().skip(1) {
            if n.parent != NONE {
                let (est, raw) = self.estimate_at(i);
                let e: &mut (f64, f64) = out
                    .entry(self.tree.nodes[n.parent as usize].method)
                    .or_default();
                e.0 += est;
                e.1 += raw;
            }
        }
        out
    }
}

/// A function's estimate, given the estimated ticks of the calls it made (compensated, raw).
/// Two strata: the long calls, all known, added as they are; the others estimated from the
/// timed ones (which are a sample of them alone).
fn estimate_with(f: &FunctionTime, (callees, raw_callees): (f64, f64)) -> FunctionEstimate {
    let rest = f.calls.saturating_sub(f.long.calls);
    let outer_rest = f.outer_calls.saturating_sub(f.outer_long.calls);
    let all = f.long.comp + scale(f.comp_all, rest, f.timed) + f.comp_open_polled;
    let inclusive =
        f.outer_long.comp + scale(f.comp_outer, outer_rest, f.outer_timed) + f.comp_open_polled;
    let raw_all =
        f.long.ticks as f64 + scale(f.ticks_all as f64, rest, f.timed) + f.open_polled as f64;
    let raw_inclusive = f.outer_long.ticks as f64
        + scale(f.ticks_outer as f64, outer_rest, f.outer_timed)
        + f.open_polled as f64;
    let (n, k) = (outer_rest as f64, f.outer_timed as f64);
    let inclusive_ci = if f.outer_timed == 0 || f.outer_timed >= outer_rest {
        0.0
    } else {
        1.96 * n * f.histogram.stdev() / k.sqrt() * (1.0 - k / n).sqrt()
    };
    // Sampled estimates can undershoot, and compensated ones of a function cheaper than the
    // calibration resolves too; exact raw sums never do.
    FunctionEstimate {
        inclusive: inclusive.max(0.0),
        exclusive: (all - callees).max(0.0),
        exclusive_clipped: all - callees < 0.0,
        raw_inclusive,
        raw_exclusive: (raw_all - raw_callees).max(0.0),
        inclusive_ci,
        long_untimed: f.outer_long.calls - f.outer_long.timed,
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
        let mut own: Vec<(f64, f64)> = (0..nodes.len()).map(|i| self.estimate_at(i)).collect();
        for (i, n) in nodes.iter().enumerate().skip(1) {
            if attached[i] {
                let (est, raw) = self.estimate_at(i);
                let p = &mut own[n.parent as usize];
                p.0 -= est;
                p.1 -= raw;
            }
        }
        let reported = self.reported();
        (1..nodes.len())
            .filter(|&i| reported[i])
            .map(|i| TimeContext {
                node: i as u32,
                parent: nodes[i].parent,
                method: nodes[i].method,
                time: self.timed_at(i),
                long: self.long_at(i),
                exclusive: own[i].0.max(0.0),
                raw_exclusive: own[i].1.max(0.0),
                exclusive_clipped: own[i].0 < 0.0,
            })
            .collect()
    }
}
