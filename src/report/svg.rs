//! A flame graph of the calling-context tree, as SVG (drawn by inferno from the folded
//! stacks).

use crate::model::ReportData;

impl ReportData {
    /// A flame graph SVG of the folded stacks (inferno). Widths are call counts, not time.
    pub fn svg(&self) -> String {
        let folded = self.folded();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = format!(
            "cabprof calling contexts, width = calls (not time) ({})",
            self.session.mode
        );
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
