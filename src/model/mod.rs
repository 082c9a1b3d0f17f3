//! The report's data model: the plain, serializable types a JSON report holds (schema in the
//! [`report`](crate::report) module docs) and the small queries every renderer shares (method
//! names, sampled-count estimates). Reading a saved report back is `read.rs`.
//!
//! This file is the bottom layer of reports: it uses no other module of the crate, so the
//! conversion from a session, the analyses' descriptors and the renderers can all build on it.
//! (Reading a file back, `read.rs`, asks the analysis registry for each analysis' own checks.)
//!
//! JSON goes through `miniserde`, not `serde_json`: every crate that instrumented code loads
//! through `::cabprof` adds its trait impls to the user's crate, and `serde_json`'s
//! `impl PartialEq<Value> for u8` (and its siblings) make `assert_eq!(&*v, &[])` ambiguous
//! there. `miniserde` implements no standard trait on a standard type. A field added to the
//! schema later is an `Option` (absent reads as `None`) or is listed in `LATER_FIELDS` (`read.rs`).

use miniserde::{Deserialize, Serialize};

mod contexts;
mod read;
mod stacks;
mod time;
mod timeline;
mod waits;
pub(crate) use contexts::parent_links;
#[cfg(feature = "pprof")]
pub(crate) use contexts::ROOT;
pub use contexts::{context_depths, context_stack, parent_indices, ContextNode};
pub(crate) use read::check_contexts;
pub use read::{ContextFault, NotAReport, ReportError};
#[cfg(feature = "pprof")]
pub(crate) use stacks::depths_and_outer;
pub(crate) use stacks::{parent_of, StackSet};
pub use stacks::{FlameStacks, Frame, ELIDED_FRAME, FLAME_INNER_FRAMES, FLAME_OUTER_FRAMES};
pub use time::{
    CompensationEntry, ContextTimeEntry, DuringSession, EdgeTimeEntry, FunctionTimeEntry, Spread,
    TimeData,
};
pub(crate) use timeline::CABPROF_SLICE;
pub use timeline::{TimelineData, TimelineSlice, TimelineThread, TimelineWait};
pub use waits::{
    DelayEntry, LatencyEntry, WaitContextEntry, WaitCountsEntry, WaitProfile, WaitSiteEntry,
    WaitsData,
};

/// Schema tag of the JSON report.
pub const SCHEMA: &str = "cabprof-report/1";

/// Everything a report says, as plain data. See the [`report`](crate::report) module docs for
/// the JSON schema. An analysis that did not run is `None`. The default value is an empty
/// report with an empty `schema`, a starting point for filling one in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// How the session ran: mode, rates, ring sizes, duration.
    pub session: SessionInfo,
    /// The counters summed over every application thread.
    pub totals: Counters,
    /// The counters of each application thread (capped by the runtime).
    pub threads: Vec<Counters>,
    /// Analyzer threads that panicked, with their messages: their rings' results are missing.
    pub analyzer_failures: Vec<String>,
    /// Reports of earlier versions: sequential-mode threads alive at the end whose results
    /// were missing. Always 0 now: live threads' results are included in every mode.
    pub unmerged_threads: u64,
    /// An upper bound on events emitted but not in `totals.events` or not yet analyzed:
    /// a snapshot's events still on their way, and in sampling mode the unpublished tail of
    /// threads still alive (a thread that has exited is counted exactly). 0 when read from a
    /// file that predates the field.
    pub events_in_flight: u64,
    /// Every method id the analyses mention, with its name and source location.
    pub methods: Vec<MethodEntry>,
    // Each analysis' field below documents its JSON (the report module's schema names the
    // shared types: `Est`, `AllocCounts`); an analysis that did not run is `null`.
    /// Calls per method, most called first. JSON:
    /// `[ { "method": u32, "count": u64, "estimated": Est } ]`.
    pub method_count: Option<Vec<MethodCountEntry>>,
    /// Caller → callee edge counts, most frequent first (caller 0 is the root). JSON:
    /// `[ { "caller": u32, "callee": u32, "count": u64, "estimated": Est } ]`.
    pub call_graph: Option<Vec<EdgeEntry>>,
    /// Depth-two call-tree patterns and the calling-context tree. JSON:
    ///
    /// ```text
    /// { "approximate": bool,
    ///   "patterns": [ { "method": u32, "callees": [u32], "count": u64, "estimated": Est } ],
    ///   "contexts": [ { "id": u32, "parent": u32, "method": u32, "count": u64,
    ///                   "estimated": Est } ] }
    /// ```
    ///
    /// One node per context (id never 0), each after its parent (0 = root); its stack is its
    /// chain of parents. Older files list `{ "stack": [u32], "count", "estimated" }` instead:
    /// read into nodes.
    pub call_tree: Option<CallTreeData>,
    /// Ball-Larus path counts, hottest first. JSON:
    /// `[ { "method": u32, "path": u32, "count": u64, "steps": [str] | null, "estimated": Est } ]`.
    pub paths: Option<Vec<PathEntry>>,
    /// Cache simulation: per-level hits and misses, misses per method. JSON:
    ///
    /// ```text
    /// { "levels": [ { "size_bytes", "ways", "line_bytes", "policy": "fifo"|"lru",
    ///                 "load_hits", "load_misses", "store_hits", "store_misses" } ],
    ///   "by_method": [ { "method": u32, "level": u32, "load_misses", "store_misses" } ] }
    /// ```
    pub cache: Option<CacheData>,
    /// Reuse-distance histogram and the miss curve it implies. JSON:
    ///
    /// ```text
    /// { "line_bytes": u32, "accesses": u64, "cold": u64,
    ///   "histogram": [ { "min": u64, "max": u64, "count": u64, "estimated": Est } ],
    ///   "miss_curve": [ { "lines": u64, "misses": u64 } ] }
    /// ```
    pub reuse_distance: Option<ReuseData>,
    /// Time per function, call-graph edge and calling context (absent in older files). JSON:
    ///
    /// ```text
    /// { "clock": str, "ticks_per_ns": f64, "calibration": str,
    ///   "sample_period": u32,                  // one call in K timed (1: every call)
    ///   "approximate": bool,                   // sampled timing or sampled rings
    ///   "functions": [ { "method": u32, "calls": u64, "timed": u64,
    ///                    "inclusive_ns", "inclusive_ci_ns", "exclusive_ns",
    ///                    "mean_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns": f64,
    ///                    "long": u64? } ],     // sampled timing: calls measured in full
    ///   "tick_ns": f64?,                       // sampled timing: the coarse clock's tick
    ///   "edges": [ { "caller": u32, "callee": u32, "calls": u64, "timed": u64,
    ///                "inclusive_ns": f64 } ],
    ///   "contexts": [ { "id": u32, "parent": u32, "method": u32, "calls": u64,
    ///                   "timed": u64, "inclusive_ns": f64, "exclusive_ns": f64 } ] }
    /// ```
    ///
    /// Contexts: nodes as in `call_tree`, each after its parent; older files list
    /// `{ "stack": [u32], "calls", "timed", "inclusive_ns", "exclusive_ns" }`: read into nodes.
    pub time: Option<TimeData>,
    /// Heap allocations per function and calling context (absent in reports written before
    /// the allocation analysis existed). JSON:
    ///
    /// ```text
    /// { "approximate": bool, "tracked": bool,       // tracked: the wrapper reported
    ///   "totals": AllocCounts, "runtime": AllocCounts,  // runtime: its own, apart
    ///   "live_bytes": i64, "peak_bytes": i64,       // since the session started
    ///   "functions": [ { "method": u32, "self": AllocCounts,
    ///                    "inclusive": AllocCounts } ],  // method 0 = outside all
    ///   "contexts": [ { "id": u32, "parent": u32, "method": u32, "calls": u64,
    ///                   "counts": AllocCounts } ] }
    /// ```
    ///
    /// Contexts: nodes as in `call_tree`, those with allocations below; the root's own counts
    /// are method 0's `self`. Older files list `{ "stack": [u32], "calls", "counts" }` (the
    /// root as `[]`): read into nodes.
    pub allocations: Option<AllocationsData>,
    /// Per thread, the last calls' start and duration (the `timeline` analysis; absent unless
    /// it ran). JSON:
    ///
    /// ```text
    /// { "ticks_per_ns": f64, "sample_period": u32, "slices_per_thread": u64,
    ///   "compensated": bool,                            // false: raw clock readings
    ///   "threads": [ { "thread": String, "overwritten": u64,
    ///                  "slices": [ { "method": u32, "depth": u32, "poll": bool,
    ///                                "start_ns": f64, "duration_ns": f64 } ] } ] }
    /// ```
    pub timeline: Option<TimelineData>,
    /// Lock waits and holds, blocked channel operations (the `waits` analysis, fed by
    /// `cabprof::sync`; absent unless it ran). JSON, with `Delay = { "count": u64, "ns": u64 }`
    /// and `Waits = { "block": Delay, "mutex": Delay }`:
    ///
    /// ```text
    /// { "approximate": bool, "totals": Waits, "root": Waits,
    ///   "contexts": [ { "id": u32, "parent": u32, "method": u32, "calls": u64,
    ///                   "counts": Waits } ],
    ///   "sites": [ { "kind": str, "site": str, "counts": Waits } ] }
    /// ```
    pub waits: Option<WaitsData>,
}

/// Per-thread (or total) counters of the runtime.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Thread name (`thread-N` if unnamed, `(all)` for the totals).
    pub thread: String,
    /// Threads folded into this entry (1, or more for the totals and the `(other threads)`
    /// overflow entry).
    pub threads: u64,
    /// Events produced (exhaustive, sequential: exact; sampling: the producer's position as
    /// last seen).
    pub events: u64,
    /// Events the analyses saw (equals `events` unless sampling or dropping).
    pub analyzed: u64,
    /// Times the producer found its ring full (exhaustive mode).
    pub producer_blocks: u64,
    /// Seconds the producer spent blocked.
    pub blocked_s: f64,
    /// Events dropped because the analyzer was gone.
    pub dropped: u64,
    /// Chunks the producer overwrote before the analyzer read them (sampling).
    pub chunks_lapped: u64,
    /// Events in those chunks (sampling).
    pub events_lapped: u64,
    /// The sampling rate in force when the ring was retired.
    pub rate: f64,
    /// The largest size its ring reached, in bytes; for the totals, the smallest and the
    /// largest of the threads'. Absent without rings (sequential mode) and in older files.
    pub ring_bytes: Option<(u64, u64)>,
    /// Times its ring (or, for the totals, the rings) changed size. Absent in older files.
    pub ring_resizes: Option<u64>,
    /// Threads whose growing ring the rings' memory budget (`CABPROF_RING_MEMORY`) refused a
    /// larger segment, and the seconds they then spent blocked at the size they kept (part of
    /// `blocked_s`). Absent where none was refused, and in older files.
    pub ring_memory_wait: Option<RingMemoryWait>,
}

/// Waits for ring memory: see [`Counters::ring_memory_wait`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RingMemoryWait {
    /// Threads refused a larger segment at least once.
    pub threads: u64,
    /// Refusals.
    pub refusals: u64,
    /// Seconds those threads' producers blocked after a refusal, before their next lap.
    pub blocked_s: f64,
}

/// How the session ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// `exhaustive`, `sampling`, `sequential`, `instrument-only` or `enqueue-only`.
    pub mode: String,
    /// The configured sampling rate (1.0 unless sampling).
    pub sampling_rate: f64,
    /// The rate in force at the end (adaptive sampling may have lowered it).
    pub rate_used: f64,
    /// Events analyzed / events emitted over all threads (sampling), 1.0 otherwise; 0.0 when
    /// read from a file that predates the field (see `LATER_FIELDS` in `src/model/read.rs`).
    pub rate_effective: f64,
    /// Ring size in bytes (0 in modes without a ring: sequential, instrument-only).
    pub buffer_bytes: u64,
    /// Chunk size in bytes (0 in modes without a ring).
    pub chunk_bytes: u64,
    /// Seconds from the session's start to this report.
    pub elapsed_s: f64,
}

/// A method the report mentions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodEntry {
    /// The id events carry (never 0, the root).
    pub id: u32,
    /// Qualified name (`function#id` when the registry did not know it).
    pub name: String,
    /// Module path.
    pub module: String,
    /// Source file.
    pub file: String,
    /// Source line.
    pub line: u32,
}

/// Calls of one method.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodCountEntry {
    /// Method id.
    pub method: u32,
    /// Calls as analyzed: exact, or in sampling mode the calls seen in the sample.
    pub count: u64,
    /// Sampling mode: the estimated full count, `count` / the fraction of events analyzed
    /// (`session.rate_effective`); `count` is then the raw number in the sample. Absent
    /// (null) when `count` is exact, and in files that predate the field.
    pub estimated: Option<u64>,
}

/// Calls along one caller → callee edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeEntry {
    /// Caller id (0 = root).
    pub caller: u32,
    /// Callee id.
    pub callee: u32,
    /// Calls.
    pub count: u64,
    /// Sampling mode: the estimated full count, `count` / the fraction of events analyzed
    /// (`session.rate_effective`); `count` is then the raw number in the sample. Absent
    /// (null) when `count` is exact, and in files that predate the field.
    pub estimated: Option<u64>,
}

/// A call-tree pattern: a method and the callees of one of its invocations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternEntry {
    /// Method id.
    pub method: u32,
    /// The callees of one invocation, in call order.
    pub callees: Vec<u32>,
    /// Invocations with exactly these callees.
    pub count: u64,
    /// Sampling mode: the estimated full count, `count` / the fraction of events analyzed
    /// (`session.rate_effective`); `count` is then the raw number in the sample. Absent
    /// (null) when `count` is exact, and in files that predate the field.
    pub estimated: Option<u64>,
}

/// One calling context: a node of the calling-context tree, linked to its parent. A context's
/// stack is its chain of parents up to the root, so the report grows with the number of
/// contexts, not with the sum of their depths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextEntry {
    /// The context's id, unique in the report and never 0 (the root).
    pub id: u32,
    /// The id of the calling context (0: the root); it comes before this entry in
    /// [`CallTreeData::contexts`].
    pub parent: u32,
    /// The method called in this context: the innermost frame of its stack.
    pub method: u32,
    /// Calls made in exactly this context.
    pub count: u64,
    /// Sampling mode: the estimated full count, `count` / the fraction of events analyzed
    /// (`session.rate_effective`); `count` is then the raw number in the sample. Absent
    /// (null) when `count` is exact, and in files that predate the field.
    pub estimated: Option<u64>,
}

/// The call-tree analysis' results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTreeData {
    /// Built from a sampled stream: stacks were resynchronised and may be wrong.
    pub approximate: bool,
    /// Depth-two patterns, most frequent first.
    pub patterns: Vec<PatternEntry>,
    /// The calling-context tree's contexts, each after its parent (a depth-first walk, the
    /// most frequent child first).
    pub contexts: Vec<ContextEntry>,
    /// Invocations not recorded as patterns for making more than
    /// `cabprof_analyses::call_tree::MAX_CALLEES` direct calls (absent in older files).
    pub overlong: Option<u64>,
}

impl CallTreeData {
    /// For each context, the index in [`contexts`](Self::contexts) of its parent (`None`: the
    /// root); see [`parent_indices`].
    pub fn parent_indices(&self) -> Vec<Option<usize>> {
        parent_indices(&self.contexts)
    }

    /// The depth of each context (1 for a child of the root), from
    /// [`parent_indices`](Self::parent_indices); see [`context_depths`].
    pub fn depths(parents: &[Option<usize>]) -> Vec<usize> {
        context_depths(parents)
    }

    /// Every context's stack (outermost first) with its count, in `contexts` order. Costs the
    /// sum of all depths (quadratic in a deep recursion): for tests and small trees.
    pub fn stacks(&self) -> Vec<(Vec<u32>, u64)> {
        let parents = self.parent_indices();
        (0..self.contexts.len())
            .map(|i| (self.stack(&parents, i), self.contexts[i].count))
            .collect()
    }

    /// Contexts as nodes from whole stacks (outermost first) and counts, the way files that
    /// predate nodes are read: the prefixes no stack lists get count 0, each parent comes
    /// before its children, and the counts of a stack listed twice are added.
    pub fn contexts_from_stacks<'a>(
        stacks: impl IntoIterator<Item = (&'a [u32], u64)>,
    ) -> Vec<ContextEntry> {
        let mut ids: std::collections::HashMap<(u32, u32), u32> = std::collections::HashMap::new();
        let mut out: Vec<ContextEntry> = Vec::new();
        for (stack, count) in stacks {
            let mut parent = 0;
            for &method in stack {
                parent = *ids.entry((parent, method)).or_insert_with(|| {
                    let id = out.len() as u32 + 1;
                    out.push(ContextEntry {
                        id,
                        parent,
                        method,
                        count: 0,
                        estimated: None,
                    });
                    id
                });
            }
            if parent != 0 {
                let c = &mut out[parent as usize - 1].count;
                *c = c.saturating_add(count);
            }
        }
        out
    }

    /// The stack of context `i`, outermost first: costs its depth; see [`context_stack`].
    pub fn stack(&self, parents: &[Option<usize>], i: usize) -> Vec<u32> {
        context_stack(&self.contexts, parents, i)
    }
}

/// Executions of one Ball-Larus path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEntry {
    /// Method id.
    pub method: u32,
    /// Path number within the method.
    pub path: u32,
    /// Executions.
    pub count: u64,
    /// The path's steps with source lines, when its numbering was known.
    pub steps: Option<Vec<String>>,
    /// Sampling mode: the estimated full count, `count` / the fraction of events analyzed
    /// (`session.rate_effective`); `count` is then the raw number in the sample. Absent
    /// (null) when `count` is exact, and in files that predate the field.
    pub estimated: Option<u64>,
}

/// One simulated cache level and its counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelEntry {
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Associativity.
    pub ways: u32,
    /// Line size in bytes.
    pub line_bytes: u32,
    /// Replacement policy: `fifo` or `lru`.
    pub policy: String,
    /// Loads that hit.
    pub load_hits: u64,
    /// Loads that missed.
    pub load_misses: u64,
    /// Stores that hit.
    pub store_hits: u64,
    /// Stores that missed.
    pub store_misses: u64,
}

impl LevelEntry {
    /// Loads and stores that reached this level: a `u128`, since the sum of four `u64`
    /// counts (of a report file, say) need not fit a `u64`.
    pub fn accesses(&self) -> u128 {
        [
            self.load_hits,
            self.load_misses,
            self.store_hits,
            self.store_misses,
        ]
        .iter()
        .map(|&c| c as u128)
        .sum()
    }

    /// Load and store misses (a `u128`, like [`accesses`](Self::accesses)).
    pub fn misses(&self) -> u128 {
        self.load_misses as u128 + self.store_misses as u128
    }

    /// Misses / accesses (0 with no accesses).
    pub fn miss_rate(&self) -> f64 {
        let n = self.accesses();
        if n == 0 {
            0.0
        } else {
            self.misses() as f64 / n as f64
        }
    }
}

/// The misses one method caused at one level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodMissEntry {
    /// Method id.
    pub method: u32,
    /// Level index (0 = L1).
    pub level: u32,
    /// Load misses.
    pub load_misses: u64,
    /// Store misses.
    pub store_misses: u64,
}

/// The cache simulation's results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheData {
    /// One entry per level, L1 first.
    pub levels: Vec<LevelEntry>,
    /// Misses per method and level.
    pub by_method: Vec<MethodMissEntry>,
}

/// One bin of the reuse-distance histogram.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinEntry {
    /// Smallest distance in the bin (distinct lines touched in between).
    pub min: u64,
    /// Largest distance in the bin.
    pub max: u64,
    /// Accesses at these distances.
    pub count: u64,
    /// Sampling mode: the estimated full count, `count` / the fraction of events analyzed
    /// (`session.rate_effective`); `count` is then the raw number in the sample. Absent
    /// (null) when `count` is exact, and in files that predate the field.
    pub estimated: Option<u64>,
}

/// One point of the miss curve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Capacity of a fully-associative LRU cache, in lines.
    pub lines: u64,
    /// Misses such a cache would take (cold misses included).
    pub misses: u64,
}

/// The reuse-distance analysis' results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReuseData {
    /// Line size in bytes.
    pub line_bytes: u32,
    /// Accesses analyzed.
    pub accesses: u64,
    /// First touches of a line (infinite distance).
    pub cold: u64,
    /// Distances in power-of-two bins.
    pub histogram: Vec<BinEntry>,
    /// Misses at power-of-two capacities.
    pub miss_curve: Vec<CurvePoint>,
}

/// Method id → entry, built once ([`ReportData::method_names`]).
#[derive(Clone, Debug, Default)]
pub struct MethodNames<'a>(std::collections::HashMap<u32, &'a MethodEntry>);

impl<'a> MethodNames<'a> {
    /// The printable name of a method id (`root` for 0, `function#ID` if unknown), as
    /// [`ReportData::name`] gives it.
    pub fn name(&self, id: u32) -> String {
        match (id, self.0.get(&id)) {
            (0, _) => "root".into(),
            (_, Some(m)) => m.name.clone(),
            (_, None) => format!("function#{id}"),
        }
    }

    /// The entry of a method id, if the report has one.
    pub fn entry(&self, id: u32) -> Option<&'a MethodEntry> {
        self.0.get(&id).copied()
    }
}

/// Allocation counts of a context or a function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocCountsEntry {
    /// Blocks allocated.
    pub allocs: u64,
    /// Bytes allocated (block sizes plus the growth of reallocations).
    pub bytes: u64,
    /// Blocks resized.
    pub reallocs: u64,
    /// Blocks freed.
    pub frees: u64,
    /// Bytes freed (block sizes plus the shrinkage of reallocations).
    pub freed_bytes: u64,
}

/// One function's allocations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionAllocEntry {
    /// Method id (0: outside every instrumented function).
    pub method: u32,
    /// While it was the innermost instrumented function.
    #[serde(rename = "self")]
    pub self_: AllocCountsEntry,
    /// While it was anywhere on the stack (recursion counted once).
    pub inclusive: AllocCountsEntry,
}

/// One calling context's own allocations: a node of the calling-context tree, linked to its
/// parent like a [`ContextEntry`]. The root's own allocations (outside every instrumented
/// function) are the `self` counts of method 0 in [`AllocationsData::functions`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocContextEntry {
    /// The context's id, unique among the allocation contexts and never 0 (the root).
    pub id: u32,
    /// The id of the calling context (0: the root); it comes before this entry in
    /// [`AllocationsData::contexts`].
    pub parent: u32,
    /// The method called in this context: the innermost frame of its stack.
    pub method: u32,
    /// Calls that entered this context.
    pub calls: u64,
    /// Allocations made while this was the context.
    pub counts: AllocCountsEntry,
    /// The blocks made in this context and not freed at the end (matched by address; see
    /// [`AllocationsData::untracked_blocks`]). Absent in older files.
    pub live: Option<LiveEntry>,
}

/// Blocks allocated and not freed, and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveEntry {
    /// Blocks.
    pub blocks: u64,
    /// Their sizes.
    pub bytes: u64,
}

/// The allocation analysis' results.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationsData {
    /// Attribution may be off (sampled stream, resynchronised stacks); totals of a complete
    /// stream stay exact.
    pub approximate: bool,
    /// Whether an allocation-tracking global allocator (`cabprof::alloc::Tracked`) reported
    /// anything during the session.
    pub tracked: bool,
    /// Counts over the whole program.
    pub totals: AllocCountsEntry,
    /// Bytes allocated minus bytes freed by the program since the session started, at the
    /// end (process-wide, exact in every mode).
    pub live_bytes: i64,
    /// The largest live byte count reached during the session.
    pub peak_bytes: i64,
    /// The runtime's own allocations (rings, analyses, reports), counted apart and not in
    /// any other figure; resizes count as one allocation and one free.
    pub runtime: AllocCountsEntry,
    /// Per function, most bytes (inclusive) first.
    pub functions: Vec<FunctionAllocEntry>,
    /// The calling contexts with allocations in their subtree, each after its parent (a
    /// depth-first walk, the child whose subtree allocated the most bytes first).
    pub contexts: Vec<AllocContextEntry>,
    /// The blocks made outside every instrumented function and not freed. Absent in older
    /// files.
    pub root_live: Option<LiveEntry>,
    /// Blocks made while the analysis held its most live blocks by address (about a million
    /// per thread's stream), so in no context's `live`. Absent in older files.
    pub untracked_blocks: Option<u64>,
}

impl AllocationsData {
    /// For each context, the index in [`contexts`](Self::contexts) of its parent (`None`: the
    /// root); see [`parent_indices`].
    pub fn parent_indices(&self) -> Vec<Option<usize>> {
        parent_indices(&self.contexts)
    }

    /// The root context's own counts: what was allocated outside every instrumented function
    /// (the `self` counts of method 0 in [`functions`](Self::functions)).
    pub fn root(&self) -> AllocCountsEntry {
        self.functions
            .iter()
            .find(|f| f.method == 0)
            .map_or_else(Default::default, |f| f.self_)
    }
}

impl ReportData {
    /// The printable name of a method id (`root` for 0). `methods` is sorted by id in every
    /// report cabprof makes or reads, so this is a binary search; renderers that name many
    /// frames build a [`MethodNames`] map once instead.
    pub fn name(&self, id: u32) -> String {
        if id == 0 {
            return "root".into();
        }
        self.method(id)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("function#{id}"))
    }

    /// The entry of a method id: a binary search of `methods` (sorted by id), then, for a
    /// table filled in some other order, a scan.
    fn method(&self, id: u32) -> Option<&MethodEntry> {
        match self.methods.binary_search_by_key(&id, |m| m.id) {
            Ok(i) => Some(&self.methods[i]),
            Err(_) => self.methods.iter().find(|m| m.id == id),
        }
    }

    /// `file:line` of a method id, or empty if unknown.
    pub(crate) fn location(&self, id: u32) -> String {
        self.method(id)
            .map(|m| format!("{}:{}", m.file, m.line))
            .unwrap_or_default()
    }

    /// A map from method id to its entry, built once: name lookups in constant time.
    pub fn method_names(&self) -> MethodNames<'_> {
        let mut map = std::collections::HashMap::with_capacity(self.methods.len());
        for m in &self.methods {
            map.entry(m.id).or_insert(m);
        }
        MethodNames(map)
    }

    /// The calling contexts as flame-graph stacks, bounded for deep recursion: a stack of at
    /// most [`FLAME_OUTER_FRAMES`] + [`FLAME_INNER_FRAMES`] frames is kept whole; a deeper one
    /// keeps its outermost [`FLAME_OUTER_FRAMES`] and innermost [`FLAME_INNER_FRAMES`] frames
    /// around one [`Frame::Elided`], and deep stacks that then read the same are merged (their
    /// counts added). So every stack has at most 65 frames, the output grows linearly with the
    /// number of contexts, and a 100,000-deep recursion draws as one tower of 65 frames whose
    /// width is still the total of its calls. Counts whose sum exceeds `u64::MAX` are scaled
    /// down ([`FlameStacks::shift`]). Empty without the call-tree analysis.
    pub fn flame_stacks(&self) -> FlameStacks {
        match &self.call_tree {
            Some(ct) => FlameStacks::from_nodes(&ct.contexts, |c| c.count),
            None => FlameStacks::default(),
        }
    }

    /// Whether the counts come from a sample.
    pub(crate) fn is_sampled(&self) -> bool {
        self.session.mode == "sampling"
    }

    /// What sampled counts are divided by to estimate the full counts: the fraction of events
    /// analyzed (`rate_effective`), or `rate_used` for a file without it; 1.0 when not
    /// sampling or nothing is known.
    pub fn estimate_rate(&self) -> f64 {
        let s = &self.session;
        if !self.is_sampled() {
            1.0
        } else if s.rate_effective > 0.0 {
            s.rate_effective
        } else if s.rate_used > 0.0 {
            s.rate_used
        } else {
            1.0
        }
    }

    /// The calls of the functions named `name` or `<path>::name` (`"parse"` matches
    /// `my_crate::parse` and `Parser::parse`, `"Parser::parse"` only the latter), summed, from
    /// the method count: exact, or in a sampled session the estimates. 0 when no such function
    /// was called, and when method counting did not run.
    pub fn calls(&self, name: &str) -> u64 {
        let Some(counts) = &self.method_count else {
            return 0;
        };
        let names = self.method_names();
        counts
            .iter()
            .filter(|c| {
                let full = names.name(c.method);
                full == name
                    || full
                        .strip_suffix(name)
                        .is_some_and(|path| path.ends_with("::"))
            })
            .map(|c| c.estimated.unwrap_or(c.count))
            .sum()
    }

    /// The estimated full count of a sampled `count` (`count` itself when not sampling).
    pub fn estimate(&self, count: u64) -> u64 {
        if self.is_sampled() {
            (count as f64 / self.estimate_rate()).round() as u64
        } else {
            count
        }
    }

    /// A count as shown: exact, or estimated from a sample (`~` and scaled).
    pub(crate) fn shown(&self, count: u64) -> String {
        if self.is_sampled() {
            format!("~{}", self.estimate(count))
        } else {
            count.to_string()
        }
    }
}
