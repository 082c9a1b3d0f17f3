//! Folded stacks (`root;a;b count` lines), the input of flame-graph tools.

use crate::model::ReportData;
use std::fmt::Write as _;

impl ReportData {
    /// Folded stacks of the calling-context tree: one `root;a;b count` line per context with
    /// that context's call count, so a frame's width in a flame graph is the calls made in its
    /// whole subtree and the total is the number of calls. The widths are call counts, not
    /// time. Paths are not drawn: a path count is per function, not per calling context, so
    /// it has no place under one context's frame without inventing how it splits (the text
    /// and JSON reports list them).
    pub fn folded(&self) -> String {
        let mut o = String::new();
        if let Some(ct) = &self.call_tree {
            for c in &ct.contexts {
                let names: Vec<String> = std::iter::once("root".to_string())
                    .chain(c.stack.iter().map(|&m| sanitize(&self.name(m))))
                    .collect();
                let _ = writeln!(o, "{} {}", names.join(";"), c.count);
            }
        }
        o
    }

    /// Folded stacks weighted by heap bytes: one `root;a;b bytes` line per calling context
    /// that allocated, with the bytes allocated while it was the context (the allocations
    /// analysis), so a frame's width in a flame graph is the bytes its whole subtree
    /// allocated. Empty unless the allocations analysis ran.
    pub fn folded_alloc_bytes(&self) -> String {
        let mut o = String::new();
        if let Some(a) = &self.allocations {
            for c in a.contexts.iter().filter(|c| c.counts.bytes > 0) {
                let names: Vec<String> = std::iter::once("root".to_string())
                    .chain(c.stack.iter().map(|&m| sanitize(&self.name(m))))
                    .collect();
                let _ = writeln!(o, "{} {}", names.join(";"), c.counts.bytes);
            }
        }
        o
    }
}

/// Folded-stack frames may not contain `;` (the frame separator); spaces are fine (the count
/// is after the last one), so `<Foo as Display>::fmt` stays readable in the flame graph.
fn sanitize(name: &str) -> String {
    name.replace(';', ",")
}
