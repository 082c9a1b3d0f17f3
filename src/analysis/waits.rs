//! `waits`: lock waits and holds, blocked channel sends and receives, per calling context and
//! per creation site, and the channels' message latency per creation site
//! ([`cabprof_analyses::Waits`]), fed by the `cabprof::sync` wrappers; the sites' places come
//! from the wrappers' table of sites.

use super::contexts::{kept_in_order, stack_rows};
use super::{check_contexts, top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{
    DelayEntry, LatencyEntry, NotAReport, ReportData, WaitContextEntry, WaitCountsEntry,
    WaitSiteEntry, WaitsData,
};
use cabprof_analyses::{ChannelLatency, Delay, WaitCounts, Waits};
use std::fmt::Write as _;

/// The waits analysis.
pub(crate) struct Descriptor;

fn delay(d: &Delay) -> DelayEntry {
    DelayEntry {
        count: d.count,
        ns: d.ns,
    }
}

fn entry(c: &WaitCounts) -> WaitCountsEntry {
    WaitCountsEntry {
        block: delay(&c.block),
        mutex: delay(&c.mutex),
    }
}

fn latency(l: &ChannelLatency) -> LatencyEntry {
    LatencyEntry {
        count: l.count,
        ns: l.ns,
        max_ns: l.max_ns,
        buckets: l.buckets.to_vec(),
    }
}

/// The order rows are shown in: the longer of the two delays first.
fn weight(c: &WaitCountsEntry) -> u64 {
    c.block.ns.max(c.mutex.ns)
}

impl AnalysisDescriptor for Descriptor {
    type State = Waits;
    const NAMES: &'static [&'static str] = &["waits", "wait", "locks", "contention"];
    // It rebuilds every thread's calling contexts, which costs every call; the waits come
    // only from the `cabprof::sync` wrappers, so it is asked for by name.
    const ON_BY_DEFAULT: bool = false;

    fn build(plan: &AnalysisPlan) -> Waits {
        let mut w = Waits::new();
        w.set_approximate(plan.approximate);
        w
    }

    fn report(w: &Waits, data: &mut ReportData, methods: &mut MethodIds) {
        // The contexts with waits in their subtree, nodes linked to parents, as the
        // allocations analysis lists its own.
        let nodes = w.context_nodes();
        let contexts: Vec<WaitContextEntry> = kept_in_order(
            &nodes,
            |n| n.node,
            |n| n.parent,
            |n| n.method.get(),
            |n| !n.counts.is_empty(),
            |n| n.counts.block.ns.saturating_add(n.counts.mutex.ns),
        )
        .into_iter()
        .enumerate()
        .map(|(k, (i, parent))| {
            let c = &nodes[i as usize];
            WaitContextEntry {
                id: k as u32 + 1,
                parent,
                method: c.method.get(),
                calls: c.calls,
                counts: entry(&c.counts),
            }
        })
        .collect();
        methods.extend(contexts.iter().map(|c| c.method));
        let buckets: std::collections::HashMap<u32, _> = w.site_histograms().into_iter().collect();
        let mut latencies: std::collections::HashMap<u32, _> =
            w.site_latencies().into_iter().collect();
        // The sites with waits, then the channels whose messages came out without a wait.
        let mut numbered = w.sites();
        let mut quiet: Vec<u32> = latencies
            .keys()
            .copied()
            .filter(|n| !numbered.iter().any(|(s, _)| s == n))
            .collect();
        quiet.sort_unstable();
        numbered.extend(quiet.into_iter().map(|n| (n, WaitCounts::default())));
        let mut sites: Vec<WaitSiteEntry> = numbered
            .iter()
            .map(|(n, c)| {
                let (kind, site) = match crate::sync::sites::site(*n) {
                    Some(s) => (s.kind.to_string(), s.place()),
                    None => ("unknown".to_string(), format!("site {n}")),
                };
                WaitSiteEntry {
                    kind,
                    site,
                    counts: entry(c),
                    block_buckets: buckets.get(n).map(|b| b.to_vec()),
                    latency: latencies.remove(n).map(|l| latency(&l)),
                }
            })
            .collect();
        sites.sort_by(|x, y| {
            weight(&y.counts)
                .cmp(&weight(&x.counts))
                .then_with(|| x.site.cmp(&y.site))
        });
        data.waits = Some(WaitsData {
            approximate: w.is_approximate(),
            totals: entry(&w.totals()),
            root: entry(&w.root()),
            contexts,
            sites,
        });
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(w) = &data.waits else {
            return;
        };
        let t = &w.totals;
        let _ = writeln!(
            o,
            "\nwaits{}: {} waits for {} (block profile: waiters); {} waiters held up for {} (mutex profile: holders)",
            if w.approximate { " (approximate attribution)" } else { "" },
            t.block.count,
            ms(t.block.ns),
            t.mutex.count,
            ms(t.mutex.ns),
        );
        if t.block.count == 0 && t.mutex.count == 0 {
            let _ = writeln!(
                o,
                "  no wait was recorded: only cabprof::sync's locks and channels report them"
            );
            latency_text(w, top, o);
            return;
        }
        let mut order: Vec<Option<usize>> = (0..w.contexts.len())
            .filter(|&i| !is_empty(&w.contexts[i].counts))
            .map(Some)
            .collect();
        if !is_empty(&w.root) {
            order.push(None);
        }
        let counts = |c: &Option<usize>| c.map_or(&w.root, |i| &w.contexts[i].counts);
        order.sort_by(|x, y| weight(counts(y)).cmp(&weight(counts(x))).then(x.cmp(y)));
        let _ = writeln!(
            o,
            "  by calling context ({}; block = waited here, mutex = others waited while this held):",
            top_of(top, order.len())
        );
        let _ = writeln!(
            o,
            "  {:>8} {:>12} {:>8} {:>12}  context",
            "waits", "block", "waiters", "mutex"
        );
        order.truncate(top);
        let shown: Vec<usize> = order.iter().flatten().copied().collect();
        let mut rows = stack_rows(&w.contexts, &shown, &data.method_names()).into_iter();
        for c in &order {
            let row = match c {
                Some(_) => rows.next().unwrap_or_default(),
                None => "root".to_string(),
            };
            let n = counts(c);
            let _ = writeln!(
                o,
                "  {:>8} {:>12} {:>8} {:>12}  {row}",
                n.block.count,
                ms(n.block.ns),
                n.mutex.count,
                ms(n.mutex.ns),
            );
        }
        // A channel whose messages never waited is in the latency table only.
        let waited: Vec<&WaitSiteEntry> = w
            .sites
            .iter()
            .filter(|s| s.counts != WaitCountsEntry::default())
            .collect();
        let _ = writeln!(o, "  by creation site ({}):", top_of(top, waited.len()));
        for s in waited.into_iter().take(top) {
            let n = &s.counts;
            let _ = writeln!(
                o,
                "  {:>8} {:>12} {:>8} {:>12}  {} {}",
                n.block.count,
                ms(n.block.ns),
                n.mutex.count,
                ms(n.mutex.ns),
                s.kind,
                s.site
            );
        }
        latency_text(w, top, o);
    }

    fn check(data: &ReportData) -> Result<(), NotAReport> {
        match &data.waits {
            Some(w) => check_contexts("waits.contexts", &w.contexts),
            None => Ok(()),
        }
    }
}

/// The channels' message latency, a line per channel site, the longest mean first.
fn latency_text(w: &WaitsData, top: usize, o: &mut String) {
    let mut channels: Vec<(&WaitSiteEntry, &LatencyEntry)> = w
        .sites
        .iter()
        .filter_map(|s| s.latency.as_ref().filter(|l| l.count > 0).map(|l| (s, l)))
        .collect();
    if channels.is_empty() {
        return;
    }
    channels.sort_by(|(xs, x), (ys, y)| {
        y.mean_ns()
            .cmp(&x.mean_ns())
            .then_with(|| xs.site.cmp(&ys.site))
    });
    let _ = writeln!(
        o,
        "  channel latency, send to receive, by creation site ({}; p50 and p99 are bucket bounds, a decade apart):",
        top_of(top, channels.len())
    );
    let _ = writeln!(
        o,
        "  {:>8} {:>12} {:>12} {:>12} {:>12}  channel",
        "messages", "mean", "p50 <=", "p99 <=", "max"
    );
    for (s, l) in channels.into_iter().take(top) {
        let _ = writeln!(
            o,
            "  {:>8} {:>12} {:>12} {:>12} {:>12}  {} {}",
            l.count,
            ms(l.mean_ns()),
            ms(l.quantile_ns(0.5)),
            ms(l.quantile_ns(0.99)),
            ms(l.max_ns),
            s.kind,
            s.site
        );
    }
}

fn is_empty(c: &WaitCountsEntry) -> bool {
    *c == WaitCountsEntry::default()
}

/// Nanoseconds as milliseconds, three decimals.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}
