//! A closer look at one cell of Figure 7: CAB against N-way buffering and FastForward on one
//! workload's event stream, alternated over many rounds in one process, so that differences of
//! a few percent, which the evaluation's five repetitions cannot resolve on a shared machine,
//! show through.
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example design_ab -- WORKLOAD
//!     [--size small|full|smoke] [--analysis paths|call-graph] [--rounds N]
//! ```
//!
//! Each round runs the workload's instrumented variant once per design (exhaustive, 2 MB ring
//! of 128 KB chunks, analyzer pinned, as in the evaluation), in a rotating order; the output is
//! each design's median and minimum time and its ratio to CAB (above 1 = CAB ahead).

use cabprof::{Analysis, BufferDesign, Session};
use cabprof_workloads::{Size, Variant};
use clap::{CommandFactory, Parser, ValueEnum};
use std::hint::black_box;
use std::time::Instant;

/// The analysis of `--analysis`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Stream {
    /// Path profiling.
    Paths,
    /// Call-graph profiling.
    CallGraph,
}

/// CAB, FastForward and N-way buffering, alternated, on one workload's stream.
#[derive(Parser, Debug)]
#[command(name = "design_ab")]
struct Args {
    /// The workload.
    #[arg(value_name = "WORKLOAD", value_parser = workload)]
    workload: String,
    /// Workload size: smoke, small or full.
    #[arg(long, value_name = "SIZE", default_value = "full")]
    size: Size,
    /// The stream: paths or call-graph.
    #[arg(long, value_enum, default_value = "paths")]
    analysis: Stream,
    /// Rounds (positive); the median and minimum are shown.
    #[arg(long, value_name = "N", default_value_t = 11, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
}

fn workload(name: &str) -> Result<String, String> {
    match cabprof_workloads::by_name(name) {
        Some(_) => Ok(name.to_string()),
        None => Err(format!("no workload {name:?}")),
    }
}

fn main() {
    let args = Args::parse();
    let name = args.workload;
    let w = cabprof_workloads::by_name(&name).expect("checked by the argument parser");
    let size = args.size;
    let rounds = args.rounds as usize;
    let analysis = match args.analysis {
        Stream::Paths => Analysis::Paths,
        Stream::CallGraph => Analysis::CallGraph,
    };
    if analysis == Analysis::Paths && !w.paths {
        Args::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!("{name} has no path events"),
            )
            .exit();
    }
    let variant = Variant::for_analysis(analysis);
    let designs = [
        ("CAB", BufferDesign::Cab),
        ("N-way", BufferDesign::NWay),
        ("FastForward", BufferDesign::FastForward),
    ];
    // Warm-up: page faults, allocator, and the session's pinning of this thread.
    Session::builder()
        .analyses(&[])
        .start()
        .expect("start")
        .finish();
    black_box(w.run_variant(variant, size));
    let mut times = vec![Vec::new(); designs.len()];
    for round in 0..rounds {
        for k in 0..designs.len() {
            let i = (round + k) % designs.len();
            let t = Instant::now();
            let s = Session::builder()
                .analyses(&[analysis])
                .buffer_bytes(2 << 20)
                .chunk_bytes(128 << 10)
                .buffer_design(designs[i].1)
                .start()
                .expect("start a session");
            black_box(w.run_variant(variant, size));
            s.finish();
            times[i].push(t.elapsed().as_secs_f64());
        }
    }
    for v in &mut times {
        v.sort_by(f64::total_cmp);
    }
    let (cab_med, cab_min) = (times[0][rounds / 2], times[0][0]);
    println!(
        "{name} ({}), {} stream, {rounds} rounds: median / min ms, ratio to CAB",
        size.name(),
        variant.name()
    );
    for ((label, _), v) in designs.iter().zip(&times) {
        let (med, min) = (v[rounds / 2], v[0]);
        println!(
            "  {label:<12} {:>8.1} / {:>8.1}   {:.3} / {:.3}",
            med * 1e3,
            min * 1e3,
            med / cab_med,
            min / cab_min
        );
    }
}
