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
//! paper's path-profiling client (Ha et al., OOPSLA 2009, §5.2) the counts could live in a hash
//! table; here the common case (method ids and path numbers both small, as the registry and
//! the instrumentation hand them out) is a dense table indexed by both, one bounds check and
//! an increment per event, and only the rest goes to a hash table.

use cabprof_cab::event::{decode, EventKind, MethodId};
use hashbrown::HashMap;

use crate::EventAnalysis;

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
#[derive(Clone, Debug, Default)]
pub struct PathProfile {
    /// `dense[method][path]` for `method < DENSE_METHODS` and `path < DENSE_PATHS`; each row
    /// grows (to a power of two) to the largest path seen. Zero means not seen.
    dense: Vec<Vec<u64>>,
    /// Every other `(method, path)`.
    sparse: HashMap<(MethodId, u32), u64>,
}

/// Method ids below this are counted in the dense table (the registry numbers methods from 1).
const DENSE_METHODS: usize = 1 << 12;
/// Path numbers below this are counted in the dense table (a method with more paths, or with
/// hashed path ids, is counted in the hash table).
const DENSE_PATHS: usize = 1 << 12;

impl PartialEq for PathProfile {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(m, p, c)| other.count(m, p) == c)
    }
}

impl Eq for PathProfile {}

impl PathProfile {
    /// An empty profile.
    pub fn new() -> PathProfile {
        PathProfile::default()
    }

    /// Count one run of `path` through `method`.
    #[inline]
    pub fn record(&mut self, method: MethodId, path: u32) {
        self.add(method, path, 1);
    }

    #[inline]
    fn add(&mut self, method: MethodId, path: u32, n: u64) {
        if let Some(c) = self
            .dense
            .get_mut(method.get() as usize)
            .and_then(|row| row.get_mut(path as usize))
        {
            *c += n;
        } else {
            self.add_slow(method, path, n);
        }
    }

    /// Grow the dense table to hold `(method, path)`, or count it in the hash table.
    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, method: MethodId, path: u32, n: u64) {
        let (m, p) = (method.get() as usize, path as usize);
        if m >= DENSE_METHODS || p >= DENSE_PATHS {
            *self.sparse.entry((method, path)).or_insert(0) += n;
            return;
        }
        if self.dense.len() <= m {
            self.dense.resize_with(m + 1, Vec::new);
        }
        let row = &mut self.dense[m];
        row.resize((p + 1).next_power_of_two().max(8), 0);
        row[p] += n;
    }

    /// Runs of `path` through `method`.
    pub fn count(&self, method: MethodId, path: u32) -> u64 {
        match self
            .dense
            .get(method.get() as usize)
            .and_then(|row| row.get(path as usize))
        {
            Some(&c) => c,
            None => self.sparse.get(&(method, path)).copied().unwrap_or(0),
        }
    }

    /// Every `(method, path, count)` seen (count > 0), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (MethodId, u32, u64)> + '_ {
        let dense = self.dense.iter().enumerate().flat_map(|(m, row)| {
            row.iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(move |(p, &c)| (MethodId::new(m as u32).expect("a counted id"), p as u32, c))
        });
        dense.chain(self.sparse.iter().map(|(&(m, p), &c)| (m, p, c)))
    }

    /// Every `(method, path)` with its count.
    pub fn paths(&self) -> HashMap<(MethodId, u32), u64> {
        self.iter().map(|(m, p, c)| ((m, p), c)).collect()
    }

    /// Distinct paths seen.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// `true` if no path was counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total path runs seen.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, _, c)| c).sum()
    }

    /// The `n` most frequent paths, most frequent first (ties by method, then path number),
    /// without steps.
    pub fn hottest(&self, n: usize) -> Vec<HotPath> {
        let mut all: Vec<((MethodId, u32), u64)> =
            self.iter().map(|(m, p, c)| ((m, p), c)).collect();
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

impl EventAnalysis for PathProfile {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(EventKind::Path { method, path }) = decode(w) {
                self.record(method, path);
            }
        }
    }

    fn merge(&mut self, other: PathProfile) {
        for (m, p, c) in other.iter() {
            self.add(m, p, c);
        }
    }
}
