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
        let contexts = context_nodes(t);
        methods.extend(contexts.iter().map(|c| c.method));
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
        // The most frequent contexts. A row shows at most five frames of its stack: the
        // outermost two (through each context's ancestor at depth 2, found for all in one
        // pass) and the innermost three; so the text costs the rows shown, whatever the depth.
        let parents = ct.parent_indices();
        let depth = CallTreeData::depths(&parents);
        let mut second = vec![0usize; parents.len()];
        for i in 0..parents.len() {
            second[i] = match parents[i] {
                Some(p) if depth[i] > 2 => second[p],
                _ => i,
            };
        }
        let mut order: Vec<usize> = (0..ct.contexts.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(ct.contexts[i].count), i));
        order.truncate(top);
        let names = data.method_names();
        let method = |i: usize| names.name(ct.contexts[i].method);
        let walk = |from: usize, steps: usize| {
            let mut frames = Vec::new();
            let mut n = Some(from);
            for _ in 0..steps {
                let Some(j) = n else { break };
                frames.push(method(j));
                n = parents[j];
            }
            frames.reverse();
            frames
        };
        let rows: Vec<String> = order
            .iter()
            .map(|&i| {
                if depth[i] > 6 {
                    let mut frames = walk(second[i], 2);
                    frames.push(format!("…{} frames…", depth[i] - 5));
                    frames.extend(walk(i, 3));
                    frames.join(" > ")
                } else {
                    walk(i, depth[i]).join(" > ")
                }
            })
            .collect();
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for r in &rows {
            *seen.entry(r).or_default() += 1;
        }
        for (&i, row) in order.iter().zip(&rows) {
            // Two deep contexts can look alike once their middles are elided: those rows name
            // their context's id (its whole stack is in the JSON report), so that no two rows
            // read the same.
            let id = if seen[row.as_str()] > 1 {
                format!(", context #{}", ct.contexts[i].id)
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "  {:>14}  {row} (depth {}{id})",
                data.shown(ct.contexts[i].count),
                depth[i]
            );
        }
    }
}

/// The contexts of `tree` as report nodes, each after its parent: a depth-first walk with the
/// most called child first (then the lower method id), so the order and the ids do not depend
/// on the order events arrived in. Linear in the number of contexts (plus sorting siblings).
fn context_nodes(tree: &CallingContextTree) -> Vec<ContextEntry> {
    let nodes = tree.nodes();
    // Node index of the tree → position in `nodes`; children lists by position.
    let at: std::collections::HashMap<u32, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n.0, i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match at.get(&n.1) {
            Some(&p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    let key = |&i: &usize| (std::cmp::Reverse(nodes[i].3), nodes[i].2.get());
    roots.sort_by_key(key);
    children.iter_mut().for_each(|c| c.sort_by_key(key));
    let mut out = Vec::with_capacity(nodes.len());
    // (position in `nodes`, id of its parent in the report)
    let mut todo: Vec<(usize, u32)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((i, parent)) = todo.pop() {
        let id = out.len() as u32 + 1;
        out.push(ContextEntry {
            id,
            parent,
            method: nodes[i].2.get(),
            count: nodes[i].3,
            estimated: None,
        });
        todo.extend(children[i].iter().rev().map(|&c| (c, id)));
    }
    out
}

