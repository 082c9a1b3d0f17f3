//! The callgrind format (Valgrind's "Callgrind Format Specification", version 1), for
//! KCachegrind, QCachegrind and `callgrind_annotate`.
//!
//! What the file holds:
//! - **Events**: `Calls` (the calls of each function) when calls were counted, then `L1m`,
//!   `L2m`, … (the misses at each simulated cache level) when caches were simulated.
//! - **Per function** (`fl=` its source file, `fn=` its name): one cost line at the
//!   function's line with its *self* costs: the calls it received and the misses the
//!   simulator attributed to it.
//! - **Per call-graph edge** (`cfi=`/`cfn=`, `calls=COUNT LINE`): the calls along the edge and
//!   their *inclusive* cost: for `Calls`, every call made while a call along that edge was
//!   open (from the calling-context tree: each context whose stack contains the edge counts
//!   once, so recursion is not counted twice); without the calling-context tree, the edge's
//!   own calls. Misses are attributed to the innermost function, not to calling contexts, so
//!   their inclusive cost along an edge is not known and is written as 0: a function's
//!   inclusive misses in KCachegrind are its own.
//! - Accesses outside every profiled function, and the calls into the first profiled
//!   function of each stack, belong to the function `root`.
//! - Counts from a sampled session are estimates (analyzed count divided by the fraction of
//!   events analyzed, rounded), like the text report's; exact otherwise. The mode and rates
//!   are in the header's `desc:` lines.

use crate::model::{CallTreeData, ReportData};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

impl ReportData {
    /// The profile in the callgrind format; see `src/report/callgrind.rs` for what it holds.
    pub fn callgrind(&self) -> String {
        let scale = |count: u64| -> u64 {
            if self.is_sampled() {
                (count as f64 / self.estimate_rate()).round() as u64
            } else {
                count
            }
        };
        let has_calls = self.call_tree.is_some() || self.method_count.is_some();
        let levels = self.cache.as_ref().map_or(0, |c| c.levels.len());
        let width = has_calls as usize + levels;

        let mut own = self.callgrind_self_costs(has_calls, width);
        let edges = self.callgrind_edges();
        for &(caller, callee) in edges.keys() {
            own.entry(caller).or_insert_with(|| vec![0; width]);
            own.entry(callee).or_insert_with(|| vec![0; width]);
        }

        let mut o = String::new();
        self.callgrind_header(&mut o, has_calls, levels);
        let mut totals = vec![0u64; width];
        for c in own.values() {
            for (t, v) in totals.iter_mut().zip(c) {
                *t = t.saturating_add(scale(*v));
            }
        }
        let _ = writeln!(o, "totals: {}", join(&totals));
        o.push('\n');

        let methods = self.method_names();
        let place = |m: u32| -> (String, u32) {
            methods
                .entry(m)
                .map_or(("???".to_string(), 0), |e| (e.file.clone(), e.line))
        };
        // Names compressed to `(id)` after their first use, so names may repeat freely.
        let mut named = BTreeSet::new();
        let mut fn_name = |m: u32| -> String {
            if named.insert(m) {
                format!("({m}) {}", methods.name(m))
            } else {
                format!("({m})")
            }
        };
        for (&m, costs) in &own {
            let (file, line) = place(m);
            let _ = writeln!(o, "fl={file}");
            let _ = writeln!(o, "fn={}", fn_name(m));
            let costs: Vec<u64> = costs.iter().map(|&v| scale(v)).collect();
            let _ = writeln!(o, "{line} {}", join(&costs));
            for (&(_, callee), &(calls, inclusive)) in edges.range((m, 0)..=(m, u32::MAX)) {
                let (callee_file, callee_line) = place(callee);
                let _ = writeln!(o, "cfi={callee_file}");
                let _ = writeln!(o, "cfn={}", fn_name(callee));
                let _ = writeln!(o, "calls={} {callee_line}", scale(calls));
                let mut inc = vec![0u64; width];
                if has_calls {
                    inc[0] = scale(inclusive);
                }
                let _ = writeln!(o, "{line} {}", join(&inc));
            }
            o.push('\n');
        }
        o
    }

    /// The header: format, creator, the session's description, the events' names.
    fn callgrind_header(&self, o: &mut String, has_calls: bool, levels: usize) {
        let _ = writeln!(o, "# callgrind format");
        let _ = writeln!(o, "version: 1");
        let _ = writeln!(o, "creator: cabprof {}", env!("CARGO_PKG_VERSION"));
        let s = &self.session;
        let _ = writeln!(
            o,
            "desc: cabprof session: mode {}, sampling rate {}, rate used {}, rate effective {}{}",
            s.mode,
            s.sampling_rate,
            s.rate_used,
            s.rate_effective,
            if self.is_sampled() {
                " (counts are estimates: analyzed count / rate effective)"
            } else {
                " (exact counts)"
            }
        );
        if let Some(cache) = &self.cache {
            for (k, l) in cache.levels.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "desc: L{}: {} B, {} ways, {} B lines, {}",
                    k + 1,
                    l.size_bytes,
                    l.ways,
                    l.line_bytes,
                    l.policy
                );
            }
        }
        let _ = writeln!(o, "positions: line");
        let mut names = Vec::new();
        if has_calls {
            let _ = writeln!(o, "event: Calls : calls");
            names.push("Calls".to_string());
        }
        for k in 1..=levels {
            let _ = writeln!(o, "event: L{k}m : L{k} misses (loads and stores)");
            names.push(format!("L{k}m"));
        }
        let _ = writeln!(o, "events: {}", names.join(" "));
    }

    /// Self costs per function: calls (if counted), then misses per simulated level.
    fn callgrind_self_costs(&self, has_calls: bool, width: usize) -> BTreeMap<u32, Vec<u64>> {
        let mut own: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        fn cost(own: &mut BTreeMap<u32, Vec<u64>>, m: u32, width: usize) -> &mut Vec<u64> {
            own.entry(m).or_insert_with(|| vec![0; width])
        }
        if let Some(ct) = &self.call_tree {
            for c in &ct.contexts {
                let v = &mut cost(&mut own, c.method, width)[0];
                *v = v.saturating_add(c.count);
            }
        } else if let Some(counts) = &self.method_count {
            for m in counts {
                cost(&mut own, m.method, width)[0] += m.count;
            }
        }
        if let Some(cache) = &self.cache {
            for e in &cache.by_method {
                let slot = has_calls as usize + e.level as usize;
                if slot < width {
                    let v = &mut cost(&mut own, e.method, width)[slot];
                    *v = v
                        .saturating_add(e.load_misses)
                        .saturating_add(e.store_misses);
                }
            }
        }
        own
    }

    /// Per call-graph edge: calls, and the inclusive `Calls` cost.
    fn callgrind_edges(&self) -> BTreeMap<(u32, u32), (u64, u64)> {
        let mut edges: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
        if let Some(ct) = &self.call_tree {
            edge_costs(ct, &mut edges);
            // Counted edges are exact where the call graph ran too (the tree agrees with it
            // in exhaustive mode; in sampled mode the graph is the better count).
            if let Some(graph) = &self.call_graph {
                for g in graph {
                    if let Some(e) = edges.get_mut(&(g.caller, g.callee)) {
                        e.0 = g.count;
                    }
                }
            }
        } else if let Some(graph) = &self.call_graph {
            for g in graph {
                edges.insert((g.caller, g.callee), (g.count, g.count));
            }
        }
        edges
    }
}

/// Per call-graph edge of the calling-context tree: `(calls, inclusive calls)`. An edge's
/// calls are those of the contexts it enters; its inclusive calls add up the calls of the
/// subtrees below its outermost occurrences on each path (so recursion is not counted twice).
/// Linear in the number of contexts: one walk with a count of each edge's open occurrences.
/// Sums saturate at `u64::MAX`.
fn edge_costs(ct: &CallTreeData, edges: &mut BTreeMap<(u32, u32), (u64, u64)>) {
    let parents = ct.parent_indices();
    let n = ct.contexts.len();
    let edge = |i: usize| {
        let caller = parents[i].map_or(0, |p| ct.contexts[p].method);
        (caller, ct.contexts[i].method)
    };
    // Calls in each context's subtree (parents precede their children).
    let mut subtree: Vec<u64> = ct.contexts.iter().map(|c| c.count).collect();
    // Each context's children as a list through `next` (`NONE` ends it), starting at
    // `first`: two indices per context, not a vector each.
    const NONE: u32 = u32::MAX;
    let mut first = vec![NONE; n];
    let mut next = vec![NONE; n];
    let mut roots = Vec::new();
    for i in (0..n).rev() {
        match parents[i] {
            Some(p) => {
                subtree[p] = subtree[p].saturating_add(subtree[i]);
                next[i] = first[p];
                first[p] = i as u32;
            }
            None => roots.push(i),
        }
    }
    let mut open: HashMap<(u32, u32), u32> = HashMap::new();
    // (context, entering): leaving a context closes its edge's occurrence.
    let mut todo: Vec<(usize, bool)> = roots.into_iter().map(|r| (r, true)).collect();
    while let Some((i, entering)) = todo.pop() {
        let key = edge(i);
        if !entering {
            if let Some(k) = open.get_mut(&key) {
                *k -= 1;
            }
            continue;
        }
        let e = edges.entry(key).or_default();
        e.0 = e.0.saturating_add(ct.contexts[i].count);
        let k = open.entry(key).or_default();
        if *k == 0 {
            e.1 = e.1.saturating_add(subtree[i]);
        }
        *k += 1;
        todo.push((i, false));
        let mut c = first[i];
        while c != NONE {
            todo.push((c as usize, true));
            c = next[c as usize];
        }
    }
}

fn join(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}
