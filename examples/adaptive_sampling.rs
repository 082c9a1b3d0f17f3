//! What adaptive sampling does when a fixed rate overflows the analyzer.
//!
//! A steady, fixed-seed stream of calls (24 methods from 4 callers) is profiled three times
//! with method count, call graph and call tree (the call tree makes the analyzer slower than the
//! producer): exhaustively (the reference), sampling at a fixed 50% (the producer laps the
//! analyzer), and adaptive sampling starting at 50%. Prints chunks lapped, the rate used and
//! the paper's error rate against the reference. The calls are event words emitted by hand
//! (no `#[profile]`), through `cabprof-cab`'s runtime: a program doing the same depends on
//! that crate beside `cabprof`.
//!
//! `cargo run --release --example adaptive_sampling`

use cabprof::{Analysis, RunMode, Session, SessionBuilder};
use cabprof_cab::runtime::emit;
use cabprof_cab::{Event, MethodId};
use clap::Parser;

fn workload(calls: u64) {
    let mut seed = 0x5EED_u64;
    for _ in 0..calls {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = seed >> 33;
        let caller = MethodId::new(1 + (r % 4) as u32).unwrap();
        let callee = MethodId::new(5 + ((r >> 8) % 24).min((r >> 16) % 24) as u32).unwrap();
        emit(Event::call(caller, callee));
        emit(Event::ret(callee));
    }
}

fn run(b: SessionBuilder, calls: u64) -> cabprof::ReportData {
    let s = b
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::CallTree,
        ])
        .buffer_bytes(1 << 20)
        .chunk_bytes(64 << 10)
        .start()
        .unwrap();
    std::thread::spawn(move || workload(calls)).join().unwrap();
    s.finish().data
}

/// Command-line options.
#[derive(Parser, Debug)]
struct Args {
    /// A short run (for the tests).
    #[arg(long)]
    short: bool,
}

fn main() {
    let calls = if Args::parse().short {
        200_000
    } else {
        20_000_000
    };
    let exact = run(Session::builder(), calls);
    println!("{calls} calls; error = mean |actual - sampled/analyzed fraction| / actual over method counts / call-graph edges");
    for (name, adaptive) in [("fixed 50%", false), ("adaptive from 50%", true)] {
        let d = run(
            Session::builder().mode(RunMode::Sampling {
                rate: 0.5,
                burst_words: 8,
                adaptive,
            }),
            calls,
        );
        let e = d.sampling_error(&exact);
        println!(
            "{name:<18} chunks lapped {:>6}  rate at the end {:>7.4}  analyzed {:>5.1}%  error: method count {:>6.2}%  call graph {:>6.2}%",
            d.totals.chunks_lapped,
            d.session.rate_used,
            100.0 * d.estimate_rate(),
            100.0 * e.method_count.unwrap_or(f64::NAN),
            100.0 * e.call_graph.unwrap_or(f64::NAN)
        );
    }
}
