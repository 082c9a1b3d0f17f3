//! One simulated level of [`CacheSim`](super::CacheSim): a flat array of tags, one row of
//! `ways` entries per set, scanned without data-dependent branches, and beside it a flat array
//! of stamps (fill time for FIFO, last use for LRU) that picks the victim.

use super::{LevelConfig, Policy};

/// Tag of an empty way. Line addresses are at most `u64::MAX >> 1` (lines are at least 2
/// bytes), so no line has it.
pub(super) const INVALID: u64 = u64::MAX;

/// Index into [`Level::stats`]: `[load hit, store hit, load miss, store miss]`.
pub(super) const MISS: usize = 2;

/// One simulated level.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Level {
    pub(super) ways: usize,
    pub(super) sets: u64,
    /// `Some(sets - 1)` when `sets` is a power of two.
    pub(super) set_mask: Option<u64>,
    pub(super) lru: bool,
    /// `sets * ways` line addresses; set `s` is the row `tags[s * ways..][..ways]`. A line is in
    /// at most one way of its row; empty ways hold `INVALID`.
    pub(super) tags: Vec<u64>,
    /// Parallel to `tags`: when the way was filled (FIFO) or last used (LRU), by `clock`; 0 for
    /// an empty way. Within a row the stamps of valid ways are distinct and non-zero, so the
    /// way with the smallest stamp is the victim, and empty ways go first.
    pub(super) stamps: Vec<u64>,
    /// Next stamp; starts at 1 and only grows.
    pub(super) clock: u64,
    /// `[load hit, store hit, load miss, store miss]`.
    pub(super) stats: [u64; 4],
}

impl Level {
    pub(super) fn new(c: &LevelConfig) -> Level {
        let sets = c.sets();
        let n = (sets * c.ways as u64) as usize;
        Level {
            ways: c.ways as usize,
            sets,
            set_mask: sets.is_power_of_two().then(|| sets - 1),
            lru: c.policy == Policy::Lru,
            tags: vec![INVALID; n],
            stamps: vec![0; n],
            clock: 1,
            stats: [0; 4],
        }
    }

    /// Index in `tags` of the row of `line`'s set.
    #[inline(always)]
    pub(super) fn base(&self, line: u64) -> usize {
        let set = match self.set_mask {
            Some(mask) => line & mask,
            None => line % self.sets,
        };
        set as usize * self.ways
    }

    /// Index in `tags` of `line`, if present.
    #[inline(always)]
    pub(super) fn find(&self, line: u64) -> Option<usize> {
        let base = self.base(line);
        let row = &self.tags[base..base + self.ways];
        // Branch-free scans for the usual associativities: which way hits is unpredictable in
        // real traces, so an early-exit loop would mispredict on most hits.
        let way = match self.ways {
            2 => find_in::<2>(row, line),
            4 => find_in::<4>(row, line),
            8 => find_in::<8>(row, line),
            12 => find_in::<12>(row, line),
            16 => find_in::<16>(row, line),
            _ => find_any(row, line),
        };
        way.map(|w| base + w)
    }

    /// `true` on a hit (and, for LRU, makes the line the most recent).
    #[inline(always)]
    pub(super) fn lookup(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some(i) => {
                if self.lru {
                    self.stamps[i] = self.clock;
                    self.clock += 1;
                }
                true
            }
            None => false,
        }
    }

    /// Put `line` (not present) in its row, in an empty way if there is one, else in place of
    /// the victim (oldest stamp); returns the evicted line, if any.
    #[inline]
    pub(super) fn fill(&mut self, line: u64) -> Option<u64> {
        debug_assert!(self.find(line).is_none());
        let base = self.base(line);
        let stamps = &self.stamps[base..base + self.ways];
        let way = match self.ways {
            2 => oldest_in::<2>(stamps),
            4 => oldest_in::<4>(stamps),
            8 => oldest_in::<8>(stamps),
            12 => oldest_in::<12>(stamps),
            16 => oldest_in::<16>(stamps),
            _ => oldest(stamps),
        };
        let i = base + way;
        let victim = std::mem::replace(&mut self.tags[i], line);
        self.stamps[i] = self.clock;
        self.clock += 1;
        (victim != INVALID).then_some(victim)
    }

    /// Remove `line` if present.
    #[inline]
    pub(super) fn invalidate(&mut self, line: u64) {
        if let Some(i) = self.find(line) {
            self.tags[i] = INVALID;
            self.stamps[i] = 0;
        }
    }

    pub(super) fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }
}

/// The first and last line numbers an access covers (`size` 0 counts as 1).
#[inline(always)]
pub(super) fn lines(addr: u64, size: u32, shift: u32) -> (u64, u64) {
    let last = addr.saturating_add(size.max(1) as u64 - 1) >> shift;
    (addr >> shift, last)
}

/// Look up lines `first..=last` of `level` in order, filling each one missing; `true` if any
/// missed (no back-invalidation: cachegrind's levels are not inclusive).
#[inline]
pub(super) fn touch_lines(level: &mut Level, first: u64, last: u64) -> bool {
    let mut missed = false;
    for line in first..=last {
        if !level.lookup(line) {
            level.fill(line);
            missed = true;
        }
    }
    missed
}

/// The way with the smallest stamp (the first of them on ties).
#[inline(always)]
fn oldest(stamps: &[u64]) -> usize {
    let mut way = 0;
    let mut min = stamps[0];
    for (w, &s) in stamps.iter().enumerate().skip(1) {
        // Select, not branch: which way is oldest is as unpredictable as which way hits.
        let older = s < min;
        min = if older { s } else { min };
        way = if older { w } else { way };
    }
    way
}

/// [`oldest`] for rows of length `N`, unrolled.
#[inline(always)]
fn oldest_in<const N: usize>(stamps: &[u64]) -> usize {
    let stamps: &[u64; N] = stamps.try_into().expect("a row has `ways` entries");
    oldest(stamps)
}

/// The way of `row` (of length `N`) holding `line`, unrolled, without branching on each way.
#[inline(always)]
fn find_in<const N: usize>(row: &[u64], line: u64) -> Option<usize> {
    let row: &[u64; N] = row.try_into().expect("a row has `ways` entries");
    let mut hits = 0u32;
    for (w, &t) in row.iter().enumerate() {
        hits |= ((t == line) as u32) << w;
    }
    (hits != 0).then(|| hits.trailing_zeros() as usize)
}

/// The way of `row` holding `line`, for any associativity: no early exit, so the loop's trip
/// count is the same on every call and only the final hit/miss test branches.
#[inline]
fn find_any(row: &[u64], line: u64) -> Option<usize> {
    let mut found = usize::MAX;
    for (w, &t) in row.iter().enumerate() {
        found = if t == line { w } else { found };
    }
    (found != usize::MAX).then_some(found)
}
