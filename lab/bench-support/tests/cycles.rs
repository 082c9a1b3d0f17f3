//! The Paoloni cycle timer: monotonic, a small positive harness cost, longer work measures
//! longer, and every statistic is finite.

use cabprof_bench_support::cycles::{self, Timer};
use std::hint::black_box;

/// `n` dependent additions the optimizer cannot delete or fold.
fn busy(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = black_box(acc.wrapping_add(i));
    }
    acc
}

#[test]
fn the_counter_never_goes_backwards() {
    let mut last = cycles::start();
    for _ in 0..10_000 {
        let a = cycles::start();
        let b = cycles::stop();
        assert!(a >= last, "start went backwards: {a} < {last}");
        assert!(b >= a, "stop {b} before start {a}");
        last = b;
    }
}

#[test]
fn the_harness_costs_something_small() {
    let timer = Timer::new();
    let overhead = timer.overhead();
    eprintln!(
        "harness overhead: {overhead} ticks = {:.1} ns (rdtscp: {})",
        cycles::ticks_to_ns(overhead as f64),
        cycles::has_rdtscp()
    );
    assert!(overhead > 0);
    let harness = timer.harness().expect("Timer::new measures its harness");
    eprintln!("empty harness: {harness:?}");
    assert_eq!(harness.min, overhead);
    assert!(harness.variance_of_minima.is_finite());
    assert!(Timer::with_overhead(7).harness().is_none());
    // The minimum of 10 000 pairs: rdtsc→rdtscp is tens of cycles on bare metal and under
    // KVM (neither traps; cpuid does, but it lies outside the window). 10 µs is generous.
    assert!(
        cycles::ticks_to_ns(overhead as f64) < 10_000.0,
        "{overhead} ticks"
    );
}

#[test]
fn a_hundred_times_the_work_has_a_larger_minimum() {
    let timer = Timer::new();
    let short = timer.measure(5, 20, || busy(1_000));
    let long = timer.measure(5, 20, || busy(100_000));
    eprintln!("busy(1k): {short:?}\nbusy(100k): {long:?}");
    assert!(long.min > short.min, "{} <= {}", long.min, short.min);
    assert!(long.min_ns() > short.min_ns());
}

#[test]
fn every_statistic_is_finite_and_consistent() {
    let m = cycles::measure(8, 50, || busy(100));
    assert_eq!((m.ensembles, m.samples), (8, 50));
    for (name, value) in [
        ("mean", m.mean),
        ("variance", m.variance),
        ("variance_of_variances", m.variance_of_variances),
        ("variance_of_minima", m.variance_of_minima),
        ("min_ns", m.min_ns()),
        ("mean_ns", m.mean_ns()),
    ] {
        assert!(value.is_finite() && value >= 0.0, "{name} = {value}");
    }
    assert!(m.min as f64 <= m.mean && m.mean <= m.max as f64);
    assert!(m.max_deviation <= m.max - m.min);
    assert_eq!(m.overhead_subtracted, Timer::shared().overhead());
    // One ensemble has no spread of minima.
    let one = Timer::with_overhead(0).measure(1, 10, || busy(10));
    assert_eq!(one.variance_of_minima, 0.0);
    assert!(one.minima_are_stable(0.0));
}

#[test]
fn ticks_per_ns_is_a_plausible_clock_rate() {
    let rate = cycles::ticks_per_ns();
    eprintln!("ticks per ns: {rate:.4}");
    if cfg!(target_arch = "x86_64") {
        // Invariant TSCs run at 0.5–6 GHz.
        assert!((0.5..6.0).contains(&rate), "{rate}");
    } else {
        assert_eq!(rate, 1.0);
    }
    // The same answer twice: it is calibrated once.
    assert_eq!(rate, cycles::ticks_per_ns());
}

#[test]
#[should_panic(expected = "at least one ensemble")]
fn zero_samples_is_a_contract_violation() {
    cycles::measure(3, 0, || ());
}
