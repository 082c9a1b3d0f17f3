//! `reuse-distance`: LRU stack distances of `Mem` events ([`cabprof_analyses::ReuseDistance`], Marin
//! and Mellor-Crummey 2004), reported as a histogram and the miss curve of fully-associative
//! LRU caches.

use super::{AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{BinEntry, CurvePoint, ReportData, ReuseData};
use cabprof_analyses::ReuseDistance;
use cabprof_cab::ConfigError;
use std::fmt::Write as _;

/// Cache sizes (in lines) the miss curve is reported at: powers of two.
const CURVE_LINES: [u64; 15] = [
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
];

/// The reuse-distance analysis.
pub(crate) struct Descriptor;

impl AnalysisDescriptor for Descriptor {
    type State = ReuseDistance;
    const NAMES: &'static [&'static str] = &["reuse-distance", "reuse"];
    const ON_BY_DEFAULT: bool = false;

    fn validate(plan: &AnalysisPlan) -> Result<(), ConfigError> {
        ReuseDistance::new(plan.reuse_line_bytes)
            .map(drop)
            .map_err(|e| ConfigError::new("reuse_line_bytes", plan.reuse_line_bytes, e.to_string()))
    }

    fn build(plan: &AnalysisPlan) -> ReuseDistance {
        ReuseDistance::new(plan.reuse_line_bytes).expect("line size validated by the plan")
    }

    fn report(rd: &ReuseDistance, data: &mut ReportData, _methods: &mut MethodIds) {
        data.reuse_distance = Some(ReuseData {
            line_bytes: rd.line_bytes(),
            accesses: rd.accesses(),
            cold: rd.cold(),
            histogram: rd
                .histogram()
                .into_iter()
                .map(|b| BinEntry {
                    min: b.min,
                    max: b.max,
                    count: b.count,
                    estimated: None,
                })
                .collect(),
            miss_curve: CURVE_LINES
                .iter()
                .zip(rd.miss_curve(&CURVE_LINES))
                .map(|(&lines, misses)| CurvePoint { lines, misses })
                .collect(),
        });
    }

    fn text(data: &ReportData, _top: usize, o: &mut String) {
        let Some(r) = &data.reuse_distance else {
            return;
        };
        if r.accesses == 0 {
            let _ = writeln!(o, "\nreuse distance: {}", super::cache::NO_ACCESSES);
            return;
        }
        let _ = writeln!(
            o,
            "\nreuse distance ({} B lines): {} accesses, {} cold",
            r.line_bytes, r.accesses, r.cold
        );
        let _ = writeln!(o, "  fully-associative LRU misses by capacity:");
        for p in &r.miss_curve {
            let rate = if r.accesses == 0 {
                0.0
            } else {
                100.0 * p.misses as f64 / r.accesses as f64
            };
            let _ = writeln!(
                o,
                "  {:>8} lines ({:>9}): {:>12} misses ({rate:.2}%)",
                p.lines,
                cabprof_cab::show_bytes(p.lines.saturating_mul(u64::from(r.line_bytes))),
                p.misses
            );
        }
    }

    fn fill_estimates(data: &mut ReportData, est: &dyn Fn(u64) -> Option<u64>) {
        if let Some(r) = &mut data.reuse_distance {
            r.histogram
                .iter_mut()
                .for_each(|e| e.estimated = est(e.count));
        }
    }
}
