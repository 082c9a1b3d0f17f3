//! Naive against blocked matrix multiply, through the cache simulator: `#[profile(memory)]`
//! records every `a[i]` access of the kernels; each kernel runs in its own session with the
//! cache simulation (the paper's L1 32 KB 4-way + L2 512 KB 8-way, 64 B, FIFO) and the
//! reuse-distance analysis, and the two are printed side by side: miss rates per level and the
//! fully-associative LRU miss curve.
//!
//! ```text
//! cargo run --release --example cache_sim            # n = 160
//! cargo run --release --example cache_sim -- --short # n = 48 (CI)
//! ```

use cabprof::{profile, Analysis, Session};
use clap::Parser;

#[profile(memory)]
fn matmul_naive(n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for i in 0..n {
        for j in 0..n {
            let mut s = 0.0;
            for k in 0..n {
                s += a[i * n + k] * b[k * n + j];
            }
            c[i * n + j] = s;
        }
    }
}

#[profile(memory)]
fn matmul_blocked(n: usize, bs: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for ii in (0..n).step_by(bs) {
        for kk in (0..n).step_by(bs) {
            for jj in (0..n).step_by(bs) {
                for i in ii..(ii + bs).min(n) {
                    for k in kk..(kk + bs).min(n) {
                        let aik = a[i * n + k];
                        for j in jj..(jj + bs).min(n) {
                            c[i * n + j] += aik * b[k * n + j];
                        }
                    }
                }
            }
        }
    }
}

fn profile_kernel(kernel: impl FnOnce()) -> cabprof::ReportData {
    let session = Session::builder()
        .analyses(&[Analysis::Cache, Analysis::ReuseDistance])
        .start()
        .expect("start session");
    kernel();
    session.finish().data
}

/// Command-line options.
#[derive(Parser, Debug)]
struct Args {
    /// A short run (for the tests).
    #[arg(long)]
    short: bool,
}

fn main() {
    let short = Args::parse().short;
    let n = if short { 48 } else { 160 };
    let bs = 16;
    let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64).collect();
    let b: Vec<f64> = (0..n * n).map(|i| (i % 5) as f64).collect();
    let mut c1 = vec![0.0; n * n];
    let mut c2 = vec![0.0; n * n];
    let naive = profile_kernel(|| matmul_naive(n, &a, &b, &mut c1));
    let blocked = profile_kernel(|| matmul_blocked(n, bs, &a, &b, &mut c2));
    assert_eq!(c1, c2, "both kernels compute the same product");
    println!(
        "{n}x{n} f64 matrices ({} KB each), blocked with {bs}x{bs} tiles\n",
        n * n * 8 / 1024
    );
    let (nc, bc) = (
        naive.cache.as_ref().unwrap(),
        blocked.cache.as_ref().unwrap(),
    );
    println!("{:<32} {:>18} {:>18}", "", "naive", "blocked");
    for (l, (x, y)) in nc.levels.iter().zip(&bc.levels).enumerate() {
        let acc = |e: &cabprof::report::LevelEntry| {
            e.load_hits + e.load_misses + e.store_hits + e.store_misses
        };
        let rate = |e: &cabprof::report::LevelEntry| {
            100.0 * (e.load_misses + e.store_misses) as f64 / acc(e).max(1) as f64
        };
        println!(
            "L{} {} KB {}-way miss rate        {:>17.2}% {:>17.2}%",
            l + 1,
            x.size_bytes >> 10,
            x.ways,
            rate(x),
            rate(y)
        );
        println!(
            "   accesses reaching L{}          {:>18} {:>18}",
            l + 1,
            acc(x),
            acc(y)
        );
    }
    let (nr, br) = (
        naive.reuse_distance.as_ref().unwrap(),
        blocked.reuse_distance.as_ref().unwrap(),
    );
    println!("\nfully-associative LRU miss rate by capacity (reuse distance, 64 B lines):");
    for (p, q) in nr.miss_curve.iter().zip(&br.miss_curve) {
        println!(
            "  {:>6} lines ({:>5} KB)           {:>17.2}% {:>17.2}%",
            p.lines,
            p.lines * 64 / 1024,
            100.0 * p.misses as f64 / nr.accesses.max(1) as f64,
            100.0 * q.misses as f64 / br.accesses.max(1) as f64
        );
    }
}
