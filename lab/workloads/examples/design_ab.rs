//! A closer look at one cell of Figure 7: CAB against N-way buffering and FastForward on one
//! workload's event stream, alternated over many rounds in one process, so that differences of
//! a few percent, which the evaluation's five repetitions cannot resolve on a shared machine,
//! show through.
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example design_ab -- WORKLOAD
//!     [--size small|full|smoke] [--analysis paths|call-graph] [--rounds N] [--events N]
//!     [--compare designs|pages]
//! ```
//!
//! `--compare pages` races the ring's memory instead: CAB with its rings on transparent huge
//! pages (the default), CAB on 4 KiB pages, and the same analysis run sequentially (inline, no
//! ring). With `--events 1` each run is one run of the workload in a fresh session, as in the
//! evaluation, where a thread's first lap of its new ring is part of the time.
//!
//! Each round runs the workload's instrumented variant once per candidate (rings exhaustive,
//! 2 MB of 128 KB chunks, analyzer pinned, as in the evaluation), in an order shuffled afresh
//! each round (fixed seed). Each candidate's time is divided by the reference's (CAB, on huge
//! pages: the first row) *of the same round*; the output is each candidate's median and
//! minimum time and the median of its per-round ratios to the reference with a 95 %
//! percentile-bootstrap interval (`cabprof_bench_support::stats::median_interval`), and a verdict:
//! `faster` or `slower` than the reference when the whole interval is below or above 1,
//! `unresolved` when it contains 1. A run is long enough that start-up and a short stall of the
//! shared machine are small against it: the workload runs as many times inside one session as
//! it takes to reach `--events` events (default 100M; the warm-up run counts them), and the
//! header gives the events per run and the repetitions.

use cabprof::{Analysis, BufferDesign, Session, SessionBuilder};
use cabprof_bench_support::{rounds::interleaved, stats};
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

/// What a round races.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Compare {
    /// CAB, N-way buffering and FastForward.
    Designs,
    /// CAB on huge pages, CAB on 4 KiB pages, and sequential (inline) analysis.
    Pages,
}

/// CAB against FastForward and N-way buffering (or against CAB on 4 KiB pages and sequential
/// analysis), alternated, on one workload's stream.
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
    /// Rounds (at least 9); each candidate runs once per round.
    #[arg(long, value_name = "N", default_value_t = stats::ROUNDS as u64, value_parser = clap::value_parser!(u64).range(stats::MIN_ROUNDS as u64..))]
    rounds: u64,
    /// Events per run, at least: the workload is repeated inside one session until a run
    /// reaches this many (at least 1).
    #[arg(long, value_name = "N", default_value_t = 100_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    events: u64,
    /// What to race: the buffer designs, or huge against 4 KiB ring pages (and sequential).
    #[arg(long, value_enum, default_value = "designs")]
    compare: Compare,
}

/// An exhaustive session on a `design` ring of the evaluation's size (2 MB of 128 KB chunks).
fn ring(design: BufferDesign) -> SessionBuilder {
    Session::builder()
        .buffer_bytes(2 << 20)
        .chunk_bytes(128 << 10)
        .buffer_design(design)
}

/// How the table names a design.
fn label(d: BufferDesign) -> &'static str {
    match d {
        BufferDesign::Cab => "CAB",
        BufferDesign::FastForward => "FastForward",
        BufferDesign::NWay => "N-way",
    }
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
    // Each candidate: its label and the session it runs in (CAB on huge pages first: the
    // reference every other is divided by).
    let designs: Vec<(&str, SessionBuilder)> = match args.compare {
        Compare::Designs => BufferDesign::ALL
            .iter()
            .map(|&d| (label(d), ring(d)))
            .collect(),
        Compare::Pages => vec![
            ("CAB huge pages", ring(BufferDesign::Cab)),
            ("CAB 4K pages", ring(BufferDesign::Cab).huge_pages(false)),
            ("sequential", Session::builder().sequential()),
        ],
    };
    let session = |b: &SessionBuilder| {
        b.clone()
            .analyses(&[analysis])
            .start()
            .expect("start a session")
    };
    // Warm-up (page faults, allocator, the session's pinning of this thread), which also
    // counts one run's events: the workload repeats until a run reaches `--events`.
    let s = session(&designs[0].1);
    black_box(w.run_variant(variant, size));
    let once = s.finish().data.totals.events.max(1);
    let repeats = args.events.div_ceil(once);
    let mut events = Vec::new();
    let times = interleaved(rounds, designs.len(), stats::SEED, |i| {
        let t = Instant::now();
        let s = session(&designs[i].1);
        for _ in 0..repeats {
            black_box(w.run_variant(variant, size));
        }
        let report = s.finish();
        let secs = t.elapsed().as_secs_f64();
        events.push(report.data.totals.events as f64);
        secs
    });
    let (few, many) = stats::min_max(&events);
    println!(
        "{name} ({}) x {repeats} per run, {} stream, {:.1}..{:.1} M events per run, {rounds} rounds, \
         each candidate once per round in a shuffled order",
        size.name(),
        variant.name(),
        few / 1e6,
        many / 1e6,
    );
    println!(
        "  {:<14} {:>18}   ratio to {} in the same round: median [95% CI]",
        "candidate", "median / min ms", designs[0].0
    );
    for ((label, _), v) in designs.iter().zip(&times) {
        let (min, _) = stats::min_max(v);
        let head = format!(
            "  {label:<14} {:>8.1} / {:>8.1}",
            stats::median(v) * 1e3,
            min * 1e3
        );
        if std::ptr::eq(v, &times[0]) {
            println!("{head}   (reference)");
            continue;
        }
        let ci = stats::median_interval(
            &stats::paired_ratios(v, &times[0]),
            0.95,
            stats::RESAMPLES,
            stats::SEED,
        );
        println!(
            "{head}   {:.3} [{:.3}, {:.3}] {}",
            ci.median,
            ci.lo,
            ci.hi,
            ci.time_verdict()
        );
    }
}
