//! The runtime around the rings: one CAB ring per application thread, pinned analyzer threads,
//! clean shutdown, snapshots and Ctrl-C (Ha et al. 2009, §3.3, §5.1).
//!
//! # Contract
//!
//! - At most one [`Session`] runs per process; [`SessionBuilder::start`] while one runs is an
//!   error ([`SessionError::AlreadyRunning`]), never a silent reset.
//! - [`emit`] is the only thing instrumentation calls. With no session it is one load and one
//!   well-predicted branch. With a session, the calling thread's ring is made on its first
//!   event (threads that never emit cost nothing) and registered with one analyzer, which is
//!   that ring's only consumer for its whole life.
//! - Each analyzer thread serves its rings round-robin and runs one analysis instance per ring
//!   (made by the session's factory), so per-thread state such as a shadow stack stays per
//!   thread. Instances are merged when a ring closes and at the end.
//! - Thread exit (normal or by panic) closes the thread's ring from its thread-local
//!   destructor; the analyzer drains it, merges its results and frees it. Memory stays bounded
//!   under thread churn.
//! - [`Session::finish`] (or drop) drains every ring, including those of threads still alive
//!   (exhaustive mode reads them without their cooperation, see
//!   [`Consumer::drain_live`](crate::ring::Consumer::drain_live)), joins the analyzers and
//!   returns the merged [`Report`]. Events emitted *while* `finish` runs may or may not be
//!   counted; for exact totals, stop or join producer threads first.
//! - A dead analyzer never deadlocks the application: its consumers are dropped as it unwinds,
//!   blocked producers stop waiting and count what they drop, and the report names the failure.
//! - Sequential mode runs the analysis inline in the emitting thread (no ring), the paper's
//!   "sequential analyzer". A thread's results are merged when it exits, or at `finish` for the
//!   finishing thread; `finish` gives threads that have just ended (a scoped thread's `join`
//!   returns before its thread-local destructor runs) up to 20 ms to merge, and threads still
//!   alive after that are counted in [`Report::unmerged_threads`].

use crate::config::{ConfigError, Mode, RingConfig, WORD_BYTES};
use crate::event::Event;
use crate::ring::{self, Consumer, Producer};
use parking_lot::{Mutex, MutexGuard};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An analysis the runtime can run: a plain single-threaded consumer of event words.
pub trait RingAnalysis: Send + 'static {
    /// Take a batch of event words (any length; chunk boundaries carry no meaning).
    fn consume(&mut self, words: &[u64]);
    /// Fold another instance's results into this one.
    fn merge(&mut self, other: Self)
    where
        Self: Sized;
}

/// How events travel from the application to the analysis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunMode {
    /// Through a CAB ring; nothing lost, the application blocks when a ring is full.
    Exhaustive,
    /// Through a CAB ring; the application never blocks, the analyzer reads `rate` of each
    /// chunk in bursts of `burst_words`. With `adaptive`, the rate drops while producers lap
    /// the analyzer and climbs back (never above `rate`) when it keeps up.
    Sampling {
        /// Fraction of each chunk analyzed, `0.0..=1.0`.
        rate: f64,
        /// Events per burst (8 = one cache line).
        burst_words: usize,
        /// Adapt the rate to what the analyzer can keep up with.
        adaptive: bool,
    },
    /// No ring: the analysis runs inline in the application thread.
    Sequential,
    /// Overhead breakdown (the paper's Figure 8), first bar: each event is only written to one
    /// thread-local word. Nothing is analyzed.
    InstrumentOnly,
    /// Overhead breakdown, second bar: events go into a ring that no analyzer reads (a
    /// sampling-mode producer, which wraps without blocking). Nothing is analyzed.
    EnqueueOnly,
}

/// Why a session could not start.
#[derive(Debug)]
pub enum SessionError {
    /// Another session is running in this process.
    AlreadyRunning,
    /// A setting is out of range.
    Config(ConfigError),
    /// An analyzer thread could not be spawned.
    Spawn(std::io::Error),
    /// The Ctrl-C handler could not be installed (another one owns SIGINT).
    Signal(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::AlreadyRunning => {
                write!(
                    f,
                    "a cabprof session is already running in this process; finish it first"
                )
            }
            SessionError::Config(e) => e.fmt(f),
            SessionError::Spawn(e) => write!(f, "could not spawn an analyzer thread: {e}"),
            SessionError::Signal(e) => write!(f, "could not install the Ctrl-C handler: {e}"),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<ConfigError> for SessionError {
    fn from(e: ConfigError) -> Self {
        SessionError::Config(e)
    }
}

/// Counters for one application thread's ring.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadStats {
    /// Thread name (or `thread-N`).
    pub thread: String,
    /// Threads folded into this entry (1, or more for the "(other threads)" overflow entry).
    pub threads: u64,
    /// Events the thread produced (exhaustive, sequential: exact; sampling: the producer's
    /// position as last seen).
    pub events: u64,
    /// Events the analysis saw (equals `events` unless sampling or dropping).
    pub analyzed: u64,
    /// Times the producer found its ring full (exhaustive).
    pub blocks: u64,
    /// Time the producer spent blocked.
    pub blocked: Duration,
    /// Events dropped because the analyzer was gone.
    pub dropped: u64,
    /// Chunks the producer overwrote before the analyzer read them (sampling).
    pub chunks_lapped: u64,
    /// Events in those chunks (sampling).
    pub events_lapped: u64,
    /// The sampling rate in force when the ring was retired.
    pub rate: f64,
}

impl ThreadStats {
    fn absorb(&mut self, o: &ThreadStats) {
        self.threads += o.threads;
        self.events += o.events;
        self.analyzed += o.analyzed;
        self.blocks += o.blocks;
        self.blocked += o.blocked;
        self.dropped += o.dropped;
        self.chunks_lapped += o.chunks_lapped;
        self.events_lapped += o.events_lapped;
        self.rate = self.rate.min(o.rate);
    }
}

/// Per-thread entries kept before further threads are folded into one "(other threads)" entry,
/// so a program that churns through millions of threads keeps a bounded report.
const MAX_THREAD_ENTRIES: usize = 1024;

fn push_thread(list: &mut Vec<ThreadStats>, t: ThreadStats) {
    if list.len() < MAX_THREAD_ENTRIES {
        list.push(t);
    } else {
        let last = list.last_mut().expect("non-empty");
        if last.thread != "(other threads)" {
            let mut other = ThreadStats {
                thread: "(other threads)".into(),
                rate: 1.0,
                ..Default::default()
            };
            other.absorb(last);
            *last = other;
        }
        last.absorb(&t);
    }
}

/// The result of a session (or a snapshot of one).
#[derive(Clone, Debug)]
pub struct Report<A> {
    /// The merged analysis.
    pub analysis: A,
    /// How events travelled.
    pub mode: RunMode,
    /// Ring sizes used (concurrent modes).
    pub ring: RingConfig,
    /// The sampling rate actually used at the end (the lowest over rings with adaptive
    /// sampling; 1.0 when not sampling).
    pub rate_used: f64,
    /// One entry per application thread that emitted events.
    pub threads: Vec<ThreadStats>,
    /// Sum over threads.
    pub totals: ThreadStats,
    /// Analyzer threads that panicked, with their messages. Their rings' results are missing.
    pub analyzer_failures: Vec<String>,
    /// Sequential mode: threads alive at the end whose inline results could not be merged.
    pub unmerged_threads: usize,
    /// Snapshots: an upper bound on events emitted but not yet analyzed when it was taken.
    pub in_flight: u64,
    /// Time from start to this report.
    pub elapsed: Duration,
}

impl<A> Report<A> {
    fn finish_totals(&mut self) {
        let mut t = ThreadStats {
            thread: "(all)".into(),
            rate: 1.0,
            ..Default::default()
        };
        for s in &self.threads {
            t.absorb(s);
        }
        self.totals = t;
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// Which buffer carries events from application threads to analyzers. CAB is the design;
/// the others are the baselines the paper compares it with (Figure 7), exhaustive mode only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferDesign {
    /// Cache-friendly Asymmetric Buffering.
    Cab,
    /// FastForward (Giacomoni et al. 2008).
    FastForward,
    /// N-way buffering (PiPA, Zhao et al. 2008).
    NWay,
}

/// Chooses how a session runs. Every setting can also come from a `CABPROF_*` variable (see
/// [`SessionBuilder::from_env`]).
#[derive(Clone, Debug)]
pub struct SessionBuilder {
    mode: RunMode,
    design: BufferDesign,
    buffer_bytes: Option<usize>,
    chunk_bytes: Option<usize>,
    analyzers: usize,
    pin: bool,
    pin_application: bool,
    output: Option<PathBuf>,
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            mode: RunMode::Exhaustive,
            design: BufferDesign::Cab,
            buffer_bytes: None,
            chunk_bytes: None,
            analyzers: 1,
            pin: true,
            pin_application: false,
            output: None,
        }
    }
}

/// The environment variables [`SessionBuilder::from_env`] reads.
pub const ENV_VARS: &[(&str, &str)] = &[
    ("CABPROF_MODE", "exhaustive | sampling | sequential"),
    (
        "CABPROF_RATE",
        "sampling rate, 0.0..=1.0 (implies sampling mode)",
    ),
    ("CABPROF_BURST", "sampling burst in events, 1..=chunk"),
    (
        "CABPROF_ADAPTIVE",
        "adaptive sampling: 0 | 1 | true | false",
    ),
    (
        "CABPROF_BUFFER",
        "ring size in bytes (K/M/G suffixes allowed)",
    ),
    (
        "CABPROF_CHUNK",
        "chunk size in bytes (K/M/G suffixes allowed)",
    ),
    ("CABPROF_ANALYZERS", "analyzer threads, 1..=64"),
    ("CABPROF_PIN", "pin threads to cores: 0 | 1 | true | false"),
    ("CABPROF_OUTPUT", "path of the report file"),
    ("CABPROF_BUFFER_DESIGN", "cab | fastforward | nway"),
];

fn parse_bytes(var: &str, text: &str) -> Result<usize, ConfigError> {
    let t = text.trim();
    let (num, mul) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| ConfigError::new(var, text, "a byte count such as 2097152, 2048K or 2M"))
}

fn parse_bool(var: &str, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(ConfigError::new(var, text, "0, 1, true or false")),
    }
}

impl SessionBuilder {
    /// Defaults: exhaustive, one pinned analyzer, chunk = 4 × L1d, buffer = 16 chunks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Exhaustive, sampling or sequential.
    pub fn mode(mut self, mode: RunMode) -> Self {
        self.mode = mode;
        self
    }

    /// The buffer design (default CAB). FastForward and N-way need exhaustive mode and
    /// power-of-two sizes.
    pub fn buffer_design(mut self, design: BufferDesign) -> Self {
        self.design = design;
        self
    }

    /// Sampling at `rate` with one-cache-line bursts.
    pub fn sampling(self, rate: f64) -> Self {
        self.mode(RunMode::Sampling {
            rate,
            burst_words: 8,
            adaptive: false,
        })
    }

    /// Ring size in bytes.
    pub fn buffer_bytes(mut self, bytes: usize) -> Self {
        self.buffer_bytes = Some(bytes);
        self
    }

    /// Chunk size in bytes.
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = Some(bytes);
        self
    }

    /// Number of analyzer threads (default 1).
    pub fn analyzers(mut self, n: usize) -> Self {
        self.analyzers = n;
        self
    }

    /// Pin analyzer threads to their own cores (the last ones, never core 0; default on).
    pub fn pin(mut self, on: bool) -> Self {
        self.pin = on;
        self
    }

    /// Also pin the thread that starts the session to core 0, as the paper's experiments do
    /// (default off). Threads it spawns afterwards inherit that affinity, so leave this off
    /// for multi-threaded programs.
    pub fn pin_application(mut self, on: bool) -> Self {
        self.pin_application = on;
        self
    }

    /// Where reports are written by those who write them (Ctrl-C handler, the facade).
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.output = Some(path.into());
        self
    }

    /// The configured output path, if any.
    pub fn output_path(&self) -> Option<&PathBuf> {
        self.output.as_ref()
    }

    /// The configured mode.
    pub fn run_mode(&self) -> RunMode {
        self.mode
    }

    /// Override settings from `CABPROF_*` variables in the process environment. A bad value is
    /// an error naming the variable and what it allows.
    pub fn from_env(self) -> Result<Self, ConfigError> {
        self.from_vars(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env) with any lookup (tests use a map).
    pub fn from_vars(mut self, get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let (mut rate, mut burst, mut adaptive) = match self.mode {
            RunMode::Sampling {
                rate,
                burst_words,
                adaptive,
            } => (rate, burst_words, adaptive),
            _ => (0.1, 8, false),
        };
        let mut sampling_vars = false;
        if let Some(v) = get("CABPROF_RATE") {
            rate = v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| ConfigError::new("CABPROF_RATE", &v, "a number in 0.0..=1.0"))?;
            sampling_vars = true;
        }
        if let Some(v) = get("CABPROF_BURST") {
            burst = v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&b| b >= 1)
                .ok_or_else(|| {
                    ConfigError::new("CABPROF_BURST", &v, "a whole number of events >= 1")
                })?;
            sampling_vars = true;
        }
        if let Some(v) = get("CABPROF_ADAPTIVE") {
            adaptive = parse_bool("CABPROF_ADAPTIVE", &v)?;
            sampling_vars = true;
        }
        let sampling = RunMode::Sampling {
            rate,
            burst_words: burst,
            adaptive,
        };
        if let Some(v) = get("CABPROF_MODE") {
            self.mode = match v.trim().to_ascii_lowercase().as_str() {
                "exhaustive" => RunMode::Exhaustive,
                "sampling" => sampling,
                "sequential" => RunMode::Sequential,
                "instrument-only" => RunMode::InstrumentOnly,
                "enqueue-only" => RunMode::EnqueueOnly,
                _ => {
                    return Err(ConfigError::new(
                        "CABPROF_MODE",
                        &v,
                        "exhaustive, sampling or sequential (or instrument-only, enqueue-only)",
                    ))
                }
            };
        } else if sampling_vars {
            self.mode = sampling;
        }
        if let Some(v) = get("CABPROF_BUFFER") {
            self.buffer_bytes = Some(parse_bytes("CABPROF_BUFFER", &v)?);
        }
        if let Some(v) = get("CABPROF_CHUNK") {
            self.chunk_bytes = Some(parse_bytes("CABPROF_CHUNK", &v)?);
        }
        if let Some(v) = get("CABPROF_ANALYZERS") {
            self.analyzers = v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=64).contains(n))
                .ok_or_else(|| ConfigError::new("CABPROF_ANALYZERS", &v, "1..=64"))?;
        }
        if let Some(v) = get("CABPROF_BUFFER_DESIGN") {
            self.design = match v.trim().to_ascii_lowercase().as_str() {
                "cab" => BufferDesign::Cab,
                "fastforward" | "ff" => BufferDesign::FastForward,
                "nway" | "n-way" => BufferDesign::NWay,
                _ => {
                    return Err(ConfigError::new(
                        "CABPROF_BUFFER_DESIGN",
                        &v,
                        "cab, fastforward or nway",
                    ))
                }
            };
        }
        if let Some(v) = get("CABPROF_PIN") {
            self.pin = parse_bool("CABPROF_PIN", &v)?;
        }
        if let Some(v) = get("CABPROF_OUTPUT") {
            if v.trim().is_empty() {
                return Err(ConfigError::new(
                    "CABPROF_OUTPUT",
                    "\"\"",
                    "a non-empty path",
                ));
            }
            self.output = Some(PathBuf::from(v));
        }
        Ok(self)
    }

    /// The ring configuration this builder will use, validated.
    pub fn ring_config(&self) -> Result<RingConfig, ConfigError> {
        let chunk = self
            .chunk_bytes
            .unwrap_or_else(crate::hw::recommended_chunk_bytes);
        let buffer = self.buffer_bytes.unwrap_or(chunk * 16);
        let mode = match self.mode {
            RunMode::Sampling {
                rate, burst_words, ..
            } => Mode::Sampling { rate, burst_words },
            _ => Mode::Exhaustive,
        };
        let cfg = RingConfig::new(buffer, chunk).with_mode(mode);
        match self.design {
            BufferDesign::Cab => cfg.validate()?,
            other => {
                if mode != Mode::Exhaustive {
                    return Err(ConfigError::new(
                        "buffer design",
                        format!("{other:?}"),
                        "Cab in sampling mode (FastForward and NWay are exhaustive only)",
                    ));
                }
                cfg.validate_power_of_two()?
            }
        }
        Ok(cfg)
    }

    /// Check every setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=64).contains(&self.analyzers) {
            return Err(ConfigError::new("analyzers", self.analyzers, "1..=64"));
        }
        self.ring_config().map(|_| ())
    }

    /// Start the session with one `factory()` analysis instance per ring (or per thread in
    /// sequential mode).
    pub fn start<A, F>(self, factory: F) -> Result<Session<A>, SessionError>
    where
        A: RingAnalysis,
        F: Fn() -> A + Send + Sync + 'static,
    {
        self.validate()?;
        Session::start(self, Arc::new(factory))
    }
}

// ---------------------------------------------------------------------------------------------
// Global state and the instrumentation entry point

/// `0` when no session runs, else `epoch << 3 | kind` of the running session. One load tells
/// `emit` both whether to do anything and whether the thread's ring is current.
static SESSION: AtomicU64 = AtomicU64::new(0);
const KIND_EXHAUSTIVE: u64 = 1;
const KIND_SAMPLING: u64 = 2;
const KIND_SEQUENTIAL: u64 = 3;
const KIND_FASTFORWARD: u64 = 4;
const KIND_NWAY: u64 = 5;
const KIND_WORD: u64 = 6;
const KIND_ENQUEUE: u64 = 7;
const KIND_MASK: u64 = 7;
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The running session's registrar. Locked only when a thread attaches or a session starts
/// or ends.
static HUB: Mutex<Option<Arc<dyn Hub>>> = Mutex::new(None);
static THREAD_SEQ: AtomicU64 = AtomicU64::new(0);

/// What a thread-local needs from the running session, without knowing its analysis type.
trait Hub: Send + Sync {
    fn key(&self) -> u64;
    /// Make a ring for a new producer thread and give its consumer to an analyzer.
    fn attach_ring(&self, thread: String) -> Sink;
    /// A sequential-mode inline analysis for a new thread.
    fn attach_inline(&self, thread: String) -> Box<dyn InlineSink>;
}

/// A sequential-mode analysis instance living in a thread-local.
trait InlineSink {
    fn consume(&mut self, words: &[u64]);
    /// The thread ended (or the session is finishing on it): merge its results into its
    /// session's, which it holds a handle to, so this works even after the session has
    /// stopped taking new threads.
    fn retire(self: Box<Self>);
}

/// A thread's connection to the session. Producers are heap-allocated and held by raw
/// pointer (from `Box::into_raw`) so that the pointer `FAST` caches and the one used here are
/// the same, with no `Box` uniqueness claim between them; `Drop` frees them.
enum Sink {
    None,
    Exhaustive(*mut Producer<false>),
    Sampling(*mut Producer<true>),
    FastForward(*mut crate::fastforward::Producer),
    NWay(*mut crate::nway::Producer),
    /// `RunMode::InstrumentOnly`: the one word events are written to.
    Word(*mut u64),
}

impl Sink {
    fn exhaustive(p: Producer<false>) -> Sink {
        Sink::Exhaustive(Box::into_raw(Box::new(p)))
    }

    fn sampling(p: Producer<true>) -> Sink {
        Sink::Sampling(Box::into_raw(Box::new(p)))
    }

    fn fastforward(p: crate::fastforward::Producer) -> Sink {
        Sink::FastForward(Box::into_raw(Box::new(p)))
    }

    fn nway(p: crate::nway::Producer) -> Sink {
        Sink::NWay(Box::into_raw(Box::new(p)))
    }

    fn word() -> Sink {
        Sink::Word(Box::into_raw(Box::new(0u64)))
    }

    fn raw(&self) -> *mut () {
        match *self {
            Sink::Word(p) => p.cast(),
            Sink::Exhaustive(p) => p.cast(),
            Sink::Sampling(p) => p.cast(),
            Sink::FastForward(p) => p.cast(),
            Sink::NWay(p) => p.cast(),
            Sink::None => std::ptr::null_mut(),
        }
    }

    #[inline]
    fn push(&mut self, event: Event) {
        match self {
            // SAFETY: the pointer came from `Box::into_raw` in `Sink::exhaustive` and is freed
            // only by `Drop` below; this thread is its only user.
            Sink::Exhaustive(p) => unsafe { (**p).push(event) },
            // SAFETY: as above, from `Sink::sampling`.
            Sink::Sampling(p) => unsafe { (**p).push(event) },
            // SAFETY: as above, from `Sink::fastforward`.
            Sink::FastForward(p) => unsafe { (**p).push(event) },
            // SAFETY: as above, from `Sink::nway`.
            Sink::NWay(p) => unsafe { (**p).push(event) },
            // SAFETY: as above, from `Sink::word`.
            Sink::Word(p) => unsafe { std::ptr::write_volatile(*p, event.word()) },
            Sink::None => {}
        }
    }

    fn flush(&mut self) {
        match self {
            // SAFETY: see `push`.
            Sink::Exhaustive(p) => unsafe { (**p).flush() },
            // SAFETY: see `push`.
            Sink::Sampling(p) => unsafe { (**p).flush() },
            // SAFETY: see `push`.
            Sink::FastForward(p) => unsafe { (**p).flush() },
            // SAFETY: see `push`.
            Sink::NWay(p) => unsafe { (**p).flush() },
            Sink::Word(_) | Sink::None => {}
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        match *self {
            // SAFETY: from `Box::into_raw`, dropped exactly once here; `FAST` was cleared by
            // `Local::retire` before any `Sink` holding a producer is dropped. Dropping the
            // producer closes it: the analyzer drains the ring and frees it.
            Sink::Exhaustive(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above.
            Sink::Sampling(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above.
            Sink::FastForward(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above.
            Sink::NWay(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above.
            Sink::Word(p) => drop(unsafe { Box::from_raw(p) }),
            Sink::None => {}
        }
    }
}

struct Local {
    /// The `SESSION` value this thread's sink belongs to.
    key: u64,
    /// Concurrent modes: this thread's producer.
    sink: Sink,
    /// Sequential mode: this thread's inline analysis.
    inline: Option<Box<dyn InlineSink>>,
}

impl Local {
    fn retire(&mut self) {
        // Forget the cached producer before it goes away.
        let _ = FAST.try_with(|f| {
            f.key.set(0);
            f.ring.set(std::ptr::null_mut());
        });
        if let Some(inline) = self.inline.take() {
            inline.retire();
        }
        // Dropping a producer closes it: the analyzer drains the ring and frees it.
        self.sink = Sink::None;
        self.key = 0;
    }

    /// Point `FAST` at this thread's producer, if it has one.
    fn publish_fast(&mut self) {
        let ring = self.sink.raw();
        if ring.is_null() {
            return;
        }
        let key = self.key;
        let _ = FAST.try_with(|f| {
            f.ring.set(ring);
            f.key.set(key);
        });
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.retire();
    }
}

/// The hot path's view of this thread's producer: the session key it belongs to and a raw
/// pointer to it. No destructor, so access is a plain thread-local load with no lazy-init or
/// registration check. Invariant: when `key` is non-zero and equals the running session's key,
/// `ring` points to the `Producer` boxed in this thread's `LOCAL` (of the type `key & KIND_MASK`
/// names); `Local::retire` zeroes `key` before that box is dropped.
struct Fast {
    key: Cell<u64>,
    ring: Cell<*mut ()>,
}

thread_local! {
    static FAST: Fast = const {
        Fast {
            key: Cell::new(0),
            ring: Cell::new(std::ptr::null_mut()),
        }
    };
    static LOCAL: RefCell<Local> = const { RefCell::new(Local { key: 0, sink: Sink::None, inline: None }) };
}

/// Record one event from the calling thread. With no session running this is one load and
/// one branch. Never blocks in sampling mode; in exhaustive mode it waits while the thread's
/// ring is full (and drops, counted, if its analyzer is gone).
#[inline(always)]
pub fn emit(event: Event) {
    let key = SESSION.load(Ordering::Relaxed);
    if key != 0 {
        emit_to(key, event);
    }
}

/// Whether a session is running (instrumentation may skip work when not).
#[inline(always)]
pub fn active() -> bool {
    SESSION.load(Ordering::Relaxed) != 0
}

#[inline(always)]
fn emit_to(key: u64, event: Event) {
    // Only loads inside `with`, so it stays a one-instruction TLS access after inlining.
    let (fast_key, ring) = FAST.with(|f| (f.key.get(), f.ring.get()));
    if fast_key != key {
        emit_slow(key, event);
        return;
    }
    let kind = key & KIND_MASK;
    if kind == KIND_EXHAUSTIVE {
        // SAFETY: by `Fast`'s invariant, a matching key means `ring` points to this thread's
        // live producer of the kind the key names; only this thread touches it, and nothing
        // else borrows it now (the slow path's `LOCAL` borrow is not held while we are here).
        unsafe { (*ring.cast::<Producer<false>>()).push(event) };
    } else if kind == KIND_SAMPLING || kind == KIND_ENQUEUE {
        // SAFETY: as above (enqueue-only sessions use a sampling producer).
        unsafe { (*ring.cast::<Producer<true>>()).push(event) };
    } else if kind == KIND_WORD {
        // SAFETY: as above; the word is this thread's `Sink::Word` box. Volatile so the
        // store, the whole point of this mode, is not optimized away.
        unsafe { std::ptr::write_volatile(ring.cast::<u64>(), event.word()) };
    } else if kind == KIND_FASTFORWARD {
        // SAFETY: as above.
        unsafe { (*ring.cast::<crate::fastforward::Producer>()).push(event) };
    } else {
        // SAFETY: as above; sequential sessions never publish to `FAST`, so the only kind
        // left is N-way.
        unsafe { (*ring.cast::<crate::nway::Producer>()).push(event) };
    }
}

/// First event of a thread in this session, sequential mode, or a thread being torn down.
#[cold]
#[inline(never)]
fn emit_slow(key: u64, event: Event) {
    // `try_with`: events from TLS destructors after `LOCAL` is gone are dropped.
    // `try_borrow_mut`: an event emitted from inside an inline analysis (re-entrancy) is
    // dropped rather than corrupting the analysis.
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            if local.key != key {
                attach(&mut local, key);
            }
            match &mut local.inline {
                Some(inline) => inline.consume(&[event.word()]),
                None => local.sink.push(event),
            }
        }
    });
}

#[cold]
#[inline(never)]
fn attach(local: &mut Local, key: u64) {
    local.retire();
    let hub = HUB.lock().clone();
    let Some(hub) = hub.filter(|h| h.key() == key) else {
        return;
    };
    let name = std::thread::current()
        .name()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("thread-{}", THREAD_SEQ.fetch_add(1, Ordering::Relaxed)));
    if key & KIND_MASK == KIND_SEQUENTIAL {
        local.inline = Some(hub.attach_inline(name));
    } else {
        local.sink = hub.attach_ring(name);
    }
    local.key = key;
    local.publish_fast();
}

/// Hand the calling thread's buffered events to its analyzer now (for instance before a
/// thread parks for a long time). Cheap; optional.
pub fn flush_current_thread() {
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            local.sink.flush();
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Analyzers

/// The consumer half of whichever buffer design the session uses.
enum AnyConsumer {
    Cab(Consumer),
    FastForward(crate::fastforward::Consumer),
    NWay(crate::nway::Consumer),
}

impl AnyConsumer {
    #[inline]
    fn poll_with(&mut self, f: impl FnMut(&[u64])) -> Poll {
        match self {
            AnyConsumer::Cab(c) => c.poll_with(f),
            AnyConsumer::FastForward(c) => c.poll_with(f),
            AnyConsumer::NWay(c) => c.poll_with(f),
        }
    }

    /// Events a live producer has written but not handed over: only CAB can read them
    /// without the producer's help (the baselines' threads are joined before `finish` in the
    /// evaluations that use them).
    fn drain_live(&mut self, f: impl FnMut(&[u64])) -> u64 {
        match self {
            AnyConsumer::Cab(c) => c.drain_live(f),
            _ => 0,
        }
    }

    fn stats(&self) -> crate::transport::ConsumerStats {
        match self {
            AnyConsumer::Cab(c) => c.stats(),
            AnyConsumer::FastForward(c) => c.stats(),
            AnyConsumer::NWay(c) => c.stats(),
        }
    }

    fn producer_stats(&self) -> crate::transport::ProducerStats {
        match self {
            AnyConsumer::Cab(c) => c.producer_stats(),
            other => crate::transport::ProducerStats {
                pushed: other.stats().delivered,
                ..Default::default()
            },
        }
    }

    fn is_sampling(&self) -> bool {
        matches!(self, AnyConsumer::Cab(c) if c.is_sampling())
    }

    fn chunk_slots(&self) -> usize {
        match self {
            AnyConsumer::Cab(c) => c.chunk_slots(),
            _ => 0,
        }
    }

    fn rate(&self) -> f64 {
        match self {
            AnyConsumer::Cab(c) => c.rate(),
            _ => 1.0,
        }
    }

    fn set_rate(&mut self, rate: f64) {
        if let AnyConsumer::Cab(c) = self {
            c.set_rate(rate);
        }
    }
}

struct RingEntry<A> {
    consumer: AnyConsumer,
    analysis: A,
    thread: String,
    /// Adaptive sampling: laps seen at the last rate decision, chunks since.
    last_lapped: u64,
    chunks_since: u64,
    /// Events read and thrown away because this ring's analyzer failed.
    discarded: u64,
}

impl<A> RingEntry<A> {
    fn stats(&self) -> ThreadStats {
        let p = self.consumer.producer_stats();
        let c = self.consumer.stats();
        let events = if self.consumer.is_sampling() {
            p.pushed
        } else {
            c.delivered
        };
        ThreadStats {
            thread: self.thread.clone(),
            threads: 1,
            events,
            analyzed: c.delivered,
            blocks: p.blocks,
            blocked: p.blocked,
            dropped: p.dropped + self.discarded,
            chunks_lapped: c.chunks_lapped,
            events_lapped: c.chunks_lapped * self.consumer.chunk_slots() as u64,
            rate: self.consumer.rate(),
        }
    }
}

/// What one analyzer hands back.
struct AnalyzerOutput<A> {
    analysis: A,
    threads: Vec<ThreadStats>,
    in_flight: u64,
}

struct AnalyzerShared<A> {
    /// New rings, handed over by attaching threads. `alive` is checked under this lock.
    inbox: Mutex<Inbox<A>>,
    has_new: AtomicBool,
    stop: AtomicBool,
    /// Snapshot requests: the requester bumps `snapshot_want`, the analyzer answers through
    /// `snapshot_out` and bumps `snapshot_done`.
    snapshot_want: AtomicU64,
    snapshot_out: Mutex<Option<AnalyzerOutput<A>>>,
    snapshot_done: AtomicU64,
    clone_fn: Option<fn(&A) -> A>,
    rings: AtomicUsize,
    /// Set when the analysis panicked in this analyzer; it then only drains and discards.
    failure: Mutex<Option<String>>,
    /// The analyzer thread, once spawned: woken when there is news for it (a new ring, a
    /// snapshot request, the stop), so an idle analyzer that sleeps in `park_timeout` starts
    /// reading a new ring at once, not up to a millisecond later (a lap of a 2 MB sampling
    /// ring at the densest workloads' event rates).
    thread: std::sync::OnceLock<std::thread::Thread>,
}

impl<A> AnalyzerShared<A> {
    fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

struct Inbox<A> {
    alive: bool,
    rings: Vec<RingEntry<A>>,
}

struct Analyzer<A> {
    shared: Arc<AnalyzerShared<A>>,
    factory: Arc<dyn Fn() -> A + Send + Sync>,
    rings: Vec<RingEntry<A>>,
    done: A,
    threads: Vec<ThreadStats>,
    adaptive: Option<f64>,
    snapshots_answered: u64,
    /// The analysis panicked: from then on rings are drained and their events discarded (and
    /// counted as dropped) so producers never block on a dead analysis.
    failed: bool,
}

/// Sets `alive = false` and drops queued rings when the analyzer thread ends in any way, so a
/// ring registered later goes elsewhere and blocked producers are released.
struct AnalyzerExit<A>(Arc<AnalyzerShared<A>>);

impl<A> Drop for AnalyzerExit<A> {
    fn drop(&mut self) {
        let mut inbox = self.0.inbox.lock();
        inbox.alive = false;
        inbox.rings.clear();
    }
}

impl<A: RingAnalysis> Analyzer<A> {
    fn run(mut self) -> AnalyzerOutput<A> {
        let _exit = AnalyzerExit(self.shared.clone());
        tracing::debug!("cabprof analyzer started");
        let mut idle_rounds = 0u32;
        loop {
            if self.shared.has_new.load(Ordering::Acquire) {
                self.take_new();
                // A new ring's producer is starting: poll it eagerly, not from a long sleep.
                idle_rounds = 0;
            }
            let stopping = self.shared.stop.load(Ordering::Acquire);
            if stopping {
                self.take_new();
                return self.drain_all();
            }
            let want = self.shared.snapshot_want.load(Ordering::Acquire);
            if want > self.snapshots_answered {
                self.answer_snapshot(want);
            }
            let worked = if self.failed {
                self.discard_round()
            } else {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.poll_round())) {
                    Ok(worked) => worked,
                    Err(panic) => {
                        self.fail(panic_message(&*panic));
                        true
                    }
                }
            };
            if worked {
                idle_rounds = 0;
            } else {
                idle_rounds = idle_rounds.saturating_add(1);
                idle_backoff(idle_rounds);
            }
        }
    }

    /// The analysis panicked: record it, throw away every result (they may be half-updated)
    /// and keep draining so producers are never blocked by a dead analysis.
    fn fail(&mut self, msg: String) {
        tracing::error!(%msg, "cabprof analysis panicked; this analyzer now discards events");
        *self.shared.failure.lock() = Some(msg);
        self.failed = true;
        self.done = (self.factory)();
        for entry in &mut self.rings {
            entry.analysis = (self.factory)();
            entry.discarded += entry.consumer.stats().delivered;
        }
    }

    fn discard_round(&mut self) -> bool {
        let mut worked = false;
        let mut i = 0;
        while i < self.rings.len() {
            let entry = &mut self.rings[i];
            let mut closed = false;
            loop {
                let mut n = 0u64;
                match entry.consumer.poll_with(|w| n += w.len() as u64) {
                    Poll::Consumed(_) => {
                        entry.discarded += n;
                        worked = true;
                    }
                    Poll::Empty => break,
                    Poll::Closed => {
                        closed = true;
                        break;
                    }
                }
            }
            if closed {
                let entry = self.rings.swap_remove(i);
                self.retire(entry);
                worked = true;
            } else {
                i += 1;
            }
        }
        worked
    }

    fn take_new(&mut self) {
        let mut inbox = self.shared.inbox.lock();
        self.rings.append(&mut inbox.rings);
        self.shared.has_new.store(false, Ordering::Release);
    }

    /// One pass over every ring, taking up to a few chunks from each. True if any work done.
    fn poll_round(&mut self) -> bool {
        let mut worked = false;
        let mut i = 0;
        while i < self.rings.len() {
            let mut closed = false;
            for _ in 0..4 {
                let entry = &mut self.rings[i];
                let analysis = &mut entry.analysis;
                match entry.consumer.poll_with(|w| analysis.consume(w)) {
                    Poll::Consumed(_) => {
                        worked = true;
                        entry.chunks_since += 1;
                    }
                    Poll::Empty => break,
                    Poll::Closed => {
                        closed = true;
                        break;
                    }
                }
            }
            if let Some(max) = self.adaptive {
                adapt_rate(&mut self.rings[i], max);
            }
            if closed {
                let entry = self.rings.swap_remove(i);
                self.retire(entry);
                worked = true;
            } else {
                i += 1;
            }
        }
        worked
    }

    fn retire(&mut self, entry: RingEntry<A>) {
        let stats = entry.stats();
        tracing::debug!(thread = %stats.thread, events = stats.events, "cabprof ring drained");
        if stats.chunks_lapped > 0 {
            tracing::info!(thread = %stats.thread, lapped = stats.chunks_lapped, "cabprof sampling overflow");
        }
        if stats.blocks > 0 {
            tracing::debug!(thread = %stats.thread, blocks = stats.blocks, blocked = ?stats.blocked, "cabprof producer blocked");
        }
        push_thread(&mut self.threads, stats);
        self.done.merge(entry.analysis);
        self.shared.rings.fetch_sub(1, Ordering::Relaxed);
    }

    /// Deliver everything every ring holds right now, live producers included.
    fn drain_now(entry: &mut RingEntry<A>) -> bool {
        let analysis = &mut entry.analysis;
        loop {
            match entry.consumer.poll_with(|w| analysis.consume(w)) {
                Poll::Consumed(_) => continue,
                Poll::Empty => {
                    entry.consumer.drain_live(|w| analysis.consume(w));
                    return false;
                }
                Poll::Closed => return true,
            }
        }
    }

    fn drain_all(mut self) -> AnalyzerOutput<A> {
        let rings = std::mem::take(&mut self.rings);
        for mut entry in rings {
            if self.failed {
                let mut n = 0u64;
                while let Poll::Consumed(_) = entry.consumer.poll_with(|w| n += w.len() as u64) {}
                entry.consumer.drain_live(|w| n += w.len() as u64);
                entry.discarded += n;
            } else if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Self::drain_now(&mut entry)
            }))
            .is_err()
            {
                self.fail("analysis panicked while draining at finish".into());
            }
            self.retire(entry);
        }
        tracing::debug!("cabprof analyzer stopped");
        AnalyzerOutput {
            analysis: std::mem::replace(&mut self.done, (self.factory)()),
            threads: std::mem::take(&mut self.threads),
            in_flight: 0,
        }
    }

    fn answer_snapshot(&mut self, want: u64) {
        if self.failed {
            *self.shared.snapshot_out.lock() = None;
            self.snapshots_answered = want;
            self.shared.snapshot_done.store(want, Ordering::Release);
            return;
        }
        let clone = self.shared.clone_fn.expect("snapshot requires Clone");
        let mut analysis = clone(&self.done);
        let mut threads = self.threads.clone();
        let mut in_flight = 0;
        for entry in &mut self.rings {
            Self::drain_now(entry);
            analysis.merge(clone(&entry.analysis));
            let s = entry.stats();
            if entry.consumer.is_sampling() {
                // Up to a chunk and a half may sit unpublished behind the producer.
                in_flight += entry.consumer.chunk_slots() as u64 * 2;
            }
            push_thread(&mut threads, s);
        }
        *self.shared.snapshot_out.lock() = Some(AnalyzerOutput {
            analysis,
            threads,
            in_flight,
        });
        self.snapshots_answered = want;
        self.shared.snapshot_done.store(want, Ordering::Release);
    }
}

use crate::transport::Poll;

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// Adaptive sampling (the paper's §6.4 future work): halve the rate when the producer laps the
/// analyzer, grow it by a quarter after 64 lap-free chunks, never above `max`.
fn adapt_rate<A>(entry: &mut RingEntry<A>, max: f64) {
    let lapped = entry.consumer.stats().chunks_lapped;
    let rate = entry.consumer.rate();
    if lapped > entry.last_lapped {
        entry.consumer.set_rate((rate * 0.5).max(1.0 / 1024.0));
        entry.last_lapped = lapped;
        entry.chunks_since = 0;
        tracing::debug!(thread = %entry.thread, rate = entry.consumer.rate(), "cabprof adaptive sampling: rate lowered");
    } else if entry.chunks_since >= 64 && rate < max {
        entry.consumer.set_rate((rate * 1.25).min(max));
        entry.chunks_since = 0;
    }
}

/// Idle analyzers back off: spin briefly, then yield, then sleep up to 1 ms, so an idle
/// service's analyzer costs almost no CPU while a busy one reacts within microseconds. The
/// sleep is a `park_timeout`: news for the analyzer (`AnalyzerShared::wake`) cuts it short.
fn idle_backoff(round: u32) {
    if round < 16 {
        std::hint::spin_loop();
    } else if round < 64 {
        std::thread::yield_now();
    } else {
        let us = (1u64 << ((round - 64) / 8).min(10)).min(1000);
        std::thread::park_timeout(Duration::from_micros(us));
    }
}

// ---------------------------------------------------------------------------------------------
// The session

struct Core<A: RingAnalysis> {
    key: u64,
    mode: RunMode,
    design: BufferDesign,
    ring: RingConfig,
    factory: Arc<dyn Fn() -> A + Send + Sync>,
    analyzers: Vec<Arc<AnalyzerShared<A>>>,
    handles: Mutex<Vec<JoinHandle<AnalyzerOutput<A>>>>,
    next: AtomicUsize,
    /// Sequential mode: merged results of retired threads.
    inline: Arc<InlineDone<A>>,
    started: Instant,
    finished: AtomicBool,
    /// Panics caught in analyzer threads.
    failures: Mutex<Vec<String>>,
    /// Serializes snapshots.
    snapshot_lock: Mutex<()>,
}

struct InlineAnalysis<A> {
    analysis: A,
    events: u64,
    thread: String,
    done: Arc<InlineDone<A>>,
}

/// Sequential mode: the merged results of threads that have ended, and how many inline
/// analyses are still live (not yet merged).
struct InlineDone<A> {
    merged: Mutex<(Option<A>, Vec<ThreadStats>)>,
    live: AtomicUsize,
}

impl<A: RingAnalysis> InlineSink for InlineAnalysis<A> {
    #[inline]
    fn consume(&mut self, words: &[u64]) {
        self.events += words.len() as u64;
        self.analysis.consume(words);
    }
    fn retire(self: Box<Self>) {
        let inline = *self;
        let mut merged = inline.done.merged.lock();
        push_thread(
            &mut merged.1,
            ThreadStats {
                thread: inline.thread,
                threads: 1,
                events: inline.events,
                analyzed: inline.events,
                rate: 1.0,
                ..Default::default()
            },
        );
        match &mut merged.0 {
            Some(a) => a.merge(inline.analysis),
            None => merged.0 = Some(inline.analysis),
        }
        // Under the lock: `finish` waits for zero, then locks, and so sees this merge.
        inline.done.live.fetch_sub(1, Ordering::Release);
    }
}

impl<A: RingAnalysis> Hub for Core<A> {
    fn key(&self) -> u64 {
        self.key
    }

    fn attach_ring(&self, thread: String) -> Sink {
        match self.mode {
            RunMode::InstrumentOnly => return Sink::word(),
            RunMode::EnqueueOnly => {
                let cfg = self.ring.with_mode(Mode::sampling(1.0));
                let (p, _no_analyzer) =
                    ring::sampling_channel(&cfg).expect("ring config validated at start");
                return Sink::sampling(p);
            }
            _ => {}
        }
        let made =
            match (self.ring.mode, self.design) {
                (Mode::Sampling { .. }, _) => ring::sampling_channel(&self.ring)
                    .map(|(p, c)| (Sink::sampling(p), AnyConsumer::Cab(c))),
                (Mode::Exhaustive, BufferDesign::Cab) => ring::channel(&self.ring)
                    .map(|(p, c)| (Sink::exhaustive(p), AnyConsumer::Cab(c))),
                (Mode::Exhaustive, BufferDesign::FastForward) => {
                    crate::fastforward::channel(&self.ring)
                        .map(|(p, c)| (Sink::fastforward(p), AnyConsumer::FastForward(c)))
                }
                (Mode::Exhaustive, BufferDesign::NWay) => crate::nway::channel(&self.ring)
                    .map(|(p, c)| (Sink::nway(p), AnyConsumer::NWay(c))),
            };
        let (sink, consumer) = made.expect("ring config validated at start");
        tracing::debug!(thread = %thread, bytes = self.ring.buffer_bytes, "cabprof ring created");
        let mut entry = Some(RingEntry {
            consumer,
            analysis: (self.factory)(),
            thread,
            last_lapped: 0,
            chunks_since: 0,
            discarded: 0,
        });
        let n = self.analyzers.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            let a = &self.analyzers[(first + k) % n];
            let mut inbox = a.inbox.lock();
            if inbox.alive {
                inbox.rings.push(entry.take().expect("once"));
                a.rings.fetch_add(1, Ordering::Relaxed);
                a.has_new.store(true, Ordering::Release);
                a.wake();
                break;
            }
        }
        if let Some(orphan) = entry {
            // Every analyzer is dead: dropping the consumer makes the producer drop and count.
            tracing::warn!(thread = %orphan.thread, "cabprof: no live analyzer; events of this thread are dropped");
        }
        sink
    }

    fn attach_inline(&self, thread: String) -> Box<dyn InlineSink> {
        self.inline.live.fetch_add(1, Ordering::Relaxed);
        Box::new(InlineAnalysis {
            analysis: (self.factory)(),
            events: 0,
            thread,
            done: self.inline.clone(),
        })
    }
}

/// A running profiling session. See the [module docs](self) for the contract.
pub struct Session<A: RingAnalysis> {
    core: Arc<Core<A>>,
    output: Option<PathBuf>,
}

/// Every online core of the machine, whatever the calling thread's affinity. (`core_affinity`
/// lists only the cores the calling thread may run on, and a thread inherits its creator's
/// mask: asking from a thread spawned by a pinned thread would see one core.)
pub fn online_cores() -> Vec<core_affinity::CoreId> {
    static CORES: std::sync::OnceLock<Vec<core_affinity::CoreId>> = std::sync::OnceLock::new();
    CORES
        .get_or_init(|| {
            let from_sysfs = std::fs::read_to_string("/sys/devices/system/cpu/online")
                .ok()
                .and_then(|s| parse_cpu_list(s.trim()));
            from_sysfs
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.into_iter()
                        .map(|id| core_affinity::CoreId { id })
                        .collect()
                })
                .or_else(core_affinity::get_core_ids)
                .unwrap_or_default()
        })
        .clone()
}

/// Parse a kernel CPU list such as `0-3,6,8-9`.
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

fn pin_to(core: usize) {
    let ids = online_cores();
    if let Some(id) = ids.get(core % ids.len().max(1)) {
        core_affinity::set_for_current(*id);
    }
}

fn claim_global() -> Result<MutexGuard<'static, Option<Arc<dyn Hub>>>, SessionError> {
    let hub = HUB.lock();
    if hub.is_some() {
        return Err(SessionError::AlreadyRunning);
    }
    Ok(hub)
}

impl<A: RingAnalysis> Session<A> {
    /// A builder with defaults.
    pub fn builder() -> SessionBuilder {
        SessionBuilder::new()
    }

    fn start(
        b: SessionBuilder,
        factory: Arc<dyn Fn() -> A + Send + Sync>,
    ) -> Result<Session<A>, SessionError> {
        Self::start_with(b, factory, None)
    }

    fn start_with(
        b: SessionBuilder,
        factory: Arc<dyn Fn() -> A + Send + Sync>,
        clone_fn: Option<fn(&A) -> A>,
    ) -> Result<Session<A>, SessionError> {
        let ring = b.ring_config()?;
        let mut global = claim_global()?;
        let epoch = EPOCH.fetch_add(1, Ordering::Relaxed) + 1;
        let kind = match b.mode {
            RunMode::Exhaustive => KIND_EXHAUSTIVE,
            RunMode::Sampling { .. } => KIND_SAMPLING,
            RunMode::Sequential => KIND_SEQUENTIAL,
            RunMode::InstrumentOnly => KIND_WORD,
            RunMode::EnqueueOnly => KIND_ENQUEUE,
        };
        let kind = match (kind, b.design) {
            (KIND_EXHAUSTIVE, BufferDesign::FastForward) => KIND_FASTFORWARD,
            (KIND_EXHAUSTIVE, BufferDesign::NWay) => KIND_NWAY,
            _ => kind,
        };
        let key = epoch << 3 | kind;
        let adaptive = match b.mode {
            RunMode::Sampling {
                rate,
                adaptive: true,
                ..
            } => Some(rate),
            _ => None,
        };
        let cores = online_cores().len().max(1);
        if b.pin_application && cores > 1 {
            pin_to(0);
        }
        let mut analyzers = Vec::new();
        let mut handles = Vec::new();
        if matches!(b.mode, RunMode::Exhaustive | RunMode::Sampling { .. }) {
            for i in 0..b.analyzers {
                let shared = Arc::new(AnalyzerShared {
                    inbox: Mutex::new(Inbox {
                        alive: true,
                        rings: Vec::new(),
                    }),
                    has_new: AtomicBool::new(false),
                    stop: AtomicBool::new(false),
                    snapshot_want: AtomicU64::new(0),
                    snapshot_out: Mutex::new(None),
                    snapshot_done: AtomicU64::new(0),
                    clone_fn,
                    rings: AtomicUsize::new(0),
                    failure: Mutex::new(None),
                    thread: std::sync::OnceLock::new(),
                });
                let analyzer = Analyzer {
                    shared: shared.clone(),
                    factory: factory.clone(),
                    rings: Vec::new(),
                    done: factory(),
                    threads: Vec::new(),
                    adaptive,
                    snapshots_answered: 0,
                    failed: false,
                };
                let pin = b.pin && cores > 1;
                let handle = std::thread::Builder::new()
                    .name(format!("cabprof-analyzer-{i}"))
                    .spawn(move || {
                        if pin {
                            // Analyzers take the last cores, counting down, and never core 0
                            // (where the OS starts, and `pin_application` pins, the app).
                            pin_to(cores - 1 - i % (cores - 1));
                        }
                        analyzer.run()
                    })
                    .map_err(SessionError::Spawn)?;
                let _ = shared.thread.set(handle.thread().clone());
                analyzers.push(shared);
                handles.push(handle);
            }
        }
        let core = Arc::new(Core {
            key,
            mode: b.mode,
            design: b.design,
            ring,
            factory,
            analyzers,
            handles: Mutex::new(handles),
            next: AtomicUsize::new(0),
            inline: Arc::new(InlineDone {
                merged: Mutex::new((None, Vec::new())),
                live: AtomicUsize::new(0),
            }),
            started: Instant::now(),
            finished: AtomicBool::new(false),
            failures: Mutex::new(Vec::new()),
            snapshot_lock: Mutex::new(()),
        });
        *global = Some(core.clone() as Arc<dyn Hub>);
        SESSION.store(key, Ordering::Release);
        tracing::info!(mode = ?b.mode, buffer = ring.buffer_bytes, chunk = ring.chunk_bytes, "cabprof session started");
        Ok(Session {
            core,
            output: b.output,
        })
    }

    /// The configured output path, if any.
    pub fn output_path(&self) -> Option<&PathBuf> {
        self.output.as_ref()
    }

    /// The mode this session runs in.
    pub fn mode(&self) -> RunMode {
        self.core.mode
    }

    /// Rings currently held by analyzers (live threads plus exited ones not yet drained).
    pub fn live_rings(&self) -> usize {
        self.core
            .analyzers
            .iter()
            .map(|a| a.rings.load(Ordering::Relaxed))
            .sum()
    }

    /// Stop, drain every ring, join the analyzers and return the merged report.
    pub fn finish(self) -> Report<A> {
        self.core
            .finish()
            .expect("a session is finished only once (finish consumes it)")
    }

    /// A handle that can finish this session from another thread (the Ctrl-C handler).
    pub fn finisher(&self) -> Finisher<A> {
        Finisher {
            core: self.core.clone(),
        }
    }
}

/// What the process-wide Ctrl-C handler runs: finish the session and report. Replaced by each
/// session that asks for it; taken (run once) by the handler.
static INTERRUPT: Mutex<Option<Box<dyn FnOnce() + Send>>> = Mutex::new(None);
static CTRLC_INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// Exit status after a Ctrl-C report: 128 + SIGINT, as shells report an interrupted program.
pub const INTERRUPTED_EXIT_CODE: i32 = 130;

impl<A: RingAnalysis> Session<A> {
    /// For services: on Ctrl-C (SIGINT), finish this session — stop, drain every ring of every
    /// thread (nothing emitted before the signal is lost in exhaustive mode), join the
    /// analyzers — hand the full report to `on_report`, then exit the process with status
    /// [`INTERRUPTED_EXIT_CODE`]. If the session finishes normally first, the handler only
    /// exits.
    pub fn on_ctrlc(
        &self,
        on_report: impl FnOnce(Report<A>) + Send + 'static,
    ) -> Result<(), SessionError> {
        let installed = CTRLC_INSTALLED.get_or_init(|| {
            ctrlc::set_handler(|| {
                let job = INTERRUPT.lock().take();
                tracing::info!("cabprof: interrupted, writing the final report");
                if let Some(job) = job {
                    job();
                }
                std::process::exit(INTERRUPTED_EXIT_CODE);
            })
            .map_err(|e| e.to_string())
        });
        if let Err(e) = installed {
            return Err(SessionError::Signal(e.clone()));
        }
        let finisher = self.finisher();
        *INTERRUPT.lock() = Some(Box::new(move || {
            if let Some(report) = finisher.finish() {
                on_report(report);
            }
        }));
        Ok(())
    }
}

impl<A: RingAnalysis + Clone> Session<A> {
    /// Like [`SessionBuilder::start`], and enables [`snapshot`](Self::snapshot).
    pub fn start_snapshotting<F>(b: SessionBuilder, factory: F) -> Result<Self, SessionError>
    where
        F: Fn() -> A + Send + Sync + 'static,
    {
        b.validate()?;
        Self::start_with(b, Arc::new(factory), Some(A::clone))
    }

    /// Results so far, without stopping. Every event published or visible in a ring at the
    /// time is included; `in_flight` bounds what may still be on its way. Sequential mode
    /// includes only threads that have exited. Returns `None` if the session was not started
    /// with [`start_snapshotting`](Self::start_snapshotting) or has finished.
    pub fn snapshot(&self) -> Option<Report<A>> {
        self.core.snapshot()
    }

    /// A handle that takes snapshots from any thread (a periodic reporter) without owning the
    /// session; its snapshots return `None` once the session has finished.
    pub fn snapshotter(&self) -> Snapshotter<A> {
        Snapshotter {
            core: self.core.clone(),
        }
    }
}

/// Takes snapshots of a session from any thread. See [`Session::snapshotter`].
pub struct Snapshotter<A: RingAnalysis> {
    core: Arc<Core<A>>,
}

impl<A: RingAnalysis + Clone> Snapshotter<A> {
    /// Results so far, as [`Session::snapshot`]; `None` once the session has finished.
    pub fn snapshot(&self) -> Option<Report<A>> {
        self.core.snapshot()
    }
}

impl<A: RingAnalysis + Clone> Core<A> {
    fn snapshot(&self) -> Option<Report<A>> {
        // One snapshot at a time: each analyzer has a single answer slot.
        let _one = self.snapshot_lock.lock();
        if self.finished.load(Ordering::Acquire) {
            return None;
        }
        let mut analysis = (self.factory)();
        let mut threads = Vec::new();
        let mut in_flight = 0;
        for a in &self.analyzers {
            a.clone_fn?;
            let want = a.snapshot_want.fetch_add(1, Ordering::AcqRel) + 1;
            a.wake();
            loop {
                if a.snapshot_done.load(Ordering::Acquire) >= want {
                    break;
                }
                if !a.inbox.lock().alive {
                    break;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            if let Some(out) = a.snapshot_out.lock().take() {
                analysis.merge(out.analysis);
                for t in out.threads {
                    push_thread(&mut threads, t);
                }
                in_flight += out.in_flight;
            }
        }
        {
            let done = self.inline.merged.lock();
            if let Some(a) = &done.0 {
                analysis.merge(a.clone());
            }
            threads.extend(done.1.iter().cloned());
        }
        let mut r = self.report(analysis, threads);
        r.in_flight = in_flight;
        Some(r)
    }
}

impl<A: RingAnalysis> Drop for Session<A> {
    fn drop(&mut self) {
        let _ = self.core.finish();
    }
}

/// Finishes a session from elsewhere (a signal handler thread). Finishing twice yields `None`.
pub struct Finisher<A: RingAnalysis> {
    core: Arc<Core<A>>,
}

impl<A: RingAnalysis> Finisher<A> {
    /// Finish the session if nobody has; the report, or `None` if it was already finished.
    pub fn finish(&self) -> Option<Report<A>> {
        self.core.finish()
    }
}

impl<A: RingAnalysis> Core<A> {
    fn report(&self, analysis: A, threads: Vec<ThreadStats>) -> Report<A> {
        let rate_used = threads
            .iter()
            .map(|t| t.rate)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))))
            .unwrap_or(match self.mode {
                RunMode::Sampling { rate, .. } => rate,
                _ => 1.0,
            });
        let mut r = Report {
            analysis,
            mode: self.mode,
            ring: self.ring,
            rate_used,
            threads,
            totals: ThreadStats::default(),
            analyzer_failures: self.failures.lock().clone(),
            unmerged_threads: self.inline.live.load(Ordering::Acquire),
            in_flight: 0,
            elapsed: self.started.elapsed(),
        };
        r.finish_totals();
        r
    }

    fn finish(&self) -> Option<Report<A>> {
        if self.finished.swap(true, Ordering::AcqRel) {
            return None;
        }
        // Stop new events first, then take the finishing thread's own sink.
        {
            let mut global = HUB.lock();
            if global.as_ref().is_some_and(|h| h.key() == self.key) {
                SESSION.store(0, Ordering::Release);
                *global = None;
            }
        }
        let _ = LOCAL.try_with(|local| {
            if let Ok(mut local) = local.try_borrow_mut() {
                if local.key == self.key {
                    if let Some(inline) = local.inline.take() {
                        inline.retire();
                    }
                    // A producer of this thread: close it so its tail is published.
                    local.retire();
                }
            }
        });
        for a in &self.analyzers {
            a.stop.store(true, Ordering::Release);
            a.wake();
        }
        let mut analysis = (self.factory)();
        let mut threads = Vec::new();
        for (i, a) in self.analyzers.iter().enumerate() {
            if let Some(msg) = a.failure.lock().take() {
                self.failures.lock().push(format!(
                    "analyzer {i}: analysis panicked: {msg}; the results of its rings are missing and their events are counted as dropped"
                ));
            }
        }
        for (i, h) in self.handles.lock().drain(..).enumerate() {
            match h.join() {
                Ok(out) => {
                    analysis.merge(out.analysis);
                    for t in out.threads {
                        push_thread(&mut threads, t);
                    }
                }
                Err(panic) => {
                    let msg = panic_message(&*panic);
                    tracing::error!(analyzer = i, %msg, "cabprof analyzer panicked");
                    self.failures
                        .lock()
                        .push(format!("analyzer {i} panicked: {msg}"));
                }
            }
        }
        // Sequential mode: a thread that has just ended may not have run its thread-local
        // destructor yet, which merges its inline results (a scoped thread's `join` returns
        // before it does). Give such threads a moment; threads still running are reported.
        let deadline = Instant::now() + INLINE_EXIT_GRACE;
        while self.inline.live.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        {
            let mut done = self.inline.merged.lock();
            if let Some(a) = done.0.take() {
                analysis.merge(a);
            }
            for t in done.1.drain(..) {
                push_thread(&mut threads, t);
            }
        }
        tracing::info!("cabprof session finished");
        Some(self.report(analysis, threads))
    }
}

/// How long `finish` waits for sequential-mode threads that have ended to merge their
/// results from their thread-local destructors.
const INLINE_EXIT_GRACE: Duration = Duration::from_millis(20);

/// Bytes per event word, for sizing in reports.
pub const EVENT_BYTES: usize = WORD_BYTES;
