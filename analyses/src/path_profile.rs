//! Path profiling: how many times each Ball-Larus path of each method ran.
//!
//! Contract: every `Path { method, path }` word adds one to `(method, path)`; every other word
//! is skipped. No state spans words, so results do not depend on chunk boundaries, and
//! [`PathProfile::merge`] adds counts.
//!
//! Path numbers are those of Ball & Larus, "Efficient Path Profiling" (MICRO 1996): each acyclic
//! path through a method's control-flow graph has a unique number in `0..paths(method)`. This
//! module only counts; turning a number back into its branch sequence needs the numbering the
//! instrumentation emitted, which the report supplies through [`PathDecoder`]. As in the CAB
//! paper's path-profiling client (Ha et al., OOPSLA 2009, §5.2) the counts live in a hash table.

use cab::event::{decode, EventKind, MethodId};
use hashbrown::HashMap;

use crate::Analysis;

/// Turns a path number back into the branch sequence (or source lines) it stands for.
///
/// Implemented by whoever owns the numbering (the instrumentation's registry); the analysis
/// never needs it to count.
pub trait PathDecoder {
    /// The steps of path `path` through `method`, e.g. `["if x > 0: taken", "loop: exit"]`;
    /// `None` if the method or path number is unknown.
    fn decode(&self, method: MethodId, path: u32) -> Option<Vec<String>>;
}

/// One counted path, as [`PathProfile::hottest`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotPath {
    /// The method the path runs through.
    pub method: MethodId,
    /// Its Ball-Larus path number.
    pub path: u32,
    /// How many times it ran.
    pub count: u64,
    /// Its steps, if a [`PathDecoder`] was given and knew them.
    pub steps: Option<Vec<String>>,
}

/// Counts per `(method, path number)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathProfile {
    counts: HashMap<(MethodId, u32), u64>,
}

impl PathProfile {
    /// An empty profile.
    pub fn new() -> PathProfile {
        PathProfile::default()
    }

    /// Count one run of `path` through `method`.
    #[inline]
    pub fn record(&mut self, method: MethodId, path: u32) {
        *self.counts.entry((method, path)).or_insert(0) += 1;
    }

    /// Runs of `path` through `method`.
    pub fn count(&self, method: MethodId, path: u32) -> u64 {
        self.counts.get(&(method, path)).copied().unwrap_or(0)
    }

    /// Every `(method, path)` with its count, in no particular order.
    pub fn paths(&self) -> &HashMap<(MethodId, u32), u64> {
        &self.counts
    }

    /// Total path runs seen.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// The `n` most frequent paths, most frequent first (ties by method, then path number),
    /// without steps.
    pub fn hottest(&self, n: usize) -> Vec<HotPath> {
        let mut all: Vec<((MethodId, u32), u64)> =
            self.counts.iter().map(|(&k, &c)| (k, c)).collect();
        let order = |a: &((MethodId, u32), u64), b: &((MethodId, u32), u64)| {
            b.1.cmp(&a.1).then(a.0.cmp(&b.0))
        };
        if n < all.len() {
            if n == 0 {
                return Vec::new();
            }
            all.select_nth_unstable_by(n - 1, order);
            all.truncate(n);
        }
        all.sort_unstable_by(order);
        all.into_iter()
            .map(|((method, path), count)| HotPath {
                method,
                path,
                count,
                steps: None,
            })
            .collect()
    }

    /// [`hottest`](Self::hottest), with each path's steps filled in by `decoder`.
    pub fn hottest_decoded(&self, n: usize, decoder: &dyn PathDecoder) -> Vec<HotPath> {
        let mut hot = self.hottest(n);
        for p in &mut hot {
            p.steps = decoder.decode(p.method, p.path);
        }
        hot
    }
}

impl Analysis for PathProfile {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(EventKind::Path { method, path }) = decode(w) {
                self.record(method, path);
            }
        }
    }

    fn merge(&mut self, other: PathProfile) {
        for (k, c) in other.counts {
            *self.counts.entry(k).or_insert(0) += c;
        }
    }
}
