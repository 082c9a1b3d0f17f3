//! What happened between two snapshots of one session: [`ReportData::since`].
//!
//! Snapshots are cumulative, so a window's counts are the later snapshot's minus the
//! earlier one's, matched by what they count rather than by position: a method by its id, an
//! edge by its two ids, a path by method and number, a calling context by its parent's match
//! and its method (context ids are renumbered by every snapshot's merge), a thread by its
//! name. Counts saturate at 0. A sampled window's estimates are made afresh from its own
//! counts and the fraction of its own events analyzed.
//!
//! What cannot be subtracted keeps the later snapshot's value, which covers the session so
//! far: a function's time percentiles and longest call (its mean is the window's), the
//! reuse-distance miss curve, the live and peak heap bytes, the simulated cache geometry.

use crate::model::*;
use std::collections::HashMap;
use std::hash::Hash;

/// Subtracts from each entry of `$now` (a `&mut Vec` of entries with a `count`) the count of
/// its match by `$key` in `$then`, and drops the entries left at 0: nothing of them happened
/// in the window.
macro_rules! subtract_counts {
    ($now:expr, $then:expr, $key:expr) => {{
        let now = $now;
        subtract_by(&mut now[..], $then, $key, |m, e| sub(&mut m.count, e.count));
        now.retain(|m| m.count > 0);
    }};
}

impl ReportData {
    /// This snapshot minus `earlier`, a snapshot of the same session: a report of the window
    /// between them (see the module docs for what is subtracted and what is kept), with
    /// `session.elapsed_s` the window's length. It renders and reads back like any report.
    pub fn since(&self, earlier: &ReportData) -> ReportData {
        let mut d = self.clone();
        d.session.elapsed_s = (self.session.elapsed_s - earlier.session.elapsed_s).max(0.0);
        sub_counters(&mut d.totals, &earlier.totals);
        let threads: HashMap<&str, &Counters> = earlier
            .threads
            .iter()
            .map(|t| (t.thread.as_str(), t))
            .collect();
        for t in &mut d.threads {
            if let Some(e) = threads.get(t.thread.as_str()) {
                sub_counters(t, e);
            }
        }
        if let (Some(now), Some(then)) = (&mut d.method_count, &earlier.method_count) {
            subtract_counts!(now, then, |m| m.method);
        }
        if let (Some(now), Some(then)) = (&mut d.call_graph, &earlier.call_graph) {
            subtract_counts!(now, then, |e| (e.caller, e.callee));
        }
        if let (Some(now), Some(then)) = (&mut d.call_tree, &earlier.call_tree) {
            subtract_counts!(&mut now.patterns, &then.patterns, |p| (
                p.method,
                p.callees.clone()
            ));
            subtract_contexts(&mut now.contexts, &then.contexts, |m, e| {
                sub(&mut m.count, e.count)
            });
            if let (Some(m), Some(e)) = (&mut now.overlong, then.overlong) {
                sub(m, e);
            }
        }
        if let (Some(now), Some(then)) = (&mut d.paths, &earlier.paths) {
            subtract_counts!(now, then, |p| (p.method, p.path));
        }
        if let (Some(now), Some(then)) = (&mut d.cache, &earlier.cache) {
            subtract_cache(now, then);
        }
        if let (Some(now), Some(then)) = (&mut d.reuse_distance, &earlier.reuse_distance) {
            sub(&mut now.accesses, then.accesses);
            sub(&mut now.cold, then.cold);
            subtract_by(
                &mut now.histogram,
                &then.histogram,
                |b| (b.min, b.max),
                |m, e| sub(&mut m.count, e.count),
            );
        }
        if let (Some(now), Some(then)) = (&mut d.time, &earlier.time) {
            subtract_time(now, then);
        }
        if let (Some(now), Some(then)) = (&mut d.allocations, &earlier.allocations) {
            subtract_allocations(now, then);
        }
        if let (Some(now), Some(then)) = (&mut d.waits, &earlier.waits) {
            subtract_waits(now, then);
        }
        // Estimates are not subtracted: a sampled window is estimated from its own sample, the
        // counts it analyzed over the fraction of its own events analyzed, not as the
        // difference of two estimates made with the fractions of two stretches of the session.
        if d.is_sampled() && d.totals.events > 0 {
            d.session.rate_effective = d.totals.analyzed as f64 / d.totals.events as f64;
        }
        crate::analysis::fill_estimates(&mut d);
        d
    }
}

fn subtract_cache(now: &mut CacheData, then: &CacheData) {
    for (m, e) in now.levels.iter_mut().zip(&then.levels) {
        sub(&mut m.load_hits, e.load_hits);
        sub(&mut m.load_misses, e.load_misses);
        sub(&mut m.store_hits, e.store_hits);
        sub(&mut m.store_misses, e.store_misses);
    }
    subtract_by(
        &mut now.by_method,
        &then.by_method,
        |m| (m.method, m.level),
        |m, e| {
            sub(&mut m.load_misses, e.load_misses);
            sub(&mut m.store_misses, e.store_misses);
        },
    );
    now.by_method
        .retain(|m| m.load_misses > 0 || m.store_misses > 0);
}

fn subtract_allocations(now: &mut AllocationsData, then: &AllocationsData) {
    sub_alloc(&mut now.totals, &then.totals);
    sub_alloc(&mut now.runtime, &then.runtime);
    subtract_by(
        &mut now.functions,
        &then.functions,
        |f| f.method,
        |m, e| {
            sub_alloc(&mut m.self_, &e.self_);
            sub_alloc(&mut m.inclusive, &e.inclusive);
        },
    );
    subtract_contexts(&mut now.contexts, &then.contexts, |m, e| {
        sub(&mut m.calls, e.calls);
        sub_alloc(&mut m.counts, &e.counts);
    });
}

fn subtract_waits(now: &mut WaitsData, then: &WaitsData) {
    sub_waits(&mut now.totals, &then.totals);
    sub_waits(&mut now.root, &then.root);
    subtract_by(
        &mut now.sites,
        &then.sites,
        |s| (s.kind.clone(), s.site.clone()),
        |m, e| {
            sub_waits(&mut m.counts, &e.counts);
            if let (Some(m), Some(e)) = (&mut m.block_buckets, &e.block_buckets) {
                for (m, e) in m.iter_mut().zip(e) {
                    sub(m, *e);
                }
            }
            if let (Some(m), Some(e)) = (&mut m.latency, &e.latency) {
                sub(&mut m.count, e.count);
                sub(&mut m.ns, e.ns);
                // The longest is the session's so far: a maximum does not subtract.
                for (m, e) in m.buckets.iter_mut().zip(&e.buckets) {
                    sub(m, *e);
                }
            }
            if m.latency.as_ref().is_some_and(|l| l.count == 0) {
                m.latency = None;
            }
        },
    );
    now.sites
        .retain(|s| s.counts != WaitCountsEntry::default() || s.latency.is_some());
    subtract_contexts(&mut now.contexts, &then.contexts, |m, e| {
        sub(&mut m.calls, e.calls);
        sub_waits(&mut m.counts, &e.counts);
    });
}

fn subtract_time(now: &mut TimeData, then: &TimeData) {
    subtract_by(
        &mut now.functions,
        &then.functions,
        |f| f.method,
        |m, e| {
            sub(&mut m.calls, e.calls);
            sub(&mut m.timed, e.timed);
            if let (Some(m), Some(e)) = (&mut m.long, e.long) {
                sub(m, e);
            }
            sub_f(&mut m.inclusive_ns, e.inclusive_ns);
            sub_f(&mut m.exclusive_ns, e.exclusive_ns);
            sub_fo(&mut m.raw_inclusive_ns, e.raw_inclusive_ns);
            sub_fo(&mut m.raw_exclusive_ns, e.raw_exclusive_ns);
            sub_fo(&mut m.wall_ns, e.wall_ns);
            sub_fo(&mut m.suspended_ns, e.suspended_ns);
            m.mean_ns = if m.calls > 0 {
                m.inclusive_ns / m.calls as f64
            } else {
                0.0
            };
        },
    );
    now.functions.retain(|f| f.calls > 0);
    subtract_by(
        &mut now.edges,
        &then.edges,
        |e| (e.caller, e.callee),
        |m, e| {
            sub(&mut m.calls, e.calls);
            sub(&mut m.timed, e.timed);
            sub_f(&mut m.inclusive_ns, e.inclusive_ns);
            sub_fo(&mut m.raw_inclusive_ns, e.raw_inclusive_ns);
        },
    );
    now.edges.retain(|e| e.calls > 0);
    subtract_contexts(&mut now.contexts, &then.contexts, |m, e| {
        sub(&mut m.calls, e.calls);
        sub(&mut m.timed, e.timed);
        sub_f(&mut m.inclusive_ns, e.inclusive_ns);
        sub_f(&mut m.exclusive_ns, e.exclusive_ns);
        sub_fo(&mut m.raw_inclusive_ns, e.raw_inclusive_ns);
        sub_fo(&mut m.raw_exclusive_ns, e.raw_exclusive_ns);
    });
    if let (Some(m), Some(e)) = (&mut now.inside_cabprof_ns, then.inside_cabprof_ns) {
        sub_f(m, e);
    }
    if let (Some(m), Some(e)) = (&mut now.inside_cabprof_entries, then.inside_cabprof_entries) {
        sub(m, e);
    }
}

fn sub_waits(a: &mut WaitCountsEntry, b: &WaitCountsEntry) {
    sub(&mut a.block.count, b.block.count);
    sub(&mut a.block.ns, b.block.ns);
    sub(&mut a.mutex.count, b.mutex.count);
    sub(&mut a.mutex.ns, b.mutex.ns);
}

fn sub(a: &mut u64, b: u64) {
    *a = a.saturating_sub(b);
}

fn sub_f(a: &mut f64, b: f64) {
    *a = (*a - b).max(0.0);
}

fn sub_fo(a: &mut Option<f64>, b: Option<f64>) {
    if let (Some(a), Some(b)) = (a, b) {
        sub_f(a, b);
    }
}

fn sub_counters(a: &mut Counters, b: &Counters) {
    sub(&mut a.events, b.events);
    sub(&mut a.analyzed, b.analyzed);
    sub(&mut a.producer_blocks, b.producer_blocks);
    sub_f(&mut a.blocked_s, b.blocked_s);
    sub(&mut a.dropped, b.dropped);
    sub(&mut a.chunks_lapped, b.chunks_lapped);
    sub(&mut a.events_lapped, b.events_lapped);
}

fn sub_alloc(a: &mut AllocCountsEntry, b: &AllocCountsEntry) {
    sub(&mut a.allocs, b.allocs);
    sub(&mut a.bytes, b.bytes);
    sub(&mut a.reallocs, b.reallocs);
    sub(&mut a.frees, b.frees);
    sub(&mut a.freed_bytes, b.freed_bytes);
}

/// Applies `f(later, earlier)` to each entry of `now` that has a match in `then` by `key`.
fn subtract_by<T, K: Hash + Eq>(
    now: &mut [T],
    then: &[T],
    key: impl Fn(&T) -> K,
    f: impl Fn(&mut T, &T),
) {
    let earlier: HashMap<K, &T> = then.iter().map(|e| (key(e), e)).collect();
    for m in now {
        if let Some(e) = earlier.get(&key(m)) {
            f(m, e);
        }
    }
}

/// Applies `f(later, earlier)` to each context of `now` whose stack is also in `then`, matched
/// by parent and method in one pass (each node comes after its parent in both lists). Nodes
/// stay, with their ids and links, even when nothing happened in them during the window:
/// their children may have been called.
fn subtract_contexts<N: ContextNode>(now: &mut [N], then: &[N], f: impl Fn(&mut N, &N)) {
    let earlier: HashMap<(u32, u32), usize> = then
        .iter()
        .enumerate()
        .map(|(i, n)| ((n.parent(), n.method()), i))
        .collect();
    // Later id → the matching earlier id (0 ↔ 0, the root).
    let mut matched: HashMap<u32, u32> = HashMap::from([(0, 0)]);
    for n in now.iter_mut() {
        let Some(&parent) = matched.get(&n.parent()) else {
            continue;
        };
        if let Some(&j) = earlier.get(&(parent, n.method())) {
            matched.insert(n.id(), then[j].id());
            f(n, &then[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(id: u32, parent: u32, method: u32, count: u64) -> ContextEntry {
        ContextEntry {
            id,
            parent,
            method,
            count,
            estimated: None,
        }
    }

    fn sampled(events: u64, analyzed: u64, count: u64) -> ReportData {
        let mut d = ReportData::default();
        d.session.mode = "sampling".into();
        d.totals.events = events;
        d.totals.analyzed = analyzed;
        d.session.rate_effective = analyzed as f64 / events as f64;
        d.method_count = Some(vec![MethodCountEntry {
            method: 1,
            count,
            estimated: None,
        }]);
        crate::analysis::fill_estimates(&mut d);
        d
    }

    /// A sampled window is estimated from its own sample: 100 calls seen among the 500 of its
    /// 1000 events analyzed estimate 200, not the difference of the two snapshots' estimates
    /// (367 - 100 = 267, each made with its own stretch's fraction).
    #[test]
    fn a_sampled_window_is_estimated_from_its_own_fraction() {
        let then = sampled(1000, 100, 10);
        let now = sampled(2000, 600, 110);
        assert_eq!(then.method_count.as_ref().unwrap()[0].estimated, Some(100));
        assert_eq!(now.method_count.as_ref().unwrap()[0].estimated, Some(367));
        let w = now.since(&then);
        let m = &w.method_count.as_ref().unwrap()[0];
        assert_eq!((m.count, m.estimated), (100, Some(200)));
        assert_eq!(w.session.rate_effective, 0.5);
    }

    /// Context ids differ between snapshots; stacks match by parent and method.
    #[test]
    fn contexts_match_by_stack_not_by_id() {
        let then = vec![ctx(1, 0, 7, 5), ctx(2, 1, 8, 3)];
        let mut now = vec![
            ctx(1, 0, 9, 4),
            ctx(2, 0, 7, 6),
            ctx(3, 2, 8, 10),
            ctx(4, 3, 7, 1),
        ];
        subtract_contexts(&mut now, &then, |m, e| sub(&mut m.count, e.count));
        let counts: Vec<u64> = now.iter().map(|c| c.count).collect();
        assert_eq!(counts, [4, 1, 7, 1]);
    }
}
