//! Reports: one data model ([`ReportData`], what the JSON file holds) and its renderings, the
//! [`Format`]s — a text table for people, JSON for tools, folded stacks for flame graphs, DOT
//! for the call graph, callgrind, and two that need crates of their own, each behind a cargo
//! feature that is off by default: a flame-graph SVG (inferno; feature `flamegraph`) and
//! pprof's gzipped protobuf (prost and flate2; feature `pprof`). The `cli` feature turns both
//! on.
//!
//! # JSON schema (`"schema": "cabprof-report/1"`)
//!
//! ```text
//! {
//!   "schema": "cabprof-report/1",
//!   "session": { "mode": "exhaustive" | "sampling" | "sequential",
//!                "sampling_rate": f64,   // configured (1.0 unless sampling)
//!                "rate_used": f64,       // in force at the end (adaptive sampling may lower it)
//!                "rate_effective": f64,  // events analyzed / events emitted (sampling; 1.0
//!                                        // otherwise); estimates divide by it. Absent in
//!                                        // older files: read as 0, meaning use rate_used
//!                "buffer_bytes": u64, "chunk_bytes": u64, "elapsed_s": f64 },
//!   "totals": Counters,                  // sum over threads
//!   "threads": [ Counters ],             // one per application thread (capped, see runtime)
//!   "analyzer_failures": [ string ],
//!   "unmerged_threads": u64,             // older versions only; always 0 now
//!   "events_in_flight": u64,             // bound on events not yet counted (snapshots; live
//!                                        // sampling threads); absent in older files: 0
//!   "methods": [ { "id": u32, "name": str, "module": str, "file": str, "line": u32 } ],
//!   "<analysis>": ... | null,            // one field per analysis, named like it with `_`
//!                                        // for `-` ("call_tree"), null when it did not run
//!                                        // or predates the file: its field of ReportData
//!                                        // documents its JSON
//! }
//! AllocCounts = { "allocs": u64, "bytes": u64, "reallocs": u64, "frees": u64,
//!                 "freed_bytes": u64 }
//! Counters = { "thread": str, "threads": u64, "events": u64, "analyzed": u64,
//!              "producer_blocks": u64, "blocked_s": f64, "dropped": u64,
//!              "chunks_lapped": u64, "events_lapped": u64, "rate": f64,
//!              "ring_bytes": [u64, u64] | null, "ring_resizes": u64 | null,
//!              "ring_memory_wait": { "threads": u64, "refusals": u64, "blocked_s": f64 }
//!                                  | null }   // growing rings the budget refused
//! Est = u64 | null   // sampling: count / rate_effective, the estimated full count (count is
//!                    // then the number in the sample); null when count is exact or the file
//!                    // predates the field
//! ```
//!
//! Counts are stored as analyzed, each with its estimate next to it in sampling mode
//! (`estimated` = count / `rate_effective`, see [`ReportData::estimate_rate`]); the text
//! rendering shows the estimates and marks them `~`. The fraction actually analyzed, not the configured rate, is the right divisor:
//! it accounts for chunks the producer overwrote first, for the rate changes of adaptive
//! sampling, and for bursts rounding the rate up within a chunk.

//!
//! # Deep stacks
//!
//! A calling context (of the call tree and of the time analysis) is a node linked to its
//! parent, so a report grows with the number of contexts, never with the sum of their depths: a 100,000-deep recursion is 100,000 small
//! entries. Renderings stay bounded too. The text report shows a deep context's outermost two
//! and innermost three frames around a count of the hidden ones (rows that then read alike
//! name their context id). Flame graphs (folded stacks, SVG) and pprof keep a stack of up to
//! [`FLAME_OUTER_FRAMES`] + [`FLAME_INNER_FRAMES`] (64) frames whole; a deeper one keeps its
//! outermost 24 and innermost 40 frames around one [`ELIDED_FRAME`] frame, and stacks that
//! then read the same are merged, their counts added: the total is unchanged, and so is the
//! width of every frame outside the elided part. Callgrind needs no elision: its inclusive
//! costs are computed from the tree in one pass.
//!
//! What rendering takes grows with the number of contexts, not with their depth: flame graphs
//! hold each stack as a few bytes per frame in one vector (`src/model/stacks.rs`) and hand
//! inferno only the frames it draws (`svg.rs`); pprof reads each sample's frames from the
//! nodes, leaf first, and encodes it straight into the gzip stream (`leaf_stacks.rs`);
//! [`write_folded_by`](ReportData::write_folded_by) and [`write_json`](ReportData::write_json)
//! stream to their writer.
//!
//! # Counts too large to add up
//!
//! Counts are `u64`. A report file may hold counts whose sums do not fit (only a crafted or
//! corrupted one can: a session does not make 2^64 calls). The text report adds counts in
//! 128 bits and shows the exact sums and percentages; flame graphs divide every count by the
//! smallest power of two that makes their total fit (the SVG's subtitle and a warning of
//! `cabprof report --format folded` say by how much, see [`FlameStacks::shift`]); pprof
//! (whose values are `i64`) and callgrind saturate at their largest value.
//!
//! # Layout
//!
//! - `src/model/` (the crate's `model` module, re-exported here): the types above,
//!   [`ReportData::from_json`] and the queries renderers share; it uses no other module of
//!   the crate but the analyses' checks of a file read back, so the analyses' descriptors (`src/analysis/`) build on it without importing
//!   `report`.
//! - `convert.rs`: a session's result (the runtime's report) to [`ReportData`]; each
//!   analysis's part comes from its descriptor in `src/analysis/`.
//! - One file per rendering: `text.rs` (the analyses' sections come from their descriptors),
//!   `json.rs`, `folded.rs`, `dot.rs`, `svg.rs` (feature `flamegraph`), `pprof.rs` (pprof's
//!   `profile.proto`, its stacks in `leaf_stacks.rs`; feature `pprof`) and `callgrind.rs`
//!   (the callgrind format).
//! - `format.rs`: [`Format`], the one list of formats (names and descriptions), which
//!   `cabprof report --format` takes and the docs are checked against.
//! - `compare.rs`: comparing reports ([`ReportData::sampling_error`],
//!   [`ReportData::results_json`]).

mod callgrind;
mod chrome_trace;
mod compare;
mod convert;
mod delta;
mod dot;
pub(crate) mod file;
mod folded;
mod format;
mod json;
#[cfg(feature = "pprof")]
mod leaf_stacks;
mod perfetto;
#[cfg(feature = "pprof")]
mod pprof;
#[cfg(feature = "flamegraph")]
mod svg;
mod text;

// The data model, type by type: what a report holds (`ReportData` and the types of its
// fields), the queries over its calling contexts, and why a file does not read as a report.
// A type an analysis adds to the schema gets its name here (and in tests/public-api/).
pub use crate::model::{
    context_depths, context_stack, parent_indices, AllocContextEntry, AllocCountsEntry,
    AllocationsData, BinEntry, CacheData, CallTreeData, CompensationEntry, ContextEntry,
    ContextFault, ContextNode, ContextTimeEntry, Counters, CurvePoint, DelayEntry, DuringSession,
    EdgeEntry, EdgeTimeEntry, FlameStacks, Frame, FunctionAllocEntry, FunctionTimeEntry,
    LatencyEntry, LevelEntry, MethodCountEntry, MethodEntry, MethodMissEntry, MethodNames,
    NotAReport, PathEntry, PatternEntry, ReportData, ReportError, ReuseData, RingMemoryWait,
    SessionInfo, Spread, TimeData, TimelineData, TimelineSlice, TimelineThread, TimelineWait,
    WaitContextEntry, WaitCountsEntry, WaitProfile, WaitSiteEntry, WaitsData, ELIDED_FRAME,
    FLAME_INNER_FRAMES, FLAME_OUTER_FRAMES, SCHEMA,
};
pub use compare::SamplingError;
pub use folded::{folded_frame, Weight};
pub use format::Format;

use crate::analysis::AnalysisSet;
use cabprof_cab::runtime;

/// A finished (or snapshot) profile: the merged analyses and the session's counters.
///
/// Built as the runtime's own work and dropped by the program, maybe while a later session
/// (or, for a snapshot, the same one) counts the program's allocations: its fields are
/// dropped as the runtime's work too, so that the frees of the report's blocks never count as
/// the program's (see [`RuntimeDrop`](runtime::RuntimeDrop) for why brackets rather than a
/// `Drop` impl). A part moved out of it (`let data = report.data`) is the program's from then
/// on: its frees count as the program's if a session runs when it is dropped.
#[derive(Debug)]
pub struct Report {
    /// Opens the runtime's scope the fields below are dropped in (the first field).
    #[allow(dead_code, reason = "never read: being dropped first is its use")]
    drop_start: runtime::RuntimeDropStart,
    /// The runtime's report, with the live analysis objects the data below is made from: the
    /// live endpoint reads the time histograms from them. Without `serve` nothing does, and
    /// it is dropped once the data is made.
    #[cfg(feature = "serve")]
    pub(crate) runtime: runtime::Report<AnalysisSet>,
    /// The same, as plain data (what the JSON holds and every rendering reads).
    pub data: ReportData,
    /// Closes the scope (the last field).
    #[allow(dead_code, reason = "never read: being dropped last is its use")]
    drop_end: runtime::RuntimeDropEnd,
}

impl Report {
    pub(crate) fn new(mut runtime: runtime::Report<AnalysisSet>) -> Report {
        // Building the report is the runtime's own work (a snapshot builds one mid-session).
        let _work = runtime::runtime_work();
        runtime.analysis.complete_counts();
        let data = ReportData::from_runtime(&runtime);
        let (drop_start, drop_end) = runtime::drop_as_runtime_work();
        // Inside the runtime's scope: its blocks are freed as the runtime's, not the program's.
        #[cfg(not(feature = "serve"))]
        drop(runtime);
        Report {
            drop_start,
            #[cfg(feature = "serve")]
            runtime,
            data,
            drop_end,
        }
    }
}

/// A report reads as its [`ReportData`]: `report.text(10)`, `report.calls("parse")`,
/// `report.json()` and every other rendering and query are [`ReportData`]'s. `Report` adds
/// only how it is dropped (its blocks are freed as the runtime's, so a program that drops
/// reports does not see them as its own frees).
impl std::ops::Deref for Report {
    type Target = ReportData;

    fn deref(&self) -> &ReportData {
        &self.data
    }
}
