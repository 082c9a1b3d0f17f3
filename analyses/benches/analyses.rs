//! Analysis throughput on one core, medians of several runs in one process:
//!
//! - cache simulator, default two levels (paper: 32 KB 4-way + 512 KB 8-way, 64 B, FIFO), on an
//!   L1-resident stream and on a random stream over 64 MB, through `CacheSim::access` and
//!   through event words (`consume`);
//! - reuse distance on the same two streams.
//!
//! `cargo bench -p cabprof-analyses --bench analyses`

use cabprof_analyses::{CacheSim, EventAnalysis as _, ReuseDistance};
use cabprof_cab::event::Event;
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
    cabprof_cab::stats::median(&v)
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
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
