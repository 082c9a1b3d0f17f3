//! `time`: inclusive and exclusive time per function, per call-graph edge and per calling
//! context, and the latency distribution of one call ([`cabprof_analyses::TimeProfile`]).
//!
//! Opt-in (not on by default): a session running it makes `#[profile]` stamp calls with
//! `Time` words (every call, or one in `time_sample` per function and thread). The counter's
//! rate is calibrated against the monotonic clock over the session itself: a reading of both
//! when it starts ([`begin_timing`]) and another when the report is made.

mod calibration;

use super::contexts::{depth_first, stack_rows};
use super::{check_contexts, top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{
    CompensationEntry, ContextTimeEntry, DuringSession, EdgeTimeEntry, FunctionTimeEntry,
    NotAReport, ReportData, Spread, TimeData,
};
use cabprof_analyses::{Calibrations, Compensation, TimeProfile};
use cabprof_cab::clock::{self, Calibration, Pair};
use cabprof_cab::runtime::RuntimeConfig;
use cabprof_cab::ConfigError;
use calibration::Overhead;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Timed calls below which a sampled estimate's interval is not shown: the normal
/// approximation behind it needs a sample of some size. (A rare long call the sample missed
/// is not the interval's business: it is measured in full, see `private::ticker`.)
const MIN_TIMED_FOR_INTERVAL: u64 = 30;

/// Largest `time_sample` accepted.
const MAX_SAMPLE: u32 = 1 << 20;

/// The running (or last) timed session's clock and overhead calibrations.
#[derive(Clone, Debug)]
pub(crate) struct Timing {
    /// The clock reading taken when it started.
    start: Pair,
    /// Its runtime settings, to measure the overhead again at the end.
    config: RuntimeConfig,
    /// Its `time_sample`.
    period: u32,
    /// The cost of a timed call, measured as it started (`Err`: why not).
    overhead: Result<Overhead, String>,
    /// The same, measured when it finished.
    at_finish: Option<Overhead>,
    /// Its `time_raw`.
    show_raw: bool,
}

static TIMING: Mutex<Option<Timing>> = Mutex::new(None);

fn timing() -> std::sync::MutexGuard<'static, Option<Timing>> {
    TIMING.lock().unwrap_or_else(|e| e.into_inner())
}

/// What [`begin_timing`] replaced, for [`restore_timing`], and whether it started the
/// ticker.
pub(crate) type TimingState = (u32, Option<Timing>, bool);

/// A session running `plan` with `config` is about to start (no session runs): stamp calls
/// if it times, measure what a timed call costs, and take the clock calibration's first
/// reading. Returns what it replaced.
pub(crate) fn begin_timing(plan: &AnalysisPlan, config: &RuntimeConfig) -> TimingState {
    if cabprof_cab::runtime::activity() == cabprof_cab::runtime::Activity::Recording {
        // A session runs: this one will not start, and the running one's settings stay.
        return (crate::__private::time_period(), timing().clone(), false);
    }
    // The timeline reads the timed calls' stamps: it times as the time analysis does, and its
    // exit stamps are in the calibration's timed calls.
    let timeline = plan.kinds.contains(&crate::Analysis::Timeline);
    let on = plan.kinds.contains(&crate::Analysis::Time) || timeline;
    let period = if on { plan.time_sample } else { 0 };
    crate::__private::set_timeline(timeline);
    // Measured before taking the lock: the calibration runs a session of its own.
    let overhead = on.then(|| calibration::measure(config, period));
    let mut slot = timing();
    let old = slot.take();
    if let Some(overhead) = overhead {
        *slot = Some(Timing {
            start: Calibration::start(),
            config: config.clone(),
            period,
            overhead,
            at_finish: None,
            show_raw: plan.time_raw,
        });
    }
    // Sampled timing finds the long calls the sample misses with a coarse clock, ticking
    // from before the session's first call.
    let ticking = period > 1;
    if ticking {
        crate::__private::start_ticker();
    } else {
        // One left by a session dropped without `finish`.
        crate::__private::stop_ticker();
    }
    let old_period = crate::__private::set_time_period(period);
    cabprof_cab::event::set_stall_words(on);
    (old_period, old, ticking)
}

/// The session did not start: put back what [`begin_timing`] replaced.
pub(crate) fn restore_timing((period, old, ticking): TimingState) {
    if ticking {
        crate::__private::stop_ticker();
    }
    crate::__private::set_time_period(period);
    cabprof_cab::event::set_stall_words(period != 0);
    crate::__private::set_timeline(false);
    *timing() = old;
}

/// The timed session has finished (no session runs): measure a timed call's cost again, to
/// state the drift in its report.
pub(crate) fn finish_timing() {
    crate::__private::stop_ticker();
    cabprof_cab::event::set_stall_words(false);
    let Some((config, period)) = timing()
        .as_ref()
        .filter(|t| t.at_finish.is_none())
        .map(|t| (t.config.clone(), t.period))
    else {
        return;
    };
    let at_finish = calibration::measure(&config, period).ok();
    if let Some(t) = timing().as_mut() {
        t.at_finish = at_finish;
    }
}

/// The clock's rate over the running (or last) timed session, measured now: for the timeline.
pub(crate) fn clock_calibration() -> Calibration {
    let start = timing()
        .as_ref()
        .map_or_else(Calibration::start, |t| t.start);
    Calibration::measure(&start)
}

/// The compensation the analysis applies, in ticks.
fn compensation(o: &Overhead) -> Compensation {
    Compensation {
        inside: o.inside,
        timed: o.timed,
        untimed: o.untimed,
        poll: o.poll,
    }
}

/// Per function, the instrumented calls inside its outermost calls' time: theirs and every
/// call below them, from the calling contexts (parents before children). Linear in the
/// contexts: one pass up for the subtree counts, one depth-first walk that keeps, per
/// function, how many of its contexts are open above the current one.
fn calls_inside(nodes: &[cabprof_analyses::TimeContext]) -> std::collections::HashMap<u32, u64> {
    use std::collections::HashMap;
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

/// The probes of a session's threads, in ns.
fn during(c: &Calibrations, ns: &dyn Fn(f64) -> f64) -> Option<DuringSession> {
    let spread = |f: fn(&cabprof_cab::event::CallCosts) -> f64| {
        Spread::of(c.kept.iter().map(|k| ns(f(k))).collect())
    };
    Some(DuringSession {
        probes: c.count,
        words: c.words,
        timed_ns: spread(|k| k.timed)?,
        untimed_ns: spread(|k| k.untimed)?,
        inside_ns: spread(|k| k.inside)?,
    })
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
                "time_sample (CABPROF_TIME_SAMPLE)",
                plan.time_sample,
                format!("1..={MAX_SAMPLE} (time one call in K)"),
            ))
        }
    }

    fn build(plan: &AnalysisPlan) -> TimeProfile {
        let mut t = TimeProfile::new();
        t.set_approximate(plan.approximate);
        if let Some(Ok(o)) = timing().as_ref().map(|t| &t.overhead) {
            t.set_compensation(compensation(o));
        }
        t
    }

    fn report(t: &TimeProfile, data: &mut ReportData, methods: &mut MethodIds) {
        let t_profile = t;
        let timing = timing().clone();
        let start = timing.as_ref().map_or_else(Calibration::start, |t| t.start);
        let cal = Calibration::measure(&start);
        let ns = |ticks: f64| cal.ns(ticks);
        let compensation = timing.as_ref().and_then(|t| {
            let o = t.overhead.as_ref().ok()?;
            Some(CompensationEntry {
                clock_ns: ns(o.clock),
                inside_ns: ns(o.inside),
                timed_ns: ns(o.timed),
                untimed_ns: ns(o.untimed),
                poll_ns: Some(ns(o.poll)),
                resolution_ns: ns(o.spread),
                timed_ns_at_finish: t.at_finish.map(|f| ns(f.timed)),
                inside_ns_at_finish: t.at_finish.map(|f| ns(f.inside)),
                during: during(t_profile.calibrations(), &ns),
            })
        });
        let resolution = compensation.as_ref().map(|c| c.resolution_ns);
        // Per instrumented call, how far the compensation may be off: half the spread of the
        // probes during the session (their interquartile range), or half the drift between
        // start and finish without probes.
        let per_call_error = compensation.as_ref().and_then(|c| {
            let mut timed: Vec<f64> = t.calibrations().kept.iter().map(|k| ns(k.timed)).collect();
            if timed.len() >= 2 {
                timed.sort_by(f64::total_cmp);
                let q = |p: f64| timed[((timed.len() - 1) as f64 * p).round() as usize];
                Some((q(0.75) - q(0.25)) / 2.0)
            } else {
                c.timed_ns_at_finish.map(|f| (f - c.timed_ns).abs() / 2.0)
            }
        });
        let calls_inside = calls_inside(&t.context_nodes());
        let estimates: std::collections::HashMap<_, _> = t.estimates().into_iter().collect();
        let sample_period = crate::__private::time_period().max(1);
        // The coarse clock's intervals: each untimed long call's entry was placed in the
        // middle of one, an error of variance `placement` (ticks²) added to the interval.
        let ticks = (sample_period > 1)
            .then(crate::__private::tick_intervals)
            .flatten();
        let placement = ticks.map_or(0.0, |(_, v)| v);
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
                // With long calls, the mean of all calls from the two strata; without, the
                // timed calls' mean, which is the same estimate.
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
                    (e.inclusive_ci.powi(2) + 1.96f64.powi(2) * e.long_untimed as f64 * placement)
                        .sqrt()
                };
                FunctionTimeEntry {
                    method: m.get(),
                    calls: f.calls,
                    timed: f.timed + f.long.timed,
                    inclusive_ns: ns(e.inclusive),
                    inclusive_ci_ns: ns(ci),
                    long: (sample_period > 1).then_some(f.long.calls),
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
                }
            })
            .collect();
        functions.sort_by(|a, b| {
            b.inclusive_ns
                .total_cmp(&a.inclusive_ns)
                .then(a.method.cmp(&b.method))
        });
        let long_edges: std::collections::HashMap<_, _> = t.long_edges().into_iter().collect();
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
        // Nodes linked to their parents, the most called child first: linear in the number
        // of contexts, whatever their depth.
        let nodes = t.context_nodes();
        let links: Vec<(u32, u32)> = nodes.iter().map(|n| (n.node, n.parent)).collect();
        let contexts: Vec<ContextTimeEntry> = depth_first(&links, |i| {
            (
                std::cmp::Reverse(nodes[i].time.calls),
                nodes[i].method.get(),
            )
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
                timed: c.time.timed + c.long.timed,
                inclusive_ns: ns(c.time.estimate_with(&c.long)).max(0.0),
                exclusive_ns: ns(c.exclusive),
                raw_inclusive_ns: Some(ns(c.time.raw_estimate_with(&c.long))),
                raw_exclusive_ns: Some(ns(c.raw_exclusive)),
                exclusive_clipped: Some(c.exclusive_clipped),
            }
        })
        .collect();
        methods.extend(functions.iter().map(|f| f.method));
        methods.extend(contexts.iter().map(|c| c.method));
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
            compensation,
            inside_cabprof_ns: Some(ns(t.stalled_ticks() as f64)),
            inside_cabprof_entries: Some(t.stalls()),
            show_raw: Some(timing.is_some_and(|t| t.show_raw)),
            tick_ns: ticks.map(|(mean, _)| ns(mean)),
        });
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(t) = &data.time else {
            return;
        };
        let how = if t.sample_period > 1 {
            let long = match t.tick_ns {
                Some(tick) => format!(
                    ", long calls apart: those during which a {} clock ticked {} times are measured in full, timed or not ({} calls)",
                    dur(tick),
                    crate::__private::LONG_TICKS,
                    t.functions.iter().filter_map(|f| f.long).sum::<u64>()
                ),
                None => String::new(),
            };
            format!(
                "sampled: one call in {} per function and thread timed, totals are estimates (~) ± the 95% interval shown (? under 30 timed calls), which assumes the untimed calls are like the timed ones, plus the calibration's error{long}",
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
        match &t.compensation {
            Some(c) => {
                let drift = match (c.timed_ns_at_finish, c.inside_ns_at_finish) {
                    (Some(t), Some(i)) => format!("; at finish {} and {}", dur1(t), dur1(i)),
                    _ => String::new(),
                };
                let polls = c
                    .poll_ns
                    .map(|p| format!(" (and {} per poll of an async fn)", dur1(p)))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "  compensated: each timed call's own time less {} inside it, each frame's less {} per timed and {} per untimed call in it{polls}{drift}; resolution {}, a clock read {}",
                    dur1(c.inside_ns),
                    dur1(c.timed_ns),
                    dur1(c.untimed_ns),
                    dur1(c.resolution_ns),
                    dur1(c.clock_ns),
                );
                if let Some(d) = &c.during {
                    let _ = writeln!(
                        o,
                        "  measured again on the program's threads as their rings lapped ({} probes; a timed call {} [{}, {}], inside it {}): each thread's calls lose the median of its latest probes; a function's time may be off by its instrumented calls times half their spread (calibration_error_ns in the JSON)",
                        d.probes,
                        dur1(d.timed_ns.median),
                        dur1(d.timed_ns.min),
                        dur1(d.timed_ns.max),
                        dur1(d.inside_ns.median),
                    );
                }
            }
            None => {
                let _ = writeln!(o, "  raw: no overhead compensation");
            }
        }
        if let Some(s) = t.inside_cabprof_ns.filter(|&s| s > 0.0) {
            let _ = writeln!(
                o,
                "  inside cabprof (waiting for an analyzer, attaching, registering, snapshots): {} in {} entries, taken out of the frames open meanwhile",
                dur(s),
                t.inside_cabprof_entries.unwrap_or(0)
            );
        }
        let raw = t.show_raw == Some(true);
        let _ = write!(
            o,
            "  {:>12} {:>14} {:>14} {:>11} {:>11} {:>11} {:>11} {:>11}",
            "calls", "inclusive", "exclusive", "mean", "p50", "p95", "p99", "max"
        );
        if raw {
            let _ = write!(
                o,
                " {:>14} {:>14} {:>11}",
                "raw incl", "raw excl", "raw mean"
            );
        }
        let _ = writeln!(o, "  method");
        for f in t.functions.iter().take(top) {
            // An estimate (some calls untimed) is marked `~` whatever its interval; an
            // interval from fewer than `MIN_TIMED_FOR_INTERVAL` timed calls is not given,
            // unless every call was long (then it is only where their entries were placed).
            let incl = if f.timed >= f.calls {
                dur(f.inclusive_ns)
            } else if f.timed < MIN_TIMED_FOR_INTERVAL && f.long.unwrap_or(0) < f.calls {
                format!("~{}±?", dur(f.inclusive_ns))
            } else {
                // The sample's interval widened by the calibration's error (systematic, so
                // added, not combined as independent).
                let half = f.inclusive_ci_ns + f.calibration_error_ns.unwrap_or(0.0);
                format!("~{}±{}", dur(f.inclusive_ns), dur(half))
            };
            // Below the resolution: bounds, not figures (the sums are of calls each cheaper
            // than the calibration resolves).
            let (incl, excl, mean) = match (f.below_resolution, &t.compensation) {
                (Some(true), Some(c)) => {
                    let bound = format!("<{}", dur(c.resolution_ns * f.calls as f64));
                    (bound.clone(), bound, format!("<{}", dur1(c.resolution_ns)))
                }
                _ => (
                    incl,
                    excl_text(f.exclusive_ns, f.exclusive_clipped),
                    dur(f.mean_ns),
                ),
            };
            let _ = write!(
                o,
                "  {:>12} {:>14} {:>14} {:>11} {:>11} {:>11} {:>11} {:>11}",
                f.calls,
                incl,
                excl,
                mean,
                dur(f.p50_ns),
                dur(f.p95_ns),
                dur(f.p99_ns),
                dur(f.max_ns),
            );
            if raw {
                let _ = write!(
                    o,
                    " {:>14} {:>14} {:>11}",
                    dur(f.raw_inclusive_ns.unwrap_or(f.inclusive_ns)),
                    dur(f.raw_exclusive_ns.unwrap_or(f.exclusive_ns)),
                    dur(f.raw_mean_ns.unwrap_or(f.mean_ns)),
                );
            }
            let _ = writeln!(o, "  {}", data.name(f.method));
        }
        let clipped = t
            .functions
            .iter()
            .take(top)
            .any(|f| f.exclusive_clipped == Some(true));
        if clipped {
            let _ = writeln!(
                o,
                "  ~0: a self time that came out below zero (the function's time less its callees', each compensated or estimated): below what the calibration or the sample resolves"
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
                excl_text(c.exclusive_ns, c.exclusive_clipped),
            );
        }
    }

    fn check(data: &ReportData) -> Result<(), NotAReport> {
        match &data.time {
            Some(t) => check_contexts("time.contexts", &t.contexts),
            None => Ok(()),
        }
    }
}

/// A self time, or `~0` where it came out below zero and was clipped.
fn excl_text(ns: f64, clipped: Option<bool>) -> String {
    if clipped == Some(true) {
        "~0".to_string()
    } else {
        dur(ns)
    }
}

/// [`dur`] with a decimal below 100 ns: the calibration's figures are a few ns.
fn dur1(ns: f64) -> String {
    if ns < 100.0 {
        format!("{ns:.1} ns")
    } else {
        dur(ns)
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
