//! `call-graph`: caller → callee edge counts ([`cabprof_analyses::CallGraph`]).

use super::{top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{EdgeEntry, ReportData};
use cabprof_analyses::CallGraph;
use std::fmt::Write as _;

/// The call-graph analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = CallGraph;
    const NAMES: &'static [&'static str] = &["call-graph", "graph"];
    const ON_BY_DEFAULT: bool = true;

    fn build(_plan: &AnalysisPlan) -> CallGraph {
        CallGraph::new()
    }

    fn report(g: &CallGraph, data: &mut ReportData, methods: &mut MethodIds) {
        let mut v: Vec<_> = g
            .sorted_edges()
            .into_iter()
            .map(|(caller, callee, count)| EdgeEntry {
                caller: caller.get(),
                callee: callee.get(),
                count,
                estimated: None,
            })
            .collect();
        // Most calls first (the text's "top N" are the N largest), ties by caller and callee.
        v.sort_by(|x, y| {
            y.count
                .cmp(&x.count)
                .then(x.caller.cmp(&y.caller))
                .then(x.callee.cmp(&y.callee))
        });
        methods.extend(v.iter().flat_map(|e| [e.caller, e.callee]));
        data.call_graph = Some(v);
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(g) = &data.call_graph else {
            return;
        };
        let _ = writeln!(o, "\ncall graph edges ({}):", top_of(top, g.len()));
        for e in g.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>14}  {} -> {}",
                data.shown(e.count),
                data.name(e.caller),
                data.name(e.callee)
            );
        }
    }

    fn fill_estimates(data: &mut ReportData, est: &dyn Fn(u64) -> Option<u64>) {
        if let Some(v) = &mut data.call_graph {
            v.iter_mut().for_each(|e| e.estimated = est(e.count));
        }
    }
}
