//! Comparing reports: the CAB paper's sampling error of a sampled report against an
//! exhaustive one, and the analysis results alone for checking that two runs agree.

use crate::model::{Counters, ReportData, SessionInfo};
use cabprof_analyses::sampling::error_rate;
use hashbrown::HashMap;
use std::hash::Hash;

/// The paper's sampling error of a sampled report against an exhaustive one, per analysis:
/// `|actual − sampled/rate| / actual` averaged over every entry of the exact profile
/// (`None` where either report lacks the analysis).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplingError {
    /// Over method counts.
    pub method_count: Option<f64>,
    /// Over call-graph edges.
    pub call_graph: Option<f64>,
    /// Over call-tree patterns.
    pub call_tree: Option<f64>,
    /// Over (method, path) counts.
    pub paths: Option<f64>,
}

/// The error of `sampled` against `exact` at `rate`, if both are present.
fn error<K: Eq + Hash>(
    exact: Option<HashMap<K, u64>>,
    sampled: Option<HashMap<K, u64>>,
    rate: f64,
) -> Option<f64> {
    Some(error_rate(&exact?, &sampled?, rate))
}

fn method_counts(d: &ReportData) -> Option<HashMap<u32, u64>> {
    d.method_count
        .as_ref()
        .map(|v| v.iter().map(|e| (e.method, e.count)).collect())
}

fn patterns(d: &ReportData) -> Option<HashMap<(u32, Vec<u32>), u64>> {
    d.call_tree.as_ref().map(|t| {
        t.patterns
            .iter()
            .map(|p| ((p.method, p.callees.clone()), p.count))
            .collect()
    })
}

impl ReportData {
    /// The call graph's edge counts by `(caller, callee)` method id, collected into `C` (a
    /// map, typically); `None` when the report has no call graph.
    pub fn edge_counts<C: FromIterator<((u32, u32), u64)>>(&self) -> Option<C> {
        self.call_graph
            .as_ref()
            .map(|v| v.iter().map(|e| ((e.caller, e.callee), e.count)).collect())
    }

    /// The path profile's counts by `(method id, path number)`, collected into `C`; `None`
    /// when the report has no path profile.
    pub fn path_counts<C: FromIterator<((u32, u32), u64)>>(&self) -> Option<C> {
        self.paths
            .as_ref()
            .map(|v| v.iter().map(|e| ((e.method, e.path), e.count)).collect())
    }

    /// Compare this sampled report with `exact` (an exhaustive run of the same workload),
    /// estimating full counts with [`estimate_rate`](Self::estimate_rate).
    pub fn sampling_error(&self, exact: &ReportData) -> SamplingError {
        let rate = self.estimate_rate();
        SamplingError {
            method_count: error(method_counts(exact), method_counts(self), rate),
            call_graph: error(exact.edge_counts(), self.edge_counts(), rate),
            call_tree: error(patterns(exact), patterns(self), rate),
            paths: error(exact.path_counts(), self.path_counts(), rate),
        }
    }

    /// The analysis results only (no timings or counters): equal for two runs that saw the
    /// same events, whatever the mode or ring sizes. The time analysis' durations differ from
    /// run to run, so only its call counts are kept, and the timeline's slices lose their times.
    pub fn results_json(&self) -> String {
        let mut d = self.clone();
        if let Some(t) = &mut d.time {
            t.ticks_per_ns = 0.0;
            t.calibration.clear();
            t.compensation = None;
            t.inside_cabprof_ns = None;
            t.inside_cabprof_entries = None;
            for f in &mut t.functions {
                f.inclusive_ns = 0.0;
                f.inclusive_ci_ns = 0.0;
                f.exclusive_ns = 0.0;
                f.mean_ns = 0.0;
                f.p50_ns = 0.0;
                f.p95_ns = 0.0;
                f.p99_ns = 0.0;
                f.max_ns = 0.0;
                f.raw_inclusive_ns = None;
                f.raw_exclusive_ns = None;
                f.raw_mean_ns = None;
                f.below_resolution = None;
                f.exclusive_clipped = None;
                f.calibration_error_ns = None;
                f.wall_ns = None;
                f.suspended_ns = None;
            }
            t.functions.sort_by_key(|f| f.method);
            for e in &mut t.edges {
                e.inclusive_ns = 0.0;
                e.raw_inclusive_ns = None;
            }
            t.edges.sort_by_key(|e| (e.caller, e.callee));
            // Listed by calls, not by time: the same order and ids in both runs.
            for c in &mut t.contexts {
                c.inclusive_ns = 0.0;
                c.exclusive_ns = 0.0;
                c.raw_inclusive_ns = None;
                c.raw_exclusive_ns = None;
                c.exclusive_clipped = None;
            }
        }
        // The timeline's slices, without their times.
        if let Some(t) = &mut d.timeline {
            t.ticks_per_ns = 0.0;
            for s in t.threads.iter_mut().flat_map(|th| &mut th.slices) {
                s.start_ns = 0.0;
                s.duration_ns = 0.0;
            }
        }
        d.session = SessionInfo::default();
        d.totals = Counters::default();
        d.threads.clear();
        d.json()
    }
}
