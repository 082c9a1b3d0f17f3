//! What a session hands back: the merged analysis and per-thread counters ([`Report`],
//! [`ThreadStats`]), and the rule that keeps the per-thread list bounded.

use super::{RunMode, RuntimeDropEnd, RuntimeDropStart};
use crate::config::RingConfig;
use std::time::Duration;

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
    /// The largest size its ring reached, in bytes (0: no ring); for several threads, the
    /// smallest and the largest of theirs.
    pub ring_bytes: (u64, u64),
    /// Times its ring changed size (a growing ring).
    pub ring_resizes: u64,
    /// Times the rings' memory budget refused its ring a larger segment (it kept its size).
    pub memory_refusals: u64,
    /// Threads among [`threads`](Self::threads) whose ring was refused a larger segment.
    pub memory_waiters: u64,
    /// Time the producer blocked on its ring after such a refusal (part of
    /// [`blocked`](Self::blocked)): its wait for ring memory.
    pub memory_wait: Duration,
}

impl ThreadStats {
    pub(super) fn absorb(&mut self, o: &ThreadStats) {
        self.threads += o.threads;
        self.events += o.events;
        self.analyzed += o.analyzed;
        self.blocks += o.blocks;
        self.blocked += o.blocked;
        self.dropped += o.dropped;
        self.chunks_lapped += o.chunks_lapped;
        self.events_lapped += o.events_lapped;
        self.rate = self.rate.min(o.rate);
        self.ring_resizes += o.ring_resizes;
        self.memory_refusals += o.memory_refusals;
        self.memory_waiters += o.memory_waiters;
        self.memory_wait += o.memory_wait;
        if o.ring_bytes.1 > 0 {
            self.ring_bytes = if self.ring_bytes.1 == 0 {
                o.ring_bytes
            } else {
                (
                    self.ring_bytes.0.min(o.ring_bytes.0),
                    self.ring_bytes.1.max(o.ring_bytes.1),
                )
            };
        }
    }
}

/// Per-thread entries kept before further threads are folded into one "(other threads)" entry,
/// so a program that churns through millions of threads keeps a bounded report.
const MAX_THREAD_ENTRIES: usize = 1024;

pub(super) fn push_thread(list: &mut Vec<ThreadStats>, t: ThreadStats) {
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
///
/// Made as the runtime's own work and dropped by the program: its fields are dropped as the
/// runtime's work too, between two brackets (see [`RuntimeDrop`](super::RuntimeDrop)), so an
/// allocation-tracking allocator never counts the frees of its blocks as the program's.
#[derive(Clone, Debug)]
pub struct Report<A> {
    /// Opens the scope the fields below are dropped in: the first field, dropped first.
    pub(super) drop_start: RuntimeDropStart,
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
    /// Snapshots: an upper bound on events emitted but not yet analyzed when it was taken.
    /// Sampling mode, snapshots and `finish`: also bounds the events of threads still alive
    /// that `totals.events` does not count yet (a live producer publishes its position
    /// only now and then; one that has exited is counted exactly).
    pub in_flight: u64,
    /// Time from start to this report.
    pub elapsed: Duration,
    /// Closes the scope: the last field, dropped last.
    pub(super) drop_end: RuntimeDropEnd,
}

impl<A> Report<A> {
    /// The same report over another analysis (a part of this one).
    pub fn map_analysis<B>(self, f: impl FnOnce(A) -> B) -> Report<B> {
        // The part kept holds the same blocks: the brackets go with it. `f` runs first, so
        // that if it panics the brackets are dropped in their order, as fields of `self`.
        let analysis = f(self.analysis);
        Report {
            drop_start: self.drop_start,
            analysis,
            mode: self.mode,
            ring: self.ring,
            rate_used: self.rate_used,
            threads: self.threads,
            totals: self.totals,
            analyzer_failures: self.analyzer_failures,
            in_flight: self.in_flight,
            elapsed: self.elapsed,
            drop_end: self.drop_end,
        }
    }

    /// Sum `threads` into `totals` (again, after keeping only some threads).
    pub fn finish_totals(&mut self) {
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
