//! `/metrics`: the session so far in Prometheus' text exposition (OpenMetrics), written by the
//! `prometheus-client` crate from the snapshot scrapes share (at most
//! [`SHARED_MAX_AGE`](super::SHARED_MAX_AGE) old).
//!
//! Every figure is cumulative since the session started, so counters only grow from one scrape
//! to the next (a sampled session's estimates are held at the largest value shown, [`Shown`]):
//!
//! Each function's series carry its name and its definition, `{function, location}`
//! (`location` is `file:line`), so that two functions whose names read the same (`<Foo as
//! Display>::fmt` in two modules) are two series:
//!
//! - `cabprof_function_calls_total{function, location}`: calls (exact, or estimates in
//!   sampling mode).
//! - `cabprof_function_duration_seconds{function, location}` (histogram; with the time
//!   analysis): the
//!   durations of the timed calls (and, with sampled timing, of the long calls measured in
//!   full), from the analysis' per-function histograms (2 significant digits), in [`BUCKETS`].
//! - `cabprof_function_allocated_bytes_total{function, location}` (with the allocations
//!   analysis): bytes allocated while the function was the innermost instrumented one (`root`,
//!   with an empty location: outside all).
//! - `cabprof_waits_total{kind, site, profile}` and `cabprof_wait_seconds_total{kind, site,
//!   profile}` (with the waits analysis): per creation site of a `cabprof::sync` lock or
//!   channel (`kind` `Mutex`, `RwLock`, `channel`, `sync_channel`, `crossbeam::bounded`, ...;
//!   `site` `file:line:col`), the contentions and delay of Go's `block` profile (the waiters')
//!   and `mutex` profile (the holders', each hold once per waiter); and
//!   `cabprof_lock_wait_seconds{kind, site}`, a histogram of the single block-profile waits
//!   (lock waits, blocked sends and receives) in decade buckets from 1 µs to 10 s
//!   (`cabprof_analyses::WAIT_BUCKETS_NS`); and `cabprof_channel_latency_seconds{kind, site}`,
//!   a histogram of the time each message sat in a `cabprof::sync` channel, from its send to
//!   its receive, in the same buckets.
//! - The runtime's counters: `cabprof_events_total`, `cabprof_events_analyzed_total`,
//!   `cabprof_events_dropped_total`, `cabprof_chunks_lapped_total`,
//!   `cabprof_producer_blocked_seconds_total`, `cabprof_endpoint_snapshots_total` (what
//!   scrapes and windows cost the program), with the allocations analysis the gauges
//!   `cabprof_heap_live_bytes` and `cabprof_heap_peak_bytes`, and the gauges `cabprof_ring_bytes` (one ring's
//!   size) and `cabprof_threads`.

use crate::report::Report;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::collections::HashMap;

/// The duration histogram's upper bounds, in seconds.
pub(crate) const BUCKETS: [f64; 9] = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0];

/// One duration histogram: its sum, count and cumulative bucket counts.
#[derive(Debug)]
struct Durations {
    sum_s: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

/// A function's series: its name and where it is defined (`file:line`; empty for the root).
type Series = (String, String);

/// What one scrape exposes, taken from a snapshot.
#[derive(Debug, Default)]
struct Scrape {
    calls: Vec<(Series, u64)>,
    durations: Vec<(Series, Durations)>,
    allocated: Option<Vec<(Series, u64)>>,
    events: u64,
    analyzed: u64,
    dropped: u64,
    lapped: u64,
    blocked_s: f64,
    ring_bytes: u64,
    threads: u64,
    endpoint_snapshots: u64,
    /// The program's live and peak heap bytes since the session started (allocations).
    heap: Option<(i64, i64)>,
    /// Per site and profile (waits): the labels, contentions and nanoseconds.
    waits: Vec<([String; 3], u64, u64)>,
    /// Per site (waits): kind and site, and its block-profile waits by duration.
    wait_durations: Vec<([String; 2], Durations)>,
    /// Per channel site (waits): kind and site, and its messages' latency.
    latencies: Vec<([String; 2], Durations)>,
}

/// The largest value each counter has shown, by metric and function: a sampled session's
/// counts are estimates (analyzed / the fraction analyzed), which can dip when that fraction
/// rises, and a counter that goes down reads as a restart to Prometheus. Served counters never
/// go below what an earlier scrape showed.
#[derive(Debug, Default)]
pub(crate) struct Shown(HashMap<(&'static str, Series), u64>);

impl Shown {
    fn at_least(&mut self, metric: &'static str, values: &mut [(Series, u64)]) {
        for (name, v) in values {
            let seen = self.0.entry((metric, name.clone())).or_default();
            *seen = (*seen).max(*v);
            *v = *seen;
        }
    }
}

/// The exposition of `report`.
/// `snapshots`: how many the endpoint has taken.
pub(crate) fn encode(report: &Report, shown: &mut Shown, snapshots: u64) -> String {
    let mut scrape = scrape(report);
    scrape.endpoint_snapshots = snapshots;
    shown.at_least("calls", &mut scrape.calls);
    if let Some(a) = &mut scrape.allocated {
        shown.at_least("allocated", a);
    }
    let total = |name: &str, v| ((name.to_string(), String::new()), v);
    let mut totals = [
        total("events", scrape.events),
        total("analyzed", scrape.analyzed),
        total("dropped", scrape.dropped),
        total("lapped", scrape.lapped),
    ];
    shown.at_least("runtime", &mut totals);
    [
        scrape.events,
        scrape.analyzed,
        scrape.dropped,
        scrape.lapped,
    ] = totals.map(|(_, v)| v);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

fn scrape(report: &Report) -> Scrape {
    let data = &report.data;
    let names = data.method_names();
    let series = |id: u32| {
        let location = names
            .entry(id)
            .map_or(String::new(), |m| format!("{}:{}", m.file, m.line));
        (names.name(id), location)
    };
    let mut s = Scrape {
        events: data.totals.events,
        analyzed: data.totals.analyzed,
        dropped: data.totals.dropped,
        lapped: data.totals.chunks_lapped,
        blocked_s: data.totals.blocked_s,
        ring_bytes: data.session.buffer_bytes,
        threads: data.totals.threads,
        ..Scrape::default()
    };
    if let Some(counts) = &data.method_count {
        s.calls = counts
            .iter()
            .map(|c| (series(c.method), c.estimated.unwrap_or(c.count)))
            .collect();
    }
    if let (Some(profile), Some(time)) = (&report.runtime.analysis.time, &data.time) {
        let ticks_per_s = time.ticks_per_ns * 1e9;
        for (method, f) in profile.functions() {
            // The timed calls and, with sampled timing, the long calls measured in full.
            let mut h = f.histogram;
            if let Some(long) = &f.long_histogram {
                let _ = h.add(long);
            }
            let h = &h;
            if h.is_empty() || ticks_per_s <= 0.0 {
                continue;
            }
            // Per bucket, not cumulative: the encoder adds them up, and writes the last,
            // unbounded one as `+Inf`.
            let mut below = 0;
            let mut buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .map(|&b| {
                    let upto = h.count_between(0, (b * ticks_per_s) as u64);
                    let n = upto.saturating_sub(below);
                    below = below.max(upto);
                    (b, n)
                })
                .collect();
            buckets.push((f64::INFINITY, h.len().saturating_sub(below)));
            s.durations.push((
                series(method.get()),
                Durations {
                    sum_s: h.mean() * h.len() as f64 / ticks_per_s,
                    count: h.len(),
                    buckets,
                },
            ));
        }
    }
    if let Some(w) = &data.waits {
        for site in &w.sites {
            for (profile, d) in [("block", site.counts.block), ("mutex", site.counts.mutex)] {
                if d.count > 0 {
                    let labels = [site.kind.clone(), site.site.clone(), profile.to_string()];
                    s.waits.push((labels, d.count, d.ns));
                }
            }
            if let Some(b) = &site.block_buckets {
                // Per bucket, as the analysis counts them: the encoder adds them up.
                let bounds = wait_bounds();
                s.wait_durations.push((
                    [site.kind.clone(), site.site.clone()],
                    Durations {
                        sum_s: site.counts.block.ns as f64 / 1e9,
                        count: site.counts.block.count,
                        buckets: bounds.zip(b.iter().copied()).collect(),
                    },
                ));
            }
            if let Some(l) = &site.latency {
                s.latencies.push((
                    [site.kind.clone(), site.site.clone()],
                    Durations {
                        sum_s: l.ns as f64 / 1e9,
                        count: l.count,
                        buckets: wait_bounds().zip(l.buckets.iter().copied()).collect(),
                    },
                ));
            }
        }
    }
    if let Some(a) = &data.allocations {
        s.heap = Some((a.live_bytes, a.peak_bytes));
        s.allocated = Some(
            a.functions
                .iter()
                .map(|f| (series(f.method), f.self_.bytes))
                .collect(),
        );
    }
    s
}

/// The upper bounds of the waits' and latencies' buckets, in seconds, `+Inf` last.
fn wait_bounds() -> impl Iterator<Item = f64> {
    cabprof_analyses::WAIT_BUCKETS_NS
        .iter()
        .map(|&ns| ns as f64 / 1e9)
        .chain([f64::INFINITY])
}

/// The labels of a function's series.
fn labels((function, location): &Series) -> [(&'static str, &str); 2] {
    [("function", function), ("location", location)]
}

impl Collector for Scrape {
    /// One family after another, in the order a scrape lists them: a table of metric
    /// families, each a few lines.
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        {
            let mut m = e.encode_descriptor(
                "cabprof_function_calls",
                "Calls of each instrumented function since the session started",
                None,
                MetricType::Counter,
            )?;
            for (series, calls) in &self.calls {
                m.encode_family(&labels(series))?
                    .encode_counter::<NoLabelSet, _, u64>(calls, None)?;
            }
        }
        if !self.durations.is_empty() {
            let mut m = e.encode_descriptor(
                "cabprof_function_duration",
                "Duration of each timed call, overhead compensated",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (series, d) in &self.durations {
                m.encode_family(&labels(series))?
                    .encode_histogram::<NoLabelSet>(d.sum_s, d.count, &d.buckets, None)?;
            }
        }
        if let Some(allocated) = &self.allocated {
            let mut m = e.encode_descriptor(
                "cabprof_function_allocated",
                "Heap bytes allocated while each function was the innermost instrumented one",
                Some(&Unit::Bytes),
                MetricType::Counter,
            )?;
            for (series, bytes) in allocated {
                m.encode_family(&labels(series))?
                    .encode_counter::<NoLabelSet, _, u64>(bytes, None)?;
            }
        }
        if !self.waits.is_empty() {
            let labels = |l: &[String; 3]| {
                [
                    ("kind", l[0].clone()),
                    ("site", l[1].clone()),
                    ("profile", l[2].clone()),
                ]
            };
            {
                let mut m = e.encode_descriptor(
                    "cabprof_waits",
                    "Waits at each cabprof::sync lock or channel site (block: waiters; mutex: waiters a contended release let go)",
                    None,
                    MetricType::Counter,
                )?;
                for (l, count, _) in &self.waits {
                    m.encode_family(&labels(l))?
                        .encode_counter::<NoLabelSet, _, u64>(count, None)?;
                }
            }
            let mut m = e.encode_descriptor(
                "cabprof_wait",
                "Time waited at each cabprof::sync lock or channel site (mutex: charged to holders, once per waiter)",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            for (l, _, ns) in &self.waits {
                m.encode_family(&labels(l))?
                    .encode_counter::<NoLabelSet, _, f64>(&(*ns as f64 / 1e9), None)?;
            }
        }
        if !self.wait_durations.is_empty() {
            let mut m = e.encode_descriptor(
                "cabprof_lock_wait",
                "Duration of each wait at a cabprof::sync lock or channel site (block profile: lock waits, blocked sends and receives)",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (l, d) in &self.wait_durations {
                m.encode_family(&[("kind", l[0].as_str()), ("site", l[1].as_str())])?
                    .encode_histogram::<NoLabelSet>(d.sum_s, d.count, &d.buckets, None)?;
            }
        }
        if !self.latencies.is_empty() {
            let mut m = e.encode_descriptor(
                "cabprof_channel_latency",
                "Time each message sat in a cabprof::sync channel, from its send to its receive",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (l, d) in &self.latencies {
                m.encode_family(&[("kind", l[0].as_str()), ("site", l[1].as_str())])?
                    .encode_histogram::<NoLabelSet>(d.sum_s, d.count, &d.buckets, None)?;
            }
        }
        for (name, help, v) in [
            (
                "cabprof_events",
                "Events the instrumented threads produced",
                self.events,
            ),
            (
                "cabprof_events_analyzed",
                "Events the analyses saw",
                self.analyzed,
            ),
            (
                "cabprof_events_dropped",
                "Events dropped because no analyzer could take them",
                self.dropped,
            ),
            (
                "cabprof_chunks_lapped",
                "Ring chunks overwritten before the analyzer read them (sampling)",
                self.lapped,
            ),
            (
                "cabprof_endpoint_snapshots",
                "Snapshots of the session this endpoint took (scrapes share one a second)",
                self.endpoint_snapshots,
            ),
        ] {
            e.encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
        e.encode_descriptor(
            "cabprof_producer_blocked",
            "Time instrumented threads waited for room in their ring (exhaustive mode)",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, f64>(&self.blocked_s, None)?;
        e.encode_descriptor(
            "cabprof_ring_bytes",
            "The size of one thread's ring",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&self.ring_bytes)?;
        e.encode_descriptor(
            "cabprof_threads",
            "Instrumented threads seen",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&self.threads)?;
        if let Some((live, peak)) = self.heap {
            for (name, help, v) in [
                (
                    "cabprof_heap_live",
                    "Heap bytes the program allocated and has not freed since the session started",
                    live,
                ),
                (
                    "cabprof_heap_peak",
                    "The most heap bytes live at once since the session started",
                    peak,
                ),
            ] {
                e.encode_descriptor(name, help, Some(&Unit::Bytes), MetricType::Gauge)?
                    .encode_gauge(&v)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_never_shows_less_than_before() {
        let mut shown = Shown::default();
        let f = ("f".to_string(), "a.rs:1".to_string());
        let g = ("g".to_string(), "a.rs:2".to_string());
        let mut first = [(f.clone(), 10), (g.clone(), 3)];
        shown.at_least("calls", &mut first);
        let mut second = [(f.clone(), 9), (g.clone(), 4)];
        shown.at_least("calls", &mut second);
        assert_eq!(second, [(f, 10), (g, 4)]);
    }
}
