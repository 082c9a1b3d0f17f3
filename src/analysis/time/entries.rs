//! The time report's entries: per function, per call-graph edge and per calling context, in
//! nanoseconds, from the analysis' ticks.

use crate::analysis::contexts::depth_first;
use crate::model::{CompensationEntry, ContextTimeEntry, EdgeTimeEntry, FunctionTimeEntry};
use cabprof_analyses::{TimeContext, TimeProfile};
use std::collections::HashMap;

/// What turns the analysis' ticks into a report's figures.
pub(super) struct Shape<'a> {
    /// Ticks to nanoseconds.
    pub(super) ns: &'a dyn Fn(f64) -> f64,
    /// One call in `sample_period` timed.
    pub(super) sample_period: u32,
    /// The variance (ticks²) of where an untimed long call's entry was placed: the middle of
    /// one interval of the coarse clock.
    pub(super) placement: f64,
}

/// Per instrumented call, how far the compensation may be off: half the range of the middle
/// 80 % of the probes during the session (see [`half_middle_range`]), or half the drift
/// between start and finish without probes; and never less than [`SHAPE_ERROR`] of a timed
/// call's cost. On a shared host the cost moves between levels some 10 ns apart, and a
/// session's calls may cost what its less common probes found; within one level, a function
/// whose calls sit among its own work, or a decoder's, costs a few % of a timed call less or
/// more than the probe's calls back to back.
fn per_call_error(t: &TimeProfile, c: &CompensationEntry, ns: &dyn Fn(f64) -> f64) -> Option<f64> {
    let mut timed: Vec<f64> = t.calibrations().kept.iter().map(|k| ns(k.timed)).collect();
    let spread = if timed.len() >= 2 {
        Some(half_middle_range(&mut timed))
    } else {
        c.timed_ns_at_finish.map(|f| (f - c.timed_ns).abs() / 2.0)
    };
    spread.map(|s| s.max(SHAPE_ERROR * c.timed_ns))
}

/// The least a call's compensation may be off, as a fraction of a timed call's cost: what
/// the probe's shape (calls back to back) was found to differ by from the programs
/// `time_fidelity` and `self_shares` check (1.7 ns of 47 for `mid`'s calls among its work,
/// 0.6-1.1 ns for miniz_oxide's decompression on a quiet host).
const SHAPE_ERROR: f64 = 0.05;

/// Half the range of the middle 80 % of `v`, as many values left out at each end (none of
/// five or fewer); at least two values, sorted in place.
fn half_middle_range(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let last = v.len() - 1;
    let out = (last as f64 * 0.1).round() as usize;
    (v[last - out] - v[out]) / 2.0
}

/// Each function's entry, the most inclusive time first.
pub(super) fn functions(
    t: &TimeProfile,
    nodes: &[TimeContext],
    compensation: Option<&CompensationEntry>,
    shape: &Shape<'_>,
) -> Vec<FunctionTimeEntry> {
    let ns = shape.ns;
    let resolution = compensation.map(|c| c.resolution_ns);
    let per_call_error = compensation.and_then(|c| per_call_error(t, c, ns));
    let calls_inside = calls_inside(nodes);
    let estimates: HashMap<_, _> = t.estimates().into_iter().collect();
    let per_call = |ticks: f64, timed: u64| {
        if timed == 0 {
            0.0
        } else {
            ns(ticks / timed as f64)
        }
    };
    let mut functions: Vec<FunctionTimeEntry> = t
        .functions()
        .into_iter()
        .map(|(m, f)| {
            let e = estimates[&m];
            let known = f.has_durations();
            let q = |p: f64| {
                if known {
                    ns(f.value_at_quantile(p) as f64)
                } else {
                    0.0
                }
            };
            // With long calls, the mean of all calls from the two strata; without, the timed
            // calls' mean, which is the same estimate.
            let (mean, raw_mean) = if f.long.calls == 0 {
                (
                    per_call(f.comp_all, f.timed),
                    per_call(f.ticks_all as f64, f.timed),
                )
            } else {
                let rest = f.calls.saturating_sub(f.long.calls);
                let scaled = |sum: f64| {
                    if f.timed == 0 {
                        0.0
                    } else {
                        sum * rest as f64 / f.timed as f64
                    }
                };
                (
                    per_call(f.long.comp + scaled(f.comp_all), f.calls),
                    per_call(f.long.ticks as f64 + scaled(f.ticks_all as f64), f.calls),
                )
            };
            let ci = if e.long_untimed == 0 {
                e.inclusive_ci
            } else {
                (e.inclusive_ci.powi(2) + 1.96f64.powi(2) * e.long_untimed as f64 * shape.placement)
                    .sqrt()
            };
            FunctionTimeEntry {
                method: m.get(),
                calls: f.calls,
                timed: f.timed + f.long.timed,
                inclusive_ns: ns(e.inclusive),
                inclusive_ci_ns: ns(ci),
                long: (shape.sample_period > 1).then_some(f.long.calls),
                exclusive_ns: ns(e.exclusive),
                mean_ns: mean.max(0.0),
                p50_ns: q(0.5),
                p95_ns: q(0.95),
                p99_ns: q(0.99),
                max_ns: ns(f.max() as f64),
                raw_inclusive_ns: Some(ns(e.raw_inclusive)),
                raw_exclusive_ns: Some(ns(e.raw_exclusive)),
                raw_mean_ns: Some(raw_mean),
                below_resolution: resolution.map(|r| f.timed > 0 && mean < r),
                exclusive_clipped: Some(e.exclusive_clipped),
                calibration_error_ns: per_call_error
                    .map(|d| d * calls_inside.get(&m.get()).copied().unwrap_or(f.calls) as f64),
                wall_ns: (f.futures > 0).then(|| ns(f.wall as f64)),
                suspended_ns: (f.futures > 0)
                    .then(|| ns(f.wall.saturating_sub(f.ticks_all) as f64)),
                woken_polls: (f.woken_polls > 0).then_some(f.woken_polls),
                wake_delay_ns: (f.woken_polls > 0).then(|| ns(f.wake_delay as f64)),
            }
        })
        .collect();
    functions.sort_by(|a, b| {
        b.inclusive_ns
            .total_cmp(&a.inclusive_ns)
            .then(a.method.cmp(&b.method))
    });
    functions
}

/// Each call-graph edge's entry, the most inclusive time first.
pub(super) fn edges(t: &TimeProfile, ns: &dyn Fn(f64) -> f64) -> Vec<EdgeTimeEntry> {
    let long_edges: HashMap<_, _> = t.long_edges().into_iter().collect();
    let mut edges: Vec<EdgeTimeEntry> = t
        .edges()
        .into_iter()
        .map(|((a, b), e)| {
            let long = long_edges.get(&(a, b)).copied().unwrap_or_default();
            EdgeTimeEntry {
                caller: a.get(),
                callee: b.get(),
                calls: e.calls,
                timed: e.timed + long.timed,
                inclusive_ns: ns(e.estimate_with(&long)).max(0.0),
                raw_inclusive_ns: Some(ns(e.raw_estimate_with(&long))),
            }
        })
        .collect();
    edges.sort_by(|a, b| {
        b.inclusive_ns
            .total_cmp(&a.inclusive_ns)
            .then((a.caller, a.callee).cmp(&(b.caller, b.callee)))
    });
    edges
}

/// Each calling context's entry, linked to its parent, the most called child first: linear in
/// the number of contexts, whatever their depth.
/// With `resolution` (ns), a context whose calls' mean is below it is marked, as a function is.
pub(super) fn contexts(
    nodes: &[TimeContext],
    ns: &dyn Fn(f64) -> f64,
    resolution: Option<f64>,
) -> Vec<ContextTimeEntry> {
    let links: Vec<(u32, u32)> = nodes.iter().map(|n| (n.node, n.parent)).collect();
    depth_first(&links, |i| {
        (
            std::cmp::Reverse(nodes[i].time.calls),
            nodes[i].method.get(),
        )
    })
    .into_iter()
    .enumerate()
    .map(|(k, (i, parent))| {
        let c = &nodes[i as usize];
        let timed = c.time.timed + c.long.timed;
        let inclusive_ns = ns(c.time.estimate_with(&c.long)).max(0.0);
        ContextTimeEntry {
            id: k as u32 + 1,
            parent,
            method: c.method.get(),
            calls: c.time.calls,
            timed,
            inclusive_ns,
            exclusive_ns: ns(c.exclusive),
            raw_inclusive_ns: Some(ns(c.time.raw_estimate_with(&c.long))),
            raw_exclusive_ns: Some(ns(c.raw_exclusive)),
            exclusive_clipped: Some(c.exclusive_clipped),
            // As a function's: some call timed (long calls aside) and the mean below.
            below_resolution: resolution
                .map(|r| c.time.timed > 0 && inclusive_ns < r * c.time.calls.max(1) as f64),
        }
    })
    .collect()
}

/// Per function, the instrumented calls inside its outermost calls' time: theirs and every
/// call below them, from the calling contexts (parents before children). Linear in the
/// contexts: one pass up for the subtree counts, one depth-first walk that keeps, per
/// function, how many of its contexts are open above the current one.
fn calls_inside(nodes: &[TimeContext]) -> HashMap<u32, u64> {
    let at: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, n)| (n.node, i)).collect();
    let parent = |i: usize| at.get(&nodes[i].parent).copied();
    let mut below: Vec<u64> = nodes.iter().map(|n| n.time.calls).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for i in (0..nodes.len()).rev() {
        match parent(i) {
            Some(p) => {
                below[p] += below[i];
                children[p].push(i);
            }
            None => roots.push(i),
        }
    }
    let mut out = HashMap::new();
    let mut open: HashMap<u32, u32> = HashMap::new();
    // (node, entering): a node is entered, its children walked, then it is left.
    let mut walk: Vec<(usize, bool)> = roots.into_iter().map(|r| (r, true)).collect();
    while let Some((i, entering)) = walk.pop() {
        let m = nodes[i].method.get();
        if entering {
            let depth = open.entry(m).or_insert(0);
            if *depth == 0 {
                *out.entry(m).or_insert(0) += below[i];
            }
            *depth += 1;
            walk.push((i, false));
            walk.extend(children[i].iter().map(|&c| (c, true)));
        } else if let Some(depth) = open.get_mut(&m) {
            *depth -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::half_middle_range;

    /// Probes at two levels: the less common one still counts (a quartile range would say
    /// 0 here), one outlier in twenty does not.
    #[test]
    fn the_error_spans_the_probes_levels_not_an_outlier() {
        let mut two_levels: Vec<f64> = [47.0; 8].into_iter().chain([57.0; 2]).collect();
        assert_eq!(half_middle_range(&mut two_levels), 5.0);
        let mut outlier: Vec<f64> = [47.0; 19].into_iter().chain([90.0]).collect();
        assert_eq!(half_middle_range(&mut outlier), 0.0);
        assert_eq!(half_middle_range(&mut [50.0, 46.0]), 2.0);
        // Five values: all count; six: one out at each end, not two at one.
        assert_eq!(half_middle_range(&mut [1.0, 2.0, 3.0, 4.0, 9.0]), 4.0);
        assert_eq!(half_middle_range(&mut [0.0, 2.0, 3.0, 4.0, 6.0, 20.0]), 2.0);
    }
}
