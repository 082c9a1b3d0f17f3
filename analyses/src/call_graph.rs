//! Call-graph profiling: how many times each caller called each callee.
//!
//! Contract: every `Call { caller, callee }` word adds one to the edge `(caller, callee)`;
//! entry points of a thread have the root ([`MethodId::ROOT`], id 0) as their caller. Every
//! other word is skipped. Each `Call` word names its caller, so no stack is kept: results do not
//! depend on chunk boundaries, sampled streams attribute every edge they see correctly, and
//! [`CallGraph::merge`] adds edge counts.
//!
//! This is the CAB paper's call-graph client (Ha et al., OOPSLA 2009, §5.2): one hash-table
//! increment per event.

use cabprof_cab::event::{decode, EventKind, MethodId};
use hashbrown::HashMap;

use crate::EventAnalysis;

/// Caller → callee edge counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallGraph {
    edges: HashMap<(MethodId, MethodId), u64>,
}

impl CallGraph {
    /// An empty call graph.
    pub fn new() -> CallGraph {
        CallGraph::default()
    }

    /// Count one call from `caller` to `callee`.
    #[inline]
    pub fn record(&mut self, caller: MethodId, callee: MethodId) {
        *self.edges.entry((caller, callee)).or_insert(0) += 1;
    }

    /// Every edge `(caller, callee)` with its count, in no particular order.
    pub fn edges(&self) -> &HashMap<(MethodId, MethodId), u64> {
        &self.edges
    }

    /// Calls from `caller` to `callee`.
    pub fn count(&self, caller: MethodId, callee: MethodId) -> u64 {
        self.edges.get(&(caller, callee)).copied().unwrap_or(0)
    }

    /// The callees of `caller` with their counts, in increasing callee id order.
    pub fn callees_of(&self, caller: MethodId) -> Vec<(MethodId, u64)> {
        let mut out: Vec<(MethodId, u64)> = self
            .edges
            .iter()
            .filter(|(&(from, _), _)| from == caller)
            .map(|(&(_, to), &c)| (to, c))
            .collect();
        out.sort_unstable();
        out
    }

    /// Every edge with its count, sorted by `(caller, callee)`.
    pub fn sorted_edges(&self) -> Vec<(MethodId, MethodId, u64)> {
        let mut out: Vec<_> = self.edges.iter().map(|(&(a, b), &c)| (a, b, c)).collect();
        out.sort_unstable();
        out
    }

    /// Total calls seen.
    pub fn total(&self) -> u64 {
        self.edges.values().sum()
    }
}

impl EventAnalysis for CallGraph {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(EventKind::Call { caller, callee }) = decode(w) {
                self.record(caller, callee);
            }
        }
    }

    fn merge(&mut self, other: CallGraph) {
        for (edge, c) in other.edges {
            *self.edges.entry(edge).or_insert(0) += c;
        }
    }
}
