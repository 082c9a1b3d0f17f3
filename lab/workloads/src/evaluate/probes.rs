//! Probes inside sessions: the analyzer's CPU time for the communication bar, and the
//! recorder and replay of event streams for the cost model's `P` term.

use super::cells::{CHUNK_BYTES, RECORD_CAP_WORDS};
use crate::{Size, Variant, Workload};
use cabprof::{Analysis, AnalysisPlan, AnalysisSet, RunMode};
use cabprof_cab::runtime::{self, EventAnalysis};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Analyzer CPU time (ns) seen by the last [`Probe`] merge on an analyzer thread.
pub(crate) static ANALYZER_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// CPU time of the calling thread in ns (`/proc/thread-self/schedstat`, first field).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A no-op analysis for the communication bar that, when the analyzer merges a retired ring
/// into its results (it does so for every ring at the end, on its own thread), records the
/// analyzer thread's CPU time so far: dequeuing, clearing and polling, no analysis.
#[derive(Default)]
pub(crate) struct Probe;

impl EventAnalysis for Probe {
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

impl EventAnalysis for Recorder {
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
#[derive(Debug)]
pub struct Recording {
    /// One stream of event words per application thread.
    streams: Vec<Vec<u64>>,
    /// Words recorded (at most [`RECORD_CAP_WORDS`]).
    pub recorded: u64,
    /// Words the session saw.
    pub total: u64,
}

pub(crate) fn record(w: Workload, v: Variant, size: Size, pin: bool) -> Recording {
    RECORDED.store(0, Ordering::Relaxed);
    let config = runtime::RuntimeConfig {
        mode: RunMode::Exhaustive,
        buffer_bytes: Some(32 << 20),
        chunk_bytes: Some(CHUNK_BYTES),
        pin,
        ..Default::default()
    };
    let s =
        runtime::Session::start(config, Recorder::default).expect("start the recording session");
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
pub(crate) fn replay(rec: &Recording, a: Analysis) -> f64 {
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
