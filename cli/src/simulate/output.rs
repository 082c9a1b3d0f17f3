//! What `cabprof simulate` shows: the progress bar while it reads, the summary at the end.

use super::{Analyzed, ThreadTimes};
use crate::units::{show_bytes, show_millions};
use cabprof::trace::{ParseStats, TraceError, TraceFormat};
use cabprof_analyses::{Counting, LevelStats, Policy};
use cabprof_cab::RingConfig;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::{Duration, Instant};

/// Progress is shown only for traces that take longer than this.
const PROGRESS_AFTER: Duration = Duration::from_millis(500);

/// The progress bar: hidden unless asked for and the trace takes a while.
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Progress {
    /// A bar over `total_bytes` of input (a spinner when the size is unknown), drawn only if
    /// `enabled`, and only once the trace has taken [`PROGRESS_AFTER`].
    pub(super) fn new(enabled: bool, total_bytes: Option<u64>, started: Instant) -> Progress {
        let bar = enabled.then(|| {
            let (template, len) = match total_bytes {
                Some(n) => ("{wide_bar} {bytes}/{total_bytes} {msg}, eta {eta}", Some(n)),
                None => ("{spinner} {bytes} {msg}", None),
            };
            ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden())
                .with_style(ProgressStyle::with_template(template).expect("a valid template"))
        });
        Progress { bar, started }
    }

    pub(super) fn update(&mut self, stats: &ParseStats) {
        let Some(bar) = &self.bar else { return };
        let elapsed = self.started.elapsed();
        if elapsed < PROGRESS_AFTER {
            return;
        }
        if bar.is_hidden() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(stats.bytes);
        bar.set_message(format!(
            "{} M accesses/s",
            show_millions(stats.events as f64 / elapsed.as_secs_f64())
        ));
    }

    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Everything printed at the end.
pub(super) struct Summary<'a> {
    pub(super) name: &'a str,
    pub(super) format: TraceFormat,
    pub(super) instructions: bool,
    pub(super) parse: ParseStats,
    pub(super) ring: RingConfig,
    pub(super) analyzed: &'a Analyzed,
    /// The reading thread's CPU use during the run.
    pub(super) reader: Option<ThreadTimes>,
    pub(super) elapsed: Duration,
    pub(super) error: Option<&'a TraceError>,
}

impl Summary<'_> {
    pub(super) fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let a = self.analyzed;
        let partial = if self.error.is_some() {
            " — PARTIAL: the trace was rejected, see the error"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "cabprof simulate: {} ({}){partial}",
            self.name, self.format
        );
        self.render_records(&mut o);
        let delivered = a.rings[0].delivered;
        let blocks: u64 = a.rings.iter().map(|r| r.blocks).sum();
        let blocked: f64 = a.rings.iter().map(|r| r.blocked.as_secs_f64()).sum();
        let chunks: Vec<String> = a.rings.iter().map(|r| r.chunks.to_string()).collect();
        let layout = if a.rings.len() == 1 {
            "1 CAB ring to 1 analyzer thread running both analyses".to_string()
        } else {
            format!(
                "{} CAB rings to {} analyzer threads, one per analysis,",
                a.rings.len(),
                a.rings.len()
            )
        };
        let _ = writeln!(
            o,
            "ring         {delivered} words through {layout} ({} in {} chunks; {} chunks \
             analyzed); the reader waited {blocks} times, {blocked:.3} s",
            show_bytes(self.ring.buffer_bytes as u64),
            show_bytes(self.ring.chunk_bytes as u64),
            chunks.join(" + "),
        );
        o.push('\n');
        self.render_cache(&mut o);
        o.push('\n');
        self.render_reuse(&mut o);
        o.push('\n');
        self.render_throughput(&mut o);
        o
    }

    /// What the trace held, by kind of record.
    fn render_records(&self, o: &mut String) {
        use std::fmt::Write as _;
        let p = &self.parse;
        let a = self.analyzed;
        match self.format {
            TraceFormat::Lackey => {
                let _ = writeln!(
                    o,
                    "records      {} lines: {} loads, {} stores, {} modifies, {} instruction \
                     fetches ({}), {} valgrind lines and {} blank lines skipped",
                    p.lines,
                    p.loads,
                    p.stores,
                    p.modifies,
                    p.instructions,
                    if a.sim.counting() == Counting::Cachegrind {
                        "through I1, each after a marker word"
                    } else if self.instructions {
                        "simulated as loads"
                    } else {
                        "not simulated"
                    },
                    p.messages,
                    p.blank
                );
                if p.rounded + p.split > 0 {
                    let _ = writeln!(
                        o,
                        "sizes        {} records rounded up to a power of two, {} larger than \
                         128 bytes split",
                        p.rounded, p.split
                    );
                }
            }
            TraceFormat::Binary => {
                let _ = writeln!(
                    o,
                    "records      {} words: {} loads, {} stores{}",
                    p.events,
                    p.loads,
                    p.stores,
                    if self.instructions {
                        " (instruction fetches included as loads)"
                    } else {
                        ""
                    }
                );
            }
        }
    }

    /// Accesses per second, and the threads' CPU time where the platform gives it.
    fn render_throughput(&self, o: &mut String) {
        use std::fmt::Write as _;
        let p = &self.parse;
        let a = self.analyzed;
        let delivered = a.rings[0].delivered;
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let _ = writeln!(
            o,
            "throughput   {} accesses in {:.3} s: {} M accesses/s ({:.1} MB/s of trace)",
            delivered,
            secs,
            show_millions(delivered as f64 / secs),
            p.bytes as f64 / secs / 1e6
        );
        let analyzers: Option<Vec<ThreadTimes>> = a.rings.iter().map(|r| r.analyzer).collect();
        if let (Some(reader), Some(analyzers)) = (self.reader, analyzers) {
            // Time waiting for a core is time other processes had it: on a busy machine the
            // CPU-time rate is what the analysis sustains on a core of its own.
            let names: &[&str] = if analyzers.len() == 1 {
                &["analyzer"]
            } else {
                &["cache sim", "reuse"]
            };
            let _ = writeln!(
                o,
                "cpu time     {:<10} {:>7.3} s on a core, {:>7.3} s waiting for one",
                "reader",
                reader.on_cpu.as_secs_f64(),
                reader.waiting.as_secs_f64()
            );
            for (name, t) in names.iter().zip(&analyzers) {
                let _ = writeln!(
                    o,
                    "             {name:<10} {:>7.3} s on a core, {:>7.3} s waiting for one: \
                     {} M accesses per CPU-second",
                    t.on_cpu.as_secs_f64(),
                    t.waiting.as_secs_f64(),
                    show_millions(delivered as f64 / t.on_cpu.as_secs_f64().max(1e-9))
                );
            }
        }
    }

    pub(super) fn render_cache(&self, o: &mut String) {
        use std::fmt::Write as _;
        let sim = &self.analyzed.sim;
        let policy = match sim.config()[0].policy {
            Policy::Fifo => "FIFO",
            Policy::Lru => "LRU",
        };
        let cachegrind = sim.counting() == Counting::Cachegrind;
        if cachegrind {
            let _ = writeln!(
                o,
                "cache (counted as cachegrind: one access per record, a Lackey M once as a \
                 read, sizes capped at the line size; D1 and I1 in front of a non-inclusive LL, \
                 {policy}); data accesses:"
            );
        } else {
            let _ = writeln!(
                o,
                "cache (inclusive, write-allocate, {policy}; one access per line touched)"
            );
        }
        let _ = writeln!(
            o,
            "{:<5} {:>9} {:>5} {:>5}  {:>12} {:>12} {:>7}  {:>12} {:>12} {:>7}  {:>7}",
            "level",
            "size",
            "ways",
            "line",
            "loads",
            "load misses",
            "rate",
            "stores",
            "store misses",
            "rate",
            "miss"
        );
        let rate = |m: u64, n: u64| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{:.2}%", 100.0 * m as f64 / n as f64)
            }
        };
        for (i, c) in sim.config().iter().enumerate() {
            let s: LevelStats = sim.stats(i);
            let loads = s.load_hits + s.load_misses;
            let stores = s.store_hits + s.store_misses;
            let _ = writeln!(
                o,
                "L{:<4} {:>9} {:>5} {:>5}  {:>12} {:>12} {:>7}  {:>12} {:>12} {:>7}  {:>7}",
                i + 1,
                show_bytes(c.size_bytes),
                c.ways,
                format!("{} B", c.line_bytes),
                loads,
                s.load_misses,
                rate(s.load_misses, loads),
                stores,
                s.store_misses,
                rate(s.store_misses, stores),
                rate(s.misses(), s.accesses())
            );
        }
        if cachegrind {
            self.render_cachegrind(o);
        }
    }

    /// Cachegrind's summary lines (`valgrind --tool=cachegrind --cache-sim=yes`), same names
    /// and sums, so the two can be compared line by line.
    pub(super) fn render_cachegrind(&self, o: &mut String) {
        use std::fmt::Write as _;
        let sim = &self.analyzed.sim;
        let (i1, ill) = (sim.fetch_stats(0), sim.fetch_stats(1));
        let (d1, dll) = (sim.stats(0), sim.stats(1));
        let reads = |s: &LevelStats| s.load_hits + s.load_misses;
        let writes = |s: &LevelStats| s.store_hits + s.store_misses;
        let split = |o: &mut String, name: &str, total: u64, rd: u64, wr: u64| {
            let _ = writeln!(o, "{name:<11} {total:>14}  ({rd} rd + {wr} wr)");
        };
        if let Some(c) = sim.i1_config() {
            let _ = writeln!(
                o,
                "as cachegrind prints it (I1 {},{},{}):",
                c.size_bytes, c.ways, c.line_bytes
            );
        }
        let _ = writeln!(o, "{:<11} {:>14}", "I refs:", reads(&i1));
        let _ = writeln!(o, "{:<11} {:>14}", "I1  misses:", i1.load_misses);
        let _ = writeln!(o, "{:<11} {:>14}", "LLi misses:", ill.load_misses);
        split(o, "D refs:", d1.accesses(), reads(&d1), writes(&d1));
        split(
            o,
            "D1  misses:",
            d1.misses(),
            d1.load_misses,
            d1.store_misses,
        );
        split(
            o,
            "LLd misses:",
            dll.misses(),
            dll.load_misses,
            dll.store_misses,
        );
        split(
            o,
            "LL refs:",
            i1.load_misses + d1.misses(),
            i1.load_misses + d1.load_misses,
            d1.store_misses,
        );
        split(
            o,
            "LL misses:",
            ill.load_misses + dll.misses(),
            ill.load_misses + dll.load_misses,
            dll.store_misses,
        );
    }

    pub(super) fn render_reuse(&self, o: &mut String) {
        use std::fmt::Write as _;
        let r = &self.analyzed.reuse;
        let line = r.line_bytes() as u64;
        let _ = writeln!(
            o,
            "reuse distance ({line} B lines): {} accesses, {} cold, {} distinct lines",
            r.accesses(),
            r.cold(),
            r.distinct_lines()
        );
        let _ = writeln!(
            o,
            "miss curve of a fully-associative LRU cache (Marin & Mellor-Crummey 2004):"
        );
        let _ = writeln!(
            o,
            "  {:>10} {:>10} {:>14} {:>9}",
            "capacity", "lines", "misses", "rate"
        );
        // Powers of two from 1 KiB (at least one line) until every miss left is cold, plus the
        // capacity of each simulated level, marked.
        let levels: Vec<u64> = self
            .analyzed
            .sim
            .config()
            .iter()
            .map(|c| c.size_bytes / line)
            .collect();
        let mut sizes: Vec<u64> = Vec::new();
        let mut lines = (1024 / line).max(1);
        let last_useful = r.distribution().len() as u64;
        while lines <= 1 << 30 {
            sizes.push(lines);
            if lines >= last_useful {
                break;
            }
            lines *= 2;
        }
        sizes.extend(levels.iter().copied().filter(|l| *l > 0));
        sizes.sort_unstable();
        sizes.dedup();
        let misses = r.miss_curve(&sizes);
        let total = r.accesses();
        for (&lines, &m) in sizes.iter().zip(&misses) {
            let mark: Vec<String> = levels
                .iter()
                .enumerate()
                .filter(|(_, &l)| l == lines)
                .map(|(i, _)| format!("L{}", i + 1))
                .collect();
            let mark = if mark.is_empty() {
                String::new()
            } else {
                format!("  <- {} size", mark.join(", "))
            };
            let rate = if total == 0 {
                "-".into()
            } else {
                format!("{:.2}%", 100.0 * m as f64 / total as f64)
            };
            let _ = writeln!(
                o,
                "  {:>10} {:>10} {:>14} {:>9}{mark}",
                show_bytes(lines * line),
                lines,
                m,
                rate
            );
        }
    }
}
