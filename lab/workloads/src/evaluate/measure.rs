//! Running cells: one run of a cell, every run of a workload's cells round-robin, and what
//! two runs that saw the same events must agree on.

use super::cells::{cells, Cfg, BUFFER_BYTES, CHUNK_BYTES};
use super::executor::Executor;
use super::probes::{record, replay, Probe, Recording, ANALYZER_CPU_NS};
use super::Options;
use crate::{Size, Variant, Workload};
use cabprof::{ReportData, RunMode, Session};
use cabprof_bench_support::stats::median;
use cabprof_cab::runtime;
use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// One run of one cell.
#[derive(Clone, Debug, Default)]
pub struct RunOut {
    /// Wall time of the run, seconds.
    pub secs: f64,
    /// Times a producer found its ring full and waited.
    pub blocks: u64,
    /// Seconds producers spent waiting.
    pub blocked_s: f64,
    /// The analyzer thread's CPU time (communication cells only), seconds.
    pub analyzer_cpu_s: f64,
    /// The report, for cells whose results are compared.
    pub data: Option<ReportData>,
}

/// Every run of one cell.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// The runs, in order.
    pub runs: Vec<RunOut>,
}

impl Cell {
    /// The median run time, seconds.
    pub fn median_s(&self) -> f64 {
        median(&self.runs.iter().map(|r| r.secs).collect::<Vec<_>>())
    }
    /// The median of `f` over the runs.
    pub(crate) fn median_of(&self, f: impl Fn(&RunOut) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }
    /// The fastest and the slowest run time, seconds.
    pub fn spread(&self) -> (f64, f64) {
        let xs: Vec<f64> = self.runs.iter().map(|r| r.secs).collect();
        (
            xs.iter().copied().fold(f64::INFINITY, f64::min),
            xs.iter().copied().fold(0.0, f64::max),
        )
    }
}

fn run_session(
    w: Workload,
    v: Variant,
    size: Size,
    expect: u64,
    b: cabprof::SessionBuilder,
    keep: bool,
) -> RunOut {
    let t = Instant::now();
    let s = b.start().expect("start a session");
    let h = black_box(w.run_variant(v, size));
    let report = s.finish();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(h, expect, "{} {}: wrong checksum", w.name, v.name());
    let d = report.data;
    assert!(
        d.analyzer_failures.is_empty(),
        "{}: {:?}",
        w.name,
        d.analyzer_failures
    );
    RunOut {
        secs,
        blocks: d.totals.producer_blocks,
        blocked_s: d.totals.blocked_s,
        analyzer_cpu_s: 0.0,
        data: keep.then_some(d),
    }
}

/// Run cell `cfg` of `w` once (on the calling thread).
///
/// One function from start to report, so that what is timed (and what is not) reads in one
/// place: setting up, the timed run, the drain, the measurement.
fn run_once(
    w: Workload,
    cfg: Cfg,
    size: Size,
    expect: u64,
    pin: bool,
    rec: Option<&Recording>,
) -> RunOut {
    let base = || {
        Session::builder()
            .buffer_bytes(BUFFER_BYTES)
            .chunk_bytes(CHUNK_BYTES)
            .pin(pin)
    };
    let keep = cfg.keeps_report();
    match cfg {
        Cfg::Plain => {
            let t = Instant::now();
            let h = black_box((w.run_plain)(size));
            let secs = t.elapsed().as_secs_f64();
            assert_eq!(h, expect, "{}: wrong checksum", w.name);
            RunOut {
                secs,
                ..RunOut::default()
            }
        }
        Cfg::Instrument(v) => run_session(
            w,
            v,
            size,
            expect,
            base().analyses(&[]).mode(RunMode::InstrumentOnly),
            keep,
        ),
        Cfg::Enqueue(v) => run_session(
            w,
            v,
            size,
            expect,
            base().analyses(&[]).mode(RunMode::EnqueueOnly),
            keep,
        ),
        Cfg::Communication(v) => {
            ANALYZER_CPU_NS.store(0, Ordering::Relaxed);
            let t = Instant::now();
            let config = runtime::RuntimeConfig {
                mode: RunMode::Exhaustive,
                buffer_bytes: Some(BUFFER_BYTES),
                chunk_bytes: Some(CHUNK_BYTES),
                pin,
                ..Default::default()
            };
            let s = runtime::Session::start(config, Probe::default).expect("start a session");
            let h = black_box(w.run_variant(v, size));
            let r = s.finish();
            let secs = t.elapsed().as_secs_f64();
            assert_eq!(h, expect, "{} {}: wrong checksum", w.name, v.name());
            assert!(r.analyzer_failures.is_empty(), "{:?}", r.analyzer_failures);
            RunOut {
                secs,
                blocks: r.totals.blocks,
                blocked_s: r.totals.blocked.as_secs_f64(),
                analyzer_cpu_s: ANALYZER_CPU_NS.load(Ordering::Relaxed) as f64 * 1e-9,
                data: None,
            }
        }
        Cfg::Concurrent {
            variant,
            analysis,
            design,
            buffer,
            chunk,
            unpinned,
        } => run_session(
            w,
            variant,
            size,
            expect,
            Session::builder()
                .analyses(&[analysis])
                .mode(RunMode::Exhaustive)
                .buffer_design(design)
                .buffer_bytes(buffer)
                .chunk_bytes(chunk)
                .pin(pin && !unpinned),
            keep,
        ),
        Cfg::Sequential(v, a) => run_session(
            w,
            v,
            size,
            expect,
            base().analyses(&[a]).mode(RunMode::Sequential),
            keep,
        ),
        Cfg::Sampling {
            variant,
            analysis,
            basis_points,
        } => run_session(
            w,
            variant,
            size,
            expect,
            base()
                .analyses(&[analysis])
                .sampling(basis_points as f64 / 10_000.0),
            keep,
        ),
        Cfg::Replay(_, a) => RunOut {
            secs: replay(rec.expect("a recording for the replay"), a),
            ..RunOut::default()
        },
    }
}

/// What two runs that saw the same events must agree on: the analysis results
/// ([`ReportData::results_json`]), except that for cache simulation only the number of
/// loads and stores per level is compared, because hits and misses depend on the heap
/// addresses the allocator hands out, which differ from run to run.
pub fn results_key(d: &ReportData) -> String {
    match &d.cache {
        Some(c) => {
            let mut d = d.clone();
            let accesses: Vec<(u64, u64)> = c
                .levels
                .iter()
                .take(1)
                .map(|l| (l.load_hits + l.load_misses, l.store_hits + l.store_misses))
                .collect();
            d.cache = None;
            format!("{} cache accesses {accesses:?}", d.results_json())
        }
        None => d.results_json(),
    }
}

/// Every cell of one workload.
#[derive(Debug)]
pub struct WorkloadResults {
    /// The workload.
    pub workload: Workload,
    /// The size it ran at.
    pub size: Size,
    /// Every cell's runs.
    pub cells: HashMap<Cfg, Cell>,
    /// Events per variant (from the recording).
    pub events: HashMap<Variant, u64>,
    /// Recording was capped for these variants (replay time extrapolated).
    pub extrapolated: HashSet<Variant>,
    /// Wall time of the whole workload's measurement, seconds.
    pub wall_s: f64,
}

impl WorkloadResults {
    /// Cell `c` (panics if it was not measured).
    pub fn cell(&self, c: Cfg) -> &Cell {
        self.cells
            .get(&c)
            .unwrap_or_else(|| panic!("{}: no cell {c:?}", self.workload.name))
    }
    /// `A`: the uninstrumented run's median time, seconds.
    pub fn a(&self) -> f64 {
        self.cell(Cfg::Plain).median_s()
    }
    /// Cell `c`'s overhead over `A` (`time / A - 1`).
    pub fn overhead(&self, c: Cfg) -> f64 {
        self.cell(c).median_s() / self.a() - 1.0
    }
}

pub(crate) fn measure_workload(
    w: Workload,
    o: &Options,
    pinned: &Executor,
    free: &Executor,
) -> WorkloadResults {
    let t0 = Instant::now();
    let size = o.size_of(w.name);
    let cfgs = cells(&w, o);
    // Single-threaded workloads on the pinned executor; the pool on the free one.
    let on_pinned = o.pin && w.threads == 1;
    let exec_for = |c: &Cfg| {
        let unpinned = matches!(c, Cfg::Concurrent { unpinned: true, .. });
        if on_pinned && !unpinned {
            pinned
        } else {
            free
        }
    };
    // Warm up (page faults, allocator) and take the checksum.
    let expect = pinned.run(move || (w.run_plain)(size));
    // Record the streams the cost model replays.
    let mut recs: HashMap<Variant, std::sync::Arc<Recording>> = HashMap::new();
    let mut events = HashMap::new();
    let mut extrapolated = HashSet::new();
    for c in &cfgs {
        if let Cfg::Replay(v, _) = *c {
            if let std::collections::hash_map::Entry::Vacant(e) = recs.entry(v) {
                let pin = o.pin;
                let t = Instant::now();
                let rec = exec_for(c).run(move || record(w, v, size, pin));
                if o.trace {
                    eprintln!(
                        "    {} record {v:?}: {} of {} words, {:.3} s",
                        w.name,
                        rec.recorded,
                        rec.total,
                        t.elapsed().as_secs_f64()
                    );
                }
                events.insert(v, rec.total);
                if rec.total > rec.recorded {
                    extrapolated.insert(v);
                }
                e.insert(std::sync::Arc::new(rec));
            }
        }
    }
    let mut cells: HashMap<Cfg, Cell> = HashMap::new();
    for round in 0..o.reps {
        for &c in &cfgs {
            let rec = match c {
                Cfg::Replay(v, _) => recs.get(&v).cloned(),
                _ => None,
            };
            let pin = o.pin && !matches!(c, Cfg::Concurrent { unpinned: true, .. });
            let out = exec_for(&c).run(move || run_once(w, c, size, expect, pin, rec.as_deref()));
            if o.trace {
                eprintln!(
                    "    {} {c:?}: {:.3} s, {} blocks, {:.3} s blocked",
                    w.name, out.secs, out.blocks, out.blocked_s
                );
            }
            cells.entry(c).or_default().runs.push(out);
        }
        if o.verbose {
            eprintln!(
                "  {} ({}): round {}/{} done, {:.0} s",
                w.name,
                size.name(),
                round + 1,
                o.reps,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    WorkloadResults {
        workload: w,
        size,
        cells,
        events,
        extrapolated,
        wall_s: t0.elapsed().as_secs_f64(),
    }
}
