//! Folded stacks (`root;a;b count` lines), the input of flame-graph tools.

use crate::model::ReportData;
use std::fmt::Write as _;

/// What a flame graph's widths measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weight {
    /// Calls (the call-tree analysis' calling contexts).
    #[default]
    Calls,
    /// Time in nanoseconds (the time analysis' contexts; estimates under sampled timing).
    Time,
}

impl ReportData {
    /// Folded stacks weighted by calls: see [`folded_by`](Self::folded_by).
    pub fn folded(&self) -> String {
        self.folded_by(Weight::Calls)
    }

    /// Folded stacks of the calling-context tree, one `root;a;b weight` line per context.
    ///
    /// - [`Weight::Calls`]: the context's call count, so a frame's width in a flame graph is
    ///   the calls made in its whole subtree and the total is the number of calls. Paths are
    ///   not drawn: a path count is per function, not per calling context, so it has no place
    ///   under one context's frame without inventing how it splits (the text and JSON reports
    ///   list them).
    /// - [`Weight::Time`]: the context's self time in whole nanoseconds, so a frame's width is
    ///   its inclusive time. Empty unless the time analysis ran.
    pub fn folded_by(&self, weight: Weight) -> String {
        let mut o = String::new();
        let stack = |s: &[u32]| -> String {
            std::iter::once("root".to_string())
                .chain(s.iter().map(|&m| sanitize(&self.name(m))))
                .collect::<Vec<_>>()
                .join(";")
        };
        match weight {
            Weight::Calls => {
                if let Some(ct) = &self.call_tree {
                    for c in &ct.contexts {
                        let _ = writeln!(o, "{} {}", stack(&c.stack), c.count);
                    }
                }
            }
            Weight::Time => {
                if let Some(t) = &self.time {
                    for c in &t.contexts {
                        let ns = c.exclusive_ns.round() as u64;
                        if ns > 0 {
                            let _ = writeln!(o, "{} {ns}", stack(&c.stack));
                        }
                    }
                }
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
