//! `cabprof`: the command-line side of cabprof.
//!
//! - `cabprof report FILE.json`: render a saved report in any `cabprof::report::Format`.
//! - `cabprof diff BASE NEW`: what changed between two reports, per function and edge; a CI
//!   gate with `--fail-above`, Bencher Metric Format with `--format bmf`.
//! - `cabprof simulate TRACE`: stream a Valgrind Lackey or binary memory trace through a CAB
//!   ring into the concurrent cache simulator and reuse-distance analysis.
//! - `cabprof trace convert|generate`: make binary traces from Lackey text, or synthetic ones.
//! - `cabprof hw`: the host's cache geometry (sysfs and the X-Ray probe) and the ring sizes
//!   cabprof derives from it.
//!
//! This file parses the arguments and dispatches; each subcommand lives in its own module.
//! Exit status: 0 on success, 1 on an error, 2 on a usage error or a malformed trace, 3 when
//! `cabprof diff --fail-above` finds a change above its threshold.

mod diff;
mod error;
mod hw;
mod report;
mod simulate;
mod trace_command;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use error::CliError;

const EXAMPLES: &str = "\
Examples:
  cabprof report profile.json --top 20
  cabprof report profile.json --format svg -o flame.svg
  cabprof report profile.json --format pprof -o profile.pb.gz
  cabprof diff base.json new.json --fail-above 5
  valgrind --tool=lackey --trace-mem=yes --log-file=app.lackey ./app
  cabprof simulate app.lackey --l1 32K:4:64 --l2 512K:8:64 --policy lru
  cabprof trace convert app.lackey app.cabtrace
  cabprof hw

Run `cabprof help SUBCOMMAND` (or `cabprof SUBCOMMAND --help`) for each one's options.";

/// Concurrent dynamic analysis with CAB rings: render reports, simulate caches from memory
/// traces, inspect the host's caches.
#[derive(Parser, Debug)]
#[command(name = "cabprof", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Render a saved JSON report again: tables, JSON, flame graphs, DOT, pprof or callgrind.
    Report(report::ReportArgs),
    /// Compare two saved reports: the change in calls, paths and misses per function and
    /// per call-graph edge, largest effect first; a CI gate with --fail-above.
    Diff(diff::DiffArgs),
    /// Simulate caches over a memory trace (Valgrind Lackey text or cabprof binary), streamed
    /// through a CAB ring into concurrent cache and reuse-distance analyses.
    Simulate(simulate::SimulateArgs),
    /// Make memory traces: convert Lackey text to cabprof's binary format, or generate one.
    Trace(trace_command::TraceArgs),
    /// Show the host's cache geometry (sysfs and the X-Ray probe) and the recommended ring.
    Hw(hw::HwArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Report(args) => report::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Trace(args) => trace_command::run(args),
        Command::Hw(args) => hw::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cabprof: error: {e}");
            e.exit_code()
        }
    }
}
