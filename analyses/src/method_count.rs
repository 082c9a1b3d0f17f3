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
        self.record_n(method.get(), 1);
    }

    /// Count `n` calls of method `id` (a raw id from an event word).
    #[inline(always)]
    fn record_n(&mut self, id: u32, n: u64) {
        if let Some(c) = self.dense.get_mut(id as usize) {
            *c += n;
        } else {
            self.record_slow_n(MethodId::new(id).unwrap_or(MethodId::ROOT), n);
        }
    }

    #[inline(never)]
    fn record_slow_n(&mut self, method: MethodId, n: u64) {
        let id = method.get();
        if id < DENSE_LIMIT {
            let len = (id as usize + 1).next_power_of_two().max(64);
            self.dense.resize(len.min(DENSE_LIMIT as usize), 0);
            self.dense[id as usize] += n;
        } else {
            *self.sparse.entry(method).or_insert(0) += n;
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

/// Counts `(method, calls)`, a method met more than once adding up: method counts from another
/// analysis that counts every call.
impl FromIterator<(MethodId, u64)> for MethodCount {
    fn from_iter<I: IntoIterator<Item = (MethodId, u64)>>(calls: I) -> MethodCount {
        let mut mc = MethodCount::new();
        for (m, n) in calls {
            mc.record_n(m.get(), n);
        }
        mc
    }
}

impl PartialEq for MethodCount {
    fn eq(&self, other: &MethodCount) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for MethodCount {}

impl EventAnalysis for MethodCount {
    /// Calls of the same function in a row (a hot loop) are counted in a register and added
    /// once: incrementing one counter in memory per call made each increment wait for the
    /// previous one's store (about 5 cycles a call).
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        let mut run_id = u32::MAX;
        let mut run = 0u64;
        for &w in words {
            if let Some((_, callee)) = cabprof_cab::event::as_call(w) {
                if callee == run_id {
                    run += 1;
                } else {
                    if run > 0 {
                        self.record_n(run_id, run);
                    }
                    run_id = callee;
                    run = 1;
                }
            }
        }
        if run > 0 {
            self.record_n(run_id, run);
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
