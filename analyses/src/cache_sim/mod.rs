//! Set-associative cache simulation, any number of inclusive levels, FIFO or LRU.
//!
//! Contract:
//! - Every `Mem { addr, size, store }` word is one access of `size` bytes; an access that
//!   straddles line boundaries touches every line it covers, and **each line touched counts as
//!   one access** at L1. [`CacheSim::access`] does the same for callers that have no event
//!   words (e.g. a trace-driven simulator).
//! - Levels are searched from L1 outwards; the first level holding the line counts a hit, the
//!   levels before it count a miss, levels after it see nothing. Loads and stores are counted
//!   apart at every level. Stores allocate like loads (write-allocate); dirty lines and
//!   write-back traffic are not modelled.
//! - On a miss the line is filled from the outermost missing level inwards. The hierarchy is
//!   **inclusive**: a line evicted from level `k` is invalidated in every level inside it
//!   (back-invalidation), so each level holds a subset of the next. A line evicted from an inner
//!   level stays in the outer ones.
//! - Replacement per level: [`Policy::Fifo`] evicts the line filled longest ago (hits do not
//!   refresh it), [`Policy::Lru`] the line used longest ago. Empty or back-invalidated ways are
//!   filled before anything is evicted. Without back-invalidations FIFO is the round-robin
//!   replacement of the CAB paper's simulator and of Pin's `dcache`.
//! - Misses are attributed to the method running at the time: the innermost open method of the
//!   `Call`/`Return` words seen so far in this instance (per `Thread` when a ring multiplexes
//!   threads), or [`MethodId::ROOT`] when none is open. Unmatched `Return`s are ignored.
//! - State spans chunks, so results do not depend on how the stream is cut. Each instance models
//!   a private cache; [`CacheSim::merge`] adds the counts of instances with the same geometry.
//!
//! **Counting conventions** ([`Counting`]). The contract above is [`Counting::PerLine`], the
//! default. [`CacheSim::cachegrind`] builds a simulator that counts as Valgrind's Cachegrind
//! does (`cg_sim.c`), so that its figures equal cachegrind's on the same accesses:
//! - one access per `Mem` word whatever lines it covers; it misses if any of its lines misses
//!   (every line is still looked up and filled, in order);
//! - two levels, an L1 (`D1`) and a last level (`LL`), both LRU; an instruction cache (`I1`)
//!   in front of the same LL takes the fetches ([`CacheSim::fetch`]; in a word stream, the
//!   `Mem` word after a [`IFETCH_MARKER`] marker);
//! - the LL is looked up, with all the access's lines, only when the L1 missed, and it is not
//!   inclusive: its evictions leave the L1 alone.
//!
//! What a record *is* (a Lackey `M` is one access, counted as a read; sizes are capped at the
//! line size, so no access covers more than two lines) is the trace reader's part of the
//! convention.
//!
//! The default geometry is the CAB paper's (Ha et al., OOPSLA 2009, §5.2): a 32 KB 4-way L1 and
//! a 512 KB 8-way L2, 64-byte lines, inclusive, FIFO. The design follows the paper's simulator
//! and Pin's `dcache` (Luk et al., PLDI 2005): a flat array of tags, one row of `ways` entries per
//! set, scanned without data-dependent branches (unrolled for 2, 4, 8, 12 and 16 ways), and
//! beside it a flat array of stamps (fill time for FIFO, last use for LRU; 0 for an empty way),
//! so a FIFO hit writes nothing, an LRU hit writes one stamp, and a fill replaces the way with
//! the smallest stamp. A power-of-two set count indexes by mask, others by modulo. Repeated
//! accesses to the line touched last (the common case for sequential code) take a fast path
//! that touches no set.

use std::fmt;

use cabprof_cab::event::{decode, EventKind, MethodId};
use hashbrown::HashMap;

use crate::thread_stacks::ThreadStacks;
use crate::EventAnalysis;

mod level;

use level::{lines, touch_lines, Level, INVALID, MISS};

/// How accesses are counted; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Counting {
    /// Each line an access touches is one access at L1 (a line-crossing access counts twice
    /// and can miss twice); inclusive levels, any number of them, FIFO or LRU.
    #[default]
    PerLine,
    /// Valgrind Cachegrind's convention: one access per access, a miss if any of its lines
    /// misses; I1 and D1 in front of a non-inclusive, shared LL; LRU.
    Cachegrind,
}

/// The payload of the `Marker` word that makes the next `Mem` word an instruction fetch, in a
/// stream for a [`Counting::Cachegrind`] simulator (other simulators ignore markers).
pub const IFETCH_MARKER: u64 = 0x1F_E7C4;

/// The smallest line size cachegrind accepts (its `MIN_LINE_SIZE`).
pub const CACHEGRIND_MIN_LINE: u32 = 16;

/// Replacement policy of one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Evict the line filled longest ago.
    Fifo,
    /// Evict the line used longest ago.
    Lru,
}

/// Geometry and policy of one cache level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LevelConfig {
    /// Capacity in bytes: a positive multiple of `ways * line_bytes`.
    pub size_bytes: u64,
    /// Associativity: at least 1 (1 = direct-mapped; `size_bytes / line_bytes` = fully
    /// associative).
    pub ways: u32,
    /// Line size in bytes: a power of two, at least 2, the same at every level.
    pub line_bytes: u32,
    /// Replacement policy.
    pub policy: Policy,
}

impl LevelConfig {
    /// The CAB paper's L1: 32 KB, 4-way, 64-byte lines, FIFO.
    pub const PAPER_L1: LevelConfig = LevelConfig::new(32 * 1024, 4, 64, Policy::Fifo);
    /// The CAB paper's L2: 512 KB, 8-way, 64-byte lines, FIFO.
    pub const PAPER_L2: LevelConfig = LevelConfig::new(512 * 1024, 8, 64, Policy::Fifo);

    /// A level; checked when a [`CacheSim`] is made from it.
    pub const fn new(size_bytes: u64, ways: u32, line_bytes: u32, policy: Policy) -> LevelConfig {
        LevelConfig {
            size_bytes,
            ways,
            line_bytes,
            policy,
        }
    }

    /// Number of sets (`size_bytes / (ways * line_bytes)`), once the level is valid.
    pub fn sets(&self) -> u64 {
        self.size_bytes / (self.ways as u64 * self.line_bytes as u64).max(1)
    }
}

/// Largest number of lines one level may hold (2^24 lines: 256 MiB of tags and stamps).
pub const MAX_LINES_PER_LEVEL: u64 = 1 << 24;

/// A cache configuration was refused; names the level and field at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfigError {
    /// Index of the offending level (0 = L1); `None` when the level list itself is at fault.
    pub level: Option<usize>,
    /// The field at fault: `"levels"`, `"size_bytes"`, `"ways"` or `"line_bytes"`.
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// What the field must be.
    pub requirement: String,
}

impl fmt::Display for CacheConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.level {
            Some(l) => write!(f, "cache L{} {} = {}: ", l + 1, self.field, self.value)?,
            None => write!(f, "cache {} = {}: ", self.field, self.value)?,
        }
        f.write_str(&self.requirement)
    }
}

impl std::error::Error for CacheConfigError {}

/// Hits and misses of one level, loads and stores apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Loads that found their line here.
    pub load_hits: u64,
    /// Loads that reached this level and missed.
    pub load_misses: u64,
    /// Stores that found their line here.
    pub store_hits: u64,
    /// Stores that reached this level and missed.
    pub store_misses: u64,
}

impl LevelStats {
    /// Accesses that reached this level.
    pub fn accesses(&self) -> u64 {
        self.hits() + self.misses()
    }

    /// Load and store hits.
    pub fn hits(&self) -> u64 {
        self.load_hits + self.store_hits
    }

    /// Load and store misses.
    pub fn misses(&self) -> u64 {
        self.load_misses + self.store_misses
    }

    /// Misses per access that reached this level (local miss rate); 0 with no accesses.
    pub fn miss_rate(&self) -> f64 {
        match self.accesses() {
            0 => 0.0,
            n => self.misses() as f64 / n as f64,
        }
    }
}

/// Misses attributed to one method at one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct MissCounts {
    /// Load misses.
    pub loads: u64,
    /// Store misses.
    pub stores: u64,
}

impl MissCounts {
    /// Load and store misses.
    pub fn total(&self) -> u64 {
        self.loads + self.stores
    }
}

/// A multi-level inclusive cache simulator; see the module docs for the contract.
#[derive(Clone, PartialEq, Eq)]
pub struct CacheSim {
    config: Vec<LevelConfig>,
    /// Level 0, kept inline: every access starts here.
    l1: Level,
    /// Levels 1.. (`config.len() - 1` of them).
    outer: Vec<Level>,
    /// `log2(line_bytes)`.
    line_shift: u32,
    /// The line accessed last, which is therefore in L1, and (for LRU) the most recent there, so
    /// accessing it again changes no replacement order; `INVALID` before the first access.
    last_line: u64,
    /// Per thread: the open methods with their slots, innermost last.
    threads: ThreadStacks<Vec<(MethodId, u32)>>,
    /// Slot of the method misses are attributed to now (top of the current stack, or 0).
    current_slot: u32,
    /// Method → slot; slot 0 is the root and is not in the map.
    slots: HashMap<MethodId, u32>,
    /// Slot → method.
    slot_methods: Vec<MethodId>,
    /// `misses[(slot * levels + level) * 2 + store]`.
    misses: Vec<u64>,
    /// How accesses are counted.
    counting: Counting,
    /// Cachegrind counting: the instruction cache and its geometry.
    i1: Option<(LevelConfig, Level)>,
    /// Instruction fetches: `[I1 hits, I1 misses, LL hits, LL misses]`.
    fetches: [u64; 4],
    /// Cachegrind counting, consuming words: the next `Mem` word is an instruction fetch.
    next_is_fetch: bool,
}

impl CacheSim {
    /// A cold cache with `levels` (L1 first), each checked.
    pub fn new(levels: &[LevelConfig]) -> Result<CacheSim, CacheConfigError> {
        validate(levels)?;
        Ok(CacheSim {
            config: levels.to_vec(),
            l1: Level::new(&levels[0]),
            outer: levels[1..].iter().map(Level::new).collect(),
            line_shift: levels[0].line_bytes.trailing_zeros(),
            last_line: INVALID,
            threads: ThreadStacks::default(),
            current_slot: 0,
            slots: HashMap::new(),
            slot_methods: vec![MethodId::ROOT],
            misses: vec![0; levels.len() * 2],
            counting: Counting::PerLine,
            i1: None,
            fetches: [0; 4],
            next_is_fetch: false,
        })
    }

    /// A simulator counting as Valgrind's Cachegrind does (see the module docs): `i1` and `d1`
    /// in front of `ll`, like `valgrind --tool=cachegrind --I1=… --D1=… --LL=…`. Each level
    /// must be LRU, have a power-of-two number of sets and lines of at least
    /// [`CACHEGRIND_MIN_LINE`] bytes (as cachegrind requires), and one line size.
    pub fn cachegrind(
        i1: LevelConfig,
        d1: LevelConfig,
        ll: LevelConfig,
    ) -> Result<CacheSim, CacheConfigError> {
        // D1 and LL are levels 0 and 1 in errors; I1's errors have no level and say "I1".
        validate(&[d1, ll])?;
        let for_i1 = |mut e: CacheConfigError| {
            e.level = None;
            e.requirement = format!("I1 {}", e.requirement);
            e
        };
        validate(&[i1]).map_err(for_i1)?;
        if i1.line_bytes != d1.line_bytes {
            return Err(for_i1(CacheConfigError {
                level: None,
                field: "line_bytes",
                value: i1.line_bytes.into(),
                requirement: format!("must equal D1's line_bytes ({})", d1.line_bytes),
            }));
        }
        for (i, c) in [d1, ll, i1].iter().enumerate() {
            let err = |field, value, requirement: &str| {
                let e = CacheConfigError {
                    level: Some(i),
                    field,
                    value,
                    requirement: format!("{requirement} under cachegrind counting"),
                };
                if i == 2 {
                    for_i1(e)
                } else {
                    e
                }
            };
            if c.policy != Policy::Lru {
                return Err(err("policy", 0, "must be LRU (cachegrind simulates LRU)"));
            }
            if !c.sets().is_power_of_two() {
                return Err(err(
                    "size_bytes",
                    c.size_bytes,
                    "must give a power-of-two number of sets (size / (ways × line))",
                ));
            }
            if c.line_bytes < CACHEGRIND_MIN_LINE {
                return Err(err(
                    "line_bytes",
                    c.line_bytes.into(),
                    "must be at least 16 (cachegrind's smallest line)",
                ));
            }
        }
        let mut sim = CacheSim::new(&[d1, ll])?;
        sim.counting = Counting::Cachegrind;
        sim.i1 = Some((i1, Level::new(&i1)));
        Ok(sim)
    }

    /// How this simulator counts.
    pub fn counting(&self) -> Counting {
        self.counting
    }

    /// The instruction cache, under cachegrind counting.
    pub fn i1_config(&self) -> Option<&LevelConfig> {
        self.i1.as_ref().map(|(c, _)| c)
    }

    /// Instruction fetches at level `level` (0 = I1, 1 = LL) as loads: hits and misses.
    /// All zero unless counting as cachegrind.
    pub fn fetch_stats(&self, level: usize) -> LevelStats {
        let [l1_hits, l1_misses, ll_hits, ll_misses] = self.fetches;
        let (load_hits, load_misses) = match level {
            0 => (l1_hits, l1_misses),
            _ => (ll_hits, ll_misses),
        };
        LevelStats {
            load_hits,
            load_misses,
            ..LevelStats::default()
        }
    }

    /// One instruction fetch of `size` bytes at `addr`: through I1 and LL under cachegrind
    /// counting; a load otherwise.
    #[inline]
    pub fn fetch(&mut self, addr: u64, size: u32) {
        let Some((_, i1)) = &mut self.i1 else {
            self.access(addr, size, false);
            return;
        };
        let (first, last) = lines(addr, size, self.line_shift);
        if !touch_lines(i1, first, last) {
            self.fetches[0] += 1;
            return;
        }
        self.fetches[1] += 1;
        if touch_lines(&mut self.outer[0], first, last) {
            self.fetches[3] += 1;
        } else {
            self.fetches[2] += 1;
        }
    }

    /// One data access under cachegrind counting.
    #[inline(never)]
    fn access_cachegrind(&mut self, addr: u64, size: u32, store: bool) {
        let s = store as usize;
        let (first, last) = lines(addr, size, self.line_shift);
        if !touch_lines(&mut self.l1, first, last) {
            self.l1.stats[s] += 1;
            return;
        }
        self.count_miss(0, s);
        if touch_lines(&mut self.outer[0], first, last) {
            self.count_miss(1, s);
        } else {
            self.outer[0].stats[s] += 1;
        }
    }

    /// The CAB paper's hierarchy: [`LevelConfig::PAPER_L1`] and [`LevelConfig::PAPER_L2`].
    pub fn paper_default() -> CacheSim {
        CacheSim::new(&[LevelConfig::PAPER_L1, LevelConfig::PAPER_L2])
            .expect("the paper's geometry is valid")
    }

    /// The levels simulated, L1 first.
    pub fn config(&self) -> &[LevelConfig] {
        &self.config
    }

    fn depth(&self) -> usize {
        1 + self.outer.len()
    }

    fn level(&self, k: usize) -> &Level {
        match k {
            0 => &self.l1,
            _ => &self.outer[k - 1],
        }
    }

    /// One access of `size` bytes at `addr` (a store if `store`), touching every line it
    /// covers. `size` 0 counts as 1.
    #[inline(always)]
    pub fn access(&mut self, addr: u64, size: u32, store: bool) {
        if self.counting == Counting::Cachegrind {
            self.access_cachegrind(addr, size, store);
            return;
        }
        let first = addr >> self.line_shift;
        let last = addr.saturating_add(size.max(1) as u64 - 1) >> self.line_shift;
        if first == last {
            self.access_line(first, store);
        } else {
            self.access_lines(first, last, store);
        }
    }

    #[inline(never)]
    fn access_lines(&mut self, first: u64, last: u64, store: bool) {
        for line in first..=last {
            self.access_line(line, store);
        }
    }

    #[inline(always)]
    fn access_line(&mut self, line: u64, store: bool) {
        let s = store as usize;
        if line == self.last_line {
            self.l1.stats[s] += 1;
            return;
        }
        self.last_line = line;
        if self.l1.lookup(line) {
            self.l1.stats[s] += 1;
        } else {
            self.l1_miss(line, s);
        }
    }

    #[inline(never)]
    fn l1_miss(&mut self, line: u64, s: usize) {
        self.count_miss(0, s);
        // Search outwards; `hit_at` is the first level holding the line (depth: memory).
        let mut hit_at = self.depth();
        for k in 1..self.depth() {
            if self.outer[k - 1].lookup(line) {
                self.outer[k - 1].stats[s] += 1;
                hit_at = k;
                break;
            }
            self.count_miss(k, s);
        }
        // Fill inwards; a victim of level k leaves every level inside it.
        for k in (1..hit_at).rev() {
            if let Some(victim) = self.outer[k - 1].fill(line) {
                self.l1.invalidate(victim);
                for inner in &mut self.outer[..k - 1] {
                    inner.invalidate(victim);
                }
            }
        }
        self.l1.fill(line);
        debug_assert!((0..self.depth()).all(|k| self.level(k).contains(line)));
    }

    #[inline]
    fn count_miss(&mut self, level: usize, s: usize) {
        let stats = match level {
            0 => &mut self.l1.stats,
            _ => &mut self.outer[level - 1].stats,
        };
        stats[MISS + s] += 1;
        let i = (self.current_slot as usize * self.depth() + level) * 2 + s;
        self.misses[i] += 1;
    }

    /// Hits and misses of level `level` (0 = L1).
    ///
    /// # Panics
    /// If there is no such level.
    pub fn stats(&self, level: usize) -> LevelStats {
        let [load_hits, store_hits, load_misses, store_misses] = self.level(level).stats;
        LevelStats {
            load_hits,
            load_misses,
            store_hits,
            store_misses,
        }
    }

    /// Misses at `level` attributed to `method` (the root for accesses outside any method).
    ///
    /// # Panics
    /// If there is no such level.
    pub fn method_misses(&self, method: MethodId, level: usize) -> MissCounts {
        assert!(level < self.depth(), "no cache level {level}");
        let slot = if method == MethodId::ROOT {
            Some(0)
        } else {
            self.slots.get(&method).copied()
        };
        slot.map_or(MissCounts::default(), |s| self.slot_misses(s, level))
    }

    fn slot_misses(&self, slot: u32, level: usize) -> MissCounts {
        let i = (slot as usize * self.depth() + level) * 2;
        MissCounts {
            loads: self.misses[i],
            stores: self.misses[i + 1],
        }
    }

    /// The methods with misses at `level`, most misses first (ties by method id).
    ///
    /// # Panics
    /// If there is no such level.
    pub fn misses_by_method(&self, level: usize) -> Vec<(MethodId, MissCounts)> {
        assert!(level < self.depth(), "no cache level {level}");
        let mut out: Vec<(MethodId, MissCounts)> = self
            .slot_methods
            .iter()
            .enumerate()
            .map(|(s, &m)| (m, self.slot_misses(s as u32, level)))
            .filter(|(_, c)| c.total() > 0)
            .collect();
        out.sort_unstable_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(&b.0)));
        out
    }

    /// `true` if the line holding `addr` is in level `level` now (for tests and probes).
    ///
    /// # Panics
    /// If there is no such level.
    pub fn contains(&self, level: usize, addr: u64) -> bool {
        let line = addr >> self.line_shift;
        self.level(level).contains(line)
    }

    fn slot_of(&mut self, method: MethodId) -> u32 {
        if method == MethodId::ROOT {
            return 0;
        }
        let stride = self.depth() * 2;
        let misses = &mut self.misses;
        let slot_methods = &mut self.slot_methods;
        *self.slots.entry(method).or_insert_with(|| {
            let s = u32::try_from(slot_methods.len()).expect("fewer than 2^32 methods");
            slot_methods.push(method);
            misses.resize(misses.len() + stride, 0);
            s
        })
    }

    fn on_call(&mut self, callee: MethodId) {
        let slot = self.slot_of(callee);
        self.threads.current.push((callee, slot));
        self.current_slot = slot;
    }

    fn on_return(&mut self, callee: MethodId) {
        let open = &mut self.threads.current;
        match open.last() {
            Some(&(m, _)) if m == callee => {
                open.pop();
            }
            _ => {
                if let Some(i) = open.iter().rposition(|&(m, _)| m == callee) {
                    open.truncate(i);
                }
            }
        }
        self.current_slot = open.last().map_or(0, |&(_, s)| s);
    }

    fn on_thread(&mut self, id: u64) {
        self.threads.switch_to(id);
        self.current_slot = self.threads.current.last().map_or(0, |&(_, s)| s);
    }
}

impl Default for CacheSim {
    /// [`CacheSim::paper_default`].
    fn default() -> CacheSim {
        CacheSim::paper_default()
    }
}

impl fmt::Debug for CacheSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stats: Vec<LevelStats> = (0..self.depth()).map(|l| self.stats(l)).collect();
        f.debug_struct("CacheSim")
            .field("config", &self.config)
            .field("stats", &stats)
            .field("methods", &(self.slot_methods.len() - 1))
            .finish_non_exhaustive()
    }
}

impl EventAnalysis for CacheSim {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            match decode(w) {
                Some(EventKind::Mem { addr, size, store }) => {
                    if std::mem::take(&mut self.next_is_fetch) {
                        self.fetch(addr, size);
                    } else {
                        self.access(addr, size, store);
                    }
                }
                Some(EventKind::Marker {
                    value: IFETCH_MARKER,
                }) => {
                    self.next_is_fetch = self.counting == Counting::Cachegrind;
                }
                Some(EventKind::Call { callee, .. }) => self.on_call(callee),
                Some(
                    EventKind::Return { callee }
                    | EventKind::TimedReturn { callee, .. }
                    | EventKind::LongReturn { callee, .. },
                ) => self.on_return(callee),
                Some(EventKind::Thread { id }) => self.on_thread(id),
                _ => {}
            }
        }
    }

    /// Adds `other`'s counts (its cache contents are dropped).
    ///
    /// # Panics
    /// If `other` simulates a different hierarchy.
    fn merge(&mut self, other: CacheSim) {
        assert_eq!(
            (self.config.as_slice(), self.counting, self.i1_config()),
            (other.config.as_slice(), other.counting, other.i1_config()),
            "merging cache simulations of different hierarchies"
        );
        for (a, b) in self.fetches.iter_mut().zip(other.fetches) {
            *a += b;
        }
        let mine = std::iter::once(&mut self.l1).chain(&mut self.outer);
        let theirs = std::iter::once(&other.l1).chain(&other.outer);
        for (mine, theirs) in mine.zip(theirs) {
            for (a, b) in mine.stats.iter_mut().zip(theirs.stats) {
                *a += b;
            }
        }
        let stride = self.depth() * 2;
        for (s, &m) in other.slot_methods.iter().enumerate() {
            let mine = self.slot_of(m) as usize * stride;
            let theirs = &other.misses[s * stride..][..stride];
            for (a, b) in self.misses[mine..][..stride].iter_mut().zip(theirs) {
                *a += b;
            }
        }
    }
}

fn validate(levels: &[LevelConfig]) -> Result<(), CacheConfigError> {
    let err = |level, field, value, requirement: String| CacheConfigError {
        level,
        field,
        value,
        requirement,
    };
    let Some(l1) = levels.first() else {
        return Err(err(
            None,
            "levels",
            0,
            "at least one level is needed".into(),
        ));
    };
    for (i, c) in levels.iter().enumerate() {
        let at = Some(i);
        if c.line_bytes < 2 || !c.line_bytes.is_power_of_two() {
            return Err(err(
                at,
                "line_bytes",
                c.line_bytes.into(),
                "must be a power of two, at least 2".into(),
            ));
        }
        if c.line_bytes != l1.line_bytes {
            return Err(err(
                at,
                "line_bytes",
                c.line_bytes.into(),
                format!(
                    "must equal L1's line_bytes ({}): every level of an inclusive hierarchy \
                     uses one line size",
                    l1.line_bytes
                ),
            ));
        }
        if c.ways == 0 {
            return Err(err(at, "ways", 0, "must be at least 1".into()));
        }
        let row = c.ways as u64 * c.line_bytes as u64;
        if c.size_bytes == 0 || c.size_bytes % row != 0 {
            return Err(err(
                at,
                "size_bytes",
                c.size_bytes,
                format!(
                    "must be a positive multiple of ways × line_bytes = {} × {} = {row}",
                    c.ways, c.line_bytes
                ),
            ));
        }
        if c.size_bytes / c.line_bytes as u64 > MAX_LINES_PER_LEVEL {
            return Err(err(
                at,
                "size_bytes",
                c.size_bytes,
                format!("must hold at most {MAX_LINES_PER_LEVEL} lines"),
            ));
        }
    }
    Ok(())
}
