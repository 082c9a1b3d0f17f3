//! Sampling's handoff area: the producer copies the sampled bursts of each chunk it finishes
//! into one of a few blocks, and the analyzer reads only those, never the ring.
//!
//! # Why not read the ring in place
//!
//! The paper's sampling consumer (Figure 5b) reads bursts of each chunk where the producer
//! wrote them. The lines it read stay in its cache, shared, until the producer comes round a
//! lap later and stores to them: each such store waits for the analyzer's copy to be
//! invalidated, which made sampling dearer per call than an exhaustive ring; with the handoff
//! it is not (figures: docs/PERFORMANCE.md, "Sampling"). The producer's fast path is still
//! the paper's Figure 5a (`if slot == MAGIC { slow }; store; add`); only where the analyzer
//! finds the sample moved.
//!
//! # Protocol
//!
//! - At each chunk start it enters (every one is armed with `MAGIC`, so this is the slow
//!   path, once a chunk) and on every flush, the producer samples the words it wrote since
//!   the last such point (at most a chunk, still in its own cache): `rate` of them in bursts
//!   spread over the range from a phase drawn anew for every block ([`plan`]).
//! - It writes them, after a head (word count, the position they run to), into block
//!   `seq % blocks` of the handoff, as a seqlock: `begun = seq + 1`, a store fence, the
//!   words (streaming stores on x86-64: they go to memory without reading the line first
//!   and leave no copy in the producer's cache), a store fence, `done = seq + 1` (Release).
//! - The analyzer takes block `next` once `done > next` (Acquire), copies it out, then
//!   (Acquire fence) reads `begun`: if the producer has begun block `next + blocks`, which
//!   shares the slot, the copy may be torn and is dropped, counted as lapped; otherwise it is
//!   delivered, burst by burst. A consumer more than `blocks` behind skips to the oldest block
//!   still whole and counts the ones skipped as lapped. It then evicts the lines it read
//!   (`clflush`), so the producer's next streaming stores there find no copy to invalidate.
//! - The handoff has as many blocks as the ring has chunks, so an analyzer may fall as far
//!   behind as with the paper's consumer before it loses a sample; each block holds what the
//!   configured rate takes of a chunk and its head, rounded up to cache lines
//!   ([`block_slots`]).
//! - The only lines both threads touch are the seqlock's (one line, two stores a block) and
//!   the end-of-lap position the producer stores at each wrap: a block's own lines are written
//!   by streaming stores, which take no line from the analyzer.
//!
//! The loom models in `tests/loom.rs` (`cab_sampling_*`) check that no torn block is ever
//! delivered and that every block lost is counted.

use super::LINE_SLOTS;
use crate::sync::{fence, AtomicU64, Ordering};

/// Words a block starts with: the count of sampled words in it (low 32 bits) and the length
/// of its first slice (high 32 bits), then the absolute ring positions its range starts and
/// ends at.
pub(crate) const HEAD: usize = 3;

/// Words a handoff block holds for a chunk of `chunk` words sampled at `rate` in bursts of
/// `burst`: its head and the most [`plan`] takes from a chunk, rounded up to whole cache
/// lines (0 when the plan takes nothing, as at rate 0: no handoff at all).
pub(crate) fn block_slots(chunk: usize, rate: f64, burst: usize) -> usize {
    match plan(chunk, rate, burst, 0).words() {
        0 => 0,
        words => (HEAD + words).div_ceil(LINE_SLOTS) * LINE_SLOTS,
    }
}

/// Words of the allocation of `blocks` blocks of `block` words: the blocks and room to
/// start them on a cache line; `None` if that overflows.
pub(crate) fn area_words(block: usize, blocks: usize) -> Option<usize> {
    blocks.checked_mul(block)?.checked_add(LINE_SLOTS - 1)
}

/// Which words of a sampled range of `len` words go to the block, as slices in the range's
/// order ([`Plan::slices`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    len: usize,
    bursts: usize,
    burst: usize,
    /// Where burst 0 starts; the others follow `len / bursts` apart, round the range.
    phase: usize,
}

/// Take `rate` of `len` words in `burst`-word bursts spread evenly round the range, seen as a
/// circle, from a phase drawn from `turn` (the ring's seed plus the block's sequence number):
/// every word is then in the sample with the same probability, `bursts * burst / len` (a
/// burst that runs past the range's end goes on at its start). So no place in a chunk is
/// favoured: not a thread's first events (the start of its first chunk), nor the same point
/// of a periodic program's period. When every burst fits, the range is taken whole.
pub(crate) fn plan(len: usize, rate: f64, burst: usize, turn: u64) -> Plan {
    let want = (rate * len as f64).round() as usize;
    let most = len.div_ceil(burst);
    let bursts = want.div_ceil(burst).min(most);
    let phase = if bursts == most || len == 0 {
        0
    } else {
        (mix(turn) % len as u64) as usize
    };
    Plan {
        len,
        bursts,
        burst,
        phase,
    }
}

impl Plan {
    /// Whether every burst fits, so the range is taken whole.
    fn whole(&self) -> bool {
        self.bursts == self.len.div_ceil(self.burst)
    }

    /// Words the plan takes.
    pub(crate) fn words(&self) -> usize {
        if self.whole() {
            self.len
        } else {
            self.bursts * self.burst
        }
    }

    /// The length of the first slice [`slices`](Self::slices) gives; every other but the last
    /// is `burst` long, and the last is what remains.
    pub(crate) fn first(&self) -> usize {
        self.slices().next().map_or(0, |(_, n)| n)
    }

    /// The slices taken, as (offset in the range, length), in the range's order, never
    /// overlapping. Taken whole, the range comes in `burst`-word slices. Spread, burst `b`
    /// starts at `phase + b * len / bursts` round the range (these are at least `burst`
    /// apart, since fewer bursts than fit are taken); the bursts that start past the end
    /// come first, and one that runs past the end is split in two, its tail first.
    pub(crate) fn slices(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let whole = self.whole();
        let (len, burst, bursts, phase) = (self.len, self.burst, self.bursts, self.phase);
        let start = move |b: usize| phase + b * len / bursts.max(1);
        // Bursts 0..k start inside the range, k..bursts past its end (round to its start).
        let k = if whole {
            bursts
        } else {
            (0..bursts).take_while(|&b| start(b) < len).count()
        };
        let split = !whole && k > 0 && start(k - 1) + burst > len;
        let tail = split.then(|| (0, start(k - 1) + burst - len));
        let wrapped = (k..bursts).map(move |b| (start(b) - len, burst));
        let inside = (0..k).map(move |b| {
            if whole {
                (b * burst, burst.min(len - b * burst))
            } else {
                let s = start(b);
                (s, burst.min(len - s))
            }
        });
        tail.into_iter().chain(wrapped).chain(inside)
    }
}

/// SplitMix64's finalizer: consecutive turns give unrelated phases.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A seed for a ring's phases, different from ring to ring and run to run (fixed under loom,
/// whose models must replay the same steps).
pub(crate) fn seed() -> u64 {
    #[cfg(not(loom))]
    {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0u8)
    }
    #[cfg(loom)]
    0
}

/// The handoff: its blocks and the seqlock over them.
pub(crate) struct Handoff {
    /// The blocks, from index `at` (the first cache-line boundary; the global allocator
    /// aligns to 8 bytes only, so there is room for the padding), so that a block never
    /// shares a line with other memory.
    words: Box<[AtomicU64]>,
    at: usize,
    /// Words per block (a multiple of a cache line).
    pub(crate) block: usize,
    /// Blocks (the ring's chunks).
    pub(crate) blocks: usize,
    /// Words per burst.
    pub(crate) burst: usize,
    /// Added to the block's sequence number to draw its phase ([`plan`]).
    pub(crate) seed: u64,
    /// The rate the producer samples at, as `f64` bits: set by the consumer (adaptive
    /// sampling), read by the producer once a block. At most the configured rate, which sized
    /// the blocks.
    pub(crate) rate: AtomicU64,
    /// The seqlock, on one cache line: the producer's two stores a block move it once.
    pub(crate) seq: crossbeam_utils::CachePadded<Seq>,
}

/// Blocks the producer has begun writing, and finished.
pub(crate) struct Seq {
    pub(crate) begun: AtomicU64,
    pub(crate) done: AtomicU64,
}

impl Handoff {
    /// `blocks` blocks of `block` words (a multiple of a line), or `None` if the memory
    /// cannot be had.
    pub(crate) fn new(block: usize, blocks: usize, burst: usize, rate: f64) -> Option<Self> {
        let words = zeroed_words(area_words(block, blocks)?)?;
        let misaligned = (words.as_ptr() as usize / std::mem::size_of::<u64>()) % LINE_SLOTS;
        Some(Handoff {
            words,
            at: (LINE_SLOTS - misaligned) % LINE_SLOTS,
            block,
            blocks,
            burst,
            seed: seed(),
            rate: AtomicU64::new(rate.to_bits()),
            seq: crossbeam_utils::CachePadded::new(Seq {
                begun: AtomicU64::new(0),
                done: AtomicU64::new(0),
            }),
        })
    }

    /// The words of block `seq`'s slot (block `seq % blocks`).
    #[inline]
    pub(crate) fn block(&self, seq: u64) -> &[AtomicU64] {
        let from = self.at + (seq % self.blocks as u64) as usize * self.block;
        &self.words[from..from + self.block]
    }
}

/// `n` words, all 0, or `None` if the memory cannot be had. Zeroed by the allocator
/// (`calloc`: a large area comes as fresh pages, zero until written), so a handoff costs
/// nothing until the producer fills its blocks.
#[cfg(not(loom))]
fn zeroed_words(n: usize) -> Option<Box<[AtomicU64]>> {
    if n == 0 {
        return Some(Box::default());
    }
    let layout = std::alloc::Layout::array::<AtomicU64>(n).ok()?;
    // SAFETY: the layout's size is not zero (n > 0).
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicU64>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of the global allocator with the layout of `n`
    // `AtomicU64`s, all bytes 0, which is a valid `AtomicU64` (0); the box frees it with the
    // same layout.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) })
}

#[cfg(loom)]
fn zeroed_words(n: usize) -> Option<Box<[AtomicU64]>> {
    Some((0..n).map(|_| AtomicU64::new(0)).collect())
}

/// Store `word` to `slot` so that it goes to memory without the line being read into this
/// core's cache first (x86-64 `movnti`). It is an aligned 8-byte store, single-copy atomic
/// like a relaxed atomic store, but not ordered with other stores: [`store_fence`] orders it.
/// Elsewhere, and under loom, a relaxed store.
#[inline(always)]
pub(crate) fn stream_store(slot: &AtomicU64, word: u64) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: `slot` is a live, 8-byte aligned `AtomicU64`; `movnti` writes exactly those 8
    // bytes, at once, as an atomic store would, and touches nothing else.
    unsafe {
        std::arch::asm!(
            "movnti [{p}], {w}",
            p = in(reg) slot.as_ptr(),
            w = in(reg) word,
            options(nostack, preserves_flags)
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    slot.store(word, Ordering::Relaxed);
}

/// Order every store before it, streaming ones included, before every store after it
/// (`sfence` on x86-64, whose plain stores are ordered already but streaming ones are not),
/// and tell the compiler so (a Release fence).
#[inline(always)]
pub(crate) fn store_fence() {
    fence(Ordering::Release);
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: `sfence` only orders this core's stores; it reads and writes no memory.
    unsafe {
        std::arch::asm!("sfence", options(nostack, preserves_flags));
    }
}

/// Evict the cache line holding `at` from every cache (x86-64 `clflush`), writing it back if
/// dirty: a hint about placement that changes no memory. Elsewhere, and under loom, nothing.
#[inline(always)]
pub(crate) fn evict_line(at: *const AtomicU64) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: `at` points into a live allocation (a handoff block); `clflush` changes no
    // memory contents and cannot fault on a mapped address.
    unsafe {
        std::arch::asm!(
            "clflush [{}]",
            in(reg) at,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = at;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The plan never takes a word twice or runs past the range, takes `round(rate * len)`
    /// words rounded up to whole bursts (at most the range), in slices of one burst but the
    /// first and last, and a block holds what any shorter range or lower rate takes.
    #[test]
    fn plans_take_the_rate_without_overlap() {
        for &(len, rate, burst) in &[
            (2048, 0.1, 8),
            (2048, 1.0, 8),
            (10, 1.0, 8),
            (64, 1.0, 48),
            (1000, 0.25, 8),
            (7, 0.5, 3),
            (2048, 0.0, 8),
            (1, 0.01, 8),
            (1024, 0.05, 8),
        ] {
            for turn in 0..50 {
                let p = plan(len, rate, burst, turn);
                let mut seen = vec![false; len];
                let slices: Vec<_> = p.slices().collect();
                for (i, &(from, n)) in slices.iter().enumerate() {
                    assert!(n > 0 && from + n <= len, "{len} {rate} {burst}: {slices:?}");
                    if i > 0 && i + 1 < slices.len() {
                        assert_eq!(n, burst, "{slices:?}");
                    }
                    for s in &mut seen[from..from + n] {
                        assert!(!*s, "{len} {rate} {burst} turn {turn}: overlap {slices:?}");
                        *s = true;
                    }
                }
                assert!(
                    slices.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0),
                    "{slices:?}"
                );
                let took: usize = slices.iter().map(|s| s.1).sum();
                assert_eq!(took, p.words());
                assert_eq!(p.first(), slices.first().map_or(0, |s| s.1));
                let want = (rate * len as f64).round() as usize;
                assert!(took >= want.min(len), "{len} {rate}: took {took} of {want}");
                assert!(took <= (want.div_ceil(burst) * burst).min(len));
                let block = block_slots(len, rate, burst);
                assert!(took == 0 || HEAD + took <= block);
                assert_eq!(block % LINE_SLOTS, 0);
                for shorter in [0, len / 3, len.saturating_sub(1), len] {
                    for lower in [rate, rate / 2.0, rate / 7.0, 0.0] {
                        let w = plan(shorter, lower, burst, turn).words();
                        assert!(w == 0 || HEAD + w <= block, "{shorter} at {lower}");
                    }
                }
            }
        }
        assert_eq!(block_slots(2048, 0.0, 8), 0);
        assert_eq!(block_slots(2048, 0.1, 8), 216);
    }

    /// Over every phase, each word of the range is taken equally often: the sample favours no
    /// place in a chunk (its first words included).
    #[test]
    fn every_word_is_taken_equally_often() {
        for &(len, rate, burst) in &[(1024, 0.05, 8), (2048, 0.1, 8), (1000, 0.3, 7), (9, 0.4, 2)] {
            let mut taken = vec![0u32; len];
            let mut bursts_times_burst = 0;
            for phase in 0..len {
                let mut p = plan(len, rate, burst, 0);
                p.phase = phase;
                bursts_times_burst = p.words();
                for (from, n) in p.slices() {
                    for t in &mut taken[from..from + n] {
                        *t += 1;
                    }
                }
            }
            assert!(
                taken.iter().all(|&t| t as usize == bursts_times_burst),
                "{len} {rate} {burst}: {:?}",
                &taken[..16.min(len)]
            );
        }
    }

    /// Handoffs: each block on its own cache lines; a size the allocator refuses is `None`,
    /// not an abort.
    #[test]
    fn handoff_blocks_are_line_aligned_and_refusal_is_none() {
        for blocks in 1..20 {
            let h = Handoff::new(16, blocks, 8, 0.5).unwrap();
            for seq in 0..2 * blocks as u64 {
                let b = h.block(seq);
                assert_eq!(b.len(), 16);
                assert_eq!(
                    b.as_ptr() as usize % (LINE_SLOTS * 8),
                    0,
                    "a block off a line"
                );
            }
        }
        assert!(Handoff::new(1 << 40, 1 << 30, 8, 1.0).is_none(), "overflow");
        assert!(
            Handoff::new(1 << 20, 1 << 25, 8, 1.0).is_none(),
            "256 TiB, refused"
        );
    }
}
