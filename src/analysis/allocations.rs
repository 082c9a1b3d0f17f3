//! `allocations`: heap allocations per function and calling context
//! ([`cabprof_analyses::Allocations`]), fed by the [`Tracked`](crate::alloc::Tracked) global
//! allocator; live and peak bytes and the runtime's own allocations come from the wrapper's
//! process-wide counters.

use super::{AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{
    AllocContextEntry, AllocCountsEntry, AllocationsData, FunctionAllocEntry, ReportData,
};
use cabprof_analyses::{AllocCounts, Allocations};
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
        let mut contexts: Vec<_> = a
            .contexts()
            .iter()
            .map(|c| AllocContextEntry {
                stack: c.stack.iter().map(|m| m.get()).collect(),
                calls: c.calls,
                counts: entry(&c.counts),
            })
            .collect();
        contexts.sort_by(|x, y| {
            y.counts
                .bytes
                .cmp(&x.counts.bytes)
                .then(y.counts.allocs.cmp(&x.counts.allocs))
                .then(x.stack.cmp(&y.stack))
        });
        methods.extend(functions.iter().map(|f| f.method));
        methods.extend(contexts.iter().flat_map(|c| c.stack.iter().copied()));
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
            "  by function (top {top} of {}; self = while innermost, incl = while on the stack):",
            a.functions.len()
        );
        let _ = writeln!(
            o,
            "  {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  method",
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
        let _ = writeln!(
            o,
            "  by calling context (top {top} of {}):",
            a.contexts.len()
        );
        for c in a.contexts.iter().take(top) {
            let stack: Vec<String> = std::iter::once("root".to_string())
                .chain(c.stack.iter().map(|&m| data.name(m)))
                .collect();
            let _ = writeln!(
                o,
                "  {:>10} {:>10}  {}",
                data.shown(c.counts.allocs),
                bytes(c.counts.bytes),
                stack.join(" > ")
            );
        }
    }
}

/// Bytes for people: `512 B`, `3.0 KiB`, `1.5 MiB`, `2.0 GiB`.
fn bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

fn signed_bytes(b: i64) -> String {
    if b < 0 {
        format!("-{}", bytes(b.unsigned_abs()))
    } else {
        bytes(b as u64)
    }
}
