//! Reports: one data model ([`ReportData`], what the JSON file holds) and its renderings — a
//! text table for people, JSON for tools, folded stacks for flame graphs, DOT for the call
//! graph and a flame-graph SVG (inferno).
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
//!   "unmerged_threads": u64,             // sequential mode: threads alive at the end
//!   "methods": [ { "id": u32, "name": str, "module": str, "file": str, "line": u32 } ],
//!   "method_count": [ { "method": u32, "count": u64 } ] | null,
//!   "call_graph": [ { "caller": u32, "callee": u32, "count": u64 } ] | null,   // 0 = root
//!   "call_tree": { "approximate": bool,
//!                  "patterns": [ { "method": u32, "callees": [u32], "count": u64 } ],
//!                  "contexts": [ { "stack": [u32], "count": u64 } ] } | null,
//!   "paths": [ { "method": u32, "path": u32, "count": u64, "steps": [str] | null } ] | null,
//!   "cache": { "levels": [ { "size_bytes", "ways", "line_bytes", "policy": "fifo"|"lru",
//!                            "load_hits", "load_misses", "store_hits", "store_misses" } ],
//!              "by_method": [ { "method": u32, "level": u32, "load_misses", "store_misses" } ] } | null,
//!   "reuse_distance": { "line_bytes": u32, "accesses": u64, "cold": u64,
//!                       "histogram": [ { "min": u64, "max": u64, "count": u64 } ],
//!                       "miss_curve": [ { "lines": u64, "misses": u64 } ] } | null
//! }
//! Counters = { "thread": str, "threads": u64, "events": u64, "analyzed": u64,
//!              "producer_blocks": u64, "blocked_s": f64, "dropped": u64,
//!              "chunks_lapped": u64, "events_lapped": u64, "rate": f64 }
//! ```
//!
//! Counts are stored as analyzed. In sampling mode the text rendering shows estimates
//! (count / `rate_effective`, see [`ReportData::estimate_rate`]) and marks them; tools should
//! do the same. The fraction actually analyzed, not the configured rate, is the right divisor:
//! it accounts for chunks the producer overwrote first, for the rate changes of adaptive
//! sampling, and for bursts rounding the rate up within a chunk.

use crate::profile::AnalysisSet;
use analyses::{MethodId, Policy};
use cab::runtime::{self, RunMode, ThreadStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Schema tag of the JSON report.
pub const SCHEMA: &str = "cabprof-report/1";

/// A finished (or snapshot) profile: the merged analyses and the session's counters.
pub struct Report {
    /// The runtime's report, with the live analysis objects.
    pub runtime: runtime::Report<AnalysisSet>,
    /// The same, as plain data (what the JSON holds and every rendering reads).
    pub data: ReportData,
}

impl Report {
    pub(crate) fn new(runtime: runtime::Report<AnalysisSet>) -> Report {
        let data = ReportData::from_runtime(&runtime);
        Report { runtime, data }
    }

    /// Text tables, `top` rows each.
    pub fn text(&self, top: usize) -> String {
        self.data.text(top)
    }

    /// The JSON report (schema in the module docs).
    pub fn json(&self) -> String {
        self.data.json()
    }

    /// Folded stacks of the calling-context tree (`root;a;b count` lines).
    pub fn folded(&self) -> String {
        self.data.folded()
    }

    /// DOT of the call graph.
    pub fn dot(&self) -> String {
        self.data.dot()
    }

    /// A flame graph of the calling-context tree, as SVG.
    pub fn svg(&self) -> String {
        self.data.svg()
    }
}

/// Per-thread (or total) counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub thread: String,
    pub threads: u64,
    pub events: u64,
    pub analyzed: u64,
    pub producer_blocks: u64,
    pub blocked_s: f64,
    pub dropped: u64,
    pub chunks_lapped: u64,
    pub events_lapped: u64,
    pub rate: f64,
}

impl From<&ThreadStats> for Counters {
    fn from(t: &ThreadStats) -> Self {
        Counters {
            thread: t.thread.clone(),
            threads: t.threads,
            events: t.events,
            analyzed: t.analyzed,
            producer_blocks: t.blocks,
            blocked_s: t.blocked.as_secs_f64(),
            dropped: t.dropped,
            chunks_lapped: t.chunks_lapped,
            events_lapped: t.events_lapped,
            rate: t.rate,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub mode: String,
    pub sampling_rate: f64,
    pub rate_used: f64,
    /// Events analyzed / events emitted over all threads (sampling), 1.0 otherwise; 0.0 when
    /// read from a file that predates the field.
    #[serde(default)]
    pub rate_effective: f64,
    pub buffer_bytes: u64,
    pub chunk_bytes: u64,
    pub elapsed_s: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodEntry {
    pub id: u32,
    pub name: String,
    pub module: String,
    pub file: String,
    pub line: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodCountEntry {
    pub method: u32,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeEntry {
    pub caller: u32,
    pub callee: u32,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternEntry {
    pub method: u32,
    pub callees: Vec<u32>,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextEntry {
    pub stack: Vec<u32>,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTreeData {
    pub approximate: bool,
    pub patterns: Vec<PatternEntry>,
    pub contexts: Vec<ContextEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEntry {
    pub method: u32,
    pub path: u32,
    pub count: u64,
    pub steps: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelEntry {
    pub size_bytes: u64,
    pub ways: u32,
    pub line_bytes: u32,
    pub policy: String,
    pub load_hits: u64,
    pub load_misses: u64,
    pub store_hits: u64,
    pub store_misses: u64,
}

impl LevelEntry {
    fn accesses(&self) -> u64 {
        self.load_hits + self.load_misses + self.store_hits + self.store_misses
    }
    fn miss_rate(&self) -> f64 {
        let n = self.accesses();
        if n == 0 {
            0.0
        } else {
            (self.load_misses + self.store_misses) as f64 / n as f64
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodMissEntry {
    pub method: u32,
    pub level: u32,
    pub load_misses: u64,
    pub store_misses: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheData {
    pub levels: Vec<LevelEntry>,
    pub by_method: Vec<MethodMissEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinEntry {
    pub min: u64,
    pub max: u64,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub lines: u64,
    pub misses: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReuseData {
    pub line_bytes: u32,
    pub accesses: u64,
    pub cold: u64,
    pub histogram: Vec<BinEntry>,
    pub miss_curve: Vec<CurvePoint>,
}

/// Everything a report says, as plain data. See the module docs for the JSON schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    pub schema: String,
    pub session: SessionInfo,
    pub totals: Counters,
    pub threads: Vec<Counters>,
    pub analyzer_failures: Vec<String>,
    pub unmerged_threads: u64,
    pub methods: Vec<MethodEntry>,
    pub method_count: Option<Vec<MethodCountEntry>>,
    pub call_graph: Option<Vec<EdgeEntry>>,
    pub call_tree: Option<CallTreeData>,
    pub paths: Option<Vec<PathEntry>>,
    pub cache: Option<CacheData>,
    pub reuse_distance: Option<ReuseData>,
}

/// Why a saved report could not be read.
#[derive(Debug)]
pub struct ReportError(pub String);

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReportError {}

/// Cache sizes (in lines) the reuse-distance miss curve is reported at: powers of two.
const CURVE_LINES: [u64; 15] = [
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
];

fn ids(it: impl IntoIterator<Item = MethodId>) -> Vec<u32> {
    it.into_iter().map(|m| m.get()).collect()
}

impl ReportData {
    fn from_runtime(r: &runtime::Report<AnalysisSet>) -> ReportData {
        let a = &r.analysis;
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        let method_count = a.method_count.as_ref().map(|mc| {
            let mut v: Vec<_> = mc
                .iter()
                .map(|(m, count)| MethodCountEntry {
                    method: m.get(),
                    count,
                })
                .collect();
            v.sort_by(|x, y| y.count.cmp(&x.count).then(x.method.cmp(&y.method)));
            seen.extend(v.iter().map(|e| e.method));
            v
        });
        let call_graph = a.call_graph.as_ref().map(|g| {
            let v: Vec<_> = g
                .sorted_edges()
                .into_iter()
                .map(|(caller, callee, count)| EdgeEntry {
                    caller: caller.get(),
                    callee: callee.get(),
                    count,
                })
                .collect();
            seen.extend(v.iter().flat_map(|e| [e.caller, e.callee]));
            v
        });
        let call_tree = match (&a.call_tree, &a.context_tree) {
            (Some(p), Some(t)) => {
                let mut patterns: Vec<_> = p
                    .sorted()
                    .into_iter()
                    .map(|(m, callees, count)| PatternEntry {
                        method: m.get(),
                        callees: ids(callees),
                        count,
                    })
                    .collect();
                patterns.sort_by(|x, y| {
                    y.count
                        .cmp(&x.count)
                        .then(x.method.cmp(&y.method))
                        .then(x.callees.cmp(&y.callees))
                });
                let mut contexts: Vec<_> = t
                    .contexts()
                    .into_iter()
                    .map(|(stack, count)| ContextEntry {
                        stack: ids(stack),
                        count,
                    })
                    .collect();
                contexts.sort_by(|x, y| y.count.cmp(&x.count).then(x.stack.cmp(&y.stack)));
                for c in &contexts {
                    seen.extend(c.stack.iter().copied());
                }
                Some(CallTreeData {
                    approximate: p.is_approximate() || t.is_approximate(),
                    patterns,
                    contexts,
                })
            }
            _ => None,
        };
        let paths = a.paths.as_ref().map(|p| {
            let hot = p.hottest(usize::MAX);
            let v: Vec<_> = hot
                .into_iter()
                .map(|h| PathEntry {
                    method: h.method.get(),
                    path: h.path,
                    count: h.count,
                    steps: crate::names::decode_path(h.method, h.path),
                })
                .collect();
            seen.extend(v.iter().map(|e| e.method));
            v
        });
        let cache = a.cache.as_ref().map(|c| {
            let levels: Vec<_> = c
                .config()
                .iter()
                .enumerate()
                .map(|(i, cfg)| {
                    let s = c.stats(i);
                    LevelEntry {
                        size_bytes: cfg.size_bytes,
                        ways: cfg.ways,
                        line_bytes: cfg.line_bytes,
                        policy: match cfg.policy {
                            Policy::Fifo => "fifo".into(),
                            Policy::Lru => "lru".into(),
                        },
                        load_hits: s.load_hits,
                        load_misses: s.load_misses,
                        store_hits: s.store_hits,
                        store_misses: s.store_misses,
                    }
                })
                .collect();
            let mut by_method = Vec::new();
            for level in 0..levels.len() {
                for (m, mc) in c.misses_by_method(level) {
                    by_method.push(MethodMissEntry {
                        method: m.get(),
                        level: level as u32,
                        load_misses: mc.loads,
                        store_misses: mc.stores,
                    });
                }
            }
            seen.extend(by_method.iter().map(|e| e.method));
            CacheData { levels, by_method }
        });
        let reuse_distance = a.reuse.as_ref().map(|rd| ReuseData {
            line_bytes: rd.line_bytes(),
            accesses: rd.accesses(),
            cold: rd.cold(),
            histogram: rd
                .histogram()
                .into_iter()
                .map(|b| BinEntry {
                    min: b.min,
                    max: b.max,
                    count: b.count,
                })
                .collect(),
            miss_curve: CURVE_LINES
                .iter()
                .zip(rd.miss_curve(&CURVE_LINES))
                .map(|(&lines, misses)| CurvePoint { lines, misses })
                .collect(),
        });
        seen.remove(&0);
        let (mode, sampling_rate) = match r.mode {
            RunMode::Exhaustive => ("exhaustive", 1.0),
            RunMode::Sampling { rate, .. } => ("sampling", rate),
            RunMode::Sequential => ("sequential", 1.0),
            RunMode::InstrumentOnly => ("instrument-only", 1.0),
            RunMode::EnqueueOnly => ("enqueue-only", 1.0),
        };
        ReportData {
            schema: SCHEMA.into(),
            session: SessionInfo {
                mode: mode.into(),
                sampling_rate,
                rate_used: r.rate_used,
                rate_effective: match r.mode {
                    RunMode::Sampling { .. } if r.totals.events > 0 => {
                        r.totals.analyzed as f64 / r.totals.events as f64
                    }
                    RunMode::Sampling { .. } => r.rate_used,
                    _ => 1.0,
                },
                buffer_bytes: r.ring.buffer_bytes as u64,
                chunk_bytes: r.ring.chunk_bytes as u64,
                elapsed_s: r.elapsed.as_secs_f64(),
            },
            totals: Counters::from(&r.totals),
            threads: r.threads.iter().map(Counters::from).collect(),
            analyzer_failures: r.analyzer_failures.clone(),
            unmerged_threads: r.unmerged_threads as u64,
            methods: seen.into_iter().map(crate::names::method_entry).collect(),
            method_count,
            call_graph,
            call_tree,
            paths,
            cache,
            reuse_distance,
        }
    }

    /// Read a saved JSON report. Errors say what is wrong and where (line and column).
    pub fn from_json(text: &str) -> Result<ReportData, ReportError> {
        let data: ReportData = serde_json::from_str(text)
            .map_err(|e| ReportError(format!("not a cabprof report: {e}")))?;
        if data.schema != SCHEMA {
            return Err(ReportError(format!(
                "unsupported report schema {:?} (this cabprof reads {SCHEMA:?})",
                data.schema
            )));
        }
        Ok(data)
    }

    /// Pretty-printed JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report data always serializes")
    }

    /// The printable name of a method id (`root` for 0).
    pub fn name(&self, id: u32) -> String {
        if id == 0 {
            return "root".into();
        }
        self.methods
            .iter()
            .find(|m| m.id == id)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("method#{id}"))
    }

    fn location(&self, id: u32) -> String {
        self.methods
            .iter()
            .find(|m| m.id == id)
            .map(|m| format!("{}:{}", m.file, m.line))
            .unwrap_or_default()
    }

    fn sampling(&self) -> bool {
        self.session.mode == "sampling"
    }

    /// What sampled counts are divided by to estimate the full counts: the fraction of events
    /// analyzed (`rate_effective`), or `rate_used` for a file without it; 1.0 when not
    /// sampling or nothing is known.
    pub fn estimate_rate(&self) -> f64 {
        let s = &self.session;
        if !self.sampling() {
            1.0
        } else if s.rate_effective > 0.0 {
            s.rate_effective
        } else if s.rate_used > 0.0 {
            s.rate_used
        } else {
            1.0
        }
    }

    /// A count as shown: exact, or estimated from a sample.
    fn shown(&self, count: u64) -> String {
        if self.sampling() {
            format!("~{:.0}", count as f64 / self.estimate_rate())
        } else {
            count.to_string()
        }
    }

    /// Text tables for people: the session, then each analysis, `top` rows each.
    pub fn text(&self, top: usize) -> String {
        let mut o = String::new();
        let s = &self.session;
        let t = &self.totals;
        let _ = writeln!(
            o,
            "cabprof report — mode {}{}, ring {} KB in {} KB chunks, {:.3} s",
            s.mode,
            if self.sampling() {
                format!(
                    " (rate {:.2}%, used {:.2}%, analyzed {:.2}% of events)",
                    s.sampling_rate * 100.0,
                    s.rate_used * 100.0,
                    self.estimate_rate() * 100.0
                )
            } else {
                String::new()
            },
            s.buffer_bytes >> 10,
            s.chunk_bytes >> 10,
            s.elapsed_s
        );
        let _ = writeln!(
            o,
            "events {} from {} thread(s), analyzed {}, dropped {}, chunks lapped {} (~{} events lost), producer blocks {} ({:.3} s blocked)",
            t.events,
            t.threads,
            t.analyzed,
            t.dropped,
            t.chunks_lapped,
            t.events_lapped,
            t.producer_blocks,
            t.blocked_s
        );
        for f in &self.analyzer_failures {
            let _ = writeln!(o, "FAILURE: {f}");
        }
        if self.unmerged_threads > 0 {
            let _ = writeln!(
                o,
                "note: {} thread(s) still running at the end; their sequential results are not included",
                self.unmerged_threads
            );
        }
        if self.sampling() {
            let _ = writeln!(
                o,
                "counts marked ~ are estimates: sampled count / rate used"
            );
        }
        if let Some(mc) = &self.method_count {
            let total: u64 = mc.iter().map(|e| e.count).sum::<u64>().max(1);
            let _ = writeln!(o, "\nmethod calls (top {top} of {}):", mc.len());
            let _ = writeln!(o, "  {:>14} {:>7}  {:<40} location", "calls", "%", "method");
            for e in mc.iter().take(top) {
                let _ = writeln!(
                    o,
                    "  {:>14} {:>6.2}%  {:<40} {}",
                    self.shown(e.count),
                    100.0 * e.count as f64 / total as f64,
                    self.name(e.method),
                    self.location(e.method)
                );
            }
        }
        if let Some(g) = &self.call_graph {
            let _ = writeln!(o, "\ncall graph edges (top {top} of {}):", g.len());
            for e in g.iter().take(top) {
                let _ = writeln!(
                    o,
                    "  {:>14}  {} -> {}",
                    self.shown(e.count),
                    self.name(e.caller),
                    self.name(e.callee)
                );
            }
        }
        if let Some(ct) = &self.call_tree {
            let approx = if ct.approximate {
                " (approximate: sampled)"
            } else {
                ""
            };
            let _ = writeln!(
                o,
                "\ncall-tree patterns{approx} (top {top} of {}): a function and the callees of one invocation",
                ct.patterns.len()
            );
            for p in ct.patterns.iter().take(top) {
                let mut callees: Vec<String> =
                    p.callees.iter().take(6).map(|&c| self.name(c)).collect();
                if p.callees.len() > 6 {
                    callees.push(format!("… {} callees in all", p.callees.len()));
                }
                let _ = writeln!(
                    o,
                    "  {:>14}  {} [{}]",
                    self.shown(p.count),
                    self.name(p.method),
                    callees.join(", ")
                );
            }
            let _ = writeln!(
                o,
                "\ncalling contexts{approx} (top {top} of {}):",
                ct.contexts.len()
            );
            for c in ct.contexts.iter().take(top) {
                let mut stack: Vec<String> = c.stack.iter().map(|&m| self.name(m)).collect();
                // Deep recursion: keep the outermost two and innermost three frames.
                if stack.len() > 6 {
                    let hidden = stack.len() - 5;
                    stack.splice(2..stack.len() - 3, [format!("…{hidden} frames…")]);
                }
                let _ = writeln!(
                    o,
                    "  {:>14}  {} (depth {})",
                    self.shown(c.count),
                    stack.join(" > "),
                    c.stack.len()
                );
            }
        }
        if let Some(paths) = &self.paths {
            let _ = writeln!(o, "\nhottest paths (top {top} of {}):", paths.len());
            for p in paths.iter().take(top) {
                let _ = writeln!(
                    o,
                    "  {:>14}  {} path #{}",
                    self.shown(p.count),
                    self.name(p.method),
                    p.path
                );
                if let Some(steps) = &p.steps {
                    for step in steps {
                        let _ = writeln!(o, "  {:>14}    {step}", "");
                    }
                }
            }
        }
        if let Some(c) = &self.cache {
            let _ = writeln!(o, "\ncache simulation:");
            for (i, l) in c.levels.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "  L{} {} KB {}-way {} B {}: {} accesses, miss rate {:.2}% (loads {}/{} miss, stores {}/{} miss)",
                    i + 1,
                    l.size_bytes >> 10,
                    l.ways,
                    l.line_bytes,
                    l.policy,
                    l.accesses(),
                    100.0 * l.miss_rate(),
                    l.load_misses,
                    l.load_hits + l.load_misses,
                    l.store_misses,
                    l.store_hits + l.store_misses
                );
            }
            let mut l1: Vec<_> = c.by_method.iter().filter(|e| e.level == 0).collect();
            l1.sort_by_key(|e| std::cmp::Reverse(e.load_misses + e.store_misses));
            if !l1.is_empty() {
                let _ = writeln!(o, "  L1 misses by function:");
                for e in l1.iter().take(top) {
                    let _ = writeln!(
                        o,
                        "  {:>14}  {} (loads {}, stores {})",
                        e.load_misses + e.store_misses,
                        self.name(e.method),
                        e.load_misses,
                        e.store_misses
                    );
                }
            }
        }
        if let Some(r) = &self.reuse_distance {
            let _ = writeln!(
                o,
                "\nreuse distance ({} B lines): {} accesses, {} cold",
                r.line_bytes, r.accesses, r.cold
            );
            let _ = writeln!(o, "  fully-associative LRU misses by capacity:");
            for p in &r.miss_curve {
                let rate = if r.accesses == 0 {
                    0.0
                } else {
                    100.0 * p.misses as f64 / r.accesses as f64
                };
                let _ = writeln!(
                    o,
                    "  {:>8} lines ({:>8} KB): {:>12} misses ({rate:.2}%)",
                    p.lines,
                    (p.lines * r.line_bytes as u64) >> 10,
                    p.misses
                );
            }
        }
        o
    }

    /// Folded stacks of the calling-context tree: one `root;a;b count` line per context with
    /// that context's call count, so a frame's width in a flame graph is the calls made in its
    /// whole subtree; and, when paths were profiled, each Ball-Larus path as a leaf
    /// `root;f;path#N count`.
    pub fn folded(&self) -> String {
        let mut o = String::new();
        if let Some(ct) = &self.call_tree {
            for c in &ct.contexts {
                let names: Vec<String> = std::iter::once("root".to_string())
                    .chain(c.stack.iter().map(|&m| sanitize(&self.name(m))))
                    .collect();
                let _ = writeln!(o, "{} {}", names.join(";"), c.count);
            }
        }
        if let Some(paths) = &self.paths {
            for p in paths {
                let _ = writeln!(
                    o,
                    "root;{};path#{} {}",
                    sanitize(&self.name(p.method)),
                    p.path,
                    p.count
                );
            }
        }
        o
    }

    /// The call graph in Graphviz DOT, edges labelled with call counts.
    pub fn dot(&self) -> String {
        let mut o = String::from("digraph cabprof {\n  rankdir=LR;\n  node [shape=box];\n");
        if let Some(g) = &self.call_graph {
            let mut nodes = BTreeSet::new();
            for e in g {
                nodes.insert(e.caller);
                nodes.insert(e.callee);
            }
            for n in nodes {
                let _ = writeln!(o, "  n{n} [label=\"{}\"];", dot_escape(&self.name(n)));
            }
            for e in g {
                let _ = writeln!(
                    o,
                    "  n{} -> n{} [label=\"{}\"];",
                    e.caller,
                    e.callee,
                    self.shown(e.count)
                );
            }
        }
        o.push_str("}\n");
        o
    }

    /// A flame graph SVG of the folded stacks (inferno).
    pub fn svg(&self) -> String {
        let folded = self.folded();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = format!("cabprof calling contexts ({})", self.session.mode);
        opts.count_name = "calls".into();
        let mut out = Vec::new();
        if folded.trim().is_empty() {
            return String::from(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">no call-tree data</text></svg>\n",
            );
        }
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .expect("folded stacks are well-formed");
        String::from_utf8(out).expect("inferno writes UTF-8")
    }
}

/// The paper's sampling error of a sampled report against an exhaustive one, per analysis:
/// `|actual − sampled/rate| / actual` averaged over every entry of the exact profile
/// (`None` where either report lacks the analysis).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplingError {
    /// Over method counts.
    pub method_count: Option<f64>,
    /// Over call-graph edges.
    pub call_graph: Option<f64>,
    /// Over call-tree patterns.
    pub call_tree: Option<f64>,
    /// Over (method, path) counts.
    pub paths: Option<f64>,
}

impl ReportData {
    /// Compare this sampled report with `exact` (an exhaustive run of the same workload),
    /// estimating full counts with [`estimate_rate`](Self::estimate_rate).
    pub fn sampling_error(&self, exact: &ReportData) -> SamplingError {
        use analyses::sampling::error_rate;
        use hashbrown::HashMap;
        let rate = self.estimate_rate();
        fn err<K: Eq + std::hash::Hash>(
            a: Option<HashMap<K, u64>>,
            b: Option<HashMap<K, u64>>,
            rate: f64,
        ) -> Option<f64> {
            Some(error_rate(&a?, &b?, rate))
        }
        let mc = |d: &ReportData| {
            d.method_count
                .as_ref()
                .map(|v| v.iter().map(|e| (e.method, e.count)).collect())
        };
        let cg = |d: &ReportData| {
            d.call_graph
                .as_ref()
                .map(|v| v.iter().map(|e| ((e.caller, e.callee), e.count)).collect())
        };
        let ct = |d: &ReportData| {
            d.call_tree.as_ref().map(|t| {
                t.patterns
                    .iter()
                    .map(|p| ((p.method, p.callees.clone()), p.count))
                    .collect()
            })
        };
        let ps = |d: &ReportData| {
            d.paths
                .as_ref()
                .map(|v| v.iter().map(|e| ((e.method, e.path), e.count)).collect())
        };
        SamplingError {
            method_count: err(mc(exact), mc(self), rate),
            call_graph: err(cg(exact), cg(self), rate),
            call_tree: err(ct(exact), ct(self), rate),
            paths: err(ps(exact), ps(self), rate),
        }
    }

    /// The analysis results only (no timings or counters): equal for two runs that saw the
    /// same events, whatever the mode or ring sizes.
    pub fn results_json(&self) -> String {
        let mut d = self.clone();
        d.session = SessionInfo {
            mode: String::new(),
            sampling_rate: 0.0,
            rate_used: 0.0,
            rate_effective: 0.0,
            buffer_bytes: 0,
            chunk_bytes: 0,
            elapsed_s: 0.0,
        };
        d.totals = Counters::default();
        d.threads.clear();
        d.json()
    }
}

/// Folded-stack frames may not contain `;` or spaces.
fn sanitize(name: &str) -> String {
    name.replace([';', ' '], "_")
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
