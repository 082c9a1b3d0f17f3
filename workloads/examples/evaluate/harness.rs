//! The evaluation harness: every measurement of the paper's section 6 (and the cost model of
//! section 4) over the workload suite, written as CSV files plus a `summary.txt` that
//! evaluates the targets of the issue. Shared by the `evaluate` example (its `main.rs`) and
//! the CI smoke test (`tests/evaluate_smoke.rs`, which includes this file by `#[path]`).
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

use cabprof::cab::runtime::{self, RingAnalysis};
use cabprof::{Analysis, AnalysisPlan, AnalysisSet, BufferDesign, ReportData, RunMode, Session};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;
use workloads::{Size, Variant, Workload};

/// The ring of every experiment but Figure 10: the paper's default, 2 MB of 128 KB chunks
/// (powers of two, as FastForward and N-way buffering need).
pub const BUFFER_BYTES: usize = 2 << 20;
/// See [`BUFFER_BYTES`].
pub const CHUNK_BYTES: usize = 128 << 10;
/// Figure 10's fixed chunk: small enough for the 16 KB ring to hold the runtime's minimum of
/// four chunks.
pub const FIG10_CHUNK_BYTES: usize = 4 << 10;
/// Figure 10's buffer sizes: 16 KB to 32 MB.
pub const FIG10_BUFFERS: [usize; 12] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
    32 << 20,
];
/// Figure 11's sampling rates.
pub const RATES: [f64; 7] = [0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0];
/// The cost model records at most this many event words per variant (512 MB) and scales the
/// replay time of the recorded prefix up to the whole stream beyond that.
pub const RECORD_CAP_WORDS: usize = 1 << 26;

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

// ---------------------------------------------------------------------------------------------
// Configurations

/// A buffer design (hashable twin of [`BufferDesign`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Design {
    Cab,
    FastForward,
    NWay,
}

impl Design {
    pub const ALL: [Design; 3] = [Design::Cab, Design::FastForward, Design::NWay];

    pub fn name(self) -> &'static str {
        match self {
            Design::Cab => "cab",
            Design::FastForward => "fastforward",
            Design::NWay => "nway",
        }
    }

    fn runtime(self) -> BufferDesign {
        match self {
            Design::Cab => BufferDesign::Cab,
            Design::FastForward => BufferDesign::FastForward,
            Design::NWay => BufferDesign::NWay,
        }
    }
}

/// One cell's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cfg {
    /// The uninstrumented twin, no session: `A`.
    Plain,
    /// `RunMode::InstrumentOnly`: each event written to one thread-local word.
    Instrument(Variant),
    /// `RunMode::EnqueueOnly`: events into a ring nobody reads.
    Enqueue(Variant),
    /// A concurrent session with no analysis: the analyzer dequeues and clears.
    Communication(Variant),
    /// Exhaustive concurrent analysis.
    Concurrent {
        variant: Variant,
        analysis: Analysis,
        design: Design,
        buffer: usize,
        chunk: usize,
        /// Application and analyzer both unpinned.
        unpinned: bool,
    },
    /// Sequential (inline) analysis.
    Sequential(Variant, Analysis),
    /// Sampling at `basis_points / 10 000`.
    Sampling {
        variant: Variant,
        analysis: Analysis,
        basis_points: u32,
    },
    /// Replay of the recorded event stream through the analysis, one thread: `P`.
    Replay(Variant, Analysis),
}

impl Cfg {
    /// The default concurrent cell of `analysis`.
    pub fn concurrent(analysis: Analysis) -> Cfg {
        Cfg::Concurrent {
            variant: Variant::for_analysis(analysis),
            analysis,
            design: Design::Cab,
            buffer: BUFFER_BYTES,
            chunk: CHUNK_BYTES,
            unpinned: false,
        }
    }

    /// The sequential cell of `analysis`.
    pub fn sequential(analysis: Analysis) -> Cfg {
        Cfg::Sequential(Variant::for_analysis(analysis), analysis)
    }

    fn keeps_report(&self) -> bool {
        matches!(
            self,
            Cfg::Concurrent { .. } | Cfg::Sequential(..) | Cfg::Sampling { .. }
        )
    }
}

/// The analyses' names as used in the CSVs.
pub fn analysis_name(a: Analysis) -> &'static str {
    a.name()
}

/// The analyses of Figure 8 that `w` has events for: method count, call graph and call tree
/// always, path profiling with path events, cache simulation with memory events.
pub fn fig8_analyses(w: &Workload) -> Vec<Analysis> {
    let mut v = vec![
        Analysis::MethodCount,
        Analysis::CallGraph,
        Analysis::CallTree,
    ];
    if w.paths {
        v.push(Analysis::Paths);
    }
    if w.memory {
        v.push(Analysis::Cache);
    }
    v
}

/// The streams of Figure 7: call graph always, paths where the workload has path events.
pub fn fig7_analyses(w: &Workload) -> Vec<Analysis> {
    let mut v = vec![Analysis::CallGraph];
    if w.paths {
        v.push(Analysis::Paths);
    }
    v
}

/// The analysis of Figure 10 / perturbation: path profiling (the paper's choice), or cache
/// simulation for a workload without path events but with memory events, else call graph.
pub fn fig10_analysis(w: &Workload) -> Analysis {
    if w.paths {
        Analysis::Paths
    } else if w.memory {
        Analysis::Cache
    } else {
        Analysis::CallGraph
    }
}

/// Figure 11's analyses (the paper's): call graph, and paths where the workload has them.
pub fn fig11_analyses(w: &Workload) -> Vec<Analysis> {
    fig7_analyses(w)
}

fn basis_points(rate: f64) -> u32 {
    (rate * 10_000.0).round() as u32
}

/// Every cell of workload `w`, in run order.
pub fn cells(w: &Workload, o: &Options) -> Vec<Cfg> {
    let mut v = vec![Cfg::Plain];
    let f8 = fig8_analyses(w);
    let mut variants: Vec<Variant> = Vec::new();
    for a in &f8 {
        let var = Variant::for_analysis(*a);
        if !variants.contains(&var) {
            variants.push(var);
        }
    }
    for &var in &variants {
        v.push(Cfg::Instrument(var));
        v.push(Cfg::Enqueue(var));
        v.push(Cfg::Communication(var));
    }
    for &a in &f8 {
        v.push(Cfg::concurrent(a));
        v.push(Cfg::sequential(a));
        v.push(Cfg::Replay(Variant::for_analysis(a), a));
    }
    for a in fig7_analyses(w) {
        for design in Design::ALL {
            v.push(
                ConcurrentFields {
                    design,
                    ..cfg_fields(Cfg::concurrent(a))
                }
                .into(),
            );
        }
    }
    let a10 = fig10_analysis(w);
    for &b in &o.buffers {
        v.push(Cfg::Concurrent {
            variant: Variant::for_analysis(a10),
            analysis: a10,
            design: Design::Cab,
            buffer: b,
            chunk: FIG10_CHUNK_BYTES,
            unpinned: false,
        });
    }
    for a in fig11_analyses(w) {
        for &r in &o.rates {
            v.push(Cfg::Sampling {
                variant: Variant::for_analysis(a),
                analysis: a,
                basis_points: basis_points(r),
            });
        }
    }
    if o.pin {
        v.push(
            ConcurrentFields {
                unpinned: true,
                ..cfg_fields(Cfg::concurrent(a10))
            }
            .into(),
        );
    }
    let mut seen = HashSet::new();
    v.retain(|c| seen.insert(*c));
    v
}

/// `Cfg::Concurrent` as a value to update with struct-update syntax.
fn cfg_fields(c: Cfg) -> ConcurrentFields {
    match c {
        Cfg::Concurrent {
            variant,
            analysis,
            design,
            buffer,
            chunk,
            unpinned,
        } => ConcurrentFields {
            variant,
            analysis,
            design,
            buffer,
            chunk,
            unpinned,
        },
        other => panic!("not a concurrent cell: {other:?}"),
    }
}

#[derive(Clone, Copy)]
struct ConcurrentFields {
    variant: Variant,
    analysis: Analysis,
    design: Design,
    buffer: usize,
    chunk: usize,
    unpinned: bool,
}

impl From<ConcurrentFields> for Cfg {
    fn from(f: ConcurrentFields) -> Cfg {
        Cfg::Concurrent {
            variant: f.variant,
            analysis: f.analysis,
            design: f.design,
            buffer: f.buffer,
            chunk: f.chunk,
            unpinned: f.unpinned,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Executors: one thread pinned to core 0, one free

type Job = Box<dyn FnOnce() + Send>;

/// A long-lived thread that runs closures one at a time.
struct Executor {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Executor {
    fn new(name: &str, pin: bool) -> Executor {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                if pin {
                    pin_current_thread_to_core0();
                }
                for job in rx {
                    job();
                }
            })
            .expect("spawn an executor thread");
        Executor {
            tx: Some(tx),
            handle: Some(handle),
        }
    }

    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (rtx, rrx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = rtx.send(r);
        });
        self.tx
            .as_ref()
            .expect("executor running")
            .send(job)
            .expect("executor alive");
        match rrx.recv().expect("executor answered") {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Pin the calling thread to core 0 for good, through the runtime's `pin_application` (an
/// instrument-only session: no analyzer, no ring).
fn pin_current_thread_to_core0() {
    let s = runtime::SessionBuilder::new()
        .mode(RunMode::InstrumentOnly)
        .pin_application(true)
        .start(Probe::default)
        .expect("start the pinning session");
    drop(s.finish());
}

/// The CPUs the calling thread may run on (`Cpus_allowed_list` of /proc), or `?`.
pub fn cpus_allowed() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .map(|l| l["Cpus_allowed_list:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

// ---------------------------------------------------------------------------------------------
// Probes: analyzer CPU time, and the recorder for the cost model

/// Analyzer CPU time (ns) seen by the last [`Probe`] merge on an analyzer thread.
static ANALYZER_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// CPU time of the calling thread in ns (`/proc/thread-self/schedstat`, first field).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A no-op analysis for the communication bar that, when the analyzer merges a retired ring
/// into its results (it does so for every ring at the end, on its own thread), records the
/// analyzer thread's CPU time so far: dequeuing, clearing and polling, no analysis.
#[derive(Default)]
struct Probe;

impl RingAnalysis for Probe {
    fn consume(&mut self, words: &[u64]) {
        black_box(words);
    }

    fn merge(&mut self, _other: Self) {
        let on_analyzer = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("cabprof-analyzer"));
        if on_analyzer {
            if let Some(ns) = thread_cpu_ns() {
                ANALYZER_CPU_NS.fetch_max(ns, Ordering::Relaxed);
            }
        }
    }
}

/// Words recorded so far by every [`Recorder`] of the running session.
static RECORDED: AtomicU64 = AtomicU64::new(0);

/// Records the event stream of each ring (one stream per application thread), up to
/// [`RECORD_CAP_WORDS`] in total.
#[derive(Default)]
struct Recorder {
    streams: Vec<Vec<u64>>,
}

impl RingAnalysis for Recorder {
    fn consume(&mut self, words: &[u64]) {
        let room = (RECORD_CAP_WORDS as u64).saturating_sub(RECORDED.load(Ordering::Relaxed));
        let take = words.len().min(room as usize);
        if take == 0 {
            return;
        }
        RECORDED.fetch_add(take as u64, Ordering::Relaxed);
        if self.streams.is_empty() {
            self.streams.push(Vec::new());
        }
        self.streams[0].extend_from_slice(&words[..take]);
    }

    fn merge(&mut self, other: Self) {
        self.streams.extend(other.streams);
    }
}

/// A workload variant's recorded event streams.
pub struct Recording {
    streams: Vec<Vec<u64>>,
    recorded: u64,
    total: u64,
}

fn record(w: Workload, v: Variant, size: Size, pin: bool) -> Recording {
    RECORDED.store(0, Ordering::Relaxed);
    let s = runtime::SessionBuilder::new()
        .mode(RunMode::Exhaustive)
        .buffer_bytes(32 << 20)
        .chunk_bytes(CHUNK_BYTES)
        .pin(pin)
        .start(Recorder::default)
        .expect("start the recording session");
    black_box(w.run_variant(v, size));
    let r = s.finish();
    let streams: Vec<Vec<u64>> = r
        .analysis
        .streams
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    let recorded = streams.iter().map(|s| s.len() as u64).sum();
    Recording {
        streams,
        recorded,
        total: r.totals.events,
    }
}

/// The analysis set the session facade builds for `[a]` (same defaults: the paper's cache
/// hierarchy, exact call trees).
fn analysis_set(a: Analysis) -> AnalysisSet {
    AnalysisPlan::with_analyses(&[a]).build()
}

/// Time one replay of `rec` through analysis `a` (per stream a fresh instance, fed in chunks
/// of [`CHUNK_BYTES`], then merged), scaled up to the whole stream when it was capped.
fn replay(rec: &Recording, a: Analysis) -> f64 {
    let t = Instant::now();
    let mut total = analysis_set(a);
    for s in &rec.streams {
        let mut set = analysis_set(a);
        for c in s.chunks(CHUNK_BYTES / 8) {
            set.consume(c);
        }
        total.merge(set);
    }
    black_box(&total);
    let secs = t.elapsed().as_secs_f64();
    if rec.recorded > 0 && rec.total > rec.recorded {
        secs * rec.total as f64 / rec.recorded as f64
    } else {
        secs
    }
}

// ---------------------------------------------------------------------------------------------
// Running cells

/// One run of one cell.
#[derive(Clone, Debug, Default)]
pub struct RunOut {
    pub secs: f64,
    pub blocks: u64,
    pub blocked_s: f64,
    pub analyzer_cpu_s: f64,
    pub data: Option<ReportData>,
}

/// Every run of one cell.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub runs: Vec<RunOut>,
}

impl Cell {
    pub fn median_s(&self) -> f64 {
        median(self.runs.iter().map(|r| r.secs).collect())
    }
    fn median_of(&self, f: impl Fn(&RunOut) -> f64) -> f64 {
        median(self.runs.iter().map(f).collect())
    }
    pub fn spread(&self) -> (f64, f64) {
        let xs: Vec<f64> = self.runs.iter().map(|r| r.secs).collect();
        (
            xs.iter().copied().fold(f64::INFINITY, f64::min),
            xs.iter().copied().fold(0.0, f64::max),
        )
    }
}

/// The median (mean of the middle two for an even count); NaN when empty.
pub fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
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
            let s = runtime::SessionBuilder::new()
                .mode(RunMode::Exhaustive)
                .buffer_bytes(BUFFER_BYTES)
                .chunk_bytes(CHUNK_BYTES)
                .pin(pin)
                .start(Probe::default)
                .expect("start a session");
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
                .buffer_design(design.runtime())
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
pub struct WorkloadResults {
    pub workload: Workload,
    pub size: Size,
    pub cells: HashMap<Cfg, Cell>,
    /// Events per variant (from the recording).
    pub events: HashMap<Variant, u64>,
    /// Recording was capped for these variants (replay time extrapolated).
    pub extrapolated: HashSet<Variant>,
    pub wall_s: f64,
}

impl WorkloadResults {
    pub fn cell(&self, c: Cfg) -> &Cell {
        self.cells
            .get(&c)
            .unwrap_or_else(|| panic!("{}: no cell {c:?}", self.workload.name))
    }
    pub fn a(&self) -> f64 {
        self.cell(Cfg::Plain).median_s()
    }
    pub fn overhead(&self, c: Cfg) -> f64 {
        self.cell(c).median_s() / self.a() - 1.0
    }
}

fn measure_workload(
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

// ---------------------------------------------------------------------------------------------
// Tables

/// A CSV table: header and rows of already formatted fields.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<String>) {
        assert_eq!(row.len(), self.header.len(), "row width");
        self.rows.push(row);
    }

    pub fn csv(&self) -> String {
        let mut s = self.header.join(",");
        s.push('\n');
        for r in &self.rows {
            s.push_str(&r.join(","));
            s.push('\n');
        }
        s
    }
}

fn f(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        String::new()
    }
}

fn fig7(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "design",
        "median_s",
        "ratio_to_cab",
        "producer_blocks",
    ]);
    for r in res {
        for a in fig7_analyses(&r.workload) {
            let cab = r.cell(Cfg::concurrent(a)).median_s();
            for d in Design::ALL {
                let c = r.cell(
                    ConcurrentFields {
                        design: d,
                        ..cfg_fields(Cfg::concurrent(a))
                    }
                    .into(),
                );
                t.push(vec![
                    r.workload.name.into(),
                    analysis_name(a).into(),
                    d.name().into(),
                    f(c.median_s(), 6),
                    f(c.median_s() / cab, 4),
                    f(c.median_of(|x| x.blocks as f64), 0),
                ]);
            }
        }
    }
    t
}

/// Figure 8's bars of `(workload, analysis)`, in order.
fn bars(a: Analysis) -> [(&'static str, Cfg); 5] {
    let v = Variant::for_analysis(a);
    [
        ("instrument", Cfg::Instrument(v)),
        ("enqueue", Cfg::Enqueue(v)),
        ("communication", Cfg::Communication(v)),
        ("concurrent", Cfg::concurrent(a)),
        ("sequential", Cfg::sequential(a)),
    ]
}

fn fig8(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "bar",
        "median_s",
        "overhead_vs_A",
        "A_s",
        "min_s",
        "max_s",
    ]);
    for r in res {
        for a in fig8_analyses(&r.workload) {
            for (bar, c) in bars(a) {
                let cell = r.cell(c);
                let (lo, hi) = cell.spread();
                t.push(vec![
                    r.workload.name.into(),
                    analysis_name(a).into(),
                    bar.into(),
                    f(cell.median_s(), 6),
                    f(r.overhead(c), 4),
                    f(r.a(), 6),
                    f(lo, 6),
                    f(hi, 6),
                ]);
            }
        }
    }
    t
}

fn fig10_cfg(w: &Workload, buffer: usize) -> Cfg {
    let a = fig10_analysis(w);
    Cfg::Concurrent {
        variant: Variant::for_analysis(a),
        analysis: a,
        design: Design::Cab,
        buffer,
        chunk: FIG10_CHUNK_BYTES,
        unpinned: false,
    }
}

fn fig10(res: &[WorkloadResults], o: &Options) -> (Table, Table) {
    let mut t = Table::new(&[
        "workload",
        "buffer_bytes",
        "median_s",
        "producer_blocks",
        "blocks_per_s",
        "analysis",
        "overhead_vs_A",
        "blocked_s",
    ]);
    let mut p = Table::new(&[
        "workload",
        "buffer_bytes",
        "blocks_per_s",
        "slowdown_vs_largest",
        "results_identical",
        "analysis",
        "blocked_fraction",
        "runs_compared",
    ]);
    let largest = *o.buffers.iter().max().expect("at least one buffer size");
    for r in res {
        let w = &r.workload;
        let big = r.cell(fig10_cfg(w, largest));
        let reference = big.runs[0]
            .data
            .as_ref()
            .map(results_key)
            .expect("report kept");
        for &b in &o.buffers {
            let c = r.cell(fig10_cfg(w, b));
            let blocks = c.median_of(|x| x.blocks as f64);
            let bps = c.median_of(|x| x.blocks as f64 / x.secs);
            let blocked = c.median_of(|x| x.blocked_s);
            let identical = c
                .runs
                .iter()
                .all(|x| x.data.as_ref().map(results_key).expect("report kept") == reference);
            let name = analysis_name(fig10_analysis(w));
            t.push(vec![
                w.name.into(),
                b.to_string(),
                f(c.median_s(), 6),
                f(blocks, 0),
                f(bps, 1),
                name.into(),
                f(r.overhead(fig10_cfg(w, b)), 4),
                f(blocked, 6),
            ]);
            p.push(vec![
                w.name.into(),
                b.to_string(),
                f(bps, 1),
                f(c.median_s() / big.median_s(), 4),
                identical.to_string(),
                name.into(),
                f(c.median_of(|x| x.blocked_s / x.secs), 4),
                c.runs.len().to_string(),
            ]);
        }
    }
    (t, p)
}

fn sampling_cfg(a: Analysis, rate: f64) -> Cfg {
    Cfg::Sampling {
        variant: Variant::for_analysis(a),
        analysis: a,
        basis_points: basis_points(rate),
    }
}

/// The error of one sampled report against the exact one, for analysis `a`.
fn error_of(sampled: &ReportData, exact: &ReportData, a: Analysis) -> f64 {
    if sampled.session.rate_used <= 0.0 {
        return f64::NAN;
    }
    let e = sampled.sampling_error(exact);
    match a {
        Analysis::CallGraph => e.call_graph,
        Analysis::Paths => e.paths,
        Analysis::CallTree => e.call_tree,
        Analysis::MethodCount => e.method_count,
        _ => None,
    }
    .unwrap_or(f64::NAN)
}

/// A count-weighted error of one sampled report: `sum |actual - sampled/rate| / sum actual`
/// over the exact profile's entries (call-graph edges or paths). Unlike the paper's error
/// rate, which weighs a once-seen edge like the hottest one, this says how much of the
/// profile's mass the estimate misplaces.
fn weighted_error_of(sampled: &ReportData, exact: &ReportData, a: Analysis) -> f64 {
    let rate = sampled.estimate_rate();
    if sampled.session.rate_used <= 0.0 {
        return f64::NAN;
    }
    let (x, y) = (entries(exact, a), entries(sampled, a));
    let total: u64 = x.values().sum();
    if total == 0 {
        return f64::NAN;
    }
    let off: f64 = x
        .iter()
        .map(|(k, &n)| (n as f64 - y.get(k).copied().unwrap_or(0) as f64 / rate).abs())
        .sum();
    off / total as f64
}

/// The entries of a profile the error rates run over: call-graph edges or (method, path).
fn entries(d: &ReportData, a: Analysis) -> HashMap<(u32, u32), u64> {
    match a {
        Analysis::CallGraph => d.call_graph.as_ref().map_or_else(HashMap::new, |v| {
            v.iter().map(|e| ((e.caller, e.callee), e.count)).collect()
        }),
        Analysis::Paths => d.paths.as_ref().map_or_else(HashMap::new, |v| {
            v.iter().map(|e| ((e.method, e.path), e.count)).collect()
        }),
        _ => HashMap::new(),
    }
}

/// A sample expecting fewer hits than this of an entry (`count × rate`) cannot estimate it
/// well: the paper's metric gives each such entry an error near 100 % (or far above, when
/// one burst happens to catch it).
const FEW_EXPECTED: f64 = 10.0;

fn fig11(res: &[WorkloadResults], o: &Options) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "rate",
        "median_s",
        "overhead_vs_A",
        "error_rate",
        "exhaustive_overhead_vs_A",
        "overhead_ratio_to_exhaustive",
        "events_lapped",
        "weighted_error",
        "entries",
        "entries_expecting_under_10",
    ]);
    for r in res {
        for a in fig11_analyses(&r.workload) {
            let exh = r.cell(Cfg::concurrent(a));
            let exact = exh.runs[0].data.as_ref().expect("report kept");
            let exact_entries = entries(exact, a);
            let exh_over = r.overhead(Cfg::concurrent(a));
            for &rate in &o.rates {
                let c = r.cell(sampling_cfg(a, rate));
                let err = median(
                    c.runs
                        .iter()
                        .map(|x| error_of(x.data.as_ref().expect("report kept"), exact, a))
                        .filter(|e| e.is_finite())
                        .collect(),
                );
                let lapped = c.median_of(|x| {
                    x.data
                        .as_ref()
                        .map_or(0.0, |d| d.totals.events_lapped as f64)
                });
                let werr = median(
                    c.runs
                        .iter()
                        .map(|x| weighted_error_of(x.data.as_ref().expect("report kept"), exact, a))
                        .filter(|e| e.is_finite())
                        .collect(),
                );
                let over = r.overhead(sampling_cfg(a, rate));
                t.push(vec![
                    r.workload.name.into(),
                    analysis_name(a).into(),
                    f(rate, 2),
                    f(c.median_s(), 6),
                    f(over, 4),
                    f(err, 4),
                    f(exh_over, 4),
                    f(over / exh_over, 4),
                    f(lapped, 0),
                    f(werr, 4),
                    exact_entries.len().to_string(),
                    exact_entries
                        .values()
                        .filter(|&&n| (n as f64) * rate < FEW_EXPECTED)
                        .count()
                        .to_string(),
                ]);
            }
        }
    }
    t
}

/// The cost model's terms of one `(workload, analysis)`.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    pub a: f64,
    pub a_i: f64,
    pub a_q: f64,
    pub p: f64,
    pub p_c: f64,
    pub e_s: f64,
    pub e_c: f64,
}

impl Model {
    pub fn app_side(&self) -> f64 {
        self.a + self.a_i + self.a_q
    }
    pub fn analyzer_side(&self) -> f64 {
        self.p + self.p_c
    }
    pub fn predicted(&self) -> f64 {
        self.app_side().max(self.analyzer_side())
    }
    /// `I_ap = E_s − A − A_i − P` (equation 1 solved for the interference).
    pub fn i_ap(&self) -> f64 {
        self.e_s - self.a - self.a_i - self.p
    }
}

fn model(r: &WorkloadResults, a: Analysis) -> Model {
    let v = Variant::for_analysis(a);
    let t_a = r.a();
    let t_i = r.cell(Cfg::Instrument(v)).median_s();
    let t_q = r.cell(Cfg::Enqueue(v)).median_s();
    Model {
        a: t_a,
        a_i: t_i - t_a,
        a_q: t_q - t_i,
        p: r.cell(Cfg::Replay(v, a)).median_s(),
        p_c: r
            .cell(Cfg::Communication(v))
            .median_of(|x| x.analyzer_cpu_s),
        e_s: r.cell(Cfg::sequential(a)).median_s(),
        e_c: r.cell(Cfg::concurrent(a)).median_s(),
    }
}

fn costmodel(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "A",
        "A_i",
        "A_q",
        "P",
        "P_c",
        "E_s",
        "E_c",
        "predicted",
        "measured",
        "predicted_over_measured",
        "dominant",
        "I_ap",
        "events",
        "P_extrapolated",
    ]);
    for r in res {
        for a in fig8_analyses(&r.workload) {
            let m = model(r, a);
            let v = Variant::for_analysis(a);
            t.push(vec![
                r.workload.name.into(),
                analysis_name(a).into(),
                f(m.a, 6),
                f(m.a_i, 6),
                f(m.a_q, 6),
                f(m.p, 6),
                f(m.p_c, 6),
                f(m.e_s, 6),
                f(m.e_c, 6),
                f(m.predicted(), 6),
                f(m.e_c, 6),
                f(m.predicted() / m.e_c, 4),
                if m.app_side() >= m.analyzer_side() {
                    "application".into()
                } else {
                    "analyzer".into()
                },
                f(m.i_ap(), 6),
                r.events.get(&v).copied().unwrap_or(0).to_string(),
                r.extrapolated.contains(&v).to_string(),
            ]);
        }
    }
    t
}

fn pinning(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "pinned_s",
        "unpinned_s",
        "pinned_overhead_vs_A",
        "unpinned_overhead_vs_A",
    ]);
    for r in res {
        let a = fig10_analysis(&r.workload);
        let pinned = Cfg::concurrent(a);
        let unpinned: Cfg = ConcurrentFields {
            unpinned: true,
            ..cfg_fields(pinned)
        }
        .into();
        if let Some(u) = r.cells.get(&unpinned) {
            t.push(vec![
                r.workload.name.into(),
                analysis_name(a).into(),
                f(r.cell(pinned).median_s(), 6),
                f(u.median_s(), 6),
                f(r.overhead(pinned), 4),
                f(r.overhead(unpinned), 4),
            ]);
        }
    }
    t
}

fn workloads_table(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "size",
        "threads",
        "A_s",
        "events_calls_variant",
        "events_paths_variant",
        "events_memory_variant",
        "wall_s",
    ]);
    for r in res {
        let ev = |v| {
            r.events
                .get(&v)
                .map_or(String::new(), |n: &u64| n.to_string())
        };
        t.push(vec![
            r.workload.name.into(),
            r.size.name().into(),
            r.workload.threads.to_string(),
            f(r.a(), 6),
            ev(Variant::Calls),
            ev(Variant::Paths),
            ev(Variant::Memory),
            f(r.wall_s, 1),
        ]);
    }
    t
}

// ---------------------------------------------------------------------------------------------
// Summary: the targets

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", x * 100.0)
    } else {
        "n/a".into()
    }
}

fn summary(res: &[WorkloadResults], o: &Options, header: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s);

    // Target 1.
    let _ = writeln!(
        s,
        "Target 1: concurrent exhaustive overhead at most half of sequential (call graph, call tree, paths), averaged over the suite"
    );
    let _ = writeln!(
        s,
        "  (overhead = time/A - 1; 'ratio of means' = mean concurrent overhead / mean sequential overhead)"
    );
    for a in [
        Analysis::MethodCount,
        Analysis::CallGraph,
        Analysis::CallTree,
        Analysis::Paths,
        Analysis::Cache,
    ] {
        let rows: Vec<&WorkloadResults> = res
            .iter()
            .filter(|r| fig8_analyses(&r.workload).contains(&a))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let conc: Vec<f64> = rows
            .iter()
            .map(|r| r.overhead(Cfg::concurrent(a)))
            .collect();
        let seq: Vec<f64> = rows
            .iter()
            .map(|r| r.overhead(Cfg::sequential(a)))
            .collect();
        let ratio = mean(&conc) / mean(&seq);
        let target = matches!(
            a,
            Analysis::CallGraph | Analysis::CallTree | Analysis::Paths
        );
        let _ = writeln!(
            s,
            "  {:<13} mean overhead concurrent {:>9}  sequential {:>9}  ratio of means {:.2}  ({} workloads){}",
            analysis_name(a),
            pct(mean(&conc)),
            pct(mean(&seq)),
            ratio,
            rows.len(),
            if target {
                format!("  {}", pass(ratio <= 0.5))
            } else {
                "  (not a target)".into()
            }
        );
    }
    let _ = writeln!(s);

    // Target 2.
    let _ = writeln!(
        s,
        "Target 2: concurrent cache simulation faster than sequential on every workload"
    );
    let mut all = true;
    for r in res.iter().filter(|r| r.workload.memory) {
        let c = r.cell(Cfg::concurrent(Analysis::Cache)).median_s();
        let q = r.cell(Cfg::sequential(Analysis::Cache)).median_s();
        all &= c < q;
        let _ = writeln!(
            s,
            "  {:<8} concurrent {:.3} s  sequential {:.3} s  concurrent/sequential {:.2}  {}",
            r.workload.name,
            c,
            q,
            c / q,
            pass(c < q)
        );
    }
    let _ = writeln!(s, "  overall: {}", pass(all));
    let _ = writeln!(s);

    // Target 3.
    let _ = writeln!(
        s,
        "Target 3: sampling at 5%: error under 3% and overhead at most half of exhaustive, on average"
    );
    if o.rates.iter().any(|&r| basis_points(r) == 500) {
        for a in [Analysis::CallGraph, Analysis::Paths] {
            let rows: Vec<&WorkloadResults> = res
                .iter()
                .filter(|r| fig11_analyses(&r.workload).contains(&a))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let mut errs = Vec::new();
            let mut werrs = Vec::new();
            let mut over5 = Vec::new();
            let mut overx = Vec::new();
            for r in &rows {
                let c = r.cell(sampling_cfg(a, 0.05));
                let exact = r.cell(Cfg::concurrent(a)).runs[0]
                    .data
                    .as_ref()
                    .expect("report kept");
                errs.push(median(
                    c.runs
                        .iter()
                        .map(|x| error_of(x.data.as_ref().expect("kept"), exact, a))
                        .filter(|e| e.is_finite())
                        .collect(),
                ));
                werrs.push(median(
                    c.runs
                        .iter()
                        .map(|x| weighted_error_of(x.data.as_ref().expect("kept"), exact, a))
                        .filter(|e| e.is_finite())
                        .collect(),
                ));
                over5.push(r.overhead(sampling_cfg(a, 0.05)));
                overx.push(r.overhead(Cfg::concurrent(a)));
            }
            let err = mean(&errs);
            let ratio = mean(&over5) / mean(&overx);
            let _ = writeln!(
                s,
                "  {:<11} mean error {:>6} {}   mean overhead 5% {:>8} vs exhaustive {:>8}: ratio {:.2} {}",
                analysis_name(a),
                pct(err),
                pass(err < 0.03),
                pct(mean(&over5)),
                pct(mean(&overx)),
                ratio,
                pass(ratio <= 0.5)
            );
            let _ = writeln!(
                s,
                "              (count-weighted error, not a target: mean {})",
                pct(mean(&werrs))
            );
            for ((r, e), we) in rows.iter().zip(&errs).zip(&werrs) {
                let exact = entries(
                    r.cell(Cfg::concurrent(a)).runs[0]
                        .data
                        .as_ref()
                        .expect("report kept"),
                    a,
                );
                let rare = exact
                    .values()
                    .filter(|&&n| n as f64 * 0.05 < FEW_EXPECTED)
                    .count();
                let _ = writeln!(
                    s,
                    "      {:<8} error {:>6} (weighted {:>6})  overhead 5% {:>8}  exhaustive {:>8}  entries {:>3}, {:>2} expecting <{FEW_EXPECTED} hits",
                    r.workload.name,
                    pct(*e),
                    pct(*we),
                    pct(r.overhead(sampling_cfg(a, 0.05))),
                    pct(r.overhead(Cfg::concurrent(a))),
                    exact.len(),
                    rare
                );
            }
        }
    } else {
        let _ = writeln!(s, "  (5% not among the measured rates)");
    }
    let _ = writeln!(s);

    // Target 4.
    let _ = writeln!(
        s,
        "Target 4: CAB ahead of FastForward and N-way on the path-profiling stream of every workload"
    );
    let _ = writeln!(
        s,
        "  (time relative to CAB; above 1.00 = CAB ahead; call graph shown for reference)"
    );
    let mut all = true;
    for r in res {
        for a in fig7_analyses(&r.workload) {
            let cab = r.cell(Cfg::concurrent(a)).median_s();
            let rel = |d: Design| {
                r.cell(
                    ConcurrentFields {
                        design: d,
                        ..cfg_fields(Cfg::concurrent(a))
                    }
                    .into(),
                )
                .median_s()
                    / cab
            };
            let ff = rel(Design::FastForward);
            let nw = rel(Design::NWay);
            let ok = ff > 1.0 && nw > 1.0;
            if a == Analysis::Paths {
                all &= ok;
            }
            let _ = writeln!(
                s,
                "  {:<8} {:<11} FastForward {:.3}  N-way {:.3}  {}",
                r.workload.name,
                analysis_name(a),
                ff,
                nw,
                if a == Analysis::Paths {
                    pass(ok)
                } else {
                    "(not a target)"
                }
            );
        }
    }
    let _ = writeln!(s, "  overall (paths): {}", pass(all));
    let _ = writeln!(s);

    // Correctness.
    let _ = writeln!(s, "Correctness checks");
    let mut same = 0;
    let mut total = 0;
    let mut differ = Vec::new();
    for r in res {
        for a in fig8_analyses(&r.workload) {
            let c = r.cell(Cfg::concurrent(a));
            let q = r.cell(Cfg::sequential(a));
            let reference = c.runs[0].data.as_ref().map(results_key).expect("kept");
            for x in c.runs.iter().chain(&q.runs) {
                total += 1;
                if x.data.as_ref().map(results_key).expect("kept") == reference {
                    same += 1;
                } else {
                    differ.push(format!("{}/{}", r.workload.name, analysis_name(a)));
                }
            }
        }
    }
    differ.dedup();
    let _ = writeln!(
        s,
        "  exhaustive concurrent and sequential runs with results identical to the first concurrent run: {same}/{total}{}",
        if differ.is_empty() {
            String::new()
        } else {
            format!(" (differ: {})", differ.join(", "))
        }
    );
    let largest = *o.buffers.iter().max().expect("buffers");
    let mut same = 0;
    let mut total = 0;
    for r in res {
        let reference = r.cell(fig10_cfg(&r.workload, largest)).runs[0]
            .data
            .as_ref()
            .map(results_key)
            .expect("kept");
        for &b in &o.buffers {
            for x in &r.cell(fig10_cfg(&r.workload, b)).runs {
                total += 1;
                same += usize::from(x.data.as_ref().map(results_key).expect("kept") == reference);
            }
        }
    }
    let _ = writeln!(
        s,
        "  perturbation runs (every buffer size) with results identical to the largest buffer's: {same}/{total}"
    );
    let _ = writeln!(s);

    // Cost model.
    let _ = writeln!(
        s,
        "Cost model: predicted max(A + A_i + A_q, P + P_c) against measured E_c"
    );
    let mut errs = Vec::new();
    let mut dom = (0, 0);
    for r in res {
        for a in fig8_analyses(&r.workload) {
            let m = model(r, a);
            errs.push((m.predicted() / m.e_c - 1.0).abs());
            if m.app_side() >= m.analyzer_side() {
                dom.0 += 1;
            } else {
                dom.1 += 1;
            }
        }
    }
    let _ = writeln!(
        s,
        "  mean |predicted/measured - 1| = {}, median {}; application dominates in {} cells, analyzer in {}",
        pct(mean(&errs)),
        pct(median(errs.clone())),
        dom.0,
        dom.1
    );
    s
}

// ---------------------------------------------------------------------------------------------
// Entry point

/// What [`run`] produced.
pub struct Outputs {
    pub results: Vec<WorkloadResults>,
    pub tables: Vec<(&'static str, Table)>,
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
    let suite: Vec<Workload> = workloads::all()
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
        std::fs::write(o.out.join(format!("{name}.csv")), t.csv())?;
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
    let summary = summary(&results, o, &header);
    std::fs::write(o.out.join("summary.txt"), &summary)?;
    Ok(Outputs {
        results,
        tables,
        summary,
    })
}

/// The CPU model name from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The first three fields of /proc/loadavg.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
