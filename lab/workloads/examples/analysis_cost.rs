//! What each analysis costs per event on the suite's real event streams: the analyzer-side
//! term `P` of the cost model, measured alone.
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example analysis_cost -- [--size small|full|smoke]
//!     [--runs N] [--only NAME[,NAME..]]
//! ```
//!
//! For each workload, the `calls` and (where it has one) `paths` variant runs once in an
//! exhaustive session whose analysis records every event word; the recorded stream is then
//! replayed through each analysis alone, in 16 K-word chunks as a ring would deliver them, and
//! the best of `--runs` replays (default 5) is printed in ns per event of the stream. The call
//! tree is shown both as its two parts (the depth-two profile and the calling context tree) and
//! as the facade runs them, fused into one decoding pass.

use cabprof_analyses::{
    call_tree::consume_both, CallGraph, CallTreeProfile, CallingContextTree, EventAnalysis,
    MethodCount, PathProfile,
};
use cabprof_cab::runtime::{RunMode, RuntimeConfig, Session};
use cabprof_workloads::{Size, Variant, Workload};
use clap::Parser;
use std::hint::black_box;
use std::time::Instant;

/// Records a ring's words.
#[derive(Default)]
struct Recorder(Vec<u64>);

impl EventAnalysis for Recorder {
    fn consume(&mut self, words: &[u64]) {
        self.0.extend_from_slice(words);
    }
    fn merge(&mut self, other: Self) {
        self.0.extend(other.0);
    }
}

/// Both call-tree analyses fed in one pass, as `cabprof`'s `CallTree` analysis runs them.
#[derive(Default)]
struct CallTree(CallTreeProfile, CallingContextTree);

impl EventAnalysis for CallTree {
    fn consume(&mut self, words: &[u64]) {
        consume_both(&mut self.0, &mut self.1, words);
    }
    fn merge(&mut self, other: Self) {
        self.0.merge(other.0);
        self.1.merge(other.1);
    }
}

fn record(w: &Workload, v: Variant, size: Size) -> Vec<u64> {
    let config = RuntimeConfig {
        mode: RunMode::Exhaustive,
        buffer_bytes: Some(32 << 20),
        chunk_bytes: Some(128 << 10),
        ..RuntimeConfig::default()
    };
    let s = Session::start(config, Recorder::default).expect("start a recording session");
    black_box(w.run_variant(v, size));
    s.finish().analysis.0
}

/// Best-of-`runs` replay time of `words` through a fresh `A`, in ns per word.
fn cost<A: EventAnalysis + Default>(words: &[u64], runs: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..runs {
        let mut a = A::default();
        let t = Instant::now();
        for c in words.chunks(16 << 10) {
            a.consume(c);
        }
        black_box(&a);
        best = best.min(t.elapsed().as_secs_f64());
    }
    best * 1e9 / words.len().max(1) as f64
}

/// Measure each analysis's cost per event on recorded event streams.
#[derive(Parser, Debug)]
#[command(name = "analysis_cost")]
struct Args {
    /// Workload size: smoke, small or full.
    #[arg(long, value_name = "SIZE", default_value = "small")]
    size: Size,
    /// Replays per analysis (the best is kept; positive).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Only these workloads.
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    only: Option<Vec<String>>,
}

fn main() {
    let Args { size, runs, only } = Args::parse();
    let runs = runs as usize;
    println!(
        "analysis cost, ns per event of the recorded stream (best of {runs}), size {}",
        size.name()
    );
    println!(
        "{:<8} {:<6} {:>11} {:>13} {:>11} {:>11} {:>10} {:>15} {:>8}",
        "workload",
        "stream",
        "events",
        "method-count",
        "call-graph",
        "tree-prof.",
        "context",
        "call-tree fused",
        "paths"
    );
    for w in cabprof_workloads::all() {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == w.name))
        {
            continue;
        }
        let calls = record(&w, Variant::Calls, size);
        println!(
            "{:<8} {:<6} {:>11} {:>13.2} {:>11.2} {:>11.2} {:>10.2} {:>15.2} {:>8}",
            w.name,
            "calls",
            calls.len(),
            cost::<MethodCount>(&calls, runs),
            cost::<CallGraph>(&calls, runs),
            cost::<CallTreeProfile>(&calls, runs),
            cost::<CallingContextTree>(&calls, runs),
            cost::<CallTree>(&calls, runs),
            "",
        );
        drop(calls);
        if w.paths {
            let paths = record(&w, Variant::Paths, size);
            println!(
                "{:<8} {:<6} {:>11} {:>13} {:>11} {:>11} {:>10} {:>15} {:>8.2}",
                w.name,
                "paths",
                paths.len(),
                "",
                "",
                "",
                "",
                "",
                cost::<PathProfile>(&paths, runs),
            );
        }
    }
}
