//! `timeline`: per thread, which call ran when ([`cabprof_analyses::Timeline`]), for the
//! Chrome trace (`cabprof report FILE --format chrome-trace`).
//!
//! Opt-in. It times calls as the time analysis does (the session stamps calls whether or not
//! `time` runs too), and in this mode every timed exit also writes its exit stamp, one more
//! event word per timed call (see `cabprof_cab::event`'s `timeline.rs`). Each thread keeps its
//! last `timeline_slices` slices (`CABPROF_TIMELINE_SLICES`). The calls' slices are
//! compensated as the time analysis' figures are, cabprof's own cost drawn as slices of its
//! own ([`cost`]); with `time_raw` (`CABPROF_TIME_RAW=1`) they are the raw clock readings.

mod cost;

use super::{AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{ReportData, TimelineData, TimelineSlice, TimelineThread};
use cabprof_analyses::timeline::{Timeline, MAX_SLICES};
use cabprof_cab::event::MAX_PAYLOAD;
use cabprof_cab::ConfigError;
use std::fmt::Write as _;

/// What a wait slice waited for: its kind, and the site numbered `site` by `cabprof::sync`.
fn wait_of(kind: cabprof_cab::event::WaitKind, site: Option<u32>) -> crate::model::TimelineWait {
    use cabprof_cab::event::WaitKind;
    let kind = match kind {
        WaitKind::Lock => "lock",
        WaitKind::Send => "send",
        WaitKind::Receive => "receive",
        WaitKind::Hold => "hold",
        WaitKind::Latency => "latency",
    };
    let site = site.and_then(crate::sync::sites::site).map_or_else(
        || format!("site {}", site.unwrap_or(0)),
        |s| format!("{} {}", s.kind, s.place()),
    );
    crate::model::TimelineWait {
        kind: kind.into(),
        site,
    }
}

/// The timeline analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = Timeline;
    const NAMES: &'static [&'static str] = &["timeline"];
    const ON_BY_DEFAULT: bool = false;

    fn validate(plan: &AnalysisPlan) -> Result<(), ConfigError> {
        if let Some(t) = &plan.timeline_trigger {
            if t.function.trim().is_empty() || t.min.is_zero() {
                return Err(ConfigError::new(
                    "timeline_trigger (CABPROF_TIMELINE_TRIGGER)",
                    format!("{:?}:{:?}", t.function, t.min),
                    "a function's name and a threshold of at least 1 ns",
                ));
            }
        }
        if (1..=MAX_SLICES).contains(&plan.timeline_slices) {
            Ok(())
        } else {
            Err(ConfigError::new(
                "timeline_slices (CABPROF_TIMELINE_SLICES)",
                plan.timeline_slices,
                format!("1..={MAX_SLICES} (slices the timeline keeps per thread)"),
            ))
        }
    }

    fn build(plan: &AnalysisPlan) -> Timeline {
        let t = Timeline::new(plan.timeline_slices);
        match &plan.timeline_trigger {
            Some(trigger) => t.with_trigger(super::trigger::analysis_trigger(trigger)),
            None => t,
        }
    }

    fn report(t: &Timeline, data: &mut ReportData, methods: &mut MethodIds) {
        let cal = super::time::clock_calibration();
        let threads = t.threads();
        let names = crate::__private::thread_names();
        let compensation = super::time::compensation_in_force();
        // The origin: the earliest start, less the cabprof slice that compensation puts before
        // it (stamps are taken modulo 2^60; a session does not last the years that takes to
        // wrap).
        let lead = compensation
            .as_ref()
            .map_or(0, |c| (c.timed.max(0.0) / 2.0).ceil() as u64);
        let origin = threads
            .iter()
            .flat_map(|th| th.slices.iter().map(|s| s.start))
            .min()
            .unwrap_or(0)
            .wrapping_sub(lead)
            & MAX_PAYLOAD;
        let ns = |ticks: u64| cal.ns(ticks as f64);
        let threads = threads
            .iter()
            .enumerate()
            .map(|(i, th)| {
                let mut slices: Vec<TimelineSlice> = th
                    .slices
                    .iter()
                    .map(|s| {
                        methods.insert(s.method.get());
                        TimelineSlice {
                            method: s.method.get(),
                            depth: u32::from(s.depth),
                            poll: s.poll,
                            task: s.task.filter(|_| s.wait.is_none()),
                            wait: s.wait.map(|kind| wait_of(kind, s.task)),
                            start_ns: ns(s.start.wrapping_sub(origin) & MAX_PAYLOAD),
                            duration_ns: ns(s.ticks),
                        }
                    })
                    .collect();
                slices.sort_by(|a, b| {
                    a.start_ns
                        .total_cmp(&b.start_ns)
                        .then(a.depth.cmp(&b.depth))
                });
                if let Some(c) = &compensation {
                    let outside = cal.ns(c.timed - c.inside);
                    slices = cost::compensate(&slices, cal.ns(c.inside), outside);
                }
                let thread = match th.thread {
                    Some(n) => names
                        .get(n as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("thread #{n}")),
                    None => format!("(unnamed {})", i + 1),
                };
                TimelineThread {
                    thread,
                    overwritten: th.overwritten,
                    slices,
                }
            })
            .collect();
        data.timeline = Some(TimelineData {
            ticks_per_ns: cal.ticks_per_ns,
            sample_period: crate::__private::time_period().max(1),
            slices_per_thread: t.capacity() as u64,
            compensated: compensation.is_some(),
            threads,
            origin_ticks: Some(origin),
        });
    }

    fn text(data: &ReportData, _top: usize, o: &mut String) {
        let Some(t) = &data.timeline else {
            return;
        };
        let _ = writeln!(
            o,
            "\ntimeline ({} thread{}, {} times; `cabprof report FILE --format chrome-trace` draws it):",
            t.threads.len(),
            if t.threads.len() == 1 { "" } else { "s" },
            if t.compensated { "compensated" } else { "raw" }
        );
        for th in &t.threads {
            let end = th
                .slices
                .iter()
                .map(|s| s.start_ns + s.duration_ns)
                .fold(0.0, f64::max);
            let begin = th.slices.first().map_or(0.0, |s| s.start_ns);
            let _ = writeln!(
                o,
                "  {:<24} {:>9} slices over {:.3} ms{}",
                th.thread,
                th.slices
                    .iter()
                    .filter(|s| s.method != crate::model::CABPROF_SLICE)
                    .count(),
                (end - begin) / 1e6,
                if th.overwritten > 0 {
                    format!(" ({} older overwritten)", th.overwritten)
                } else {
                    String::new()
                }
            );
        }
    }
}
