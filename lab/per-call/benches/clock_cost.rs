//! What reading a clock costs on this machine, and whether other work hides under the reads.
//!
//! The per-call race (`per_call`) times every call with two clock reads (`lfence; rdtsc` at
//! entry, `rdtscp` at exit) and prints how much of `cabprof timed` they are. This bench asks
//! whether the rest could shrink by overlapping with plain reads: it measures, per call of
//! the same ~2 ns body as `per_call`,
//!
//! - one read of each clock a profiler could use: `rdtsc` (`cabprof_cab::clock::now`),
//!   `rdtscp`, and `std::time::Instant::now` (what hotpath and tracing layers read);
//! - the body between two plain `rdtsc` reads, their difference kept;
//! - the same two functions with `N` extra single-slot instructions (`nop`s) after the body,
//!   for `N` = 32 and 64: what `N` instructions cost with and without the reads around them.
//!   If the reads' latency hid other work, the extra instructions would cost less next to
//!   them than alone.
//!
//! All variants run in one process, interleaved: each round runs each variant once (`CALLS`
//! calls) in a freshly shuffled order (fixed seed); the table gives the median over rounds
//! and its spread (min-max). The cost of one extra `nop`, alone and next to the reads, is computed from the
//! medians and, for its spread, within each round (both terms of a difference from one round).
//! Their ratio (next to the reads / alone) is, as for every comparison in this project, the
//! median of the per-round ratios with a 95 % bootstrap interval
//! (`cabprof_bench_support::stats::median_interval`, fixed seed): below 1 only if the whole interval is.
//! `cargo bench -p cabprof-per-call --bench clock_cost` (release); `CLOCK_COST_ROUNDS` (9 to
//! 1000, default 17: `cabprof_bench_support::stats::MIN_ROUNDS` and `ROUNDS`) sets the rounds. x86-64
//! only (it reads the time-stamp counter directly).

/// The body `per_call` times.
#[cfg(target_arch = "x86_64")]
mod body;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use cabprof_bench_support::rounds::interleaved;
    use cabprof_bench_support::stats::{self, Side};
    use std::hint::black_box;
    use std::time::Instant;

    const CALLS: u64 = 10_000_000;
    /// Rounds when `CLOCK_COST_ROUNDS` is unset (the project's paired comparisons' default).
    const ROUNDS_DEFAULT: usize = stats::ROUNDS;
    /// The fewest rounds `CLOCK_COST_ROUNDS` may ask for: below it the bootstrap interval of
    /// the ratio's median is far too narrow for 95 %.
    const ROUNDS_MIN: usize = stats::MIN_ROUNDS;
    /// The most rounds `CLOCK_COST_ROUNDS` may ask for (a round takes about a second).
    const ROUNDS_MAX: usize = 1000;

    /// A variant: its name in the table, and the function it calls.
    type Variant = (&'static str, fn(u64) -> u64);

    use crate::body::work;

    /// `N` one-byte `nop`s: `N` issue slots, no data dependence, no memory.
    #[inline(always)]
    fn nops<const N: usize>() {
        if N > 0 {
            // SAFETY: `nop`s touch no register, flag or memory.
            unsafe {
                std::arch::asm!(
                    ".rept {n}",
                    "nop",
                    ".endr",
                    n = const N,
                    options(nomem, nostack, preserves_flags),
                );
            }
        }
    }

    #[inline(never)]
    fn plain<const N: usize>(x: u64) -> u64 {
        let r = work(x);
        nops::<N>();
        r
    }

    #[inline(never)]
    fn two_reads<const N: usize>(x: u64) -> u64 {
        let start = cabprof_cab::clock::now();
        let r = work(x);
        black_box(cabprof_cab::clock::now().saturating_sub(start));
        nops::<N>();
        r
    }

    #[inline(never)]
    fn one_rdtsc(x: u64) -> u64 {
        black_box(cabprof_cab::clock::now());
        work(x)
    }

    #[inline(never)]
    fn one_rdtscp(x: u64) -> u64 {
        let mut aux = 0u32;
        // SAFETY: only run where CPUID reports `rdtscp` (checked in `run`).
        black_box(unsafe { core::arch::x86_64::__rdtscp(&mut aux) });
        work(x)
    }

    #[inline(never)]
    fn one_instant(x: u64) -> u64 {
        black_box(Instant::now());
        work(x)
    }

    /// ns per call of `CALLS` calls of `f`.
    fn once(f: fn(u64) -> u64) -> f64 {
        let t = Instant::now();
        let mut acc = 0u64;
        for i in 0..CALLS {
            acc = acc.wrapping_add(f(black_box(i)));
        }
        black_box(acc);
        t.elapsed().as_nanos() as f64 / CALLS as f64
    }

    pub(crate) fn run() {
        let rounds = cabprof_bench_support::rounds::rounds(
            "CLOCK_COST_ROUNDS",
            ROUNDS_MIN,
            ROUNDS_MAX,
            ROUNDS_DEFAULT,
        );
        let mut variants: Vec<Variant> = vec![
            ("plain", plain::<0>),
            ("one rdtsc", one_rdtsc),
            ("one Instant::now", one_instant),
            ("two rdtsc (timed-call floor)", two_reads::<0>),
            ("plain + 32 nops", plain::<32>),
            ("two rdtsc + 32 nops", two_reads::<32>),
            ("plain + 64 nops", plain::<64>),
            ("two rdtsc + 64 nops", two_reads::<64>),
        ];
        // CPUID leaf 0x8000_0001, EDX bit 27: the CPU has `rdtscp`.
        // SAFETY: `cpuid` is part of the x86-64 baseline; leaf 0x8000_0001 exists on every
        // x86-64 CPU (long mode is reported there). `__cpuid` is an `unsafe fn` on the
        // workspace's MSRV (1.88) and a safe one on later compilers, hence the `allow`.
        #[allow(unused_unsafe)]
        let has_rdtscp = unsafe { core::arch::x86_64::__cpuid(0x8000_0001) }.edx & (1 << 27) != 0;
        if has_rdtscp {
            variants.insert(2, ("one rdtscp", one_rdtscp));
        }
        for f in &variants {
            once(f.1); // warm up
        }
        let samples = interleaved(rounds, variants.len(), stats::SEED, |i| once(variants[i].1));
        let med: Vec<f64> = samples.iter().map(|s| stats::median(s)).collect();
        let plain_ns = med[0];
        println!("clock_cost: {CALLS} calls per variant and round, median of {rounds} rounds");
        println!(
            "{:32} {:>8} {:>13} {:>11}",
            "", "ns/call", "spread", "over plain"
        );
        for (((name, _), s), med) in variants.iter().zip(&samples).zip(&med) {
            let (lo, hi) = stats::min_max(s);
            println!(
                "{name:32} {med:>8.2} {:>13} {:>11.2}",
                format!("{lo:.2}-{hi:.2}"),
                med - plain_ns
            );
        }
        let index = |name: &str| {
            variants
                .iter()
                .position(|(n, _)| *n == name)
                .expect("variant")
        };
        let at = |name: &str| med[index(name)];
        let alone = (at("plain + 64 nops") - plain_ns) / 64.0;
        let between = (at("two rdtsc + 64 nops") - at("two rdtsc (timed-call floor)")) / 64.0;
        // The same per-`nop` costs within each round (both variants of a difference ran in the
        // same round), for their spread.
        let per_round = |with: &str, without: &str| -> Vec<f64> {
            let (w, o) = (&samples[index(with)], &samples[index(without)]);
            w.iter().zip(o).map(|(w, o)| (w - o) / 64.0).collect()
        };
        let alone_r = per_round("plain + 64 nops", "plain");
        let between_r = per_round("two rdtsc + 64 nops", "two rdtsc (timed-call floor)");
        let ratio = stats::median_interval(
            &stats::paired_ratios(&between_r, &alone_r),
            0.95,
            stats::RESAMPLES,
            stats::SEED,
        );
        let (alone_lo, alone_hi) = stats::min_max(&alone_r);
        let (between_lo, between_hi) = stats::min_max(&between_r);
        println!();
        println!(
            "an extra nop costs {alone:.3} ns alone (per round {alone_lo:.3}-{alone_hi:.3}) and \
             {between:.3} ns next to two rdtsc reads (per round {between_lo:.3}-{between_hi:.3})"
        );
        let verdict = match ratio.side_of(1.0) {
            Side::Below => "below 1: the reads hid some of it",
            Side::Above => "above 1: the reads made it dearer",
            Side::Contains => "contains 1: no difference resolved",
        };
        println!(
            "next to the reads / alone, median of the per-round ratios: {:.2} [{:.2}, {:.2}] \
             (95 % bootstrap), {verdict}",
            ratio.median, ratio.lo, ratio.hi
        );
        println!(
            "one rdtsc read: {:.2} ns; Instant::now: {:.2} ns",
            at("one rdtsc") - plain_ns,
            at("one Instant::now") - plain_ns
        );
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::run();
    #[cfg(not(target_arch = "x86_64"))]
    println!("clock_cost: x86-64 only (it reads the time-stamp counter directly)");
}
