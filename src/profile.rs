//! The analyses a session can run ([`Analysis`]), the set run over one event stream
//! ([`AnalysisSet`]) and what to build for each stream (`AnalysisPlan`). Sessions are in
//! [`crate::session`].

use analyses::{
    Analysis as _, CacheSim, CallGraph, CallTreeProfile, CallingContextTree, LevelConfig,
    MethodCount, PathProfile, ReuseDistance,
};
use cab::runtime::RingAnalysis;

/// One analysis a session can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Analysis {
    /// Calls per function.
    MethodCount,
    /// Caller → callee edge counts.
    CallGraph,
    /// The paper's depth-two call-tree profile and the full calling-context tree.
    CallTree,
    /// Ball-Larus path counts (functions marked `#[profile(paths)]`).
    Paths,
    /// Set-associative cache simulation of `Mem` events (`#[profile(memory)]`).
    Cache,
    /// Reuse-distance histogram of `Mem` events.
    ReuseDistance,
}

impl Analysis {
    /// Every analysis.
    pub const ALL: [Analysis; 6] = [
        Analysis::MethodCount,
        Analysis::CallGraph,
        Analysis::CallTree,
        Analysis::Paths,
        Analysis::Cache,
        Analysis::ReuseDistance,
    ];

    /// Parse a name as used by `CABPROF_ANALYSES` (`method-count`, `call-graph`, `call-tree`,
    /// `paths`, `cache`, `reuse-distance`).
    pub fn parse(name: &str) -> Option<Analysis> {
        Some(
            match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "method-count" | "methods" => Analysis::MethodCount,
                "call-graph" | "graph" => Analysis::CallGraph,
                "call-tree" | "tree" => Analysis::CallTree,
                "paths" | "path" => Analysis::Paths,
                "cache" => Analysis::Cache,
                "reuse-distance" | "reuse" => Analysis::ReuseDistance,
                _ => return None,
            },
        )
    }
}

/// Every configured analysis over one stream; what the runtime runs per ring (or per thread in
/// sequential mode).
#[derive(Clone, Default)]
pub struct AnalysisSet {
    /// Calls per function.
    pub method_count: Option<MethodCount>,
    /// Caller → callee edges.
    pub call_graph: Option<CallGraph>,
    /// Depth-two call-tree patterns.
    pub call_tree: Option<CallTreeProfile>,
    /// Calling-context tree.
    pub context_tree: Option<CallingContextTree>,
    /// Path counts.
    pub paths: Option<PathProfile>,
    /// Cache simulation.
    pub cache: Option<CacheSim>,
    /// Reuse distances.
    pub reuse: Option<ReuseDistance>,
}

/// What to build for each stream.
#[derive(Clone)]
pub(crate) struct AnalysisPlan {
    pub(crate) kinds: Vec<Analysis>,
    pub(crate) cache_levels: Vec<LevelConfig>,
    pub(crate) reuse_line_bytes: u32,
    pub(crate) approximate: bool,
}

impl AnalysisPlan {
    pub(crate) fn build(&self) -> AnalysisSet {
        let has = |k| self.kinds.contains(&k);
        let mut set = AnalysisSet::default();
        if has(Analysis::MethodCount) {
            set.method_count = Some(MethodCount::new());
        }
        if has(Analysis::CallGraph) {
            set.call_graph = Some(CallGraph::new());
        }
        if has(Analysis::CallTree) {
            let mut p = CallTreeProfile::new();
            p.set_approximate(self.approximate);
            let mut t = CallingContextTree::new();
            t.set_approximate(self.approximate);
            set.call_tree = Some(p);
            set.context_tree = Some(t);
        }
        if has(Analysis::Paths) {
            set.paths = Some(PathProfile::new());
        }
        if has(Analysis::Cache) {
            set.cache = Some(CacheSim::new(&self.cache_levels).expect("validated by the builder"));
        }
        if has(Analysis::ReuseDistance) {
            set.reuse =
                Some(ReuseDistance::new(self.reuse_line_bytes).expect("validated by the builder"));
        }
        set
    }
}

fn merge_opt<T: analyses::Analysis>(a: &mut Option<T>, b: Option<T>) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y),
        (None, Some(y)) => *a = Some(y),
        _ => {}
    }
}

impl RingAnalysis for AnalysisSet {
    fn consume(&mut self, words: &[u64]) {
        if let Some(a) = &mut self.method_count {
            a.consume(words);
        }
        if let Some(a) = &mut self.call_graph {
            a.consume(words);
        }
        match (&mut self.call_tree, &mut self.context_tree) {
            (Some(p), Some(t)) => analyses::call_tree::consume_both(p, t, words),
            (p, t) => {
                if let Some(a) = p {
                    a.consume(words);
                }
                if let Some(a) = t {
                    a.consume(words);
                }
            }
        }
        if let Some(a) = &mut self.paths {
            a.consume(words);
        }
        if let Some(a) = &mut self.cache {
            a.consume(words);
        }
        if let Some(a) = &mut self.reuse {
            a.consume(words);
        }
    }

    fn merge(&mut self, o: Self) {
        merge_opt(&mut self.method_count, o.method_count);
        merge_opt(&mut self.call_graph, o.call_graph);
        merge_opt(&mut self.call_tree, o.call_tree);
        merge_opt(&mut self.context_tree, o.context_tree);
        merge_opt(&mut self.paths, o.paths);
        merge_opt(&mut self.cache, o.cache);
        merge_opt(&mut self.reuse, o.reuse);
    }
}
