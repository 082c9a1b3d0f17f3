//! `call-tree`: the CAB paper's depth-two call-tree profile ([`cabprof_analyses::CallTreeProfile`])
//! and the full calling-context tree ([`cabprof_analyses::CallingContextTree`]), fed in one pass.

use super::contexts::{depth_first, stack_rows};
use super::{check_contexts, top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{CallTreeData, ContextEntry, NotAReport, PatternEntry, ReportData};
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
        let contexts = context_nodes(t);
        methods.extend(contexts.iter().map(|c| c.method));
        data.call_tree = Some(CallTreeData {
            approximate: p.is_approximate() || t.is_approximate(),
            patterns,
            contexts,
            overlong: Some(p.overlong()),
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
        if let Some(n) = ct.overlong.filter(|&n| n > 0) {
            let _ = writeln!(
                o,
                "  ({n} invocations made more than {} calls each: not recorded as patterns)",
                cabprof_analyses::call_tree::MAX_CALLEES
            );
        }
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
        // The most frequent contexts, each row bounded whatever the depth.
        let mut order: Vec<usize> = (0..ct.contexts.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(ct.contexts[i].count), i));
        order.truncate(top);
        let rows = stack_rows(&ct.contexts, &order, &data.method_names());
        for (&i, row) in order.iter().zip(&rows) {
            let _ = writeln!(o, "  {:>14}  {row}", data.shown(ct.contexts[i].count));
        }
    }

    fn fill_estimates(data: &mut ReportData, est: &dyn Fn(u64) -> Option<u64>) {
        if let Some(t) = &mut data.call_tree {
            t.patterns
                .iter_mut()
                .for_each(|e| e.estimated = est(e.count));
            t.contexts
                .iter_mut()
                .for_each(|e| e.estimated = est(e.count));
        }
    }

    fn check(data: &ReportData) -> Result<(), NotAReport> {
        match &data.call_tree {
            Some(t) => check_contexts("call_tree.contexts", &t.contexts),
            None => Ok(()),
        }
    }
}

/// The contexts of `tree` as report nodes, each after its parent: a depth-first walk with the
/// most called child first (then the lower method id), so the order and the ids do not depend
/// on the order events arrived in. Linear in the number of contexts (plus sorting siblings).
fn context_nodes(tree: &CallingContextTree) -> Vec<ContextEntry> {
    let nodes = tree.nodes();
    let links: Vec<(u32, u32)> = nodes.iter().map(|n| (n.0, n.1)).collect();
    depth_first(&links, |i| {
        (std::cmp::Reverse(nodes[i].3), nodes[i].2.get())
    })
    .into_iter()
    .enumerate()
    .map(|(k, (i, parent))| ContextEntry {
        id: k as u32 + 1,
        parent,
        method: nodes[i as usize].2.get(),
        count: nodes[i as usize].3,
        estimated: None,
    })
    .collect()
}
