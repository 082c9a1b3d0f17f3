//! A cycle timer for code sections too short for a clock: Paoloni's method.
//!
//! # Contract
//!
//! - [`start`] and [`stop`] return ticks of one monotonic counter; `stop() - start()` brackets
//!   exactly the code between them. Nothing written before `start` is executed after its
//!   counter read, and nothing written after `stop` is executed before its counter read.
//! - Ticks are time-stamp-counter ticks on x86-64 and nanoseconds elsewhere;
//!   [`ticks_per_ns`] converts. On x86-64 they are *not* core cycles: an invariant TSC
//!   (Linux's `constant_tsc` and `nonstop_tsc` flags; Intel since Nehalem, AMD since family
//!   10h) counts at a fixed reference rate whatever the core clock does, so ticks measure wall
//!   time at sub-nanosecond resolution (this project's KVM host: 2.1 ticks/ns).
//! - A [`Timer`] knows its own cost (the minimum of many empty samples) and subtracts it from
//!   every sample. [`Timer::measure`] runs `ensembles × samples` samples
//!   and reports, per Paoloni, the minimum, the mean, the mean within-ensemble variance, and
//!   the variance of the per-ensemble minima and variances. **Trust a minimum only when the
//!   variance of the minima is near zero**: then the minimum is a property of the code, not
//!   of the interrupts and migrations that hit one ensemble.
//! - User space cannot disable preemption or interrupts as Paoloni's kernel module does, so
//!   single samples carry outliers; minima are robust to them, means and variances are not.
//!
//! # Method
//!
//! G. Paoloni, "How to Benchmark Code Execution Times on Intel IA-32 and IA-64 Instruction
//! Set Architectures", Intel white paper 324264, 2010, §3.2.1:
//!
//! ```text
//! start:  cpuid; rdtsc            cpuid waits for all earlier instructions, then rdtsc reads
//! ...code under test...
//! stop:   rdtscp; mov; mov; cpuid rdtscp waits for the code to finish before reading; the
//!                                 trailing cpuid stops later instructions from moving up
//! ```
//!
//! The expensive, variable-latency `cpuid` never sits between the two counter reads, which is
//! what gives Paoloni's method its zero variance of minima (§3.2.2). Without `rdtscp` (checked
//! once through `cpuid` leaf `0x8000_0001`, EDX bit 27) `stop` uses `lfence; rdtsc`: Intel's
//! SDM (vol. 2B, RDTSC) documents that `lfence` makes `rdtsc` wait for all earlier
//! instructions, the user-space stand-in for §3.2.3's `cr0` write, which needs ring 0.
//!
//! ```
//! use cabprof_bench_support::cycles::Timer;
//!
//! let timer = Timer::new();
//! let m = timer.measure(4, 50, || std::hint::black_box(3u64).pow(5));
//! assert!(m.min <= m.max && m.variance_of_minima.is_finite());
//! ```

use crate::stats::variance;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Empty samples per ensemble when a [`Timer`] measures its own cost.
const OVERHEAD_SAMPLES: usize = 1_000;
/// Ensembles of [`OVERHEAD_SAMPLES`]: 10 000 pairs. Under KVM each pair costs two `cpuid`
/// exits (~1–2 µs each), so this is ~10–40 ms, once per [`Timer::new`].
const OVERHEAD_ENSEMBLES: usize = 10;
/// Wall time [`ticks_per_ns`] counts ticks over. Both clocks are read within ~100 ns of the
/// window's ends, so 20 ms gives a rate good to ~1e-5.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(20);

/// Read the counter after every earlier instruction has executed (`cpuid; rdtsc`).
///
/// Put it immediately before the code under test, and [`stop`] immediately after.
#[inline(always)]
pub fn start() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        tsc::start()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        portable::now_ns()
    }
}

/// Read the counter after the code under test has executed, before anything after it
/// (`rdtscp; cpuid`, or `lfence; rdtsc; cpuid` on CPUs without `rdtscp`).
#[inline(always)]
pub fn stop() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_rdtscp() {
            tsc::stop_rdtscp()
        } else {
            tsc::stop_lfence()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        portable::now_ns()
    }
}

/// Whether [`stop`] uses `rdtscp` (x86-64 CPUs since ~2008 all have it; some hypervisors hide
/// it). Decided once per process from `cpuid`; always `false` off x86-64.
#[inline]
pub fn has_rdtscp() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        tsc::has_rdtscp()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Counter ticks per nanosecond: the TSC rate in GHz on x86-64 (measured once per process
/// against [`Instant`] over 20 ms), exactly `1.0` elsewhere.
pub fn ticks_per_ns() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        if cfg!(target_arch = "x86_64") {
            calibrate()
        } else {
            1.0
        }
    })
}

/// `ticks` converted to nanoseconds with [`ticks_per_ns`].
pub fn ticks_to_ns(ticks: f64) -> f64 {
    ticks / ticks_per_ns()
}

fn calibrate() -> f64 {
    let wall0 = Instant::now();
    let ticks0 = start();
    while wall0.elapsed() < CALIBRATION_WINDOW {
        std::hint::spin_loop();
    }
    let ticks1 = stop();
    let wall = wall0.elapsed();
    ticks1.wrapping_sub(ticks0) as f64 / wall.as_nanos().max(1) as f64
}

/// A [`start`]/[`stop`] harness that knows its own cost.
#[derive(Clone, Copy, Debug)]
pub struct Timer {
    /// Minimum ticks of an empty sample; subtracted from every sample.
    overhead: u64,
    /// The measurement of the empty harness that `overhead` came from (`None` if given).
    harness: Option<Measurement>,
}

impl Default for Timer {
    fn default() -> Self {
        Timer::new()
    }
}

impl Timer {
    /// Measure the harness, as Paoloni §4 asks before any measurement: warm it up (his
    /// appendix, ln 19–30: the first executions pay instruction-cache misses), then time 10
    /// ensembles of 1000 empty samples through the very code [`measure`](Self::measure) uses,
    /// and keep the minimum.
    pub fn new() -> Timer {
        let raw = Timer::with_overhead(0);
        for _ in 0..3 {
            black_box(raw.sample(|| ()));
        }
        let harness = raw.measure(OVERHEAD_ENSEMBLES, OVERHEAD_SAMPLES, || ());
        Timer {
            overhead: harness.min,
            harness: Some(harness),
        }
    }

    /// A timer that subtracts `overhead` ticks instead of measuring it (0 gives raw samples).
    pub fn with_overhead(overhead: u64) -> Timer {
        Timer {
            overhead,
            harness: None,
        }
    }

    /// The process-wide timer [`measure`] uses, built on first use.
    pub fn shared() -> &'static Timer {
        static SHARED: OnceLock<Timer> = OnceLock::new();
        SHARED.get_or_init(Timer::new)
    }

    /// The empty-harness measurement [`Timer::new`] took: its `variance_of_minima` says
    /// whether this machine can time anything reproducibly right now (`None` for
    /// [`Timer::with_overhead`]).
    pub fn harness(&self) -> Option<&Measurement> {
        self.harness.as_ref()
    }

    /// Ticks of an empty sample (the minimum observed), subtracted from every sample.
    pub fn overhead(&self) -> u64 {
        self.overhead
    }

    /// Ticks `f` took once, less the overhead (saturating at 0). Its result is kept alive
    /// with [`black_box`] so the work cannot be deleted.
    #[inline(always)]
    pub fn sample<R, F: FnOnce() -> R>(&self, f: F) -> u64 {
        let t0 = start();
        let r = f();
        let t1 = stop();
        black_box(r);
        t1.wrapping_sub(t0).saturating_sub(self.overhead)
    }

    /// Paoloni's measurement: `ensembles` ensembles of `samples` samples of `f`, each sample
    /// less the overhead. See [`Measurement`] for what is reported.
    ///
    /// # Panics
    ///
    /// If `ensembles` or `samples` is 0.
    pub fn measure<R, F: FnMut() -> R>(
        &self,
        ensembles: usize,
        samples: usize,
        mut f: F,
    ) -> Measurement {
        assert!(
            ensembles > 0 && samples > 0,
            "measure needs at least one ensemble of one sample (got {ensembles} × {samples})"
        );
        let mut buf = vec![0u64; samples];
        let mut minima = Vec::with_capacity(ensembles);
        let mut variances = Vec::with_capacity(ensembles);
        let mut min = u64::MAX;
        let mut max = 0u64;
        let mut max_deviation = 0u64;
        let mut total = 0f64;
        for _ in 0..ensembles {
            for slot in buf.iter_mut() {
                *slot = self.sample(&mut f);
            }
            let lo = buf.iter().copied().min().unwrap_or(0);
            let hi = buf.iter().copied().max().unwrap_or(0);
            min = min.min(lo);
            max = max.max(hi);
            max_deviation = max_deviation.max(hi - lo);
            total += buf.iter().map(|&t| t as f64).sum::<f64>();
            minima.push(lo as f64);
            let ticks: Vec<f64> = buf.iter().map(|&t| t as f64).collect();
            variances.push(variance(&ticks));
        }
        Measurement {
            ensembles,
            samples,
            min,
            max,
            mean: total / (ensembles * samples) as f64,
            variance: variances.iter().sum::<f64>() / ensembles as f64,
            variance_of_variances: variance(&variances),
            variance_of_minima: variance(&minima),
            max_deviation,
            overhead_subtracted: self.overhead,
        }
    }
}

/// [`Timer::measure`] with the [`Timer::shared`] timer.
///
/// # Panics
///
/// If `ensembles` or `samples` is 0.
pub fn measure<R, F: FnMut() -> R>(ensembles: usize, samples: usize, f: F) -> Measurement {
    Timer::shared().measure(ensembles, samples, f)
}

/// What [`Timer::measure`] found, in ticks, every sample already less the harness overhead.
///
/// Paoloni's §3.1.2 reading: `variance_of_minima ≈ 0` means the minimum is reproducible and
/// can be trusted; `variance` is the resolution (its square root is the standard error of one
/// sample); `variance_of_variances ≈ 0` means that error is itself stable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// Ensembles run.
    pub ensembles: usize,
    /// Samples per ensemble.
    pub samples: usize,
    /// Smallest sample of all ensembles.
    pub min: u64,
    /// Largest sample of all ensembles (an outlier, usually an interrupt).
    pub max: u64,
    /// Mean of all samples.
    pub mean: f64,
    /// Mean over ensembles of the within-ensemble variance (Paoloni's "total variance").
    pub variance: f64,
    /// Variance of the per-ensemble variances.
    pub variance_of_variances: f64,
    /// Variance of the per-ensemble minima: near zero when the minimum can be trusted.
    pub variance_of_minima: f64,
    /// Largest `max - min` within one ensemble.
    pub max_deviation: u64,
    /// Harness ticks subtracted from every sample.
    pub overhead_subtracted: u64,
}

impl Measurement {
    /// [`min`](Self::min) in nanoseconds.
    pub fn min_ns(&self) -> f64 {
        ticks_to_ns(self.min as f64)
    }

    /// [`mean`](Self::mean) in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        ticks_to_ns(self.mean)
    }

    /// Whether the per-ensemble minima agree to within `tolerance_ticks` standard deviation:
    /// Paoloni's test for a minimum that is a property of the code, not of the noise.
    pub fn minima_are_stable(&self, tolerance_ticks: f64) -> bool {
        self.variance_of_minima.sqrt() <= tolerance_ticks
    }
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    //! The x86-64 counter reads. `cpuid` clobbers `rbx`, which LLVM reserves and `asm!` cannot
    //! name as an operand, so each block saves and restores it through a scratch register
    //! (as `core::arch::x86_64::__cpuid` does). No block says `nomem`, so the compiler also
    //! treats each as a full memory barrier and cannot move loads or stores across it.

    use std::arch::asm;
    use std::sync::atomic::{AtomicU8, Ordering};

    /// Extended `cpuid` leaf holding the `rdtscp` feature flag.
    const EXT_FEATURES: u32 = 0x8000_0001;
    /// EDX bit of [`EXT_FEATURES`] set when `rdtscp` exists (Intel SDM vol. 2A, CPUID,
    /// table "Information Returned by CPUID": "Bit 27: RDTSCP and IA32_TSC_AUX are available").
    const RDTSCP_BIT: u32 = 1 << 27;

    /// `cpuid` with `leaf` and sub-leaf 0, as `[eax, ebx, ecx, edx]`.
    fn cpuid(leaf: u32) -> [u32; 4] {
        let (eax, ebx, ecx, edx): (u32, u32, u32, u32);
        // SAFETY: `cpuid` exists on every x86-64 CPU (it predates the 64-bit extension), is
        // unprivileged and only writes eax/ebx/ecx/edx. eax/ecx/edx are declared operands;
        // rbx is saved in a scratch register and restored before the block ends.
        unsafe {
            asm!(
                "mov {saved:r}, rbx",
                "cpuid",
                "xchg {saved:r}, rbx",
                saved = out(reg) ebx,
                inout("eax") leaf => eax,
                inout("ecx") 0u32 => ecx,
                out("edx") edx,
                options(nostack, preserves_flags),
            );
        }
        [eax, ebx, ecx, edx]
    }

    /// 0 = not yet checked, 1 = no `rdtscp`, 2 = `rdtscp`. Relaxed is enough: every thread
    /// that checks computes the same answer from the same CPU, so a race only repeats work.
    static RDTSCP: AtomicU8 = AtomicU8::new(0);

    #[inline(always)]
    pub(super) fn has_rdtscp() -> bool {
        match RDTSCP.load(Ordering::Relaxed) {
            0 => {
                let found = cpuid(0x8000_0000)[0] >= EXT_FEATURES
                    && cpuid(EXT_FEATURES)[3] & RDTSCP_BIT != 0;
                RDTSCP.store(if found { 2 } else { 1 }, Ordering::Relaxed);
                found
            }
            known => known == 2,
        }
    }

    /// `cpuid; rdtsc` (Paoloni §3.2.1, first block).
    #[inline(always)]
    pub(super) fn start() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: `cpuid` and `rdtsc` exist on every x86-64 CPU and are unprivileged (unless
        // the OS sets CR4.TSD, which Linux does only for seccomp'd processes that asked for
        // it via prctl(PR_SET_TSC); then rdtsc faults with SIGSEGV, it cannot corrupt state).
        // They write only eax/ebx/ecx/edx: three are declared operands and rbx is restored.
        unsafe {
            asm!(
                "mov {saved:r}, rbx",
                "cpuid",
                "mov rbx, {saved:r}",
                "rdtsc",
                saved = out(reg) _,
                inout("eax") 0u32 => lo,
                inout("ecx") 0u32 => _,
                out("edx") hi,
                options(nostack, preserves_flags),
            );
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// `rdtscp; mov; mov; cpuid` (Paoloni §3.2.1, second block).
    #[inline(always)]
    pub(super) fn stop_rdtscp() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: only called once `has_rdtscp` found the rdtscp flag set, so the instruction
        // exists; rdtscp writes eax/edx/ecx, cpuid eax/ebx/ecx/edx. All but rbx are declared
        // (the counter is copied out of eax/edx before cpuid overwrites them) and rbx is
        // restored. `mov` does not touch flags.
        unsafe {
            asm!(
                "rdtscp",
                "mov {lo:e}, eax",
                "mov {hi:e}, edx",
                "mov {saved:r}, rbx",
                "mov eax, 0",
                "cpuid",
                "mov rbx, {saved:r}",
                lo = out(reg) lo,
                hi = out(reg) hi,
                saved = out(reg) _,
                out("eax") _,
                out("ecx") _,
                out("edx") _,
                options(nostack, preserves_flags),
            );
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// `lfence; rdtsc; mov; mov; cpuid`, for CPUs without `rdtscp`.
    #[inline(always)]
    pub(super) fn stop_lfence() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: lfence is SSE2, part of the x86-64 baseline; rdtsc and cpuid as in `start`.
        // Written registers are declared operands, or rbx, which is restored.
        unsafe {
            asm!(
                "lfence",
                "rdtsc",
                "mov {lo:e}, eax",
                "mov {hi:e}, edx",
                "mov {saved:r}, rbx",
                "mov eax, 0",
                "cpuid",
                "mov rbx, {saved:r}",
                lo = out(reg) lo,
                hi = out(reg) hi,
                saved = out(reg) _,
                out("eax") _,
                out("ecx") _,
                out("edx") _,
                options(nostack, preserves_flags),
            );
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
}

/// The clock used off x86-64 (compiled everywhere so its tests run on any host).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
mod portable {
    use std::sync::OnceLock;
    use std::time::Instant;

    /// Nanoseconds since the first call in this process; monotonic, as `Instant` is.
    #[inline]
    pub(super) fn now_ns() -> u64 {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn portable_clock_is_monotonic() {
        let mut last = super::portable::now_ns();
        for _ in 0..1000 {
            let now = super::portable::now_ns();
            assert!(now >= last);
            last = now;
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn both_stop_variants_follow_start() {
        let t0 = super::tsc::start();
        let t1 = super::tsc::stop_lfence();
        assert!(t1 >= t0);
        if super::has_rdtscp() {
            let t2 = super::tsc::stop_rdtscp();
            assert!(t2 >= t1);
        }
    }
}
