//! A long session, as a service runs one: 1,000 instrumented functions called at random by two
//! threads whose driver never returns (with an occasional sleep, so call durations span
//! nanoseconds to milliseconds), every analysis on, a snapshot every 200 ms. Prints the
//! process's RSS and the snapshot latency (mean of the last five) at the minutes given as
//! arguments, then finishes.
//!
//! `cargo run --release -p cabprof-checks --example long_session -- 1 5 15`

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

macro_rules! functions {
    ($($f:ident)*) => {
        $(
            #[cabprof::profile]
            #[inline(never)]
            fn $f(x: u64) -> u64 {
                std::hint::black_box(x).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (x >> 7)
            }
        )*
        pub(super) static FNS: &[fn(u64) -> u64] = &[$($f),*];
    };
}

macro_rules! groups {
    ($($m:ident)*) => {
        $(
            mod $m {
                functions!(f0 f1 f2 f3 f4 f5 f6 f7 f8 f9);
            }
        )*
        pub(super) static GROUPS: &[&[fn(u64) -> u64]] = &[$($m::FNS),*];
    };
}

macro_rules! tree {
    ($($m:ident)*) => {
        $(
            mod $m {
                groups!(g0 g1 g2 g3 g4 g5 g6 g7 g8 g9);
            }
        )*
        static TREE: &[&[&[fn(u64) -> u64]]] = &[$($m::GROUPS),*];
    };
}

tree!(t0 t1 t2 t3 t4 t5 t6 t7 t8 t9);

/// Calls the functions at random until `stop`: a main loop open for the whole session.
#[cabprof::profile]
fn driver(seed: u64, stop: &AtomicBool) -> u64 {
    let mut x = seed;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let r = (x >> 33) as usize;
        x ^= TREE[r % 10][(r / 10) % 10][(r / 100) % 10](x);
        i += 1;
        if i.is_multiple_of(2_000_000) {
            std::thread::sleep(Duration::from_millis(x % 50 + 1));
        }
    }
    x
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let marks: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("minutes, as numbers"))
        .collect();
    let session = cabprof::Session::builder()
        .all_analyses()
        .pin(false)
        .from_env()
        .expect("CABPROF_* settings")
        .start()
        .expect("no other session runs");
    let snapshots = session.snapshotter();
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let stop = &stop;
            s.spawn(move || driver(t + 1, stop));
        }
        let mut latency = Vec::new();
        for &mark in &marks {
            while t0.elapsed().as_secs_f64() / 60.0 < mark {
                std::thread::sleep(Duration::from_millis(200));
                let a = Instant::now();
                drop(snapshots.snapshot().expect("the session runs"));
                latency.push(a.elapsed().as_secs_f64());
            }
            let last: Vec<f64> = latency.iter().rev().take(5).copied().collect();
            println!(
                "minute {mark}: RSS {:.0} MB, snapshot latency {:.3} s (mean of the last {}), {} snapshots",
                rss_mb(),
                last.iter().sum::<f64>() / last.len().max(1) as f64,
                last.len(),
                latency.len()
            );
        }
        stop.store(true, Ordering::Relaxed);
    });
    let a = Instant::now();
    let report = session.finish();
    println!(
        "finish {:.3} s, RSS {:.0} MB, {} events",
        a.elapsed().as_secs_f64(),
        rss_mb(),
        report.data.totals.events
    );
}
