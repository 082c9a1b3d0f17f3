//! The X-Ray probe: an L1 data cache's capacity, associativity and line size, measured on any
//! [`ProbeTarget`].
//!
//! K. Yotov, K. Pingali, P. Stodghill, "X-Ray: A Tool for Automatic Measurement of Hardware
//! Parameters", QEST 2005. Section and figure numbers below are those of the same authors'
//! "Automatic Measurement of Hardware Parameters for Embedded Processors" (2005, §4), which
//! presents the same cache algorithms. Write `A` for the associativity, `B` the line size,
//! `C` the capacity and `T = C / A` the cache *stride* (one way; a power of two even when `C`
//! and `A` are not). A sequence `⟨m0, S, N⟩` is `N` addresses
//! `S` bytes apart; it is *compact* if repeatedly walking it hits every time. Theorem 1: it is
//! compact iff `N ≤ A·⌈T/S⌉`. So the longest compact sequence shrinks as `S` doubles until
//! `S = T`, then stays `A` (Figure 5):
//!
//! 1. `S = 8`: double `N` until `⟨0, S, N⟩` is not compact.
//! 2. Double `S`; binary-search the smallest non-compact `N` below the last one. When it stops
//!    changing (at `S = 2T`), `A = N − 1` and `C = (S / 2)·A`.
//! 3. Line size (Figure 7): `⟨0, T, A⟩ ∪ ⟨C + δ, T, A⟩` puts `2A` lines in one set while
//!    `δ < B` and two sets of `A` once `δ ≥ B`; double `δ` from 8 until it is compact. (We use
//!    halves of `A − 1` lines where that still overflows one set; see `line_size`.)
//!
//! *Compact* is decided as in §4.3: the average latency of a walk is within
//! [`ProbeOptions::tolerance`] of the hit latency of the one-element walk `⟨0, 1, 1⟩`. Walks
//! visit the sequence in a coprime-step order, after element `i` element `(i + p) mod N` (§4.4),
//! so constant-stride prefetchers see no constant stride. Deviations from the paper: strides
//! and `δ` start at 8 bytes (one pointer slot, as the real walk stores pointers) rather than 1,
//! which changes nothing for lines of 8 bytes or more; `p` is chosen so that both `p` and
//! `p⁻¹ mod N` are far from 0, so that neither consecutive visits nor visits to the elements
//! of one line are close (otherwise a small-stride walk hits in its own lines and looks
//! compact); and a *not compact* reading is confirmed by re-measuring, since noise on a shared
//! machine only ever makes a walk slower.

use std::collections::HashMap;

use super::{CacheGeometry, HostMemory, HwError};

/// Smallest stride and `δ` the probe uses, and the alignment of every probed address: one
/// pointer-sized slot of the walk (8 bytes on 64-bit targets; two slots on 32-bit ones).
pub const PROBE_WORD_BYTES: usize = 8;

/// Probed addresses are offsets from a base aligned to this. 64 KiB covers the cache stride
/// `T = C / A` of any L1 (4 KiB on every x86-64 L1d: 32 KiB/8, 48 KiB/12), so offset 0 starts
/// a set and a page.
pub const PROBE_BASE_ALIGN: usize = 64 << 10;

/// Memory whose access latency an X-Ray probe can time.
///
/// `chase(addresses, rounds)` walks `addresses` in the order given, cyclically: one untimed
/// warm-up round, then at least `rounds` timed rounds (a target may run more to reach timer
/// resolution). It returns the average latency of one access in the timed rounds, in any unit
/// that is the same for every call on one target (nanoseconds, cycles, model units).
///
/// Addresses are byte offsets from a base aligned to [`PROBE_BASE_ALIGN`]; the probe passes
/// only distinct multiples of [`PROBE_WORD_BYTES`], at least one. Each call starts from
/// whatever state the last left; the warm-up round is what makes that irrelevant.
pub trait ProbeTarget {
    /// Walk `addresses` and return the mean latency per access; see the trait docs.
    fn chase(&mut self, addresses: &[usize], rounds: usize) -> f64;
}

/// Knobs of [`probe_l1d_with`]; [`Default`] suits both real memory and
/// [`SimulatedCache`](super::SimulatedCache).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeOptions {
    /// A walk is compact if its latency is at most `(1 + tolerance) ×` the hit latency.
    /// Default 0.5: an L1 hit costs 4–5 cycles and an L2 hit 12–16 on x86-64 cores of the
    /// last decade, so a walk whose every access misses L1 is ≥ 2.4× slower (3.1× measured on
    /// this project's Sapphire Rapids host); 1.5× sits between timer noise (a few %) and the
    /// smallest full-miss jump.
    pub tolerance: f64,
    /// Timed rounds per walk (targets may run more).
    pub rounds: usize,
    /// Measurements before a walk is declared *not* compact (one compact reading suffices:
    /// interference only adds time).
    pub confirmations: usize,
    /// Give up if a compact sequence grows beyond this many elements (step 1).
    pub max_elements: usize,
    /// Give up if the stride grows beyond this many bytes (step 2).
    pub max_stride: usize,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            tolerance: 0.5,
            rounds: 4,
            confirmations: 3,
            // 2^17 slots of 8 bytes: 1 MiB, beyond every L1 and many L2s.
            max_elements: 1 << 17,
            // T = C / A is 4 KiB on today's L1s; 1 MiB allows any L1 and most L2s.
            max_stride: 1 << 20,
        }
    }
}

/// Measure an L1 data cache's capacity, associativity and line size with X-Ray's algorithms
/// (see the module docs) and default [`ProbeOptions`].
pub fn probe_l1d<T: ProbeTarget>(target: &mut T) -> Result<CacheGeometry, HwError> {
    probe_l1d_with(target, &ProbeOptions::default())
}

/// [`probe_l1d`] with explicit options.
pub fn probe_l1d_with<T: ProbeTarget>(
    target: &mut T,
    options: &ProbeOptions,
) -> Result<CacheGeometry, HwError> {
    XRay::new(target, *options).l1d()
}

/// [`probe_l1d`] on this machine's memory ([`HostMemory::new`]).
pub fn probe_host_l1d() -> Result<CacheGeometry, HwError> {
    probe_l1d(&mut HostMemory::new())
}

/// X-Ray's control engine: the walks it asks for, and the hit latency they are judged by.
struct XRay<'t, T: ProbeTarget> {
    target: &'t mut T,
    options: ProbeOptions,
    /// Latency of `⟨0, 1, 1⟩`, the one-element walk that always hits (§4.3.1).
    hit_latency: f64,
    /// Visiting step `p` per sequence length, computed once each.
    steps: HashMap<usize, usize>,
}

impl<'t, T: ProbeTarget> XRay<'t, T> {
    fn new(target: &'t mut T, options: ProbeOptions) -> Self {
        XRay {
            target,
            options,
            hit_latency: f64::NAN,
            steps: HashMap::new(),
        }
    }

    fn l1d(mut self) -> Result<CacheGeometry, HwError> {
        // §4.3.1: hit latency. Every verdict is judged against it, so it gets three times the
        // readings of any walk, and the fastest counts.
        self.hit_latency = (0..3 * self.options.confirmations.max(1))
            .map(|_| self.target.chase(&[0], self.options.rounds))
            .fold(f64::INFINITY, f64::min);
        if !(self.hit_latency.is_finite() && self.hit_latency > 0.0) {
            return Err(HwError::ProbeFailed {
                step: "measuring the hit latency",
                detail: format!("one-element walk took {}", self.hit_latency),
            });
        }
        let (ways, size_bytes) = self.capacity_and_associativity()?;
        let line_bytes = self.line_size(ways, size_bytes)?;
        Ok(CacheGeometry::l1d(size_bytes, ways, line_bytes))
    }

    /// Figure 5. Returns `(A, C)`.
    ///
    /// The paper's pseudo-code assigns `Nold ← N` at the top of the loop, when `N` is still
    /// the 0 it was reset to, so its first search would be over `[1, 0]`; its prose (search
    /// below the first non-compact length, then below each result) is what is implemented.
    fn capacity_and_associativity(&mut self) -> Result<(usize, usize), HwError> {
        let mut stride = PROBE_WORD_BYTES;
        let mut n = 1;
        while self.is_compact(&sequence(stride, n)) {
            n *= 2;
            if n > self.options.max_elements {
                return Err(HwError::ProbeFailed {
                    step: "growing a compact sequence (Figure 5, first loop)",
                    detail: format!(
                        "{} elements {stride} B apart still hit; no capacity found",
                        self.options.max_elements
                    ),
                });
            }
        }
        // Invariant: `bound` elements `stride / 2` apart are not compact, and neither are
        // they `stride` apart (a larger stride only concentrates them into fewer sets).
        let mut bound = n;
        loop {
            stride *= 2;
            if stride > self.options.max_stride {
                return Err(HwError::ProbeFailed {
                    step: "doubling the stride (Figure 5, second loop)",
                    detail: format!(
                        "the shortest non-compact sequence was still shrinking ({bound} \
                         elements) at stride {} B",
                        self.options.max_stride
                    ),
                });
            }
            let smallest = self.smallest_non_compact(stride, bound);
            if smallest == bound {
                break;
            }
            bound = smallest;
        }
        // Now `stride = 2T` and `bound = A + 1`: one more line than a set holds.
        let ways = bound - 1;
        if ways == 0 {
            return Err(HwError::ProbeFailed {
                step: "deriving the associativity (Figure 5)",
                detail: format!("a single element at stride {stride} B never hit"),
            });
        }
        Ok((ways, stride / 2 * ways))
    }

    /// Binary search for the smallest `N` in `1..=bound` with `⟨0, stride, N⟩` not compact,
    /// given that `bound` is not compact (so the answer is `bound` if nothing smaller is).
    fn smallest_non_compact(&mut self, stride: usize, bound: usize) -> usize {
        // Invariant: `lo` elements are compact (0 trivially), `hi` are not.
        let (mut lo, mut hi) = (0, bound);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.is_compact(&sequence(stride, mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// Figure 7: the smallest `δ` that moves `⟨C + δ, T, h⟩` out of `⟨0, T, h⟩`'s set.
    ///
    /// The paper uses halves of `h = A` lines. We use `h = max(A − 1, ⌊A/2⌋ + 1)`: still
    /// `2h > A`, so the halves overflow a shared set, but (for `A ≥ 3`) a way to spare once
    /// they are in separate sets, so that a line a co-running hyperthread keeps in the set
    /// does not hide the compact case.
    fn line_size(&mut self, ways: usize, size_bytes: usize) -> Result<usize, HwError> {
        let way_bytes = size_bytes / ways;
        let half = (ways - 1).max(ways / 2 + 1);
        debug_assert!(2 * half > ways && half <= ways);
        let mut delta = PROBE_WORD_BYTES;
        while delta < way_bytes {
            let mut seq = sequence(way_bytes, half);
            seq.extend(
                sequence(way_bytes, half)
                    .iter()
                    .map(|a| a + size_bytes + delta),
            );
            if self.is_compact(&seq) {
                return Ok(delta);
            }
            delta *= 2;
        }
        Err(HwError::ProbeFailed {
            step: "measuring the line size (Figure 7)",
            detail: format!(
                "2 × {half} lines one way ({way_bytes} B) apart never became compact for \
                 offsets up to {way_bytes} B"
            ),
        })
    }

    /// §4.3/§4.4: walk `seq` in coprime-step order and compare with the hit latency.
    fn is_compact(&mut self, seq: &[usize]) -> bool {
        let n = seq.len();
        let step = *self.steps.entry(n).or_insert_with(|| visiting_step(n));
        let ordered: Vec<usize> = (0..n).map(|k| seq[k * step % n]).collect();
        let limit = self.hit_latency * (1.0 + self.options.tolerance);
        (0..self.options.confirmations.max(1))
            .any(|_| self.target.chase(&ordered, self.options.rounds) <= limit)
    }
}

/// `⟨0, stride, n⟩`.
fn sequence(stride: usize, n: usize) -> Vec<usize> {
    (0..n).map(|i| i * stride).collect()
}

/// X-Ray's visiting step `p` for `n` elements (§4.4): coprime with `n`, so `i ← (i + p) mod n`
/// visits all, with both `p` and its inverse far from `0 mod n`. Element `i + j` is visited
/// `j·p⁻¹ mod n` steps after element `i`; if that were small for small `j`, the elements of
/// one line would be visited close together and hit each other's line, and a walk far larger
/// than the cache could look compact. Candidates lie near `n/φ` and `n/φ²`, where multiples
/// spread best (the three-distance theorem); the one whose first 8 multiples of `p` and `p⁻¹`
/// stay farthest from 0 wins.
///
/// Measured on this project's Sapphire Rapids host: 12 lines one page apart, walked in page
/// order (`p = 1`), miss L1 twice as often as in a 12-way LRU set should, while `p = 5` hits;
/// a prefetcher following the page stride evidently brings a 13th line into the set.
fn visiting_step(n: usize) -> usize {
    if n <= 2 {
        return 1;
    }
    let distance = |x: usize| {
        let r = x % n;
        r.min(n - r)
    };
    let spread = |p: usize| {
        let inverse = mod_inverse(p, n)?;
        Some(
            (1..=8usize.min(n - 1))
                .map(|j| distance(j * p).min(distance(j * inverse)))
                .min()
                .unwrap_or(0),
        )
    };
    const WINDOW: usize = 48;
    let centres = [n * 618 / 1000, n * 382 / 1000];
    // Ties (common for small n, where some j·p is always 1 from 0) go to the p farthest from
    // 0 and n: a step of ±1 element is a constant stride the next-page prefetcher follows.
    let mut best = (0, 0, 1);
    for centre in centres {
        for p in centre.saturating_sub(WINDOW).max(1)..(centre + WINDOW).min(n) {
            if let Some(score) = spread(p) {
                let key = (score, distance(p), p);
                if (key.0, key.1) > (best.0, best.1) {
                    best = key;
                }
            }
        }
    }
    best.2
}

/// `p⁻¹ mod n`, if `gcd(p, n) = 1`.
fn mod_inverse(p: usize, n: usize) -> Option<usize> {
    let (mut r0, mut r1) = (n as i128, p as i128);
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (t0, t1) = (t1, t0 - q * t1);
    }
    (r0 == 1).then(|| t0.rem_euclid(n as i128) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visiting_step_is_coprime_and_spread() {
        for n in 1..600 {
            let p = visiting_step(n);
            let mut seen = vec![false; n];
            for k in 0..n {
                seen[k * p % n] = true;
            }
            assert!(
                seen.iter().all(|&s| s),
                "p = {p} does not cycle through {n}"
            );
        }
        // For large n, the first eight multiples of p and p⁻¹ keep well apart.
        for n in [1000, 4097, 8192, 12288, 65536] {
            let p = visiting_step(n);
            let q = mod_inverse(p, n).unwrap();
            for j in 1..=8 {
                for x in [j * p % n, j * q % n] {
                    assert!(x.min(n - x) >= n / 40, "n={n} p={p} q={q} j={j}");
                }
            }
        }
    }
}
