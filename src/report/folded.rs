//! Folded stacks (`root;a;b count` lines), the input of flame-graph tools.

use crate::model::ReportData;
use std::fmt::Write as _;

impl ReportData {
    /// Folded stacks of the calling-context tree: one `root;a;b count` line per context with
    /// that context's call count, so a frame's width in a flame graph is the calls made in its
    /// whole subtree; and, when paths were profiled, each Ball-Larus path as a leaf
    /// `root;f;path#N count`.
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
        if let Some(paths) = &self.paths {
            for p in paths {
                let _ = writeln!(
                    o,
                    "root;{};path#{} {}",
                    sanitize(&self.name(p.method)),
                    p.path,
                    p.count
                );
            }
        }
        o
    }
}

/// Folded-stack frames may not contain `;` or spaces.
fn sanitize(name: &str) -> String {
    name.replace([';', ' '], "_")
}
