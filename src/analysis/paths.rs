//! `paths`: Ball-Larus path counts of functions marked `#[profile(paths)]`
//! ([`cabprof_analyses::PathProfile`]), decoded to source lines through the method registry.

use super::{top_of, AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{PathEntry, ReportData};
use crate::names;
use cabprof_analyses::PathProfile;
use std::fmt::Write as _;

/// The path-profiling analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = PathProfile;
    const NAMES: &'static [&'static str] = &["paths", "path"];
    const ON_BY_DEFAULT: bool = true;

    fn build(_plan: &AnalysisPlan) -> PathProfile {
        PathProfile::new()
    }

    fn report(p: &PathProfile, data: &mut ReportData, methods: &mut MethodIds) {
        let v: Vec<_> = p
            .hottest(usize::MAX)
            .into_iter()
            .map(|h| PathEntry {
                method: h.method.get(),
                path: h.path,
                count: h.count,
                steps: names::decode_path(h.method, h.path),
                estimated: None,
            })
            .collect();
        methods.extend(v.iter().map(|e| e.method));
        data.paths = Some(v);
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(paths) = &data.paths else {
            return;
        };
        if paths.is_empty() {
            let _ = writeln!(
                o,
                "\nhottest paths: none recorded (only functions marked `#[profile(paths)]` have paths)"
            );
            return;
        }
        let _ = writeln!(o, "\nhottest paths ({}):", top_of(top, paths.len()));
        for p in paths.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>14}  {} path #{}",
                data.shown(p.count),
                data.name(p.method),
                p.path
            );
            if let Some(steps) = &p.steps {
                for step in steps {
                    let _ = writeln!(o, "  {:>14}    {step}", "");
                }
            }
        }
    }

    fn fill_estimates(data: &mut ReportData, est: &dyn Fn(u64) -> Option<u64>) {
        if let Some(v) = &mut data.paths {
            v.iter_mut().for_each(|e| e.estimated = est(e.count));
        }
    }
}
