//! The call graph in Graphviz DOT.

use crate::model::ReportData;
use std::collections::BTreeSet;
use std::fmt::Write as _;

impl ReportData {
    /// The call graph in Graphviz DOT, edges labelled with call counts.
    pub fn dot(&self) -> String {
        let mut o = String::from("digraph cabprof {\n  rankdir=LR;\n  node [shape=box];\n");
        if let Some(g) = &self.call_graph {
            let mut nodes = BTreeSet::new();
            for e in g {
                nodes.insert(e.caller);
                nodes.insert(e.callee);
            }
            for n in nodes {
                let _ = writeln!(o, "  n{n} [label=\"{}\"];", dot_escape(&self.name(n)));
            }
            for e in g {
                let _ = writeln!(
                    o,
                    "  n{} -> n{} [label=\"{}\"];",
                    e.caller,
                    e.callee,
                    self.shown(e.count)
                );
            }
        }
        o.push_str("}\n");
        o
    }
}

/// A DOT string literal's contents: backslashes and quotes escaped.
fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
