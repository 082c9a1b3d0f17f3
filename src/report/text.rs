//! The text rendering for people: the session's summary, then one section per analysis that
//! ran, each drawn by its descriptor (`src/analysis/`), in report order.

use crate::analysis::TEXT_SECTIONS;
use crate::model::ReportData;
use std::fmt::Write as _;

impl ReportData {
    /// Text tables for people: the session, then each analysis, `top` rows each.
    pub fn text(&self, top: usize) -> String {
        let mut o = String::new();
        self.summary(&mut o);
        for section in TEXT_SECTIONS {
            section(self, top, &mut o);
        }
        o
    }

    /// The session's lines: mode and ring, event counters, failures and caveats.
    fn summary(&self, o: &mut String) {
        let s = &self.session;
        let t = &self.totals;
        let ring = if s.buffer_bytes == 0 {
            String::from("no ring")
        } else {
            format!(
                "ring {} in {} chunks",
                cabprof_cab::show_bytes(s.buffer_bytes),
                cabprof_cab::show_bytes(s.chunk_bytes)
            )
        };
        let _ = writeln!(
            o,
            "cabprof report — mode {}{}, {ring}, {:.3} s",
            s.mode,
            if self.is_sampled() {
                format!(
                    " (rate {:.2}%, used {:.2}%, analyzed {:.2}% of events)",
                    s.sampling_rate * 100.0,
                    s.rate_used * 100.0,
                    self.estimate_rate() * 100.0
                )
            } else {
                String::new()
            },
            s.elapsed_s
        );
        let _ = writeln!(
            o,
            "events {} from {} thread(s), analyzed {}, dropped {}, chunks lapped {} (~{} events lost), producer blocks {} ({:.3} s blocked)",
            t.events,
            t.threads,
            t.analyzed,
            t.dropped,
            t.chunks_lapped,
            t.events_lapped,
            t.producer_blocks,
            t.blocked_s
        );
        if let (Some((small, large)), Some(resizes)) = (t.ring_bytes, t.ring_resizes) {
            let _ = writeln!(
                o,
                "rings {} to {} (each thread's largest), {resizes} resize(s)",
                cabprof_cab::show_bytes(small),
                cabprof_cab::show_bytes(large),
            );
        }
        if let Some(w) = &t.ring_memory_wait {
            let _ = writeln!(
                o,
                "ring memory: {} thread(s) refused a larger ring {} time(s) (CABPROF_RING_MEMORY spent), then blocked {:.3} s at the size they kept; raise CABPROF_RING_MEMORY or lower CABPROF_BUFFER",
                w.threads, w.refusals, w.blocked_s
            );
        }
        if t.dropped > 0 {
            let ringless = self
                .threads
                .iter()
                .find(|c| c.thread == "(threads without a ring)")
                .map_or(0, |c| c.dropped);
            if ringless > 0 {
                let _ = writeln!(
                    o,
                    "dropped: {ringless} events of threads that found the rings' memory (CABPROF_RING_MEMORY) spent; raise it, lower CABPROF_BUFFER, or use CABPROF_MODE=sampling"
                );
            }
            if t.dropped > ringless {
                let _ = writeln!(
                    o,
                    "dropped: {} events no analyzer read (a failed analyzer, if FAILURE says so)",
                    t.dropped - ringless
                );
            }
        }
        for f in &self.analyzer_failures {
            let _ = writeln!(o, "FAILURE: {f}");
        }
        if self.unmerged_threads > 0 {
            let _ = writeln!(
                o,
                "note: {} thread(s) still running at the end; their sequential results are not included",
                self.unmerged_threads
            );
        }
        if self.events_in_flight > 0 {
            let _ = writeln!(
                o,
                "note: up to {} more events were emitted but not yet counted (a snapshot's events on their way, or live sampling threads' unpublished tails)",
                self.events_in_flight
            );
        }
        if self.is_sampled() {
            let _ = writeln!(
                o,
                "counts marked ~ are estimates: count in the sample / fraction of events analyzed ({:.2}%)",
                self.estimate_rate() * 100.0
            );
        }
    }
}
