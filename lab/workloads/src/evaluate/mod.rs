//! The evaluation harness: every measurement of the paper's section 6 (and the cost model of
//! section 4) over the workload suite, written as CSV files plus a `summary.txt` that checks
//! the evaluation's targets. Run by the `evaluate` example and by the CI smoke test
//! (`tests/it/evaluate_smoke.rs`).
//!
//! # How a figure is measured
//!
//! Every figure is a set of *cells*: one configuration (a workload variant, a run mode, the
//! analyses, the ring) timed `reps` times. All the cells of one workload, the uninstrumented
//! baseline `A` included, run round-robin in one process: round 1 runs every cell once,
//! round 2 again, and so on, so that a change in the machine's load hits every cell alike. A
//! cell's time is the median of its runs; each run is timed from just before the session
//! starts to just after `finish` returns (so a concurrent run includes draining the analyzer's
//! backlog).
//!
//! Affinity: with pinning on (the default), the single-threaded workloads run on a thread
//! pinned to core 0 (the runtime's `pin_application`, applied once to a long-lived executor
//! thread) and the analyzer is pinned to the last core; the multi-threaded `pool` runs on an
//! unpinned thread (its workers would otherwise inherit core 0), analyzer still pinned.
//!
//! # The parts, one job each
//!
//! - `cells`: the ring constants, the buffer designs and the cell configurations ([`Cfg`],
//!   [`cells`]).
//! - `executor`: the pinned and the free executor thread, and host facts (its load and allowed cores).
//! - `probes`: the analyzer's CPU time, and the cost model's recording and replay.
//! - `measure`: running the cells ([`WorkloadResults`], [`results_key`]).
//! - `table` and `figures`: the CSV tables of every figure ([`Table`]).
//! - `summary`: `summary.txt`, the targets checked against the cells.
//! - [`page`]: the evaluation page's tables, regenerated from the files `run` writes.
//! - here: [`Options`] and [`run`], which measures everything and writes the files.

mod cells;
mod executor;
mod figures;
mod measure;
pub mod page;
mod probes;
mod summary;
mod table;

pub use cabprof_bench_support::host::cpu_model;
pub use cells::{
    cells, fig10_analysis, fig11_analyses, fig7_analyses, fig8_analyses, Cfg, BUFFER_BYTES,
    CHUNK_BYTES, FIG10_BUFFERS, FIG10_CHUNK_BYTES, RATES, RECORD_CAP_WORDS,
};
pub use executor::{cpus_allowed, loadavg};
pub use figures::Model;
pub use measure::{results_key, Cell, RunOut, WorkloadResults};
pub use probes::Recording;
pub use table::Table;

use crate::{Size, Workload};
use executor::Executor;
use figures::{costmodel, fig10, fig11, fig7, fig8, pinning, workloads_table};
use measure::measure_workload;
use std::path::PathBuf;
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// `smoke`, `quick` or `full` (for the outputs).
    pub preset: &'static str,
    /// Workload size, per workload.
    pub sizes: Vec<(&'static str, Size)>,
    /// Default size for workloads not in `sizes`.
    pub size: Size,
    /// Repetitions per cell.
    pub reps: usize,
    /// Output directory.
    pub out: PathBuf,
    /// Only these workloads (all if `None`).
    pub only: Option<Vec<String>>,
    /// Figure 10's buffer sizes.
    pub buffers: Vec<usize>,
    /// Figure 11's sampling rates.
    pub rates: Vec<f64>,
    /// Pin the application (core 0) and the analyzer (last core).
    pub pin: bool,
    /// Progress lines on stderr.
    pub verbose: bool,
    /// One line per run on stderr (cell, seconds).
    pub trace: bool,
}

impl Options {
    /// The CI smoke preset: `Size::Smoke`, one repetition, trimmed grids.
    pub fn smoke(out: PathBuf) -> Options {
        Options {
            preset: "smoke",
            sizes: Vec::new(),
            size: Size::Smoke,
            reps: 1,
            out,
            only: None,
            buffers: vec![16 << 10, 32 << 20],
            rates: vec![0.0, 0.05],
            pin: true,
            verbose: false,
            trace: false,
        }
    }

    /// The quick preset: `Size::Small`, five repetitions (interleaved, so drift on a shared
    /// machine hits every cell alike).
    pub fn quick(out: PathBuf) -> Options {
        Options {
            preset: "quick",
            sizes: Vec::new(),
            size: Size::Small,
            reps: 5,
            out,
            only: None,
            buffers: FIG10_BUFFERS.to_vec(),
            rates: RATES.to_vec(),
            pin: true,
            verbose: true,
            trace: false,
        }
    }

    /// The full preset: five repetitions at `Size::Full`, except three workloads that stay at
    /// `Size::Small` to keep the whole run bounded (13.5 min measured on the 2-core machine, under
    /// load): `sort` and `matrix`, whose cache
    /// simulation at full size takes 3–6 s per concurrent run (more sequentially, times 56
    /// cells and 5 repetitions), and `interp`, whose 130 M call events at full size make a
    /// call-tree session take about 6 s.
    pub fn full(out: PathBuf) -> Options {
        Options {
            preset: "full",
            sizes: vec![
                ("interp", Size::Small),
                ("sort", Size::Small),
                ("matrix", Size::Small),
            ],
            size: Size::Full,
            reps: 5,
            ..Options::quick(out)
        }
    }

    /// The size `w` runs at.
    pub fn size_of(&self, w: &str) -> Size {
        self.sizes
            .iter()
            .find(|(n, _)| *n == w)
            .map_or(self.size, |&(_, s)| s)
    }
}

/// What [`run`] produced.
#[derive(Debug)]
pub struct Outputs {
    /// Every workload's cells.
    pub results: Vec<WorkloadResults>,
    /// The CSV tables, by file stem.
    pub tables: Vec<(&'static str, Table)>,
    /// The text of `summary.txt`.
    pub summary: String,
}

/// Measure everything `o` asks for and write the CSVs and `summary.txt` into `o.out`.
pub fn run(o: &Options) -> std::io::Result<Outputs> {
    let t0 = Instant::now();
    let load_start = loadavg();
    std::fs::create_dir_all(&o.out)?;
    let pinned = Executor::new("eval-app-pinned", o.pin);
    let free = Executor::new("eval-app-free", false);
    let pinned_cpus = pinned.run(cpus_allowed);
    let free_cpus = free.run(cpus_allowed);
    let suite: Vec<Workload> = crate::all()
        .into_iter()
        .filter(|w| {
            o.only
                .as_ref()
                .is_none_or(|only| only.iter().any(|n| n == w.name))
        })
        .collect();
    let mut results = Vec::new();
    for w in suite {
        if o.verbose {
            eprintln!("{}: {} cells x {} reps", w.name, cells(&w, o).len(), o.reps);
        }
        results.push(measure_workload(w, o, &pinned, &free));
    }
    let wall = t0.elapsed().as_secs_f64();
    let (t10, tp) = fig10(&results, o);
    let tables = vec![
        ("workloads", workloads_table(&results)),
        ("fig7", fig7(&results)),
        ("fig8", fig8(&results)),
        ("fig10", t10),
        ("fig11", fig11(&results, o)),
        ("costmodel", costmodel(&results)),
        ("perturbation", tp),
        ("pinning", pinning(&results)),
    ];
    for (name, t) in &tables {
        t.write(&o.out.join(format!("{name}.csv")))?;
    }
    let header = format!(
        "cabprof evaluation, preset {} ({} repetitions per cell, median), sizes: {}\n\
         machine: {} ({} CPUs); app threads allowed on CPUs {} (pinned executor) / {} (free)\n\
         ring: {} KiB buffer, {} KiB chunk (Figure 10: {} KiB chunk); wall time {:.0} s\n\
         load average (1, 5, 15 min) at start: {}; at end: {}",
        o.preset,
        o.reps,
        results
            .iter()
            .map(|r| format!("{}={}", r.workload.name, r.size.name()))
            .collect::<Vec<_>>()
            .join(" "),
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        pinned_cpus,
        free_cpus,
        BUFFER_BYTES >> 10,
        CHUNK_BYTES >> 10,
        FIG10_CHUNK_BYTES >> 10,
        wall,
        load_start,
        loadavg()
    );
    let summary = summary::summary(&results, o, &header);
    std::fs::write(o.out.join("summary.txt"), &summary)?;
    Ok(Outputs {
        results,
        tables,
        summary,
    })
}
