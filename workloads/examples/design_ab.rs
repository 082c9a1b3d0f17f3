//! A closer look at one cell of Figure 7: CAB against N-way buffering and FastForward on one
//! workload's event stream, alternated over many rounds in one process, so that differences of
//! a few percent, which the evaluation's five repetitions cannot resolve on a shared machine,
//! show through.
//!
//! ```text
//! cargo run --release -p cabprof-workloads --example design_ab -- WORKLOAD
//!     [--size small|full|smoke] [--analysis paths|call-graph] [--rounds N]
//! ```
//!
//! Each round runs the workload's instrumented variant once per design (exhaustive, 2 MB ring
//! of 128 KB chunks, analyzer pinned, as in the evaluation), in a rotating order; the output is
//! each design's median and minimum time and its ratio to CAB (above 1 = CAB ahead).

use cabprof::{Analysis, BufferDesign, Session};
use std::hint::black_box;
use std::time::Instant;
use workloads::{Size, Variant};

fn usage(msg: &str) -> ! {
    eprintln!(
        "design_ab: {msg}\nusage: design_ab WORKLOAD [--size small|full|smoke] [--analysis paths|call-graph] [--rounds N]"
    );
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| usage("which workload?"));
    let w = workloads::by_name(&name).unwrap_or_else(|| usage(&format!("no workload {name:?}")));
    let (mut size, mut analysis, mut rounds) = (Size::Full, Analysis::Paths, 11usize);
    while let Some(a) = args.next() {
        let v = args
            .next()
            .unwrap_or_else(|| usage(&format!("{a} needs a value")));
        match a.as_str() {
            "--size" => size = Size::parse(&v).unwrap_or_else(|| usage(&format!("bad size {v:?}"))),
            "--analysis" => {
                analysis = match v.as_str() {
                    "paths" => Analysis::Paths,
                    "call-graph" => Analysis::CallGraph,
                    _ => usage(&format!("bad analysis {v:?}")),
                }
            }
            "--rounds" => {
                rounds = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| usage(&format!("bad --rounds {v:?}")))
            }
            _ => usage(&format!("unknown argument {a:?}")),
        }
    }
    if analysis == Analysis::Paths && !w.paths {
        usage(&format!("{name} has no path events"));
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
