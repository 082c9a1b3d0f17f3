//! The timestamps of timed functions: one counter read per event, calibrated to nanoseconds
//! once per session.
//!
//! - [`now`] is the cheapest monotonic counter the target has, read without serialisation: the
//!   time-stamp counter (`rdtsc`) on x86-64, the virtual counter (`cntvct_el0`) on AArch64,
//!   and elsewhere nanoseconds of [`Instant`] since the process' first read. Nothing orders
//!   it against neighbouring instructions; it stamps what needs no more (a send, a wake, a
//!   batch of calls).
//! - A timed call's interval is opened by [`now_before`] and closed by [`now_after`]. On
//!   x86-64 `lfence; rdtsc` waits for the caller's work to execute, `rdtscp` for the body's,
//!   so neither falls on the wrong side of a stamp; on AArch64 an `isb` precedes each read.
//!   Neither is the benches' cycle timer (`cabprof_bench_support::cycles`), whose `cpuid`
//!   traps to the hypervisor in a VM (some 10 µs); the two fenced reads cost a timed call
//!   about 35 ns here, the plain ones 27.
//! - On x86-64 the counter is the invariant TSC (Linux's `constant_tsc`/`nonstop_tsc`):
//!   it counts at a fixed rate whatever the core clock does, so ticks measure wall time, on
//!   every core alike.
//! - [`Calibration`]: the tick rate, measured against the monotonic clock ([`Instant`]) over
//!   the session itself: a (counter, clock) pair is taken when it starts
//!   ([`Calibration::start`]) and another when the report is made
//!   ([`Calibration::measure`]); the session's own length is the baseline, at least
//!   [`MIN_BASELINE`] (the report waits out the difference). Each pair is the tightest of a
//!   few tries, so one preemption between the two reads does not skew it.

use std::time::{Duration, Instant};

/// The shortest baseline a calibration uses: with the clock read to within some 100 ns at
/// each end, 20 ms puts the rate within 1e-5.
pub const MIN_BASELINE: Duration = Duration::from_millis(20);

/// The name of the counter [`now`] reads.
pub const SOURCE: &str = if cfg!(target_arch = "x86_64") {
    "rdtsc"
} else if cfg!(target_arch = "aarch64") {
    "cntvct_el0"
} else {
    "monotonic clock (ns)"
};

/// The current counter value: one plain read, no fence. See the module docs.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` is part of the x86-64 baseline and has no preconditions.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: reading `cntvct_el0` is allowed at EL0 on every OS Rust targets (Linux,
        // macOS, Windows enable it) and touches no memory.
        unsafe {
            core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack));
        }
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// The counter, read once every earlier instruction has executed: the reading that opens an
/// interval (`lfence` then `rdtsc` on x86-64, `isb` then `cntvct_el0` on AArch64; elsewhere
/// [`now`], unordered). Later instructions may still start before the read; the body's first
/// ones wait for inputs that pass a barrier after it. A plain [`now`] may execute while the
/// caller's work is still in flight: the latency of the chain that computes a function's
/// arguments (a table lookup, a bit-buffer refill) then fell inside the function's own
/// interval, and a caller doing most of the work was reported with a fraction of it. The
/// fence costs the call a few ns, which calibration measures with the rest of a timed call.
#[inline(always)]
pub fn now_before() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `lfence` (SSE2) and `rdtsc` are in the x86-64 baseline and have no
        // preconditions.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        ordered()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        now()
    }
}

/// The counter, read once every earlier instruction has executed: the reading that closes an
/// interval. A plain [`now`] may execute while the work before it is still in flight (an
/// out-of-order core runs ahead of a long dependency chain), so the tail of a pure-arithmetic
/// body fell after its exit stamp, into its caller's time. `rdtscp` waits for the earlier
/// instructions (not for later ones); on an x86-64 CPU without it (or a hypervisor that hides
/// it), `lfence` then `rdtsc`. On AArch64 `isb` then `cntvct_el0`; elsewhere [`now`].
#[inline(always)]
pub fn now_after() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if has_rdtscp() {
        let mut aux = 0u32;
        // SAFETY: `has_rdtscp` found the instruction (CPUID 0x8000_0001, EDX bit 27); it
        // writes `aux` (the core's id, unused) and has no other effect.
        return unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
    }
    // The opening read waits for the earlier instructions too.
    now_before()
}

/// `isb` then `cntvct_el0`: the barrier flushes the pipeline, so the counter is not read
/// ahead of the instructions before it (the order Linux's own counter reads keep).
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn ordered() -> u64 {
    let v: u64;
    // SAFETY: `isb` has no operands and changes no memory; reading `cntvct_el0` is allowed at
    // EL0 on every OS Rust targets (see `now`).
    unsafe {
        // Not `nomem`: the asm is then also a compiler barrier, as the x86 intrinsics are.
        core::arch::asm!(
            "isb",
            "mrs {}, cntvct_el0",
            out(reg) v,
            options(nostack, preserves_flags)
        );
    }
    v
}

/// Whether this CPU has `rdtscp`: asked once (a `cpuid`, which a hypervisor may trap), then
/// one load.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_rdtscp() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not asked yet, 1: no, 2: yes.
    static HAS: AtomicU8 = AtomicU8::new(0);
    match HAS.load(Ordering::Relaxed) {
        0 => {
            let yes = rdtscp_present();
            HAS.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

#[cfg(target_arch = "x86_64")]
#[cold]
fn rdtscp_present() -> bool {
    // SAFETY: `cpuid` is in the x86-64 baseline; leaf 0x8000_0000 says which extended leaves
    // exist, and 0x8000_0001 is asked only if it does. (A safe function in newer Rust, unsafe
    // in the declared MSRV.)
    #[allow(unused_unsafe)]
    unsafe {
        let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0
    }
}

/// One reading of both clocks, taken as close together as a few tries allow.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    ticks: u64,
    at: Instant,
    /// Counter ticks the tightest try spent between its two counter reads (its uncertainty).
    spread: u64,
}

impl Pair {
    /// Read both clocks: of 16 tries, the one whose `Instant` read took the fewest ticks; the
    /// counter value is the midpoint of the two reads around it.
    pub fn read() -> Pair {
        let mut best: Option<Pair> = None;
        for _ in 0..16 {
            let a = now();
            let at = Instant::now();
            let b = now();
            let spread = b.wrapping_sub(a);
            if best.is_none_or(|p| spread < p.spread) {
                best = Some(Pair {
                    ticks: a + spread / 2,
                    at,
                    spread,
                });
            }
        }
        best.expect("16 tries")
    }
}

/// Counter ticks per nanosecond, and how that was measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Counter ticks per nanosecond of the monotonic clock.
    pub ticks_per_ns: f64,
    /// The monotonic-clock time the two pairs were apart.
    pub baseline: Duration,
    /// The larger of the two pairs' read windows, in ticks: the uncertainty of each end.
    pub spread_ticks: u64,
}

impl Calibration {
    /// The first pair, taken when a session starts.
    pub fn start() -> Pair {
        Pair::read()
    }

    /// Measure against `start`: waits until [`MIN_BASELINE`] has passed since it, then takes
    /// the second pair.
    pub fn measure(start: &Pair) -> Calibration {
        let waited = start.at.elapsed();
        if waited < MIN_BASELINE {
            std::thread::sleep(MIN_BASELINE - waited);
        }
        let end = Pair::read();
        let baseline = end.at.duration_since(start.at);
        let ticks = end.ticks.wrapping_sub(start.ticks);
        Calibration {
            ticks_per_ns: ticks as f64 / baseline.as_nanos().max(1) as f64,
            baseline,
            spread_ticks: start.spread.max(end.spread),
        }
    }

    /// Nanoseconds for `ticks` counter ticks.
    pub fn ns(&self, ticks: f64) -> f64 {
        ticks / self.ticks_per_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_agrees_with_the_monotonic_clock_over_a_spin() {
        let start = Calibration::start();
        let c = Calibration::measure(&start);
        assert!(c.baseline >= MIN_BASELINE);
        // Spin 5 ms by the monotonic clock; the counter, calibrated, must say the same.
        spin_agrees(&c, now, now, 5, 0.01);
    }

    /// Spins `ms` by the monotonic clock between `open` and `close`: the calibrated counter
    /// must say the same, within `within` of it.
    fn spin_agrees(c: &Calibration, open: fn() -> u64, close: fn() -> u64, ms: u64, within: f64) {
        let t0 = open();
        let i0 = Instant::now();
        while i0.elapsed() < Duration::from_millis(ms) {}
        let ns = c.ns(close().wrapping_sub(t0) as f64);
        let want = i0.elapsed().as_nanos() as f64;
        assert!(
            (ns - want).abs() < within * want,
            "{ns} ns by the counter, {want} ns by the clock"
        );
    }

    /// The ordered reads are one counter: in program order on one thread they never go back,
    /// and an interval opened and closed around 1 ms of spinning reads that long.
    #[test]
    fn the_ordered_reads_are_the_same_counter() {
        let c = Calibration::measure(&Calibration::start());
        for _ in 0..1000 {
            let a = now_before();
            let b = now_after();
            let d = now_before();
            assert!(a <= b && b <= d, "{a} {b} {d}");
        }
        spin_agrees(&c, now_before, now_after, 1, 0.05);
    }
}
