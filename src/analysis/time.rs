//! `time`: inclusive and exclusive time per function, per call-graph edge and per calling
//! context, and the latency distribution of one call ([`cabprof_analyses::TimeProfile`]).
//!
//! Opt-in (not on by default): a session running it makes `#[profile]` stamp calls with
//! `Time` words (every call, or one in `time_sample` per function and thread). The counter's
//! rate is calibrated against the monotonic clock over the session itself: a reading of both
//! when it starts ([`begin_timing`]) and another when the report is made.

use super::contexts::{depth_first, stack_rows};
use super::{top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{ContextTimeEntry, EdgeTimeEntry, FunctionTimeEntry, ReportData, TimeData};
use cabprof_analyses::TimeProfile;
use cabprof_cab::clock::{self, Calibration, Pair};
use cabprof_cab::ConfigError;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Largest `time_sample` accepted.
const MAX_SAMPLE: u32 = 1 << 20;

/// The clock reading taken when the running (or last) timed session started.
static START: Mutex<Option<Pair>> = Mutex::new(None);

/// What [`begin_timing`] replaced, for [`restore_timing`].
pub(crate) type TimingState = (u32, Option<Pair>);

/// A session running `plan` is about to start: stamp calls if it times, and take the
/// calibration's first reading. Returns what it replaced.
pub(crate) fn begin_timing(plan: &AnalysisPlan) -> TimingState {
    let on = plan.kinds.contains(&crate::Analysis::Time);
    let period = if on { plan.time_sample } else { 0 };
    let old_period = crate::__private::set_time_period(period);
    let mut start = START.lock().unwrap_or_else(|e| e.into_inner());
    let old_start = *start;
    if on {
        *start = Some(Calibration::start());
    }
    (old_period, old_start)
}

/// The session did not start: put back what [`begin_timing`] replaced.
pub(crate) fn restore_timing((period, start): TimingState) {
    crate::__private::set_time_period(period);
    *START.lock().unwrap_or_else(|e| e.into_inner()) = start;
}

/// The time analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = TimeProfile;
    const NAMES: &'static [&'static str] = &["time", "timing"];
    const ON_BY_DEFAULT: bool = false;

    fn validate(plan: &AnalysisPlan) -> Result<(), ConfigError> {
        if (1..=MAX_SAMPLE).contains(&plan.time_sample) {
            Ok(())
        } else {
            Err(ConfigError::new(
                "time_sample",
                plan.time_sample,
                format!("1..={MAX_SAMPLE} (time one call in K)"),
            ))
        }
    }

    fn build(plan: &AnalysisPlan) -> TimeProfile {
        let mut t = TimeProfile::new();
        t.set_approximate(plan.approximate);
        t
    }

    fn report(t: &TimeProfile, data: &mut ReportData, methods: &mut MethodIds) {
        let start = *START.lock().unwrap_or_else(|e| e.into_inner());
        let start = start.unwrap_or_else(Calibration::start);
        let cal = Calibration::measure(&start);
        let ns = |ticks: f64| cal.ns(ticks);
        let estimates: std::collections::HashMap<_, _> = t.estimates().into_iter().collect();
        let mut functions: Vec<FunctionTimeEntry> = t
            .functions()
            .into_iter()
            .map(|(m, f)| {
                let e = estimates[&m];
                let h = &f.histogram;
                let q = |p: f64| if h.is_empty() { 0.0 } else { ns(h.value_at_quantile(p) as f64) };
                FunctionTimeEntry {
                    method: m.get(),
                    calls: f.calls,
                    timed: f.timed,
                    inclusive_ns: ns(e.inclusive),
                    inclusive_ci_ns: ns(e.inclusive_ci),
                    exclusive_ns: ns(e.exclusive),
                    mean_ns: if f.timed == 0 {
                        0.0
                    } else {
                        ns(f.ticks_all as f64 / f.timed as f64)
                    },
                    p50_ns: q(0.5),
                    p95_ns: q(0.95),
                    p99_ns: q(0.99),
                    max_ns: if h.is_empty() { 0.0 } else { ns(h.max() as f64) },
                }
            })
            .collect();
        functions.sort_by(|a, b| {
            b.inclusive_ns
                .total_cmp(&a.inclusive_ns)
                .then(a.method.cmp(&b.method))
        });
        let mut edges: Vec<EdgeTimeEntry> = t
            .edges()
            .into_iter()
            .map(|((a, b), e)| EdgeTimeEntry {
                caller: a.get(),
                callee: b.get(),
                calls: e.calls,
                timed: e.timed,
                inclusive_ns: ns(e.estimate()),
            })
            .collect();
        edges.sort_by(|a, b| {
            b.inclusive_ns
                .total_cmp(&a.inclusive_ns)
                .then((a.caller, a.callee).cmp(&(b.caller, b.callee)))
        });
        // Nodes linked to their parents, the most called child first: linear in the number
        // of contexts, whatever their depth.
        let nodes = t.context_nodes();
        let links: Vec<(u32, u32)> = nodes.iter().map(|n| (n.node, n.parent)).collect();
        let contexts: Vec<ContextTimeEntry> = depth_first(&links, |i| {
            (std::cmp::Reverse(nodes[i].time.calls), nodes[i].method.get())
        })
        .into_iter()
        .enumerate()
        .map(|(k, (i, parent))| {
            let c = &nodes[i as usize];
            ContextTimeEntry {
                id: k as u32 + 1,
                parent,
                method: c.method.get(),
                calls: c.time.calls,
                timed: c.time.timed,
                inclusive_ns: ns(c.time.estimate()),
                exclusive_ns: ns(c.exclusive),
            }
        })
        .collect();
        methods.extend(functions.iter().map(|f| f.method));
        methods.extend(contexts.iter().map(|c| c.method));
        let sample_period = crate::__private::time_period().max(1);
        data.time = Some(TimeData {
            clock: clock::SOURCE.into(),
            ticks_per_ns: cal.ticks_per_ns,
            calibration: format!(
                "{} against the monotonic clock (std::time::Instant) over {:.1} ms of the session, each end read to within {} ticks",
                clock::SOURCE,
                cal.baseline.as_secs_f64() * 1e3,
                cal.spread_ticks
            ),
            sample_period,
            approximate: t.is_approximate() || sample_period > 1,
            functions,
            edges,
            contexts,
        });
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(t) = &data.time else {
            return;
        };
        let how = if t.sample_period > 1 {
            format!(
                "sampled: one call in {} per function and thread timed, totals are estimates ± the 95% interval shown",
                t.sample_period
            )
        } else {
            "every call timed".to_string()
        };
        let _ = writeln!(
            o,
            "\ntime ({how}; {:.4} ticks/ns, {}; async fns count time polled, not suspended) ({}):",
            t.ticks_per_ns,
            t.calibration,
            top_of(top, t.functions.len())
        );
        let _ = writeln!(
            o,
            "  {:>12} {:>14} {:>14} {:>11} {:>11} {:>11} {:>11} {:>11}  method",
            "calls", "inclusive", "exclusive", "mean", "p50", "p95", "p99", "max"
        );
        for f in t.functions.iter().take(top) {
            let incl = if f.inclusive_ci_ns > 0.0 {
                format!("~{}±{}", dur(f.inclusive_ns), dur(f.inclusive_ci_ns))
            } else {
                dur(f.inclusive_ns)
            };
            let _ = writeln!(
                o,
                "  {:>12} {:>14} {:>14} {:>11} {:>11} {:>11} {:>11} {:>11}  {}",
                f.calls,
                incl,
                dur(f.exclusive_ns),
                dur(f.mean_ns),
                dur(f.p50_ns),
                dur(f.p95_ns),
                dur(f.p99_ns),
                dur(f.max_ns),
                data.name(f.method)
            );
        }
        let _ = writeln!(
            o,
            "\ntime by calling context ({}):",
            top_of(top, t.contexts.len())
        );
        // The most inclusive time first, each row bounded whatever the depth.
        let mut order: Vec<usize> = (0..t.contexts.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&t.contexts[a], &t.contexts[b]);
            y.inclusive_ns.total_cmp(&x.inclusive_ns).then(a.cmp(&b))
        });
        order.truncate(top);
        let rows = stack_rows(&t.contexts, &order, &data.method_names());
        for (&i, row) in order.iter().zip(&rows) {
            let c = &t.contexts[i];
            let _ = writeln!(
                o,
                "  {:>12} {:>14} incl {:>14} self  {row}",
                c.calls,
                dur(c.inclusive_ns),
                dur(c.exclusive_ns),
            );
        }
    }
}

/// A duration for people: ns, µs, ms or s with 3 significant digits or so.
fn dur(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}
