//! Method counting: how many times each method was called.
//!
//! Contract: every `Call { callee, .. }` word adds one to `callee`'s count; every other word is
//! skipped. Counts do not depend on how the stream is cut into chunks, and [`MethodCount::merge`]
//! adds counts, so per-ring instances merge into the counts of the whole program. The caller
//! carried by each `Call` word is not needed, so sampled streams are counted without bias
//! (scale with [`crate::sampling::scale`]).
//!
//! As in the CAB paper's method-counting client (Ha et al., OOPSLA 2009, §5.2) the counters are
//! an array indexed by method id: the registry hands out dense ids from 1, so the common case is
//! one decode, one bounds check and one increment. Ids beyond [`DENSE_LIMIT`] (never produced by
//! the registry in practice, but representable in an event word) go to a hash map instead, so a
//! stray id cannot make the array huge.

use cabprof_cab::event::MethodId;
use hashbrown::HashMap;

use crate::EventAnalysis;

/// Method ids below this are counted in a flat array; larger ones in a hash map.
pub const DENSE_LIMIT: u32 = 1 << 16;

/// Calls per method (by callee).
///
/// Two profiles are equal when they hold the same counts, however their storage grew.
#[derive(Clone, Debug, Default)]
pub struct MethodCount {
    /// `dense[id]` is the count of method `id`, for `id < DENSE_LIMIT`; grows on demand.
    dense: Vec<u64>,
    /// Counts of methods with `id >= DENSE_LIMIT`.
    sparse: HashMap<MethodId, u64>,
}

impl MethodCount {
    /// An empty profile.
    pub fn new() -> MethodCount {
        MethodCount::default()
    }

    /// Count one call of `method`.
    #[inline]
    pub fn record(&mut self, method: MethodId) {
        self.record_id(method.get());
    }

    #[inline(always)]
    fn record_id(&mut self, id: u32) {
        if let Some(c) = self.dense.get_mut(id as usize) {
            *c += 1;
        } else {
            self.record_slow(MethodId::new(id).unwrap_or(MethodId::ROOT));
        }
    }

    #[inline(never)]
    fn record_slow(&mut self, method: MethodId) {
        let id = method.get();
        if id < DENSE_LIMIT {
            let len = (id as usize + 1).next_power_of_two().max(64);
            self.dense.resize(len.min(DENSE_LIMIT as usize), 0);
            self.dense[id as usize] += 1;
        } else {
            *self.sparse.entry(method).or_insert(0) += 1;
        }
    }

    /// Calls of `method` seen so far.
    pub fn count(&self, method: MethodId) -> u64 {
        match self.dense.get(method.get() as usize) {
            Some(&c) => c,
            None => self.sparse.get(&method).copied().unwrap_or(0),
        }
    }

    /// Every method called at least once with its count, in increasing id order.
    pub fn iter(&self) -> impl Iterator<Item = (MethodId, u64)> + '_ {
        let mut sparse: Vec<(MethodId, u64)> = self.sparse.iter().map(|(&m, &c)| (m, c)).collect();
        sparse.sort_unstable();
        self.dense
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c != 0)
            .map(|(id, &c)| (MethodId::new(id as u32).expect("dense ids fit"), c))
            .chain(sparse)
    }

    /// Number of distinct methods called.
    pub fn len(&self) -> usize {
        self.dense.iter().filter(|&&c| c != 0).count() + self.sparse.len()
    }

    /// `true` if no call was seen.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total calls seen.
    pub fn total(&self) -> u64 {
        self.dense.iter().sum::<u64>() + self.sparse.values().sum::<u64>()
    }

    /// The profile as a map, e.g. for [`crate::sampling::error_rate`].
    pub fn to_map(&self) -> HashMap<MethodId, u64> {
        self.iter().collect()
    }
}

impl PartialEq for MethodCount {
    fn eq(&self, other: &MethodCount) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for MethodCount {}

impl EventAnalysis for MethodCount {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some((_, callee)) = cabprof_cab::event::as_call(w) {
                self.record_id(callee);
            }
        }
    }

    fn merge(&mut self, other: MethodCount) {
        if other.dense.len() > self.dense.len() {
            self.dense.resize(other.dense.len(), 0);
        }
        for (mine, theirs) in self.dense.iter_mut().zip(&other.dense) {
            *mine += theirs;
        }
        for (m, c) in other.sparse {
            *self.sparse.entry(m).or_insert(0) += c;
        }
    }
}
