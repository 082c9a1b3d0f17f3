//! CAB against FastForward and N-way buffering, carrying the same instrumented workload (the
//! paper's Figure 7 in one command): a recursive, branchy program with `#[profile(paths)]`,
//! run under each buffer design in exhaustive mode with the call-graph and path analyses, and
//! once with no session (the instrumentation's branch only). Prints the median time of several
//! runs per design and its ratio to CAB.
//!
//! ```text
//! cargo run --release --example compare_buffers            # full
//! cargo run --release --example compare_buffers -- --short # quick (CI)
//! ```

use cabprof::{profile, Analysis, BufferDesign, Session};
use clap::Parser;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Collatz-style recursion with branches: many calls, many paths.
#[profile(paths)]
fn walk(n: u64, depth: u32) -> u64 {
    if depth == 0 || n <= 1 {
        return n;
    }
    let next = if n.is_multiple_of(2) {
        n / 2
    } else {
        3 * n + 1
    };
    if next.is_multiple_of(3) {
        walk(next, depth - 1) + 1
    } else if next.is_multiple_of(5) && depth.is_multiple_of(2) {
        walk(next / 5, depth - 1) ^ 7
    } else {
        walk(next, depth - 1)
    }
}

#[profile]
fn workload(items: u64) -> u64 {
    let mut acc = 0u64;
    for i in 1..=items {
        acc = acc.wrapping_add(walk(black_box(i), 40));
    }
    acc
}

fn timed(design: Option<BufferDesign>, items: u64) -> (Duration, u64, u64) {
    let session = design.map(|d| {
        Session::builder()
            .analyses(&[Analysis::CallGraph, Analysis::Paths])
            .buffer_design(d)
            .buffer_bytes(2 << 20)
            .chunk_bytes(128 << 10)
            .start()
            .expect("start session")
    });
    let t = Instant::now();
    let result = workload(items);
    let events = session.map_or(0, |s| s.finish().data.totals.events);
    (t.elapsed(), result, events)
}

/// Command-line options.
#[derive(Parser, Debug)]
struct Args {
    /// A short run (for the tests).
    #[arg(long)]
    short: bool,
}

/// How the table names a design.
fn label(d: BufferDesign) -> &'static str {
    match d {
        BufferDesign::Cab => "CAB",
        BufferDesign::FastForward => "FastForward",
        BufferDesign::NWay => "N-way",
    }
}

fn main() {
    let short = Args::parse().short;
    let (items, reps) = if short { (2_000, 3) } else { (200_000, 7) };
    let designs = std::iter::once(("no session (branch only)", None))
        .chain(BufferDesign::ALL.map(|d| (label(d), Some(d))));
    let mut rows = Vec::new();
    let mut expect = None;
    for (name, d) in designs {
        let mut times = Vec::new();
        let mut events = 0;
        for _ in 0..reps {
            let (t, r, e) = timed(d, items);
            assert_eq!(*expect.get_or_insert(r), r, "{name} changed the result");
            times.push(t);
            events = e;
        }
        times.sort();
        rows.push((name, times[reps / 2], times[0], times[reps - 1], events));
    }
    let cab = rows[1].1.as_secs_f64();
    println!("{items} items, median of {reps} runs, call graph + path profile, exhaustive, 2 MB ring / 128 KB chunks");
    println!(
        "{:<26} {:>10} {:>22} {:>14} {:>12}",
        "buffer", "median", "min..max", "events", "vs CAB"
    );
    for (name, med, lo, hi, events) in rows {
        println!(
            "{name:<26} {:>8.1}ms {:>9.1}..{:<9.1}ms {events:>14} {:>11.2}x",
            med.as_secs_f64() * 1e3,
            lo.as_secs_f64() * 1e3,
            hi.as_secs_f64() * 1e3,
            med.as_secs_f64() / cab
        );
    }
}
