//! `method-count`: calls per function ([`cabprof_analyses::MethodCount`]).

use super::{top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{MethodCountEntry, ReportData};
use cabprof_analyses::MethodCount;
use std::fmt::Write as _;

/// The method-count analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = MethodCount;
    // `method-count` stays the canonical name (users type it, reports key on it); the
    // function-named aliases match the word the rest of the user-facing text uses.
    const NAMES: &'static [&'static str] =
        &["method-count", "methods", "function-count", "functions"];
    const ON_BY_DEFAULT: bool = true;

    fn build(_plan: &AnalysisPlan) -> MethodCount {
        MethodCount::new()
    }

    fn report(mc: &MethodCount, data: &mut ReportData, methods: &mut MethodIds) {
        let mut v: Vec<_> = mc
            .iter()
            .map(|(m, count)| MethodCountEntry {
                method: m.get(),
                count,
                estimated: None,
            })
            .collect();
        v.sort_by(|x, y| y.count.cmp(&x.count).then(x.method.cmp(&y.method)));
        methods.extend(v.iter().map(|e| e.method));
        data.method_count = Some(v);
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(mc) = &data.method_count else {
            return;
        };
        // Summed in a u128: counts read from a file may add up to more than a u64 holds.
        let total: u128 = mc.iter().map(|e| e.count as u128).sum::<u128>().max(1);
        let _ = writeln!(o, "\ncalls per function ({}):", top_of(top, mc.len()));
        // The name column is as wide as the longest name shown, so locations stay aligned.
        let width = mc
            .iter()
            .take(top)
            .map(|e| data.name(e.method).chars().count())
            .max()
            .unwrap_or(0)
            .max("function".len());
        let _ = writeln!(
            o,
            "  {:>14} {:>7}  {:<width$}  location",
            "calls", "%", "function"
        );
        for e in mc.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>14} {:>6.2}%  {:<width$}  {}",
                data.shown(e.count),
                100.0 * e.count as f64 / total as f64,
                data.name(e.method),
                data.location(e.method)
            );
        }
    }

    fn fill_estimates(data: &mut ReportData, est: &dyn Fn(u64) -> Option<u64>) {
        if let Some(v) = &mut data.method_count {
            v.iter_mut().for_each(|e| e.estimated = est(e.count));
        }
    }
}
