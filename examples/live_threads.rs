//! Many threads alive at once, each calling one profiled function 2,000 times (a barrier
//! halfway keeps them all alive together): the case of issue 45, where every thread's ring
//! starts small and grows only as far as its thread needs.
//!
//! ```text
//! CABPROF=1 cargo run --release --example live_threads -- 1000   # threads (default 100)
//! ```

use std::sync::{Arc, Barrier};

#[cabprof::profile]
fn work(x: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(2654435761) >> 7)
}

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let barrier = barrier.clone();
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let mut sum = 0u64;
                    for i in 0..2_000u64 {
                        if i == 1_000 {
                            barrier.wait();
                        }
                        sum = sum.wrapping_add(work(i ^ t as u64));
                    }
                    sum
                })
                .expect("spawn")
        })
        .collect();
    let total = handles
        .into_iter()
        .fold(0u64, |a, h| a.wrapping_add(h.join().unwrap()));
    println!("{threads} threads: {total}");
}
