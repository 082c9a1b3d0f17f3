//! The timeline's part of the report model: per thread, its last slices (calls, polls of
//! `async fn` futures and waits at `cabprof::sync` locks and channels), each with its start and
//! duration.

use miniserde::{Deserialize, Serialize};

/// The timeline analysis' results: times in nanoseconds from the earliest slice's start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineData {
    /// Counter ticks per nanosecond (as the time analysis' `ticks_per_ns`).
    pub ticks_per_ns: f64,
    /// One call in `sample_period` per function and thread was timed, and only timed calls
    /// are on the timeline (1: every call).
    pub sample_period: u32,
    /// Slices kept per thread, the latest (the flight recorder's bound).
    pub slices_per_thread: u64,
    /// Whether the calls' slices are compensated for the instrumentation's cost, as the time
    /// analysis' figures are, with that cost in slices of method 0 of its own; `false`: raw
    /// clock readings, as the time analysis' `raw_` figures (`time_raw`).
    pub compensated: bool,
    /// One entry per thread with slices, by thread number.
    pub threads: Vec<TimelineThread>,
    /// The origin (the earliest start) as a clock reading, so that a window of the live
    /// endpoint can keep the slices it saw start. Absent in older files.
    pub origin_ticks: Option<u64>,
}

impl TimelineData {
    /// Nanoseconds from the origin to clock reading `ticks` (negative before it); `None`
    /// without a known origin.
    fn ns_after_origin(&self, ticks: u64) -> Option<f64> {
        let max = cabprof_cab::event::MAX_PAYLOAD;
        let d = ticks.wrapping_sub(self.origin_ticks?) & max;
        // Both readings are of the same counter, taken modulo 2^60.
        let signed = if d > max / 2 {
            -((max - d + 1) as f64)
        } else {
            d as f64
        };
        Some(signed / self.ticks_per_ns)
    }

    /// The slices that `keep` keeps (by start and end in ns from the origin), the threads
    /// left without any dropped.
    fn keeping(&self, keep: impl Fn(f64, f64) -> bool) -> TimelineData {
        let threads = self
            .threads
            .iter()
            .map(|t| TimelineThread {
                thread: t.thread.clone(),
                overwritten: t.overwritten,
                slices: t
                    .slices
                    .iter()
                    .filter(|s| keep(s.start_ns, s.start_ns + s.duration_ns))
                    .cloned()
                    .collect(),
            })
            .filter(|t| !t.slices.is_empty())
            .collect();
        TimelineData {
            threads,
            ..self.clone_empty()
        }
    }

    fn clone_empty(&self) -> TimelineData {
        TimelineData {
            ticks_per_ns: self.ticks_per_ns,
            sample_period: self.sample_period,
            slices_per_thread: self.slices_per_thread,
            compensated: self.compensated,
            threads: Vec::new(),
            origin_ticks: self.origin_ticks,
        }
    }

    /// The slices that started at clock reading `ticks` or later (a live window's).
    #[cfg(feature = "serve")]
    pub(crate) fn started_since(&self, ticks: u64) -> TimelineData {
        match self.ns_after_origin(ticks) {
            Some(from) => self.keeping(|start, _| start >= from),
            None => self.clone(),
        }
    }

    /// The slices that overlap the clock readings `from..=to` (the trigger's window).
    pub(crate) fn between(&self, from: u64, to: u64) -> TimelineData {
        match (self.ns_after_origin(from), self.ns_after_origin(to)) {
            (Some(from), Some(to)) => self.keeping(|start, end| end >= from && start <= to),
            _ => self.clone(),
        }
    }
}

/// One thread's slices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineThread {
    /// The thread's name (`thread-N` if unnamed; `(unnamed N)` if it sent no thread mark).
    pub thread: String,
    /// Slices overwritten to keep within `slices_per_thread`: older than every one listed.
    pub overwritten: u64,
    /// Its slices, by start (a parent before the children it encloses).
    pub slices: Vec<TimelineSlice>,
}

/// What a wait slice waited for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineWait {
    /// `lock`, `send` or `receive`.
    pub kind: String,
    /// The lock's or channel's creation site: its type and `file:line:column`.
    pub site: String,
}

/// The method id of a slice of time inside cabprof (0 names no function).
pub(crate) const CABPROF_SLICE: u32 = 0;

/// One call, or one poll of a future, on a thread; or, in a compensated timeline, time inside
/// cabprof (method 0, named `cabprof` in the trace formats).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineSlice {
    /// Method id; 0: time inside cabprof (the instrumentation's cost taken out of the calls
    /// around it).
    pub method: u32,
    /// Frames open below it on its thread (0: called from the root).
    pub depth: u32,
    /// A poll of an `async fn`'s future rather than a whole call.
    pub poll: bool,
    /// For a poll, its future's task id, which ties the future's polls together (unique
    /// among the futures alive at once; absent in older files).
    pub task: Option<u32>,
    /// A wait at a `cabprof::sync` lock or channel (waits analysis, timeline mode) rather than
    /// a call: one deeper than the call it waited in (`method`; the root's id 0 outside every
    /// call is shown as no function). Absent for calls, and in older files.
    pub wait: Option<TimelineWait>,
    /// Its start, in ns from the timeline's origin (the earliest start).
    pub start_ns: f64,
    /// Its duration in ns.
    pub duration_ns: f64,
}
