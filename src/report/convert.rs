//! From a session's result (the runtime's report over an [`AnalysisSet`]) to [`ReportData`]:
//! the session's counters here, each analysis's results from its descriptor.

use crate::analysis::{AnalysisSet, MethodIds};
use crate::model::{Counters, MethodEntry, ReportData, RingMemoryWait, SessionInfo, SCHEMA};
use crate::names;
use cabprof_cab::runtime::{self, RunMode, ThreadStats};

impl From<&ThreadStats> for Counters {
    fn from(t: &ThreadStats) -> Self {
        Counters {
            thread: t.thread.clone(),
            threads: t.threads,
            events: t.events,
            analyzed: t.analyzed,
            producer_blocks: t.blocks,
            blocked_s: t.blocked.as_secs_f64(),
            dropped: t.dropped,
            chunks_lapped: t.chunks_lapped,
            events_lapped: t.events_lapped,
            rate: t.rate,
            ring_bytes: (t.ring_bytes.1 > 0).then_some(t.ring_bytes),
            ring_resizes: (t.ring_bytes.1 > 0).then_some(t.ring_resizes),
            ring_memory_wait: (t.memory_refusals > 0).then_some(RingMemoryWait {
                threads: t.memory_waiters,
                refusals: t.memory_refusals,
                blocked_s: t.memory_wait.as_secs_f64(),
            }),
        }
    }
}

/// The registry's name and location of `id`, or a placeholder naming the id.
fn method_entry(id: u32) -> MethodEntry {
    match names::lookup(id) {
        Some(m) => MethodEntry {
            id,
            name: m.name,
            module: m.module.to_string(),
            file: m.file.to_string(),
            line: m.line,
        },
        None => MethodEntry {
            id,
            name: format!("function#{id}"),
            module: String::new(),
            file: String::new(),
            line: 0,
        },
    }
}

fn session_info(r: &runtime::Report<AnalysisSet>) -> SessionInfo {
    let (mode, sampling_rate) = match r.mode {
        RunMode::Exhaustive => ("exhaustive", 1.0),
        RunMode::Sampling { rate, .. } => ("sampling", rate),
        RunMode::Sequential => ("sequential", 1.0),
        RunMode::InstrumentOnly => ("instrument-only", 1.0),
        RunMode::EnqueueOnly => ("enqueue-only", 1.0),
    };
    // Sequential and instrument-only sessions make no ring: they report no ring size.
    let has_ring = !matches!(r.mode, RunMode::Sequential | RunMode::InstrumentOnly);
    SessionInfo {
        mode: mode.into(),
        sampling_rate,
        rate_used: r.rate_used,
        rate_effective: match r.mode {
            RunMode::Sampling { .. } if r.totals.events > 0 => {
                r.totals.analyzed as f64 / r.totals.events as f64
            }
            RunMode::Sampling { .. } => r.rate_used,
            _ => 1.0,
        },
        buffer_bytes: if has_ring {
            r.ring.buffer_bytes as u64
        } else {
            0
        },
        chunk_bytes: if has_ring {
            r.ring.chunk_bytes as u64
        } else {
            0
        },
        elapsed_s: r.elapsed.as_secs_f64(),
    }
}

impl ReportData {
    /// The plain data of a session's result, method names looked up in the registry.
    pub(crate) fn from_runtime(r: &runtime::Report<AnalysisSet>) -> ReportData {
        let mut data = ReportData {
            schema: SCHEMA.into(),
            session: session_info(r),
            totals: Counters::from(&r.totals),
            threads: r.threads.iter().map(Counters::from).collect(),
            analyzer_failures: r.analyzer_failures.clone(),
            events_in_flight: r.in_flight,
            ..ReportData::default()
        };
        let mut seen = MethodIds::new();
        r.analysis.report(&mut data, &mut seen);
        seen.remove(&0);
        data.methods = seen.into_iter().map(method_entry).collect();
        crate::analysis::fill_estimates(&mut data);
        data
    }
}
