//! `time`: inclusive and exclusive time per function, per call-graph edge and per calling
//! context, and the latency distribution of one call ([`cabprof_analyses::TimeProfile`]).
//!
//! Opt-in (not on by default): a session running it makes `#[profile]` stamp calls with
//! `Time` words (every call, or one in `time_sample` per function and thread). The counter's
//! rate is calibrated against the monotonic clock over the session itself: a reading of both
//! when it starts ([`begin_timing`]) and another when the report is made.

mod calibration;
mod entries;
mod text;

use super::{check_contexts, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{CompensationEntry, DuringSession, NotAReport, ReportData, Spread, TimeData};
use cabprof_analyses::{Calibrations, Compensation, TimeProfile};
use cabprof_cab::clock::{self, Calibration, Pair};
use cabprof_cab::runtime::RuntimeConfig;
use cabprof_cab::ConfigError;
use calibration::Overhead;
use std::sync::Mutex;

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
/// ticker; `None` if a session ran and nothing was replaced.
pub(crate) type TimingState = Option<(u32, Option<Timing>, bool)>;

/// A session running `plan` with `config` is about to start (no session runs): stamp calls
/// if it times, measure what a timed call costs, and take the clock calibration's first
/// reading. Returns what it replaced.
pub(crate) fn begin_timing(plan: &AnalysisPlan, config: &RuntimeConfig) -> TimingState {
    if cabprof_cab::runtime::activity() == cabprof_cab::runtime::Activity::Recording {
        // A session runs: this one will not start, and the running one's settings stay.
        return None;
    }
    // The timeline reads the timed calls' stamps: it times as the time analysis does, and its
    // exit stamps are in the calibration's timed calls.
    let timeline = plan.kinds.contains(&crate::Analysis::Timeline);
    let on = plan.kinds.contains(&crate::Analysis::Time) || timeline;
    let period = if on { plan.time_sample } else { 0 };
    crate::__private::set_timeline(timeline);
    // Channel messages carry their send time only for the analysis that reads it.
    crate::sync::latency::set_stamping(plan.kinds.contains(&crate::Analysis::Waits));
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
    drop(slot);
    super::trigger::prepare(plan.timeline_trigger.as_ref().filter(|_| timeline));
    Some((old_period, old, ticking))
}

/// The session did not start: put back what [`begin_timing`] replaced (nothing if a session
/// was running: its settings stay).
pub(crate) fn restore_timing(state: TimingState) {
    let Some((period, old, ticking)) = state else {
        return;
    };
    if ticking {
        crate::__private::stop_ticker();
    }
    crate::__private::set_time_period(period);
    cabprof_cab::event::set_stall_words(period != 0);
    crate::__private::set_timeline(false);
    crate::__private::set_trigger_ticks(u64::MAX);
    crate::sync::latency::set_stamping(false);
    *timing() = old;
}

/// The timed session has finished (no session runs): measure a timed call's cost again, to
/// state the drift in its report.
pub(crate) fn finish_timing() {
    crate::__private::stop_ticker();
    crate::sync::latency::set_stamping(false);
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

/// The compensation in force (ticks), unless raw times were asked for (`time_raw`) or the
/// cost was not measured.
pub(crate) fn compensation_in_force() -> Option<Compensation> {
    let t = timing();
    let t = t.as_ref().filter(|t| !t.show_raw)?;
    t.overhead.as_ref().ok().map(compensation)
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
        let timing = timing().clone();
        let start = timing.as_ref().map_or_else(Calibration::start, |t| t.start);
        let cal = Calibration::measure(&start);
        let ns = |ticks: f64| cal.ns(ticks);
        let compensation = timing.as_ref().and_then(|tm| {
            let o = tm.overhead.as_ref().ok()?;
            Some(CompensationEntry {
                clock_ns: ns(o.clock),
                inside_ns: ns(o.inside),
                timed_ns: ns(o.timed),
                untimed_ns: ns(o.untimed),
                // Stated where futures were polled: elsewhere it takes nothing out.
                poll_ns: (t.polls() > 0).then(|| ns(o.poll)),
                resolution_ns: ns(o.spread),
                timed_ns_at_finish: tm.at_finish.map(|f| ns(f.timed)),
                inside_ns_at_finish: tm.at_finish.map(|f| ns(f.inside)),
                during: during(t.calibrations(), &ns),
            })
        });
        let sample_period = crate::__private::time_period().max(1);
        // The coarse clock's intervals (mean and variance, ticks), with sampled timing.
        let ticks = (sample_period > 1)
            .then(crate::__private::tick_intervals)
            .flatten();
        let nodes = t.context_nodes();
        let shape = entries::Shape {
            ns: &ns,
            sample_period,
            placement: ticks.map_or(0.0, |(_, v)| v),
        };
        let functions = entries::functions(t, &nodes, compensation.as_ref(), &shape);
        let edges = entries::edges(t, &ns);
        let resolution = compensation.as_ref().map(|c| c.resolution_ns);
        let contexts = entries::contexts(&nodes, &ns, resolution);
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
        if let Some(t) = &data.time {
            text::render(data, t, top, o);
        }
    }

    fn check(data: &ReportData) -> Result<(), NotAReport> {
        match &data.time {
            Some(t) => check_contexts("time.contexts", &t.contexts),
            None => Ok(()),
        }
    }
}
