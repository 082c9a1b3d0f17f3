//! Reuse (LRU stack) distance of every memory access, in cache lines.
//!
//! Contract:
//! - The reuse distance of an access to line `b` is the number of *distinct* other lines
//!   accessed since the previous access to `b`; the first access to a line is *cold* (infinite
//!   distance). Every `Mem` word is one access per line it covers (as in
//!   [`crate::cache_sim`]); loads and stores are treated alike; other words are skipped.
//! - Under [`Counting::Cachegrind`] ([`ReuseDistance::with_counting`]) each `Mem` word is one
//!   access whatever lines it covers, as Valgrind's Cachegrind counts: its lines are touched in
//!   order and its distance is the largest of theirs (cold if any is), so a fully-associative
//!   LRU cache misses it exactly when cachegrind's would; the `Mem` word after an
//!   [`IFETCH_MARKER`] marker (an instruction fetch) is skipped.
//! - A fully-associative LRU cache of `C` lines misses an access exactly when its distance is
//!   `>= C` or it is cold. The exact distribution of distances is kept, so
//!   [`ReuseDistance::misses_for_capacity`] is exact for every `C` from one pass.
//! - State spans chunks, so results do not depend on how the stream is cut. Each instance sees
//!   one stream (one thread's accesses); [`ReuseDistance::merge`] adds distributions, which
//!   describes each thread's private reuse, not a shared cache.
//!
//! Algorithm: Marin & Mellor-Crummey, "Cross-Architecture Performance Predictions for
//! Scientific Applications Using Parameterized Models" (SIGMETRICS 2004), §2.2.2: a logical
//! clock ticks once per access, a hash table maps each line to the time of its last access, and
//! an ordered structure over those times counts how many lines were last touched after a given
//! time. Where they use a balanced binary tree keyed by time, this uses a bitmap over the
//! timestamp space with one bit set at each line's last-access time, plus a Fenwick tree of the
//! bitmap words' population counts: the distance is one popcount and one Fenwick prefix sum, and
//! moving a line's mark is two bit flips and at most one Fenwick update, so each access costs
//! O(log(n / 64)) after the hash lookup. The word being filled (the newest 64 timestamps) joins
//! the Fenwick tree only once it is complete, so reuse within it touches no tree at all. When
//! the timestamp space fills up it is compacted: live marks are renumbered `0..n` in order and
//! the space is resized to `8n` timestamps (at least 4096; one bit each), so memory stays
//! proportional to the number of distinct lines (the hash table dominates) and compaction, O(n)
//! every `7n` or more accesses, costs O(1) amortised per access.

use std::fmt;

use cabprof_cab::event::{decode, EventKind};
use hashbrown::HashMap;

use crate::cache_sim::{Counting, IFETCH_MARKER};
use crate::EventAnalysis;

/// Default line size in bytes.
pub const DEFAULT_LINE_BYTES: u32 = 64;
/// Default limit below which [`ReuseDistance::histogram`] has one bin per distance.
pub const DEFAULT_EXACT_BELOW: u64 = 64;
/// Default smallest timestamp space (accesses between compactions when few lines are live).
pub const DEFAULT_MIN_TIMESTAMPS: usize = 1 << 12;
/// After a compaction the timestamp space is this many times the live lines (at least the
/// minimum, [`DEFAULT_MIN_TIMESTAMPS`] unless set): a timestamp costs one bit, and a larger
/// space compacts less often.
const SPACE_PER_LINE: usize = 8;
/// The timestamp space is a whole number of bitmap words.
const WORD: usize = 64;

/// A reuse-distance configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReuseConfigError {
    /// The field at fault (`"line_bytes"`).
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// What the field must be.
    pub requirement: &'static str,
}

impl fmt::Display for ReuseConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reuse distance {} = {}: {}",
            self.field, self.value, self.requirement
        )
    }
}

impl std::error::Error for ReuseConfigError {}

/// One bin of the display histogram: accesses with distance in `min..=max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReuseBin {
    /// Smallest distance in the bin.
    pub min: u64,
    /// Largest distance in the bin.
    pub max: u64,
    /// Accesses with a distance in the bin.
    pub count: u64,
}

/// Reuse-distance histogram of a stream of accesses; see the module docs.
#[derive(Clone, PartialEq, Eq)]
pub struct ReuseDistance {
    /// `log2(line_bytes)`.
    line_shift: u32,
    /// Distances below this get one display bin each.
    exact_below: u64,
    /// Smallest timestamp space; a positive multiple of 64.
    min_timestamps: usize,
    /// Line → time of its last access. Every value is `< now`, and distinct.
    last_access: HashMap<u64, u32>,
    /// Bit `t % 64` of `marks[t / 64]` is set iff `t` is a value of `last_access`. The length
    /// times 64 is the timestamp space.
    marks: Vec<u64>,
    /// Fenwick tree (1-based) over the population counts of `marks[b]` for the complete words
    /// `b < fenwick_words`; entries for later words are 0. `fenwick[0]` is always 0, and after
    /// the tree's `marks.len()` nodes come `fenwick_levels + 1` sink entries that absorb the
    /// steps of branch-free updates that run past the end; neither is part of the tree.
    fenwick: Vec<u32>,
    /// Bit length of `marks.len()`: every tree index is below `1 << fenwick_levels`.
    fenwick_levels: u32,
    /// Words `0..fenwick_words` are in `fenwick`; always `now / 64` after [`Self::tick`].
    fenwick_words: usize,
    /// The next timestamp; `<= 64 * marks.len()`.
    now: u32,
    /// The line accessed last (its distance on the next access, if repeated, is 0).
    last_line: Option<u64>,
    /// `distances[d]`: accesses with reuse distance exactly `d`.
    distances: Vec<u64>,
    /// First accesses to a line.
    cold: u64,
    /// How accesses are counted.
    counting: Counting,
    /// Consuming words under cachegrind counting: the next `Mem` word is a fetch (skipped).
    skip_next: bool,
}

impl Default for ReuseDistance {
    /// 64-byte lines.
    fn default() -> ReuseDistance {
        ReuseDistance::new(DEFAULT_LINE_BYTES).expect("the default line size is valid")
    }
}

impl ReuseDistance {
    /// An empty histogram over lines of `line_bytes` bytes (a power of two; 1 gives the pure
    /// temporal reuse of bytes).
    pub fn new(line_bytes: u32) -> Result<ReuseDistance, ReuseConfigError> {
        if !line_bytes.is_power_of_two() {
            return Err(ReuseConfigError {
                field: "line_bytes",
                value: line_bytes.into(),
                requirement: "must be a power of two",
            });
        }
        Ok(ReuseDistance {
            line_shift: line_bytes.trailing_zeros(),
            exact_below: DEFAULT_EXACT_BELOW,
            min_timestamps: DEFAULT_MIN_TIMESTAMPS,
            last_access: HashMap::new(),
            marks: Vec::new(),
            fenwick: Vec::new(),
            fenwick_levels: 0,
            fenwick_words: 0,
            now: 0,
            last_line: None,
            distances: Vec::new(),
            cold: 0,
            counting: Counting::PerLine,
            skip_next: false,
        })
    }

    /// Count accesses per line touched ([`Counting::PerLine`], the default) or per access as
    /// cachegrind does ([`Counting::Cachegrind`]); see the module docs.
    pub fn with_counting(mut self, counting: Counting) -> ReuseDistance {
        self.counting = counting;
        self
    }

    /// How accesses are counted.
    pub fn counting(&self) -> Counting {
        self.counting
    }

    /// Give distances below `limit` one display bin each (default 64); above it bins cover
    /// powers of two. Affects [`histogram`](Self::histogram) only: the counts are exact anyway.
    pub fn with_exact_below(mut self, limit: u64) -> ReuseDistance {
        self.exact_below = limit;
        self
    }

    /// Keep at least `min` timestamps (rounded up to a multiple of 64; default 4096) between
    /// compactions. A tuning knob: memory is one bit per timestamp, and a smaller space only
    /// compacts more often (which is how tests exercise compaction); distances never change.
    pub fn with_min_timestamps(mut self, min: usize) -> ReuseDistance {
        self.min_timestamps = min.max(1).div_ceil(WORD) * WORD;
        self
    }

    /// Line size in bytes.
    pub fn line_bytes(&self) -> u32 {
        1 << self.line_shift
    }

    /// One access of `size` bytes at `addr`: one access per line covered (`size` 0 counts as 1).
    /// Under cachegrind counting, one access in all (see the module docs).
    #[inline]
    pub fn access(&mut self, addr: u64, size: u32) {
        let first = addr >> self.line_shift;
        let last = addr.saturating_add(size.max(1) as u64 - 1) >> self.line_shift;
        if self.counting == Counting::Cachegrind && last != first {
            self.access_as_one(first, last);
            return;
        }
        self.access_line(first);
        if last != first {
            self.access_lines_after(first, last);
        }
    }

    #[inline(never)]
    fn access_lines_after(&mut self, first: u64, last: u64) {
        for line in first + 1..=last {
            self.access_line(line);
        }
    }

    /// Lines `first..=last` touched in order as one access: the largest distance, or cold.
    #[inline(never)]
    fn access_as_one(&mut self, first: u64, last: u64) {
        let mut distance = Some(0);
        for line in first..=last {
            let d = self.touch(line);
            distance = distance.zip(d).map(|(a, b)| a.max(b));
        }
        match distance {
            Some(d) => self.record(d),
            None => self.cold += 1,
        }
    }

    /// One access to line number `line` (an address divided by the line size). Returns its
    /// reuse distance, or `None` for a cold access.
    #[inline]
    pub fn access_line(&mut self, line: u64) -> Option<u64> {
        let d = self.touch(line);
        match d {
            Some(d) => self.record(d),
            None => self.cold += 1,
        }
        d
    }

    /// Move `line` to the most recent mark; its distance, or `None` if cold. Records nothing.
    #[inline(always)]
    fn touch(&mut self, line: u64) -> Option<u64> {
        if self.last_line == Some(line) {
            // Already the most recent mark: nothing moves.
            return Some(0);
        }
        self.last_line = Some(line);
        let t = self.tick();
        let live = self.last_access.len() as u64;
        let (tw, tb) = (t as usize / 64, t % 64);
        let d = match self.last_access.insert(line, t) {
            Some(prev) => {
                let (pw, pb) = (prev as usize / 64, prev % 64);
                // Marks after `prev`: the rest of its word, then every later word.
                let in_word = (self.marks[pw] >> pb).count_ones() as u64 - 1;
                let d = if pw == tw {
                    in_word
                } else {
                    in_word + live - prefix(&self.fenwick, self.fenwick_levels, pw)
                };
                self.marks[pw] &= !(1 << pb);
                if pw < self.fenwick_words {
                    add(&mut self.fenwick, self.fenwick_levels, pw, u32::MAX);
                }
                Some(d)
            }
            None => None,
        };
        self.marks[tw] |= 1 << tb;
        d
    }

    /// The next timestamp, compacting first if the space is used up, and moving a word that
    /// just became complete into the Fenwick tree.
    #[inline]
    fn tick(&mut self) -> u32 {
        if self.now as usize == self.marks.len() * 64 {
            self.compact();
        }
        let t = self.now;
        self.now += 1;
        let tw = t as usize / 64;
        if self.fenwick_words < tw {
            debug_assert_eq!(self.fenwick_words + 1, tw);
            let done = self.fenwick_words;
            let n = self.marks[done].count_ones();
            add(&mut self.fenwick, self.fenwick_levels, done, n);
            self.fenwick_words = tw;
        }
        t
    }

    #[inline]
    fn record(&mut self, d: u64) {
        let d = d as usize;
        if d >= self.distances.len() {
            self.distances.resize(d + 1, 0);
        }
        self.distances[d] += 1;
    }

    /// Renumber the live marks `0..n` (keeping their order) in a space of about
    /// `max(8n, min_timestamps)` timestamps.
    #[cold]
    fn compact(&mut self) {
        let n = self.last_access.len();
        // before[w]: live marks in words `0..w`.
        let mut before = Vec::with_capacity(self.marks.len());
        let mut sum = 0u32;
        for &m in &self.marks {
            before.push(sum);
            sum += m.count_ones();
        }
        debug_assert_eq!(sum as usize, n);
        for t in self.last_access.values_mut() {
            let (w, b) = (*t as usize / 64, *t % 64);
            *t = before[w] + (self.marks[w] & ((1u64 << b) - 1)).count_ones();
        }
        let words = (SPACE_PER_LINE * n).max(self.min_timestamps).div_ceil(WORD);
        assert!(
            words * 64 <= u32::MAX as usize,
            "reuse distance: more than 2^29 distinct lines"
        );
        self.marks = vec![0; words];
        for (w, m) in self.marks.iter_mut().enumerate() {
            let set = n.saturating_sub(w * 64).min(64);
            *m = if set == 64 {
                u64::MAX
            } else {
                (1u64 << set) - 1
            };
        }
        // Complete words hold 64 marks each; node i covers words (i - lowbit(i), i], 1-based.
        self.fenwick_words = n / 64;
        self.fenwick = (0..=words)
            .map(|i| {
                let low = i & i.wrapping_neg();
                (64 * (i.min(self.fenwick_words) - (i - low).min(self.fenwick_words))) as u32
            })
            .collect();
        self.fenwick_levels = usize::BITS - words.leading_zeros();
        self.fenwick
            .resize(words + 1 + self.fenwick_levels as usize + 1, 0);
        self.now = n as u32;
    }

    /// Accesses seen (one per line touched; one per access under cachegrind counting).
    pub fn accesses(&self) -> u64 {
        self.cold + self.distances.iter().sum::<u64>()
    }

    /// Cold accesses (first touch of a line).
    pub fn cold(&self) -> u64 {
        self.cold
    }

    /// Distinct lines seen by this instance (since it was made; not summed by `merge`).
    pub fn distinct_lines(&self) -> usize {
        self.last_access.len()
    }

    /// The exact distribution: element `d` is the number of accesses with distance `d`.
    pub fn distribution(&self) -> &[u64] {
        &self.distances
    }

    /// Accesses with distance exactly `d`.
    pub fn count(&self, d: u64) -> u64 {
        usize::try_from(d)
            .ok()
            .and_then(|d| self.distances.get(d))
            .copied()
            .unwrap_or(0)
    }

    /// The display histogram: non-empty bins in increasing order, one per distance below the
    /// exact limit, then `[2^k, 2^(k+1))` (clipped to start at the limit). Cold accesses are in
    /// [`cold`](Self::cold).
    pub fn histogram(&self) -> Vec<ReuseBin> {
        let mut bins: Vec<ReuseBin> = Vec::new();
        for (d, &c) in self.distances.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let d = d as u64;
            let (min, max) = if d < self.exact_below {
                (d, d)
            } else {
                let k = 63 - d.leading_zeros();
                let lo = (1u64 << k).max(self.exact_below);
                (lo, (1u64 << k).saturating_mul(2) - 1)
            };
            match bins.last_mut() {
                Some(b) if b.min == min => b.count += c,
                _ => bins.push(ReuseBin { min, max, count: c }),
            }
        }
        bins
    }

    /// Misses of a fully-associative LRU cache of `lines` lines over the accesses seen: cold
    /// accesses plus those with distance `>= lines`. Exact.
    pub fn misses_for_capacity(&self, lines: u64) -> u64 {
        let from =
            usize::try_from(lines).map_or(self.distances.len(), |l| l.min(self.distances.len()));
        self.cold + self.distances[from..].iter().sum::<u64>()
    }

    /// [`misses_for_capacity`](Self::misses_for_capacity) for each size in `sizes` (in lines),
    /// in one pass over the distribution.
    pub fn miss_curve(&self, sizes: &[u64]) -> Vec<u64> {
        // at_least[d] = accesses with distance >= d.
        let mut at_least = vec![0u64; self.distances.len() + 1];
        for d in (0..self.distances.len()).rev() {
            at_least[d] = at_least[d + 1] + self.distances[d];
        }
        sizes
            .iter()
            .map(|&c| {
                let c = usize::try_from(c)
                    .map_or(self.distances.len(), |c| c.min(self.distances.len()));
                self.cold + at_least[c]
            })
            .collect()
    }
}

/// Marks in words `0..=w` (`w < marks.len()`).
///
/// Top-down and branch-free: the indices a Fenwick prefix sum visits are the prefixes of the
/// binary form of `w + 1`, so walk its `levels` bits from the top and add the node at each set
/// bit (masking the others), instead of a loop whose trip count is `popcount(w + 1)` and so
/// mispredicts on random positions.
#[inline]
fn prefix(fenwick: &[u32], levels: u32, w: usize) -> u64 {
    let i = w + 1;
    let mut at = 0;
    let mut sum = 0u64;
    for k in (0..levels).rev() {
        let bit = (i >> k) & 1;
        at += bit << k;
        sum += fenwick[at] as u64 & (bit as u64).wrapping_neg();
    }
    sum
}

/// Add `delta` (wrapping; `u32::MAX` removes one) to word `w`'s count.
///
/// Always `levels + 1` steps, enough to pass the end of the tree from any start, so the loop
/// never mispredicts its exit; steps past the end land in sink entries, selected without a
/// branch, one per step so that they form no chain of dependent writes.
#[inline]
fn add(fenwick: &mut [u32], levels: u32, w: usize, delta: u32) {
    let end = fenwick.len() - (levels as usize + 1);
    let mut i = w + 1;
    for step in 0..=levels as usize {
        let at = if i < end { i } else { end + step };
        fenwick[at] = fenwick[at].wrapping_add(delta);
        i += i & i.wrapping_neg();
    }
}

impl fmt::Debug for ReuseDistance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReuseDistance")
            .field("line_bytes", &self.line_bytes())
            .field("accesses", &self.accesses())
            .field("cold", &self.cold)
            .field("distinct_lines", &self.distinct_lines())
            .field("histogram", &self.histogram())
            .finish()
    }
}

impl EventAnalysis for ReuseDistance {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            match decode(w) {
                Some(EventKind::Mem { addr, size, .. }) if !std::mem::take(&mut self.skip_next) => {
                    self.access(addr, size)
                }
                Some(EventKind::Marker {
                    value: IFETCH_MARKER,
                }) => self.skip_next = self.counting == Counting::Cachegrind,
                _ => {}
            }
        }
    }

    /// Adds `other`'s distribution and cold count (its line state is dropped).
    fn merge(&mut self, other: ReuseDistance) {
        if other.distances.len() > self.distances.len() {
            self.distances.resize(other.distances.len(), 0);
        }
        for (a, b) in self.distances.iter_mut().zip(&other.distances) {
            *a += b;
        }
        self.cold += other.cold;
    }
}
