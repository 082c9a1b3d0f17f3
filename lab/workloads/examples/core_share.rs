//! Do the machine's two cores really run independently? A fixed integer loop is timed on core
//! 0 alone and then while another thread spins on core 1, alternating, several rounds. On two
//! separate physical cores the ratio is about 1.00; on two hyperthreads of one core (or a
//! host that cannot give both vCPUs a full core) it is well above 1, and an analyzer thread on
//! core 1 then takes throughput from the application on core 0 whatever the buffer does.
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example core_share -- [--rounds N]
//! ```

use clap::Parser;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// About 0.1 s of integer work in eight independent chains, enough to keep a core's execution
/// ports busy (a sibling hyperthread would compete for them), with no memory traffic.
fn work() -> u64 {
    let mut x = [0u64; 8];
    for (k, v) in x.iter_mut().enumerate() {
        *v = black_box(0x9E37_79B9_7F4A_7C15u64 ^ k as u64);
    }
    for i in 0..40_000_000u64 {
        for v in x.iter_mut() {
            *v = v.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(i) ^ (*v >> 7);
        }
    }
    x.iter().fold(0, |a, &v| a ^ v)
}

/// Pin the calling thread to `core` (of the machine's online cores, not of the inherited mask).
fn pin(core: usize) {
    if let Some(id) = cabprof_cab::runtime::online_cores()
        .into_iter()
        .find(|c| c.id == core)
    {
        core_affinity::set_for_current(id);
    }
}

/// How much a busy second core slows a loop on core 0.
#[derive(Parser, Debug)]
#[command(name = "core_share")]
struct Args {
    /// Rounds of each measurement (positive); the median is shown.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
}

fn timed() -> f64 {
    let t = Instant::now();
    black_box(work());
    t.elapsed().as_secs_f64()
}

fn main() {
    let rounds = Args::parse().rounds as usize;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        println!("one core: nothing to compare");
        return;
    }
    pin(0);
    let (mut alone, mut shared) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        alone.push(timed());
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let spinner = std::thread::spawn(move || {
            pin(1);
            while !s.load(Ordering::Relaxed) {
                black_box(work());
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        shared.push(timed());
        stop.store(true, Ordering::Relaxed);
        spinner.join().expect("spinner");
    }
    alone.sort_by(f64::total_cmp);
    shared.sort_by(f64::total_cmp);
    let (a, b) = (alone[rounds / 2], shared[rounds / 2]);
    println!(
        "core 0 loop, median of {rounds}: alone {:.1} ms, core 1 busy {:.1} ms, ratio {:.2}",
        a * 1e3,
        b * 1e3,
        b / a
    );
}
