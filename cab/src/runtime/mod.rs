//! The runtime around the rings: one ring per application thread, pinned analyzer threads,
//! clean shutdown, snapshots and Ctrl-C (Ha et al. 2009, §3.3, §5.1).
//!
//! # Contract
//!
//! - At most one [`Session`] runs per process; [`Session::start`] while one runs is an error
//!   ([`SessionError::AlreadyRunning`]), never a silent reset.
//! - [`emit`] is the only thing instrumentation calls. With no session it is one load and one
//!   well-predicted branch. With a session, the calling thread's ring is made on its first
//!   event (threads that never emit cost nothing) and registered with one analyzer, which is
//!   that ring's only consumer for its whole life.
//! - Each analyzer thread serves its rings round-robin and runs one analysis instance per ring
//!   (made by the session's factory), so per-thread state such as a shadow stack stays per
//!   thread. Instances are merged when a ring closes and at the end.
//! - Thread exit (normal or by panic) closes the thread's ring from its thread-local
//!   destructor; the analyzer drains it, merges its results and frees it.
//! - All rings together hold at most [`RuntimeConfig::ring_memory`] bytes (`CABPROF_RING_MEMORY`,
//!   default [`DEFAULT_RING_MEMORY`]), so thread churn behind a busy analyzer cannot queue
//!   rings without bound. A thread whose ring would exceed it waits for rings to be freed in
//!   exhaustive mode (at most [`RING_MEMORY_WAIT`], never once no analyzer is alive), not at
//!   all in sampling mode; if it still gets none, or the allocator refuses its ring, it runs
//!   on without one and its events are dropped and counted (the report's
//!   "(threads without a ring)" entry). A ring size no ring can have is an error at start.
//! - A thread's first event fits a small stack (16 KiB, `tests/small_stack.rs`): a thread with
//!   less than `ROOM` bytes of stack left has its ring and analysis instance made on a
//!   helper thread (`with_room`; up to eight kept for the next); if that fails, it runs without a ring. In
//!   sequential mode such a thread's results are merged at `finish`, not at its exit.
//! - After `fork`, the child runs with profiling off: `emit` does nothing there, and
//!   `finish` in the child returns an empty report naming the fork. The parent's session is
//!   unaffected.
//! - A snapshot reads what the rings held when it was asked for (at most a ring's worth each),
//!   not what producers add while it reads, so it returns in time proportional to that backlog.
//! - [`Session::finish`] (or drop) drains every ring, including those of threads still alive
//!   (exhaustive mode reads them without their cooperation, see
//!   [`Consumer::drain_live`](crate::ring::Consumer::drain_live)), joins the analyzers and
//!   returns the merged [`Report`]. Events emitted *while* `finish` runs may or may not be
//!   counted; for exact totals, stop or join producer threads first.
//! - A dead analyzer never deadlocks the application: its consumers are dropped as it unwinds,
//!   blocked producers stop waiting and count what they drop, and the report names the failure.
//! - Sequential mode runs the analysis inline in the emitting thread (no ring), the paper's
//!   "sequential analyzer". Each thread's instance sits behind its own mutex, registered with
//!   the session. The thread appends its words to a 256-word buffer (`pending`) and locks
//!   its instance (uncontended) once per full buffer to analyze them; snapshots and `finish`
//!   lock it, analyze what is pending, and copy or take the results of threads that are still
//!   alive (pool workers that never exit). A thread's results are merged when it exits or at `finish`, whichever
//!   comes first.
//!
//! This is the generic layer: it runs any [`EventAnalysis`] and writes no files. Programs
//! normally use the `cabprof` facade's `SessionBuilder`, which owns a [`RuntimeConfig`], the
//! analyses to run and where the report goes.
//!
//! ```
//! use cabprof_cab::runtime::{emit, EventAnalysis, RuntimeConfig, Session};
//! use cabprof_cab::Event;
//!
//! #[derive(Default)]
//! struct Count(u64);
//! impl EventAnalysis for Count {
//!     fn consume(&mut self, words: &[u64]) { self.0 += words.len() as u64 }
//!     fn merge(&mut self, other: Self) { self.0 += other.0 }
//! }
//!
//! let config = RuntimeConfig { pin: false, ..RuntimeConfig::default() };
//! let session = Session::start(config, Count::default).unwrap();
//! for v in 0..1000 {
//!     emit(Event::marker(v).unwrap());
//! }
//! assert_eq!(session.finish().analysis.0, 1000);
//! ```
//!
//! Files, one job each:
//! - `config`: [`RuntimeConfig`], its `CABPROF_*` variables and its validation.
//! - `budget`: the memory budget of all rings, and the counting sink of a thread without one.
//! - `design`: the buffer designs ([`BufferDesign`]), registered in one table, and the
//!   type-erased producer and consumer the other files hold.
//! - `tls`: the thread-local hot path: [`emit`], a thread's attachment to the session.
//! - `pending`: sequential mode's per-thread buffer of words and how its analysis takes them.
//! - `analyzer`: analyzer threads, their poll loop, adaptive sampling and [`Backoff`].
//! - `session`: the lifecycle: start, snapshot, finish.
//! - `sequential`: sequential mode's registry of the threads' inline analyses.
//! - `merge`: `merge_options`, folding results together.
//! - `report`: [`Report`] and [`ThreadStats`].
//! - `signal`: Ctrl-C.
//! - `stack`: `with_room`: the one-off work of a thread's first event, on a helper thread
//!   when the calling thread's stack is small.
//! - `affinity`: CPU topology and pinning ([`online_cores`]).

mod affinity;
mod analyzer;
mod budget;
mod config;
mod design;
// Public only for the loom models (`cab/tests/loom.rs`), which check its protocol.
mod merge;
#[cfg(loom)]
#[doc(hidden)]
pub mod pending;
#[cfg(not(loom))]
#[allow(unreachable_pub)]
mod pending;
mod report;
mod sequential;
mod session;
mod signal;
mod stack;
mod tls;
mod work;

pub use affinity::online_cores;
pub use analyzer::{drain, Backoff};
pub use config::{RuntimeConfig, DEFAULT_RING_MEMORY, RING_MEMORY_WAIT, SETTINGS};
pub use design::BufferDesign;
pub use report::{Report, ThreadStats};
pub use session::{Finisher, Session, Snapshotter};
pub use tls::{active, emit, flush_current_thread};
// The `cabprof` facade's plumbing: its hot path, its process-wide session and its reports'
// drop brackets. Public because the facade is another crate; hidden because it is no API.
#[doc(hidden)]
pub use merge::merge_options;
#[doc(hidden)]
pub use signal::{exit_on_termination, INTERRUPTED_EXIT_CODE};
#[doc(hidden)]
pub use stack::{with_room, ROOM};
#[doc(hidden)]
pub use tls::{
    activity, activity_of, emit_with, process_session_requested, recording, session_key,
    settle_idle, stalled_since, thread_name, Activity, PROCESS_VAR,
};
#[doc(hidden)]
pub use work::{
    drop_as_runtime_work, in_runtime_work, runtime_work, RuntimeDrop, RuntimeDropEnd,
    RuntimeDropStart, RuntimeWork,
};

use crate::config::{ConfigError, WORD_BYTES};
use std::fmt;

/// Bytes per event word, for sizing in reports.
pub const EVENT_BYTES: usize = WORD_BYTES;

pub use crate::analysis::EventAnalysis;

/// How events travel from the application to the analysis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunMode {
    /// Through a ring; nothing lost, the application blocks when a ring is full.
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
    /// Overhead breakdown (the paper's Figure 8), first bar: each event is appended to the
    /// thread's buffer as in sequential mode (the same inline code), and a full buffer is
    /// emptied unread. What sequential and concurrent analysis both pay besides their own
    /// part (the analysis inline, or the ring). Nothing is analyzed.
    InstrumentOnly,
    /// Overhead breakdown, second bar: events go into a ring that no analyzer reads (a
    /// sampling-mode producer, which wraps without blocking). Nothing is analyzed.
    EnqueueOnly,
}

impl RunMode {
    /// Sampling at `rate` with one-cache-line bursts, not adaptive.
    pub fn sampling(rate: f64) -> RunMode {
        RunMode::Sampling {
            rate,
            burst_words: 8,
            adaptive: false,
        }
    }
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
