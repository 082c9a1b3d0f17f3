//! A flame graph of the calling-context tree, as SVG (drawn by inferno from the folded
//! stacks).

use super::folded::{folded_frame, folded_lines};
use crate::model::ReportData;

impl ReportData {
    /// A flame graph SVG of the folded stacks (inferno). Widths are call counts, not time.
    /// Deep stacks are elided and names escaped as in [`folded`](Self::folded); when the
    /// counts add up to more than `u64::MAX` they are scaled down and the title says by how
    /// much.
    pub fn svg(&self) -> String {
        let flame = self.flame_stacks();
        let folded = folded_lines(self, &flame.stacks);
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = format!(
            "cabprof calling contexts, width = calls (not time) ({})",
            folded_frame(&self.session.mode)
        );
        if flame.shift > 0 {
            opts.subtitle = Some(format!(
                "calls divided by 2^{}: their sum exceeds 2^64",
                flame.shift
            ));
        }
        opts.count_name = "calls".into();
        let mut out = Vec::new();
        if folded.trim().is_empty() {
            return String::from(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">no call-tree data</text></svg>\n",
            );
        }
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .expect("folded stacks are well-formed");
        String::from_utf8(out).expect("inferno writes UTF-8")
    }
}
