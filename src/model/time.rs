//! The time analysis' part of the report model: per function, per call-graph edge and per
//! calling context, with the calibration of the clock and of the instrumentation's own cost.

use super::parent_indices;
use miniserde::{Deserialize, Serialize};

/// The time analysis' results: times in nanoseconds, converted from counter ticks with the
/// calibration stated here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeData {
    /// The counter read per event (`rdtsc`, `cntvct_el0` or the monotonic clock).
    pub clock: String,
    /// Counter ticks per nanosecond.
    pub ticks_per_ns: f64,
    /// How `ticks_per_ns` was measured.
    pub calibration: String,
    /// One call in `sample_period` per function and thread was timed (1: every call).
    pub sample_period: u32,
    /// Estimates from a sampled or resynchronised stream rather than exact sums.
    pub approximate: bool,
    /// Per function, most inclusive time first.
    pub functions: Vec<FunctionTimeEntry>,
    /// Per caller → callee edge (caller 0 is the root), most time first.
    pub edges: Vec<EdgeTimeEntry>,
    /// The calling contexts, each after its parent (a depth-first walk, the most called
    /// child first).
    pub contexts: Vec<ContextTimeEntry>,
    /// What was subtracted from the times (absent in older files, whose times are raw).
    pub compensation: Option<CompensationEntry>,
    /// Time the application's threads spent inside cabprof (waiting for an analyzer,
    /// attaching a ring, registering a name, taking a snapshot), taken out of every frame
    /// open meanwhile.
    pub inside_cabprof_ns: Option<f64>,
    /// How many times they entered cabprof (one `Stall` event word each).
    pub inside_cabprof_entries: Option<u64>,
    /// Show the raw figures beside the compensated ones in the text report
    /// (`CABPROF_TIME_RAW=1`).
    pub show_raw: Option<bool>,
    /// With sampled timing: the mean interval of the coarse clock that found the long calls
    /// (a call during which it ticked 16 times is measured in full; see
    /// [`FunctionTimeEntry::long`]). Absent in older files and without sampled timing.
    pub tick_ns: Option<f64>,
}

/// The calibrated cost of a timed call, subtracted from the times reported (overhead
/// compensation): a call's duration loses `inside_ns`; the frames around a call lose what it
/// cost them, `timed_ns` for a timed call and `untimed_ns` for an untimed one. Measured on
/// the instrumented code path when the session started, and again when it finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompensationEntry {
    /// One clock read (two back to back).
    pub clock_ns: f64,
    /// The part of a timed call inside its own interval.
    pub inside_ns: f64,
    /// What a timed call adds to the time of the frames around it.
    pub timed_ns: f64,
    /// What an untimed call adds to them.
    pub untimed_ns: f64,
    /// What each poll of an instrumented future adds to them beyond a call's cost. Absent
    /// when no future was polled, and in files written before it was measured.
    pub poll_ns: Option<f64>,
    /// What a compensated time can resolve: a call whose compensated mean is below it is
    /// marked (`below_resolution`), not shown as a precise figure.
    pub resolution_ns: f64,
    /// `timed_ns` measured again when the session finished (absent for a snapshot or a
    /// per-test report of a session still running).
    pub timed_ns_at_finish: Option<f64>,
    /// `inside_ns` measured again when the session finished.
    pub inside_ns_at_finish: Option<f64>,
    /// The probes the program's threads ran while the session ran (each when its ring
    /// lapped, at most about every 10 ms): each thread's calls lose the median of its latest
    /// ones rather than the figures above. Absent in files written before they existed.
    pub during: Option<DuringSession>,
}

/// The calibration probes run on the program's threads during a session: how many, and the
/// spread of what they measured (the figures the compensation followed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DuringSession {
    /// Probes run.
    pub probes: u64,
    /// The event words the probes wrote (probe and calibration words: events, no calls).
    pub words: u64,
    /// `timed_ns` of the probes.
    pub timed_ns: Spread,
    /// `untimed_ns` of the probes.
    pub untimed_ns: Spread,
    /// `inside_ns` of the probes.
    pub inside_ns: Spread,
}

/// The lowest, median and highest of a set of figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The lowest.
    pub min: f64,
    /// The median.
    pub median: f64,
    /// The highest.
    pub max: f64,
}

impl Spread {
    /// Of `v` (`None` if empty).
    pub fn of(mut v: Vec<f64>) -> Option<Spread> {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (n > 0).then(|| Spread {
            min: v[0],
            median: if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            },
            max: v[n - 1],
        })
    }
}

impl TimeData {
    /// For each context, the index in [`contexts`](Self::contexts) of its parent (`None`: the
    /// root); see [`parent_indices`].
    pub fn parent_indices(&self) -> Vec<Option<usize>> {
        parent_indices(&self.contexts)
    }
}

/// One function's time. With sampled timing the totals are estimates: the long calls' sum
/// (each measured) plus the other calls' estimated from the timed ones (their sum × calls not
/// long / timed ones not long); the per-call figures describe all calls, each timed call
/// standing for the calls not long it samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionTimeEntry {
    /// Method id.
    pub method: u32,
    /// Calls.
    pub calls: u64,
    /// Calls timed (long ones included).
    pub timed: u64,
    /// Inclusive time of all its calls (outermost activations, so recursion counts once).
    pub inclusive_ns: f64,
    /// Half-width of the 95% confidence interval of `inclusive_ns` (0 when every call was
    /// timed): of the estimate of the calls not long, and of where the untimed long calls'
    /// entries were placed.
    pub inclusive_ci_ns: f64,
    /// With sampled timing, the calls measured in full because they were long (the coarse
    /// clock ticked 16 times during each), timed or not: in `inclusive_ns` as they are, never
    /// scaled. Absent in older files and without sampled timing.
    pub long: Option<u64>,
    /// Exclusive (self) time: inclusive time of every activation minus that of its callees.
    pub exclusive_ns: f64,
    /// Mean of one call's inclusive time.
    pub mean_ns: f64,
    /// Median of one call.
    pub p50_ns: f64,
    /// 95th percentile of one call.
    pub p95_ns: f64,
    /// 99th percentile of one call.
    pub p99_ns: f64,
    /// Longest call.
    pub max_ns: f64,
    /// `inclusive_ns` before compensation.
    pub raw_inclusive_ns: Option<f64>,
    /// `exclusive_ns` before compensation.
    pub raw_exclusive_ns: Option<f64>,
    /// `mean_ns` before compensation.
    pub raw_mean_ns: Option<f64>,
    /// The compensated mean is below what the calibration resolves
    /// ([`CompensationEntry::resolution_ns`]): the call costs less than that, how much less
    /// is not known. Its times are shown as bounds.
    pub below_resolution: Option<bool>,
    /// `exclusive_ns` came out below 0 (it is a difference: the function's time less its
    /// callees', each compensated or estimated) and is shown as 0: its self time is below
    /// what the calibration or the sample resolves.
    pub exclusive_clipped: Option<bool>,
    /// How far `inclusive_ns` may be off because the calibration is: every instrumented call
    /// inside it (its own and its callees') times half the range of the middle 80 % of what
    /// the probes during the session measured for a timed call (without probes, half the
    /// drift between the start and finish calibrations), and at least 5 % of a timed call's
    /// cost. Absent without either.
    pub calibration_error_ns: Option<f64>,
    /// For an `async fn`: the wall time of its futures whose polls were all timed and seen,
    /// each from its first poll's start to its last poll's end. Absent for other functions
    /// and in older files.
    pub wall_ns: Option<f64>,
    /// The part of `wall_ns` those futures spent suspended, not being polled: `wall_ns` less
    /// their raw time polled.
    pub suspended_ns: Option<f64>,
    /// For an `async fn` whose timed futures were woken: polls that followed a wake of the
    /// future's waker, and the time from those wakes to those polls (the executor's
    /// scheduling delay; part of `suspended_ns`). Absent otherwise, and in older files.
    pub woken_polls: Option<u64>,
    /// See `woken_polls`.
    pub wake_delay_ns: Option<f64>,
}

/// Inclusive time along one caller → callee edge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeTimeEntry {
    /// Caller id (0 = root).
    pub caller: u32,
    /// Callee id.
    pub callee: u32,
    /// Calls.
    pub calls: u64,
    /// Calls timed.
    pub timed: u64,
    /// Inclusive time of the callee's calls along this edge.
    pub inclusive_ns: f64,
    /// `inclusive_ns` before compensation.
    pub raw_inclusive_ns: Option<f64>,
}

/// Time in one calling context: a node of the calling-context tree, linked to its parent
/// like a [`ContextEntry`](super::ContextEntry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextTimeEntry {
    /// The context's id, unique among the time contexts and never 0 (the root).
    pub id: u32,
    /// The id of the calling context (0: the root); it comes before this entry in
    /// [`TimeData::contexts`].
    pub parent: u32,
    /// The method called in this context: the innermost frame of its stack.
    pub method: u32,
    /// Calls made in exactly this context.
    pub calls: u64,
    /// Calls timed.
    pub timed: u64,
    /// Inclusive time of those calls.
    pub inclusive_ns: f64,
    /// Their self time: inclusive minus that of the contexts directly below.
    pub exclusive_ns: f64,
    /// `inclusive_ns` before compensation.
    pub raw_inclusive_ns: Option<f64>,
    /// `exclusive_ns` before compensation.
    pub raw_exclusive_ns: Option<f64>,
    /// `exclusive_ns` came out below 0 and is shown as 0 (see
    /// [`FunctionTimeEntry::exclusive_clipped`]).
    pub exclusive_clipped: Option<bool>,
    /// The mean of this context's calls is below what the calibration resolves (see
    /// [`FunctionTimeEntry::below_resolution`]): its times are shown as bounds. Absent
    /// without compensation, and in older files.
    pub below_resolution: Option<bool>,
}
