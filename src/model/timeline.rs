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
