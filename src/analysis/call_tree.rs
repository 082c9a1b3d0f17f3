//! `call-tree`: the CAB paper's depth-two call-tree profile ([`cabprof_analyses::CallTreeProfile`])
//! and the full calling-context tree ([`cabprof_analyses::CallingContextTree`]), fed in one pass.

use super::{top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{CallTreeData, ContextEntry, PatternEntry, ReportData};
use cabprof_analyses::{CallTreeProfile, CallingContextTree, MethodId};
use std::fmt::Write as _;

/// The state of [`Analysis::CallTree`](crate::Analysis::CallTree): both call-tree analyses
/// over one stream, each word decoded once for both
/// ([`cabprof_analyses::call_tree::consume_both`]).
#[derive(Clone, Debug, Default)]
pub struct CallTrees {
    /// Depth-two call-tree patterns.
    pub profile: CallTreeProfile,
    /// The calling-context tree.
    pub contexts: CallingContextTree,
}

impl cabprof_analyses::EventAnalysis for CallTrees {
    fn consume(&mut self, words: &[u64]) {
        cabprof_analyses::call_tree::consume_both(&mut self.profile, &mut self.contexts, words);
    }

    fn merge(&mut self, other: CallTrees) {
        cabprof_analyses::EventAnalysis::merge(&mut self.profile, other.profile);
        cabprof_analyses::EventAnalysis::merge(&mut self.contexts, other.contexts);
    }
}

fn ids(it: impl IntoIterator<Item = MethodId>) -> Vec<u32> {
    it.into_iter().map(|m| m.get()).collect()
}

/// The call-tree analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = CallTrees;
    const NAMES: &'static [&'static str] = &["call-tree", "tree"];
    const ON_BY_DEFAULT: bool = true;

    fn build(plan: &AnalysisPlan) -> CallTrees {
        let mut trees = CallTrees::default();
        trees.profile.set_approximate(plan.approximate);
        trees.contexts.set_approximate(plan.approximate);
        trees
    }

    fn report(state: &CallTrees, data: &mut ReportData, methods: &mut MethodIds) {
        let (p, t) = (&state.profile, &state.contexts);
        let mut patterns: Vec<_> = p
            .sorted()
            .into_iter()
            .map(|(m, callees, count)| PatternEntry {
                method: m.get(),
                callees: ids(callees),
                count,
                estimated: None,
            })
            .collect();
        patterns.sort_by(|x, y| {
            y.count
                .cmp(&x.count)
                .then(x.method.cmp(&y.method))
                .then(x.callees.cmp(&y.callees))
        });
        let mut contexts: Vec<_> = t
            .contexts()
            .into_iter()
            .map(|(stack, count)| ContextEntry {
                stack: ids(stack),
                count,
                estimated: None,
            })
            .collect();
        contexts.sort_by(|x, y| y.count.cmp(&x.count).then(x.stack.cmp(&y.stack)));
        for c in &contexts {
            methods.extend(c.stack.iter().copied());
        }
        data.call_tree = Some(CallTreeData {
            approximate: p.is_approximate() || t.is_approximate(),
            patterns,
            contexts,
        });
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(ct) = &data.call_tree else {
            return;
        };
        let approx = if ct.approximate {
            " (approximate: sampled)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "\ncall-tree patterns{approx} ({}): a function and the callees of one invocation",
            top_of(top, ct.patterns.len())
        );
        for p in ct.patterns.iter().take(top) {
            let mut callees: Vec<String> =
                p.callees.iter().take(6).map(|&c| data.name(c)).collect();
            if p.callees.len() > 6 {
                callees.push(format!("… {} callees in all", p.callees.len()));
            }
            let _ = writeln!(
                o,
                "  {:>14}  {} [{}]",
                data.shown(p.count),
                data.name(p.method),
                callees.join(", ")
            );
        }
        let _ = writeln!(
            o,
            "\ncalling contexts{approx} ({}):",
            top_of(top, ct.contexts.len())
        );
        let shown: Vec<_> = ct.contexts.iter().take(top).collect();
        let rows: Vec<String> = shown.iter().map(|c| context_row(data, &c.stack, true)).collect();
        for (c, row) in shown.iter().zip(&rows) {
            // Two deep contexts can look alike once their middles are elided: show those in
            // full, so that no two rows read the same.
            let row = if rows.iter().filter(|r| *r == row).count() > 1 {
                context_row(data, &c.stack, false)
            } else {
                row.clone()
            };
            let _ = writeln!(
                o,
                "  {:>14}  {row} (depth {})",
                data.shown(c.count),
                c.stack.len()
            );
        }
    }
}

/// A calling context's frames joined by `>`; with `elide`, a deep one keeps its outermost two
/// and innermost three frames around a count of the hidden ones.
fn context_row(data: &ReportData, stack: &[u32], elide: bool) -> String {
    let mut frames: Vec<String> = stack.iter().map(|&m| data.name(m)).collect();
    if elide && frames.len() > 6 {
        let hidden = frames.len() - 5;
        frames.splice(2..frames.len() - 3, [format!("…{hidden} frames…")]);
    }
    frames.join(" > ")
}
