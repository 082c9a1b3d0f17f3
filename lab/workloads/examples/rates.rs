//! The suite's time and event rate per workload and instrumentation variant: the spread of
//! event rates, like the paper's benchmark table.
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example rates -- [--size full|small|smoke]
//!     [--runs N] [--only NAME[,NAME..]] [--all]
//! ```
//!
//! For each workload, in one process: the plain twin's time `A` and the instrumented twin's
//! time with no session running (dormant instrumentation); then each variant inside an
//! exhaustive session running the analyses that variant is for (the paper's per-client
//! instrumentation): `calls` with method count + call graph + call tree, `paths` with the path
//! profile (workloads with `paths`), `memory` with the cache simulator (workloads with
//! `memory`), and with `--all` the `instrumented` twin with every analysis. `CABPROF_*`
//! variables apply to the sessions (a `CABPROF_ANALYSES` overrides the choice above). Times
//! are medians of `--runs` runs (default 3) with min–max. Events are the session's totals,
//! split into calls (each a Call and a Return), path events and memory events; the event rate
//! is events per second of *uninstrumented* run time `A`, the rate at which the program
//! generates events.
//!
//! Affinity: starting a session pins the calling thread to core 0 for good (unless
//! `CABPROF_PIN=0`), and threads it spawns later inherit that, so the pool's workers share
//! core 0 with it while the analyzer has core 1. An empty session runs first so that every
//! measurement, `A` included, sees the same affinity.

use cabprof::{Analysis, SessionBuilder};
use cabprof_workloads::{Size, Variant, Workload};
use clap::Parser;
use std::hint::black_box;
use std::time::Instant;

/// Event rates of every workload, measured with the session the environment configures.
#[derive(Parser, Debug)]
#[command(name = "rates")]
struct Args {
    /// Workload size: full, small or smoke.
    #[arg(long, value_name = "SIZE", default_value = "full")]
    size: Size,
    /// Runs per workload (positive); the median and the range are shown.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Only these workloads.
    #[arg(long, value_name = "NAME[,NAME..]", value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Also the `instrumented` twin with every analysis.
    #[arg(long)]
    all: bool,
}

fn usage(msg: &str) -> ! {
    if !msg.is_empty() {
        eprintln!("rates: {msg}");
    }
    eprintln!("usage: rates [--size full|small|smoke] [--runs N] [--only NAME[,NAME..]] [--all]");
    std::process::exit(2)
}

/// Median, min and max of some seconds.
fn stats(xs: Vec<f64>) -> (f64, f64, f64) {
    let (lo, hi) = cabprof_bench_support::stats::min_max(&xs);
    (cabprof_bench_support::stats::median(&xs), lo, hi)
}

fn ms((med, lo, hi): (f64, f64, f64)) -> String {
    format!("{:.1} ({:.1}-{:.1})", med * 1e3, lo * 1e3, hi * 1e3)
}

/// Time `f` `runs` times, checking its checksum.
fn timed(runs: usize, expect: u64, what: &str, f: impl Fn() -> u64) -> (f64, f64, f64) {
    let mut xs = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let h = black_box(f());
        xs.push(t.elapsed().as_secs_f64());
        assert_eq!(h, expect, "{what}: wrong checksum");
    }
    stats(xs)
}

struct SessionRun {
    secs: f64,
    events: u64,
    calls: u64,
    paths: u64,
    mem: u64,
    blocks: u64,
    threads: usize,
}

fn session_run(
    w: &Workload,
    v: Variant,
    analyses: &[Analysis],
    size: Size,
    expect: u64,
) -> SessionRun {
    let b = SessionBuilder::new()
        .analyses(analyses)
        .from_env()
        .unwrap_or_else(|e| usage(&e.to_string()));
    let session = b.start().unwrap_or_else(|e| usage(&e.to_string()));
    let t = Instant::now();
    let h = black_box(w.run_variant(v, size));
    let report = session.finish();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(
        h,
        expect,
        "{} {}: wrong checksum in a session",
        w.name,
        v.name()
    );
    let d = &report.data;
    assert!(d.analyzer_failures.is_empty(), "{:?}", d.analyzer_failures);
    let calls = d
        .method_count
        .as_ref()
        .map(|m| m.iter().map(|e| e.count).sum());
    let paths = d.paths.as_ref().map(|p| p.iter().map(|e| e.count).sum());
    // What the analyses did not count, by elimination: each variant emits calls plus at most
    // one other kind.
    let events = d.totals.events;
    let (calls, paths, mem) = match (v, calls, paths) {
        (_, Some(c), Some(p)) => (c, p, events.saturating_sub(2 * c + p)),
        (Variant::Calls, Some(c), None) => (c, 0, 0),
        (Variant::Memory, Some(c), None) => (c, 0, events.saturating_sub(2 * c)),
        (Variant::Paths, None, Some(p)) => ((events - p) / 2, p, 0),
        (Variant::Memory, None, None) => {
            let m = d
                .cache
                .as_ref()
                .and_then(|c| c.levels.first())
                .map_or(0, |l| {
                    l.load_hits + l.load_misses + l.store_hits + l.store_misses
                });
            ((events - m) / 2, 0, m)
        }
        _ => (0, 0, 0),
    };
    SessionRun {
        secs,
        events,
        calls,
        paths,
        mem,
        blocks: d.totals.producer_blocks,
        threads: d.threads.iter().filter(|t| t.events > 0).count(),
    }
}

fn main() {
    let a = Args::parse();
    let runs = a.runs as usize;
    let suite: Vec<Workload> = cabprof_workloads::all()
        .into_iter()
        .filter(|w| {
            a.only
                .as_ref()
                .is_none_or(|o| o.iter().any(|n| n == w.name))
        })
        .collect();
    if suite.is_empty() {
        usage("no workload matches --only");
    }
    // Same affinity for every measurement (see the module docs).
    let pin = SessionBuilder::new()
        .from_env()
        .unwrap_or_else(|e| usage(&e.to_string()));
    drop(
        pin.start()
            .unwrap_or_else(|e| usage(&e.to_string()))
            .finish(),
    );
    println!(
        "# cabprof workloads: size {}, {} runs each (median, min-max)",
        a.size.name(),
        runs
    );
    println!();
    println!(
        "| workload | A: plain ms | dormant ms | variant | analyses | session ms | session/A | events | calls | path ev | mem ev | Mev/s of A | blocks | threads |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut rates = Vec::new();
    for w in &suite {
        // Warm up once (page faults, allocator) and take the reference checksum.
        let expect = (w.run_plain)(a.size);
        let plain = timed(runs, expect, w.name, || (w.run_plain)(a.size));
        let dormant = timed(runs, expect, w.name, || (w.run_instrumented)(a.size));
        let mut rows: Vec<(Variant, &str, Vec<Analysis>)> = vec![(
            Variant::Calls,
            "method-count,call-graph,call-tree",
            vec![
                Analysis::MethodCount,
                Analysis::CallGraph,
                Analysis::CallTree,
            ],
        )];
        if w.paths {
            rows.push((Variant::Paths, "paths", vec![Analysis::Paths]));
        }
        if w.memory {
            rows.push((Variant::Memory, "cache", vec![Analysis::Cache]));
        }
        if a.all {
            rows.push((Variant::Instrumented, "all", Analysis::ALL.to_vec()));
        }
        for (i, (v, names, analyses)) in rows.iter().enumerate() {
            let mut secs = Vec::new();
            let mut last = None;
            for _ in 0..runs {
                let r = session_run(w, *v, analyses, a.size, expect);
                secs.push(r.secs);
                last = Some(r);
            }
            let r = last.expect("at least one run");
            let sess = stats(secs);
            let rate = r.events as f64 / plain.0 / 1e6;
            rates.push((w.name, v.name(), rate));
            let (wn, pa, da) = if i == 0 {
                (w.name, ms(plain), ms(dormant))
            } else {
                ("", String::new(), String::new())
            };
            println!(
                "| {wn} | {pa} | {da} | {} | {names} | {} | {:.2} | {} | {} | {} | {} | {:.1} | {} | {} |",
                v.name(),
                ms(sess),
                sess.0 / plain.0,
                r.events,
                r.calls,
                r.paths,
                r.mem,
                rate,
                r.blocks,
                r.threads
            );
        }
    }
    rates.sort_by(|x, y| x.2.total_cmp(&y.2));
    println!();
    println!("event rates (Mev/s of A), lowest first:");
    for (w, v, r) in &rates {
        println!("  {r:9.2}  {w} {v}");
    }
}
