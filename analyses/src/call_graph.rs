//! Call-graph profiling: how many times each caller called each callee.
//!
//! Contract: every `Call { caller, callee }` word adds one to the edge `(caller, callee)`;
//! entry points of a thread have the root ([`MethodId::ROOT`], id 0) as their caller. Every
//! other word is skipped. Each `Call` word names its caller, so no stack is kept: results do not
//! depend on chunk boundaries, sampled streams attribute every edge they see correctly, and
//! [`CallGraph::merge`] adds edge counts.
//!
//! This is the CAB paper's call-graph client (Ha et al., OOPSLA 2009, §5.2): one hash-table
//! increment per event. Here the table maps an edge to a slot of a dense counter array, and a
//! small direct-mapped cache of recent edges in front of it answers the common case (a hot
//! loop's few edges) with one compare, so most calls never hash into the table.

use cabprof_cab::event::{self, MethodId};
use hashbrown::HashMap;

use crate::EventAnalysis;

/// Entries of the edge cache (a power of two).
const CACHE: usize = 1024;
/// An empty cache entry: no edge packs to this (ids are at most 30 bits).
const EMPTY: u64 = u64::MAX;

/// Caller → callee edge counts.
#[derive(Clone)]
pub struct CallGraph {
    /// Edge → its slot in `counts` and `keys`.
    slots: HashMap<(MethodId, MethodId), u32>,
    keys: Vec<(MethodId, MethodId)>,
    counts: Vec<u64>,
    /// Recently counted edges, packed `caller << 32 | callee`, with their slots.
    cache: Box<[(u64, u32); CACHE]>,
}

impl Default for CallGraph {
    fn default() -> Self {
        CallGraph {
            slots: HashMap::new(),
            keys: Vec::new(),
            counts: Vec::new(),
            // Made on the heap: `Box::new` of the array would build its 16 KiB on the stack
            // first, on the thread making the instance (an application thread's first event).
            cache: vec![(EMPTY, 0); CACHE]
                .into_boxed_slice()
                .try_into()
                .expect("CACHE entries"),
        }
    }
}

impl std::fmt::Debug for CallGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallGraph")
            .field("edges", &self.keys.len())
            .field("total", &self.total())
            .finish()
    }
}

impl PartialEq for CallGraph {
    fn eq(&self, other: &CallGraph) -> bool {
        self.sorted_edges() == other.sorted_edges()
    }
}

impl Eq for CallGraph {}

impl CallGraph {
    /// An empty call graph.
    pub fn new() -> CallGraph {
        CallGraph::default()
    }

    /// Count one call from `caller` to `callee`.
    #[inline]
    pub fn record(&mut self, caller: MethodId, callee: MethodId) {
        self.add(caller.get(), callee.get(), 1);
    }

    #[inline(always)]
    fn add(&mut self, caller: u32, callee: u32, n: u64) {
        let key = (caller as u64) << 32 | callee as u64;
        // Fibonacci hashing: the top 10 bits of a multiply by 2^64 / φ.
        let at = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize & (CACHE - 1);
        let (cached, slot) = self.cache[at];
        if cached == key {
            if let Some(c) = self.counts.get_mut(slot as usize) {
                *c += n;
                return;
            }
        }
        self.add_uncached(key, at, n);
    }

    #[inline(never)]
    fn add_uncached(&mut self, key: u64, at: usize, n: u64) {
        let edge = (method((key >> 32) as u32), method(key as u32));
        let slot = match self.slots.get(&edge) {
            Some(&s) => s,
            None => {
                let s = u32::try_from(self.keys.len()).expect("fewer than 2^32 edges");
                self.slots.insert(edge, s);
                self.keys.push(edge);
                self.counts.push(0);
                s
            }
        };
        self.counts[slot as usize] += n;
        self.cache[at] = (key, slot);
    }

    /// Every edge `(caller, callee)` with its count, in no particular order.
    pub fn edges(&self) -> impl Iterator<Item = ((MethodId, MethodId), u64)> + '_ {
        self.keys.iter().copied().zip(self.counts.iter().copied())
    }

    /// The number of distinct edges.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no call was counted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Calls from `caller` to `callee`.
    pub fn count(&self, caller: MethodId, callee: MethodId) -> u64 {
        self.slots
            .get(&(caller, callee))
            .map_or(0, |&s| self.counts[s as usize])
    }

    /// Calls per function, as [`MethodCount`](crate::MethodCount) counts them from the same
    /// stream (every `Call` is one edge): a session running both takes its method counts
    /// from here rather than counting every call twice.
    pub fn call_counts(&self) -> crate::MethodCount {
        self.edges().map(|((_, callee), n)| (callee, n)).collect()
    }

    /// The callees of `caller` with their counts, in increasing callee id order.
    pub fn callees_of(&self, caller: MethodId) -> Vec<(MethodId, u64)> {
        let mut out: Vec<(MethodId, u64)> = self
            .edges()
            .filter(|&((from, _), _)| from == caller)
            .map(|((_, to), c)| (to, c))
            .collect();
        out.sort_unstable();
        out
    }

    /// Every edge with its count, sorted by `(caller, callee)`.
    pub fn sorted_edges(&self) -> Vec<(MethodId, MethodId, u64)> {
        let mut out: Vec<_> = self.edges().map(|((a, b), c)| (a, b, c)).collect();
        out.sort_unstable();
        out
    }

    /// Total calls seen.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// A method id from a word's 30-bit field (always valid).
fn method(id: u32) -> MethodId {
    MethodId::new(id).unwrap_or(MethodId::ROOT)
}

impl EventAnalysis for CallGraph {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some((caller, callee)) = event::as_call(w) {
                self.add(caller, callee, 1);
            }
        }
    }

    fn merge(&mut self, other: CallGraph) {
        for ((a, b), c) in other.edges() {
            self.add(a.get(), b.get(), c);
        }
    }
}
