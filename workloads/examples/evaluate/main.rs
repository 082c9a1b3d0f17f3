//! The evaluation: the CAB paper's Figures 7, 8, 10 and 11, its cost model (section 4) and a
//! perturbation study, over the workload suite, written as CSV files and a `summary.txt` that
//! evaluates the issue's targets. `docs/EVALUATION.md` shows the results; the `plot` example
//! draws them.
//!
//! ```text
//! cargo run --release -p cabprof-workloads --example evaluate -- [--smoke|--quick|--full]
//!     [--out DIR] [--reps N] [--size smoke|small|full] [--only NAME[,NAME..]] [--no-pin]
//!     [--trace]
//! cargo run --release -p cabprof-workloads --example plot -- DIR
//! ```
//!
//! - `--smoke`: `Size::Smoke`, 1 repetition, 2 buffer sizes and 2 sampling rates (CI's check
//!   that the harness works; seconds).
//! - `--quick` (default): `Size::Small`, 5 repetitions, every buffer size and rate (about 1.5
//!   minutes on the 2-core machine when it is quiet, more under load).
//! - `--full`: 5 repetitions at `Size::Full`, except `interp`, `sort` and `matrix` at
//!   `Size::Small` (see `Options::full`): about 15 minutes.
//!
//! Outputs in `--out` (default `docs/eval`): `fig7.csv`, `fig8.csv`, `fig10.csv`, `fig11.csv`,
//! `costmodel.csv`, `perturbation.csv`, `pinning.csv`, `workloads.csv` and `summary.txt`.
//! See `harness.rs` for how each cell is measured.

mod harness;

use harness::Options;
use std::path::PathBuf;
use workloads::Size;

fn usage(msg: &str) -> ! {
    if !msg.is_empty() {
        eprintln!("evaluate: {msg}");
    }
    eprintln!(
        "usage: evaluate [--smoke|--quick|--full] [--out DIR] [--reps N] [--size smoke|small|full] \
         [--only NAME[,NAME..]] [--no-pin] [--trace]"
    );
    std::process::exit(2)
}

fn main() {
    let mut preset = "quick";
    let mut out = PathBuf::from("docs/eval");
    let mut reps = None;
    let mut size = None;
    let mut only = None;
    let mut pin = true;
    let mut trace = false;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--smoke" => preset = "smoke",
            "--quick" => preset = "quick",
            "--full" => preset = "full",
            "--out" => {
                out = PathBuf::from(it.next().unwrap_or_else(|| usage("--out needs a path")))
            }
            "--reps" => {
                reps = Some(
                    it.next()
                        .and_then(|v| v.parse::<usize>().ok())
                        .filter(|&n| n > 0)
                        .unwrap_or_else(|| usage("--reps needs a positive number")),
                )
            }
            "--size" => {
                size = Some(
                    it.next()
                        .and_then(|v| Size::parse(&v))
                        .unwrap_or_else(|| usage("--size needs smoke, small or full")),
                )
            }
            "--only" => {
                only = Some(
                    it.next()
                        .unwrap_or_else(|| usage("--only needs names"))
                        .split(',')
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                )
            }
            "--no-pin" => pin = false,
            "--trace" => trace = true,
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let mut o = match preset {
        "smoke" => Options::smoke(out),
        "full" => Options::full(out),
        _ => Options::quick(out),
    };
    o.verbose = true;
    if let Some(r) = reps {
        o.reps = r;
    }
    if let Some(s) = size {
        o.size = s;
        o.sizes.clear();
    }
    if let Some(names) = only {
        if let Some(bad) = names.iter().find(|n| workloads::by_name(n).is_none()) {
            usage(&format!("no workload {bad:?}"));
        }
        o.only = Some(names);
    }
    o.pin = pin;
    o.trace = trace;
    match harness::run(&o) {
        Ok(outputs) => {
            print!("{}", outputs.summary);
            eprintln!(
                "{} workloads: wrote {} tables and summary.txt to {}",
                outputs.results.len(),
                outputs.tables.len(),
                o.out.display()
            );
        }
        Err(e) => {
            eprintln!("evaluate: could not write to {}: {e}", o.out.display());
            std::process::exit(1);
        }
    }
}
