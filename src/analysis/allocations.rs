//! `allocations`: heap allocations per function and calling context
//! ([`cabprof_analyses::Allocations`]), fed by the [`Tracked`](crate::alloc::Tracked) global
//! allocator; live and peak bytes and the runtime's own allocations come from the wrapper's
//! process-wide counters.

use super::contexts::{kept_in_order, stack_rows};
use super::{check_contexts, top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{
    AllocContextEntry, AllocCountsEntry, AllocationsData, FunctionAllocEntry, LiveEntry,
    NotAReport, ReportData,
};
use cabprof_analyses::{AllocCounts, Allocations, LiveCounts};
use std::fmt::Write as _;

/// The allocation analysis.
pub(crate) struct Descriptor;

fn entry(c: &AllocCounts) -> AllocCountsEntry {
    AllocCountsEntry {
        allocs: c.allocs,
        bytes: c.bytes,
        reallocs: c.reallocs,
        frees: c.frees,
        freed_bytes: c.freed_bytes,
    }
}

fn live(l: LiveCounts) -> LiveEntry {
    LiveEntry {
        blocks: l.blocks,
        bytes: l.bytes,
    }
}

impl AnalysisDescriptor for Descriptor {
    type State = Allocations;
    const NAMES: &'static [&'static str] = &["allocations", "alloc", "allocs"];
    // It needs the wrapper as the program's global allocator, so it is asked for by name.
    const ON_BY_DEFAULT: bool = false;

    fn build(plan: &AnalysisPlan) -> Allocations {
        let mut a = Allocations::new();
        a.set_approximate(plan.approximate);
        a
    }

    fn report(a: &Allocations, data: &mut ReportData, methods: &mut MethodIds) {
        let g = crate::alloc::global_counts();
        let totals = entry(&a.totals());
        let mut functions: Vec<_> = a
            .by_function()
            .iter()
            .map(|f| FunctionAllocEntry {
                method: f.method.get(),
                self_: entry(&f.self_),
                inclusive: entry(&f.inclusive),
            })
            .collect();
        functions.sort_by(|x, y| {
            (y.inclusive.bytes, y.self_.bytes)
                .cmp(&(x.inclusive.bytes, x.self_.bytes))
                .then(x.method.cmp(&y.method))
        });
        // Nodes linked to their parents: the contexts with allocations in their subtree, the
        // child whose subtree allocated the most bytes first. Linear in the number of
        // contexts, whatever their depth.
        let nodes = a.context_nodes();
        let contexts: Vec<AllocContextEntry> = kept_in_order(
            &nodes,
            |n| n.node,
            |n| n.parent,
            |n| n.method.get(),
            |n| !n.counts.is_empty(),
            |n| n.counts.bytes,
        )
        .into_iter()
        .enumerate()
        .map(|(k, (i, parent))| {
            let c = &nodes[i as usize];
            AllocContextEntry {
                id: k as u32 + 1,
                parent,
                method: c.method.get(),
                calls: c.calls,
                counts: entry(&c.counts),
                // Absent where nothing made here is live: most contexts, in most reports.
                live: (c.live.blocks > 0).then(|| live(c.live)),
            }
        })
        .collect();
        methods.extend(functions.iter().map(|f| f.method));
        methods.extend(contexts.iter().map(|c| c.method));
        data.allocations = Some(AllocationsData {
            approximate: a.is_approximate(),
            tracked: g.runtime_allocs > 0 || !a.totals().is_empty(),
            totals,
            live_bytes: g.live_bytes,
            peak_bytes: g.peak_bytes,
            runtime: AllocCountsEntry {
                allocs: g.runtime_allocs,
                bytes: g.runtime_bytes,
                reallocs: 0,
                frees: g.runtime_frees,
                freed_bytes: g.runtime_freed_bytes,
            },
            functions,
            contexts,
            root_live: Some(live(a.root_live())),
            untracked_blocks: Some(a.untracked_blocks()),
        });
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(a) = &data.allocations else {
            return;
        };
        let t = &a.totals;
        let _ = writeln!(
            o,
            "\nallocations{}: {} allocs, {} reallocs, {} frees; {} allocated, {} freed; live {} at the end, peak {}",
            if a.approximate { " (approximate attribution)" } else { "" },
            data.shown(t.allocs),
            data.shown(t.reallocs),
            data.shown(t.frees),
            bytes(t.bytes),
            bytes(t.freed_bytes),
            signed_bytes(a.live_bytes),
            signed_bytes(a.peak_bytes),
        );
        let _ = writeln!(
            o,
            "  the runtime's own (not included): {} allocs ({}), {} frees ({})",
            a.runtime.allocs,
            bytes(a.runtime.bytes),
            a.runtime.frees,
            bytes(a.runtime.freed_bytes)
        );
        if !a.tracked {
            let _ = writeln!(
                o,
                "  no allocation was reported: make cabprof::alloc::Tracked the #[global_allocator]"
            );
            return;
        }
        let _ = writeln!(
            o,
            "  by function ({}; self = while innermost, incl = while on the stack):",
            top_of(top, a.functions.len())
        );
        let _ = writeln!(
            o,
            "  {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  function",
            "allocs", "bytes", "incl allocs", "incl bytes", "frees", "freed"
        );
        for f in a.functions.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
                data.shown(f.self_.allocs),
                bytes(f.self_.bytes),
                data.shown(f.inclusive.allocs),
                bytes(f.inclusive.bytes),
                data.shown(f.self_.frees),
                bytes(f.self_.freed_bytes),
                if f.method == 0 {
                    "(outside instrumented functions)".to_string()
                } else {
                    data.name(f.method)
                }
            );
        }
        // The contexts with allocations of their own and the root, most bytes first, each
        // row bounded whatever the depth.
        let none = AllocCountsEntry::default();
        let mut order: Vec<Option<usize>> = (0..a.contexts.len())
            .filter(|&i| a.contexts[i].counts != none)
            .map(Some)
            .collect();
        let root = a.root();
        if root != none {
            order.push(None);
        }
        let counts = |c: &Option<usize>| c.map_or(&root, |i| &a.contexts[i].counts);
        order.sort_by(|x, y| {
            let (p, q) = (counts(x), counts(y));
            (q.bytes, q.allocs).cmp(&(p.bytes, p.allocs)).then(x.cmp(y))
        });
        let _ = writeln!(o, "  by calling context ({}):", top_of(top, order.len()));
        order.truncate(top);
        let shown: Vec<usize> = order.iter().flatten().copied().collect();
        let mut rows = stack_rows(&a.contexts, &shown, &data.method_names()).into_iter();
        for c in &order {
            let row = match c {
                Some(_) => rows.next().unwrap_or_default(),
                None => "root".to_string(),
            };
            let n = counts(c);
            let _ = writeln!(
                o,
                "  {:>10} {:>10}  {row}",
                data.shown(n.allocs),
                bytes(n.bytes),
            );
        }
    }

    fn check(data: &ReportData) -> Result<(), NotAReport> {
        match &data.allocations {
            Some(a) => check_contexts("allocations.contexts", &a.contexts),
            None => Ok(()),
        }
    }
}

use cabprof_cab::show_bytes as bytes;

fn signed_bytes(b: i64) -> String {
    if b < 0 {
        format!("-{}", bytes(b.unsigned_abs()))
    } else {
        bytes(b as u64)
    }
}
