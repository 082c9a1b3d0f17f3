//! What allocation tracking costs: one allocation-heavy body under plain `System`, cabprof's
//! `Tracked` wrapper without and with a session (exhaustive, the `allocations` analysis, the
//! body instrumented with `#[cabprof::profile]`), hotpath's allocation mode (its
//! `CountingAllocator`, a guard, the body under `#[hotpath::measure]`) and dhat's heap
//! profiler. Prints ns per allocator call (alloc, realloc or free) and the ratio to `System`.
//!
//! One binary can have one global allocator, so this one dispatches on a mode chosen before
//! each measurement: every variant pays the same extra load and branch. All of them end in
//! `System`, so a block made under one mode may be freed under another (dhat ignores blocks
//! it did not see made).
//!
//! Run: `cargo bench -p cabprof-workloads --bench alloc_overhead` (`ALLOC_BENCH_ITERS` sets the
//! iterations per run, default 200 000; each variant runs 7 times, interleaved, and the median
//! is shown).

use cabprof_bench_support::stats::median;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

const SYSTEM: u8 = 0;
const CABPROF: u8 = 1;
const HOTPATH: u8 = 2;
const DHAT: u8 = 3;

static MODE: AtomicU8 = AtomicU8::new(SYSTEM);
static TRACKED: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();
static HOTPATH_ALLOC: hotpath::CountingAllocator = hotpath::CountingAllocator::new();
static DHAT_ALLOC: dhat::Alloc = dhat::Alloc;

/// Forwards to the allocator of the current mode.
struct Switch;

macro_rules! dispatch {
    ($method:ident ( $($arg:expr),* )) => {
        // SAFETY: the caller's guarantees are passed on unchanged; every mode's allocator
        // allocates from `System`, so any of them may free or resize any block.
        unsafe {
            match MODE.load(Ordering::Relaxed) {
                CABPROF => TRACKED.$method($($arg),*),
                HOTPATH => HOTPATH_ALLOC.$method($($arg),*),
                DHAT => DHAT_ALLOC.$method($($arg),*),
                _ => System.$method($($arg),*),
            }
        }
    };
}

// SAFETY: forwards every call to one of four allocators that all uphold `GlobalAlloc` and all
// allocate from `System` (see `dispatch!`).
unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        dispatch!(alloc(layout))
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        dispatch!(alloc_zeroed(layout))
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        dispatch!(dealloc(ptr, layout))
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        dispatch!(realloc(ptr, layout, new_size))
    }
}

#[global_allocator]
static GLOBAL: Switch = Switch;

/// Allocator calls per iteration of the body: a box (alloc, free), a `Vec<u64>` pushed to 32
/// (alloc at 4, realloc to 8, 16, 32, free), a string (alloc, free).
const CALLS_PER_ITER: u64 = 2 + 5 + 2;

macro_rules! body {
    ($i:expr) => {{
        let i: u64 = $i;
        let b = black_box(Box::new(i));
        let mut v: Vec<u64> = Vec::new();
        for k in 0..32 {
            v.push(k ^ *b);
        }
        let mut s = String::with_capacity(24);
        s.push_str("allocation heavy");
        black_box((&v, &s));
        v.len() as u64 + s.len() as u64
    }};
}

fn plain(i: u64) -> u64 {
    body!(i)
}

#[cabprof::profile]
fn with_cabprof(i: u64) -> u64 {
    body!(i)
}

#[hotpath::measure]
fn with_hotpath(i: u64) -> u64 {
    body!(i)
}

fn run(iters: u64, f: fn(u64) -> u64) -> f64 {
    let start = Instant::now();
    let mut acc = 0;
    for i in 0..iters {
        acc += f(black_box(i));
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / (iters * CALLS_PER_ITER) as f64
}

fn main() {
    let iters: u64 = std::env::var("ALLOC_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    const ROUNDS: usize = 7;
    let names = [
        "System (no tracking)",
        "cabprof Tracked, no session",
        "cabprof Tracked + session (exhaustive)",
        "hotpath alloc mode",
        "dhat heap profiler",
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..ROUNDS {
        // 0: plain System.
        MODE.store(SYSTEM, Ordering::Relaxed);
        samples[0].push(run(iters, plain));

        // 1: the wrapper with no session.
        MODE.store(CABPROF, Ordering::Relaxed);
        samples[1].push(run(iters, plain));

        // 2: the wrapper with a session running the allocation analysis.
        let session = cabprof::Session::builder()
            .analyses(&[cabprof::Analysis::Allocations])
            .start()
            .expect("start a cabprof session");
        samples[2].push(run(iters, with_cabprof));
        let report = session.finish();
        MODE.store(SYSTEM, Ordering::Relaxed);
        let a = report.data.allocations.as_ref().expect("allocations ran");
        let seen = a.totals.allocs + a.totals.reallocs + a.totals.frees;
        assert!(
            seen >= iters * CALLS_PER_ITER,
            "cabprof saw {seen} allocator calls, expected at least {}",
            iters * CALLS_PER_ITER
        );
        drop(report);

        // 3: hotpath's allocation mode.
        {
            let guard = hotpath::HotpathGuardBuilder::new("alloc_overhead")
                .format(hotpath::Format::None)
                .build();
            MODE.store(HOTPATH, Ordering::Relaxed);
            samples[3].push(run(iters, with_hotpath));
            MODE.store(SYSTEM, Ordering::Relaxed);
            drop(guard);
        }

        // 4: dhat (testing mode: nothing written at the end).
        {
            let profiler = dhat::Profiler::builder().testing().build();
            MODE.store(DHAT, Ordering::Relaxed);
            samples[4].push(run(iters, plain));
            MODE.store(SYSTEM, Ordering::Relaxed);
            drop(profiler);
        }
    }
    let base = median(&samples[0]);
    println!(
        "alloc_overhead: {iters} iterations x {CALLS_PER_ITER} allocator calls, median of {ROUNDS} interleaved runs"
    );
    println!("{:<42} {:>12} {:>10}", "variant", "ns/call", "vs System");
    for (name, s) in names.iter().zip(samples) {
        let m = median(&s);
        println!("{name:<42} {m:>12.1} {:>9.2}x", m / base);
    }
}
