//! What the X-Ray probe runs on: [`SimulatedCache`], a deterministic LRU model on which the
//! probe must recover the geometry exactly, and [`HostMemory`], this machine's memory timed
//! with a pointer chase.

use std::time::Instant;

use super::{CacheGeometry, HwError, ProbeTarget, PROBE_BASE_ALIGN, PROBE_WORD_BYTES};

/// A deterministic set-associative cache with true LRU replacement, for testing the probe.
///
/// Each [`chase`](ProbeTarget::chase) starts cold, walks one warm-up round, then returns
/// `(hits × hit_latency + misses × miss_latency) / accesses` over the timed rounds. With LRU
/// the state after one round repeats every round, so the answer is exact.
#[derive(Clone, Debug)]
pub struct SimulatedCache {
    geometry: CacheGeometry,
    /// Invariant: `geometry.sets() > 0` and `sets() × ways × line == size`.
    sets: usize,
    hit_latency: f64,
    miss_latency: f64,
    /// Per set, the line numbers held, most recently used first; at most `ways` long.
    lines: Vec<Vec<usize>>,
}

impl SimulatedCache {
    /// A cold cache of `geometry` with latencies of 4 (hit) and 14 (miss): an x86-64 L1 hit
    /// and L2 hit in cycles, so the probe sees the contrast it sees on real hardware.
    ///
    /// Errors if a line, the ways or the sets would be empty, or the capacity is not a whole
    /// number of sets.
    pub fn new(geometry: CacheGeometry) -> Result<SimulatedCache, HwError> {
        let invalid = |reason| HwError::InvalidGeometry { geometry, reason };
        if geometry.line_bytes == 0 || geometry.ways == 0 {
            return Err(invalid("line_bytes and ways must be non-zero"));
        }
        let sets = geometry.sets();
        if sets == 0 || sets * geometry.ways * geometry.line_bytes != geometry.size_bytes {
            return Err(invalid(
                "size_bytes must be a non-zero multiple of ways × line_bytes",
            ));
        }
        Ok(SimulatedCache {
            geometry,
            sets,
            hit_latency: 4.0,
            miss_latency: 14.0,
            lines: vec![Vec::with_capacity(geometry.ways); sets],
        })
    }

    /// The same cache with other latencies.
    pub fn with_latencies(self, hit_latency: f64, miss_latency: f64) -> SimulatedCache {
        SimulatedCache {
            hit_latency,
            miss_latency,
            ..self
        }
    }

    /// The simulated geometry.
    pub fn geometry(&self) -> CacheGeometry {
        self.geometry
    }

    /// Empty every set.
    pub fn reset(&mut self) {
        self.lines.iter_mut().for_each(Vec::clear);
    }

    /// Access byte `address`; `true` on a hit. The line becomes most recently used; on a miss
    /// into a full set the least recently used line is evicted.
    pub fn access(&mut self, address: usize) -> bool {
        let line = address / self.geometry.line_bytes;
        let set = &mut self.lines[line % self.sets];
        match set.iter().position(|&l| l == line) {
            Some(pos) => {
                set[..=pos].rotate_right(1);
                true
            }
            None => {
                if set.len() == self.geometry.ways {
                    set.pop();
                }
                set.insert(0, line);
                false
            }
        }
    }
}

impl ProbeTarget for SimulatedCache {
    fn chase(&mut self, addresses: &[usize], rounds: usize) -> f64 {
        self.reset();
        for &a in addresses {
            self.access(a);
        }
        let rounds = rounds.max(1);
        let mut hits = 0usize;
        for _ in 0..rounds {
            for &a in addresses {
                hits += usize::from(self.access(a));
            }
        }
        let accesses = rounds * addresses.len();
        let misses = accesses - hits;
        (hits as f64 * self.hit_latency + misses as f64 * self.miss_latency) / accesses as f64
    }
}

/// This machine's memory, timed with a pointer chase (§4.4): every probed slot holds the
/// address of the next, and the walk is `p = *p`, so each load waits for the one before and
/// the time per step is the load-to-use latency of wherever the line was.
///
/// On x86-64 the walk is a fixed three-instruction `asm!` loop, so it is the same code in
/// debug and release builds and no compiler can reshape it (X-Ray's §2.1 concern); elsewhere
/// it is a Rust loop over slot indices. Each walk is timed with [`Instant`] for at least
/// `min_accesses` steps, `repetitions` times, and the fastest repetition is reported in
/// nanoseconds per access: interference only ever adds time.
#[derive(Debug)]
pub struct HostMemory {
    slots: Vec<usize>,
    repetitions: usize,
    min_accesses: usize,
}

impl Default for HostMemory {
    fn default() -> Self {
        HostMemory::new()
    }
}

impl HostMemory {
    /// 5 repetitions of at least 2^16 steps per walk: ~120–400 µs each at L1/L2 latencies
    /// (2–6 ns), thousands of times the ~25 ns cost of reading [`Instant`].
    pub fn new() -> HostMemory {
        HostMemory::with_effort(5, 1 << 16)
    }

    /// `repetitions` timed walks (at least 1) of at least `min_accesses` steps each.
    pub fn with_effort(repetitions: usize, min_accesses: usize) -> HostMemory {
        HostMemory {
            slots: Vec::new(),
            repetitions: repetitions.max(1),
            min_accesses,
        }
    }

    /// Link `addresses` into a cycle; returns the index of the first element's slot.
    fn link(&mut self, addresses: &[usize]) -> usize {
        const SLOT: usize = std::mem::size_of::<usize>();
        let mut sorted = addresses.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert!(
            sorted.len() == addresses.len() && addresses.iter().all(|a| a % PROBE_WORD_BYTES == 0),
            "probe addresses must be distinct multiples of {PROBE_WORD_BYTES}"
        );
        let top = sorted.last().copied().unwrap_or(0);
        let needed = (top + PROBE_BASE_ALIGN) / SLOT + 1;
        if self.slots.len() < needed {
            self.slots = vec![0; needed.next_power_of_two()];
        }
        let base = self.slots.as_ptr() as usize;
        let first = (base.next_multiple_of(PROBE_BASE_ALIGN) - base) / SLOT;
        debug_assert!(first + top / SLOT < self.slots.len());
        let n = addresses.len();
        for k in 0..n {
            let here = first + addresses[k] / SLOT;
            let next = first + addresses[(k + 1) % n] / SLOT;
            self.slots[here] = base + next * SLOT;
        }
        first + addresses[0] / SLOT
    }

    /// Walk `steps` (≥ 1) links from slot `start`; returns where the walk ended.
    #[cfg(target_arch = "x86_64")]
    fn walk(&self, start: usize, steps: usize) -> usize {
        assert!(steps > 0 && start < self.slots.len());
        let mut p = self.slots.as_ptr().wrapping_add(start) as usize;
        // SAFETY: `link` wrote a cycle: every slot reachable from `start` holds the address of
        // another slot of `self.slots` (`base + index × 8`, index in bounds, 8-byte aligned).
        // `&self` keeps the allocation alive and unchanged for the whole walk. The loop only
        // reads memory (`readonly`), changes only `p`, `left` and flags, and ends after
        // `steps ≥ 1` iterations, so `dec` never wraps below zero.
        unsafe {
            std::arch::asm!(
                "2:",
                "mov {p}, qword ptr [{p}]",
                "dec {left}",
                "jnz 2b",
                p = inout(reg) p,
                left = inout(reg) steps => _,
                options(nostack, readonly),
            );
        }
        (p - self.slots.as_ptr() as usize) / std::mem::size_of::<usize>()
    }

    /// [`walk`](Self::walk) in plain Rust: index arithmetic in the chain, so slower, but
    /// equally latency-bound.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn walk_portable(&self, start: usize, steps: usize) -> usize {
        let base = self.slots.as_ptr() as usize;
        let mut i = start;
        for _ in 0..steps {
            i = (self.slots[i] - base) / std::mem::size_of::<usize>();
        }
        i
    }

    #[inline]
    fn walk_fastest(&self, start: usize, steps: usize) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            self.walk(start, steps)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.walk_portable(start, steps)
        }
    }
}

impl ProbeTarget for HostMemory {
    fn chase(&mut self, addresses: &[usize], rounds: usize) -> f64 {
        let n = addresses.len();
        assert!(n > 0, "a walk needs at least one address");
        let start = self.link(addresses);
        let rounds = rounds.max(1).max(self.min_accesses.div_ceil(n));
        let steps = rounds * n;
        std::hint::black_box(self.walk_fastest(start, n));
        let mut best = f64::INFINITY;
        for _ in 0..self.repetitions {
            let t0 = Instant::now();
            let end = self.walk_fastest(start, steps);
            let ns = t0.elapsed().as_nanos() as f64;
            std::hint::black_box(end);
            best = best.min(ns / steps as f64);
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_walks_agree() {
        let mut mem = HostMemory::with_effort(1, 1);
        let addresses = [0, 64, 4096, 72, 8192 + 8];
        let start = mem.link(&addresses);
        for steps in [1, 2, 5, 7, 1000] {
            assert_eq!(
                mem.walk_fastest(start, steps),
                mem.walk_portable(start, steps)
            );
        }
        let first = start - addresses[0] / 8;
        assert_eq!(mem.walk_portable(start, 2), first + addresses[2] / 8);
    }
}
