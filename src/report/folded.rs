//! Folded stacks (`root;a;b count` lines), the input of flame-graph tools.

use crate::model::{
    parent_links, parent_of, ContextTimeEntry, FlameStacks, Frame, ReportData, StackSet,
    ELIDED_FRAME,
};
use std::fmt::Write as _;
use std::io::Write as _;

/// What a flame graph's widths measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weight {
    /// Calls (the call-tree analysis' calling contexts).
    #[default]
    Calls,
    /// Time in nanoseconds (the time analysis' contexts; estimates under sampled timing).
    Time,
    /// Heap bytes allocated (the allocations analysis' contexts).
    AllocBytes,
}

impl ReportData {
    /// Folded stacks weighted by calls: see [`folded_by`](Self::folded_by).
    pub fn folded(&self) -> String {
        self.folded_by(Weight::Calls)
    }

    /// Folded stacks of the calling-context tree, one `root;a;b weight` line per context.
    ///
    /// - [`Weight::Calls`]: the context's call count, so a frame's width in a flame graph is
    ///   the calls made in its whole subtree and the total is the number of calls. Paths are
    ///   not drawn: a path count is per function, not per calling context, so it has no place
    ///   under one context's frame without inventing how it splits (the text and JSON reports
    ///   list them).
    /// - [`Weight::Time`]: the context's self time in whole nanoseconds, so a frame's width is
    ///   its inclusive time. Compensated times are estimates, and where a context's callees
    ///   add up to more than its own inclusive time (its self time came out negative) they are
    ///   drawn scaled down to fit inside it, so that widths never go below zero and the
    ///   outermost frames are as wide as their inclusive times. Empty unless the time analysis
    ///   ran.
    /// - [`Weight::AllocBytes`]: the bytes allocated while the context was innermost, so a
    ///   frame's width is the bytes its whole subtree allocated. Empty unless the allocations
    ///   analysis ran.
    ///
    /// Deep stacks are bounded ([`ReportData::flame_stacks`]): past 64 frames, a stack keeps
    /// its outermost 24 and innermost 40 frames around one `[deep stack: frames elided]`
    /// frame, and lines that then read the same are merged. If the weights add up to more
    /// than `u64::MAX` (a crafted or corrupted report), every one is divided by the same power
    /// of two so that flame-graph tools can total them ([`crate::report::FlameStacks::shift`]).
    /// Method names are escaped ([`folded_frame`]) so that every line parses.
    pub fn folded_by(&self, weight: Weight) -> String {
        let mut out = Vec::new();
        self.write_folded_by(weight, &mut out)
            .expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("names and counts are UTF-8")
    }

    /// Write the lines of [`folded_by`](Self::folded_by) to `out` one at a time, through a
    /// buffer of its own, without holding them (the text repeats each context's whole stack,
    /// so it can be many times the report's size). Returns the shift the weights were divided
    /// by ([`FlameStacks::shift`], 0 normally), or the first error `out` gave.
    pub fn write_folded_by(
        &self,
        weight: Weight,
        out: impl std::io::Write,
    ) -> std::io::Result<u32> {
        let stacks = self.stack_set_by(weight);
        let mut out = std::io::BufWriter::with_capacity(64 << 10, out);
        let names = frame_names(self, &stacks);
        for i in 0..stacks.len() {
            out.write_all(b"root")?;
            for &t in stacks.tokens(i) {
                out.write_all(b";")?;
                out.write_all(names[t as usize].as_bytes())?;
            }
            writeln!(out, " {}", stacks.weight(i))?;
        }
        out.flush()?;
        Ok(stacks.shift())
    }

    /// The flame-graph stacks of [`folded_by`](Self::folded_by).
    pub fn flame_stacks_by(&self, weight: Weight) -> FlameStacks {
        self.stack_set_by(weight).to_flame_stacks()
    }

    /// [`flame_stacks_by`](Self::flame_stacks_by), compactly, for the renderers.
    pub(crate) fn stack_set_by(&self, weight: Weight) -> StackSet {
        match weight {
            Weight::Calls => match &self.call_tree {
                Some(ct) => StackSet::from_nodes(&ct.contexts, 0, |_, c| c.count),
                None => StackSet::default(),
            },
            Weight::Time => match &self.time {
                Some(t) => {
                    let drawn = drawn_self_times(&t.contexts);
                    StackSet::from_nodes(&t.contexts, 0, |i, _| drawn[i])
                }
                None => StackSet::default(),
            },
            Weight::AllocBytes => match &self.allocations {
                Some(a) => StackSet::from_nodes(&a.contexts, a.root().bytes, |_, c| c.counts.bytes),
                None => StackSet::default(),
            },
        }
    }
}

/// Each frame of `stacks` as folded text, by token: method names escaped ([`folded_frame`]).
pub(super) fn frame_names(data: &ReportData, stacks: &StackSet) -> Vec<String> {
    let names = data.method_names();
    stacks
        .frames()
        .iter()
        .map(|&f| match f {
            Frame::Elided => ELIDED_FRAME.to_string(),
            Frame::Method(m) => folded_frame(&names.name(m)),
        })
        .collect()
}

/// The self width of each time context in a flame graph, in whole nanoseconds: each context is
/// as wide as its inclusive time (0 if that came out negative), and callees that add up to
/// more than their caller are scaled down together to fit inside it.
fn drawn_self_times(contexts: &[ContextTimeEntry]) -> Vec<u64> {
    let links = parent_links(contexts);
    let parents = |i: usize| parent_of(&links, i);
    // Each context's inclusive time, never below 0; a context never called itself (only on
    // the way to others, as an older report's whole stacks leave them) is as wide as its
    // callees. Callees come after their callers in the list, so a backward pass sees every
    // callee before its caller.
    let mut own: Vec<f64> = contexts.iter().map(|c| c.inclusive_ns.max(0.0)).collect();
    let mut callees = vec![0.0f64; contexts.len()];
    for i in (0..contexts.len()).rev() {
        if contexts[i].calls == 0 {
            own[i] = own[i].max(callees[i]);
        }
        if let Some(p) = parents(i) {
            callees[p] += own[i];
        }
    }
    let mut inclusive = vec![0.0f64; contexts.len()];
    let scale = |incl: f64, callees: f64| {
        if callees > incl && callees > 0.0 {
            incl / callees
        } else {
            1.0
        }
    };
    // Callers come before their callees in the list (the model's order).
    for i in 0..contexts.len() {
        inclusive[i] = match parents(i) {
            Some(p) => own[i] * scale(inclusive[p], callees[p]),
            None => own[i],
        };
    }
    (0..contexts.len())
        .map(|i| {
            let own = inclusive[i] - callees[i] * scale(inclusive[i], callees[i]);
            own.max(0.0).round() as u64
        })
        .collect()
}

/// A method name as one folded-stack frame. The format separates frames with `;`, ends a line
/// at a line break and takes the count after the last space (inferno also takes a second
/// number before it as a differential count), so a name is escaped the way Rust escapes a
/// string: a backslash as `\\`, `\n`, `\r` and `\t`, `;` and every other control or
/// whitespace character except the plain space as `\u{..}`, and the last space of a name that
/// ends in a number as `\u{20}`. Other names, `<Foo as Display>::fmt` among them, are
/// unchanged.
pub fn folded_frame(name: &str) -> String {
    let mut o = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            ';' => o.push_str("\\u{3b}"),
            c if c != ' ' && (c.is_control() || c.is_whitespace()) => {
                let _ = write!(o, "\\u{{{:x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    if let Some(space) = o.rfind(' ') {
        let tail = &o[space + 1..];
        if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            o.replace_range(space..=space, "\\u{20}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::drawn_self_times;
    use crate::model::ContextTimeEntry;

    fn ctx(id: u32, parent: u32, inclusive_ns: f64) -> ContextTimeEntry {
        ContextTimeEntry {
            id,
            parent,
            method: id,
            calls: 1,
            timed: 1,
            inclusive_ns,
            exclusive_ns: 0.0,
            raw_inclusive_ns: None,
            raw_exclusive_ns: None,
            exclusive_clipped: None,
            below_resolution: None,
        }
    }

    /// A caller whose compensated callees add up to more than itself: they are drawn scaled
    /// to fit, nothing is negative, and the total is the outermost inclusive time.
    #[test]
    fn callees_wider_than_their_caller_are_fitted_inside_it() {
        // main 100 > {a 80 > {c 30}, b 40}: a + b = 120 > 100; c fits in a.
        let contexts = [
            ctx(1, 0, 100.0),
            ctx(2, 1, 80.0),
            ctx(3, 1, 40.0),
            ctx(4, 2, 30.0),
        ];
        let drawn = drawn_self_times(&contexts);
        // a and b scaled by 100/120: main's own 0, a 66.7 (c still fits: its own 36.7, c 30),
        // b 33.3.
        assert_eq!(drawn, vec![0, 37, 33, 30]);
        assert_eq!(drawn.iter().sum::<u64>(), 100);
        // A negative inclusive time is drawn as nothing, and its callees with it.
        let contexts = [ctx(1, 0, 50.0), ctx(2, 1, -5.0), ctx(3, 2, 10.0)];
        assert_eq!(drawn_self_times(&contexts), vec![50, 0, 0]);
        // A context never called itself (an older report's gap) is as wide as its callees.
        let mut gap = ctx(2, 1, 0.0);
        gap.calls = 0;
        let contexts = [ctx(1, 0, 100.0), gap, ctx(3, 2, 30.0)];
        assert_eq!(drawn_self_times(&contexts), vec![70, 0, 30]);
    }
}
