//! The evaluation: the CAB paper's Figures 7, 8, 10 and 11, its cost model (section 4) and a
//! perturbation study, over the workload suite, written as CSV files and a `summary.txt` that
//! evaluates the issue's targets. `docs/EVALUATION.md` shows the results; the `plot` example
//! draws them.
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example evaluate -- [--smoke|--quick|--full]
//!     [--out DIR] [--reps N] [--size smoke|small|full] [--only NAME[,NAME..]] [--no-pin]
//!     [--trace]
//! cargo run --profile eval -p cabprof-workloads --example plot -- DIR
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
//! See `cabprof_workloads::evaluate` for how each cell is measured.

use cabprof_workloads::evaluate::{self, Options};
use cabprof_workloads::Size;
use clap::Parser;
use std::path::PathBuf;

/// Run the evaluation and write its CSV files and summary.
#[derive(Parser, Debug)]
#[command(name = "evaluate")]
struct Args {
    /// CI's check that the harness works: `Size::Smoke`, 1 repetition, trimmed grids.
    #[arg(long, overrides_with_all = ["quick", "full"])]
    smoke: bool,
    /// `Size::Small`, 5 repetitions, every buffer size and rate (the default).
    #[arg(long, overrides_with_all = ["smoke", "full"])]
    quick: bool,
    /// 5 repetitions at `Size::Full` (three workloads at `Size::Small`).
    #[arg(long, overrides_with_all = ["smoke", "quick"])]
    full: bool,
    /// Output directory.
    #[arg(long, value_name = "DIR", default_value = "docs/eval")]
    out: PathBuf,
    /// Repetitions per cell (positive).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    reps: Option<u64>,
    /// Workload size for every workload: smoke, small or full.
    #[arg(long, value_name = "SIZE")]
    size: Option<Size>,
    /// Only these workloads.
    #[arg(long, value_name = "NAME[,NAME..]", value_delimiter = ',', value_parser = parse_workload)]
    only: Option<Vec<String>>,
    /// Do not pin the application and the analyzer.
    #[arg(long)]
    no_pin: bool,
    /// One line per run on stderr.
    #[arg(long)]
    trace: bool,
}

fn parse_workload(v: &str) -> Result<String, String> {
    match cabprof_workloads::by_name(v) {
        Some(_) => Ok(v.to_string()),
        None => Err(format!("no workload {v:?}")),
    }
}

fn main() {
    let args = Args::parse();
    let mut o = if args.smoke {
        Options::smoke(args.out)
    } else if args.full {
        Options::full(args.out)
    } else {
        Options::quick(args.out)
    };
    o.verbose = true;
    if let Some(r) = args.reps {
        o.reps = r as usize;
    }
    if let Some(s) = args.size {
        o.size = s;
        o.sizes.clear();
    }
    o.only = args.only;
    o.pin = !args.no_pin;
    o.trace = args.trace;
    match evaluate::run(&o) {
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
