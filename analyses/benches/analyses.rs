//! Analysis throughput on one core, medians of several runs in one process:
//!
//! - cache simulator, default two levels (paper: 32 KB 4-way + 512 KB 8-way, 64 B, FIFO), on an
//!   L1-resident stream and on a random stream over 64 MB, through `CacheSim::access` and
//!   through event words (`consume`);
//! - reuse distance on the same two streams;
//! - the call analyses (method count, call graph, call tree, time, timeline) on call streams like the
//!   per-call benchmark's hot loop (`main` calling a leaf, and a leaf under a three-deep chain),
//!   untimed, every call timed, and one call in 16 timed: ns per call and M events/s.
//!
//! `cargo bench -p cabprof-analyses --bench analyses`

use cabprof_analyses::call_tree::consume_both;
use cabprof_analyses::{
    CacheSim, CallGraph, CallTreeProfile, CallingContextTree, EventAnalysis, MethodCount,
    ReuseDistance, TimeProfile, Timeline,
};
use cabprof_cab::event::{Event, MethodId};
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1 << 24;

fn l1_stream() -> Vec<u64> {
    // Sequential 8-byte loads and stores over a 16 KB array, repeated: L1 hits after the
    // first pass, one new line every 8 accesses on the first pass only.
    (0..N as u64)
        .map(|i| 0x10_0000 + (i * 8) % (16 << 10))
        .collect()
}

fn random_stream() -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..N)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (0x10_0000 + (x % (64 << 20))) & !7
        })
        .collect()
}

/// Median of five runs of `f`.
fn median<F: FnMut() -> f64>(mut f: F) -> f64 {
    let v: Vec<f64> = (0..5).map(|_| f()).collect();
    cabprof_bench_support::stats::median(&v)
}

/// Calls per call stream.
const CALLS: u64 = 1 << 22;

/// `CALLS` calls of a leaf from `depth` nested frames; one in `timed_every` timed (0: none).
fn call_stream(depth: u32, timed_every: u64) -> Vec<u64> {
    let m = |i: u32| MethodId::new(i).unwrap();
    let mut w = vec![Event::thread(1).unwrap().word()];
    let mut t = 0u64;
    let mut stamp = |w: &mut Vec<u64>| {
        t += 7;
        w.push(Event::time(t).word());
    };
    for d in 1..=depth {
        w.push(Event::call(m(d - 1), m(d)).word());
        stamp(&mut w);
    }
    let leaf = m(depth + 1);
    for i in 0..CALLS {
        w.push(Event::call(m(depth), leaf).word());
        // A timed call returns with its duration, as `#[profile]` sends it.
        let timed = timed_every != 0 && i % timed_every == 0;
        w.push(
            if timed {
                Event::timed_return(leaf, 40 + i % 8)
            } else {
                Event::ret(leaf)
            }
            .word(),
        );
    }
    for d in (1..=depth).rev() {
        stamp(&mut w);
        w.push(Event::ret(m(d)).word());
    }
    w
}

/// Best-of-five ns per call of `A` on `words`, fed in 16 K-word chunks as a ring delivers them.
fn per_call<A: Default>(words: &[u64], consume: impl Fn(&mut A, &[u64])) -> f64 {
    let v: Vec<f64> = (0..5)
        .map(|_| {
            let mut a = A::default();
            let t = Instant::now();
            for chunk in words.chunks(16 << 10) {
                consume(&mut a, chunk);
            }
            black_box(&a);
            t.elapsed().as_nanos() as f64 / CALLS as f64
        })
        .collect();
    v.into_iter().fold(f64::INFINITY, f64::min)
}

fn call_analyses() {
    println!("call streams: {CALLS} calls of a leaf, ns per call (M events/s)");
    println!(
        "{:<28} {:>16} {:>16} {:>16} {:>16} {:>16}",
        "stream", "method count", "call graph", "call tree", "time", "timeline"
    );
    for (name, depth, every) in [
        ("depth 1, untimed", 1, 0),
        ("depth 1, every call timed", 1, 1),
        ("depth 1, 1 in 16 timed", 1, 16),
        ("depth 3, untimed", 3, 0),
        ("depth 3, every call timed", 3, 1),
    ] {
        let w = call_stream(depth, every);
        let per_event = CALLS as f64 / w.len() as f64;
        let cell = |ns: f64| format!("{ns:>6.2} ({:>6.0})", 1e3 / (ns * per_event));
        let mc = per_call::<MethodCount>(&w, |a, c| a.consume(c));
        let cg = per_call::<CallGraph>(&w, |a, c| a.consume(c));
        let ct = per_call::<(CallTreeProfile, CallingContextTree)>(&w, |a, c| {
            consume_both(&mut a.0, &mut a.1, c)
        });
        let tp = per_call::<TimeProfile>(&w, |a, c| a.consume(c));
        let tl = per_call::<Timeline>(&w, |a, c| a.consume(c));
        println!(
            "{name:<28} {:>16} {:>16} {:>16} {:>16} {:>16}",
            cell(mc),
            cell(cg),
            cell(ct),
            cell(tp),
            cell(tl)
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    call_analyses();
    if std::env::args().any(|a| a == "--calls") {
        return;
    }
    for (name, addrs) in [
        ("L1-resident", l1_stream()),
        ("random 64 MB", random_stream()),
    ] {
        let words: Vec<u64> = addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| Event::mem(a, 8, i % 4 == 0).unwrap().word())
            .collect();
        let direct = median(|| {
            let mut sim = CacheSim::paper_default();
            let t = Instant::now();
            for (i, &a) in addrs.iter().enumerate() {
                sim.access(a, 8, i % 4 == 0);
            }
            black_box(sim.stats(0));
            N as f64 / t.elapsed().as_secs_f64() / 1e6
        });
        let via_words = median(|| {
            let mut sim = CacheSim::paper_default();
            let t = Instant::now();
            for chunk in words.chunks(16 << 10) {
                sim.consume(chunk);
            }
            black_box(sim.stats(0));
            N as f64 / t.elapsed().as_secs_f64() / 1e6
        });
        let reuse = median(|| {
            let mut rd = ReuseDistance::new(64).unwrap();
            let t = Instant::now();
            for chunk in words.chunks(16 << 10) {
                rd.consume(chunk);
            }
            black_box(rd.cold());
            N as f64 / t.elapsed().as_secs_f64() / 1e6
        });
        println!(
            "{name:<14} cache sim {direct:>7.1} M accesses/s (access), {via_words:>7.1} M/s (event words); reuse distance {reuse:>6.1} M/s"
        );
    }
}
