//! A flame graph of the calling-context tree, as SVG (drawn by inferno from the folded
//! stacks).

use super::folded::{folded_frame, folded_lines};
use super::Weight;
use crate::model::ReportData;

impl ReportData {
    /// A flame graph SVG of the folded stacks, weighted by calls (inferno). Widths are call
    /// counts, not time: [`svg_by`](Self::svg_by) draws time.
    ///
    /// This and [`svg_by`](Self::svg_by) need cabprof's `flamegraph` feature (off by
    /// default: it builds inferno); [`folded`](Self::folded) needs nothing.
    pub fn svg(&self) -> String {
        self.svg_by(Weight::Calls)
    }

    /// A flame graph SVG of the folded stacks, weighted by calls or by time (inferno). Deep
    /// stacks are elided and names escaped as in [`folded_by`](Self::folded_by); when the
    /// weights add up to more than `u64::MAX` they are scaled down and the subtitle says by
    /// how much.
    pub fn svg_by(&self, weight: Weight) -> String {
        let flame = self.flame_stacks_by(weight);
        let folded = folded_lines(self, &flame.stacks);
        let mut opts = inferno::flamegraph::Options::default();
        let (what, unit, missing) = match weight {
            Weight::Calls => (
                "calling contexts, width = calls (not time)",
                "calls",
                "no call-tree data",
            ),
            Weight::Time => ("time by calling context, width = ns", "ns", "no time data"),
            Weight::AllocBytes => (
                "heap allocations by calling context, width = bytes allocated",
                "bytes",
                "no allocation data",
            ),
        };
        opts.title = format!("cabprof {what} ({})", folded_frame(&self.session.mode));
        if flame.shift > 0 {
            opts.subtitle = Some(format!(
                "{unit} divided by 2^{}: their sum exceeds 2^64",
                flame.shift
            ));
        }
        opts.count_name = unit.into();
        let mut out = Vec::new();
        if folded.trim().is_empty() {
            return format!(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">{missing}</text></svg>\n"
            );
        }
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .expect("folded stacks are well-formed");
        String::from_utf8(out).expect("inferno writes UTF-8")
    }
}
