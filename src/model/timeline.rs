//! The timeline's part of the report model: per thread, its last slices (calls, and polls of
//! `async fn` futures), each with its start and duration.

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
    /// Whether the slices' times are compensated for the instrumentation's cost; `false`:
    /// raw clock readings, as the time analysis' `raw_` figures.
    pub compensated: bool,
    /// One entry per thread with slices, by thread number.
    pub threads: Vec<TimelineThread>,
    /// The origin (the earliest start) as a clock reading, so that a window of the live
    /// endpoint can keep the slices it saw start. Absent in older files.
    pub origin_ticks: Option<u64>,
}

impl TimelineData {
    /// The slices that started at clock reading `ticks` or later (a live window's), the
    /// threads without any dropped.
    #[cfg(feature = "serve")]
    pub(crate) fn started_since(&self, ticks: u64) -> TimelineData {
        let Some(origin) = self.origin_ticks else {
            return self.clone();
        };
        // Both readings are of the same counter, taken modulo 2^60.
        let from_ns = (ticks.wrapping_sub(origin) & cabprof_cab::event::MAX_PAYLOAD) as f64
            / self.ticks_per_ns;
        let since_origin = ticks >= origin;
        let threads = self
            .threads
            .iter()
            .map(|t| TimelineThread {
                thread: t.thread.clone(),
                overwritten: t.overwritten,
                slices: t
                    .slices
                    .iter()
                    .filter(|s| !since_origin || s.start_ns >= from_ns)
                    .cloned()
                    .collect(),
            })
            .filter(|t| !t.slices.is_empty())
            .collect();
        TimelineData {
            ticks_per_ns: self.ticks_per_ns,
            sample_period: self.sample_period,
            slices_per_thread: self.slices_per_thread,
            compensated: self.compensated,
            threads,
            origin_ticks: self.origin_ticks,
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

/// One call, or one poll of a future, on a thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineSlice {
    /// Method id.
    pub method: u32,
    /// Frames open below it on its thread (0: called from the root).
    pub depth: u32,
    /// A poll of an `async fn`'s future rather than a whole call.
    pub poll: bool,
    /// Its start, in ns from the timeline's origin (the earliest start).
    pub start_ns: f64,
    /// Its duration in ns.
    pub duration_ns: f64,
}
