//! Folded stacks (`root;a;b count` lines), the input of flame-graph tools.

use crate::model::{FlameStacks, Frame, MethodNames, ReportData, ELIDED_FRAME};
use std::fmt::Write as _;

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
    ///   its inclusive time. Empty unless the time analysis ran.
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
        folded_lines(self, &self.flame_stacks_by(weight).stacks)
    }

    /// The flame-graph stacks of [`folded_by`](Self::folded_by).
    pub fn flame_stacks_by(&self, weight: Weight) -> FlameStacks {
        match weight {
            Weight::Calls => self.flame_stacks(),
            Weight::Time => match &self.time {
                Some(t) => FlameStacks::from_nodes(&t.contexts, |c| c.exclusive_ns.round() as u64),
                None => FlameStacks::default(),
            },
            Weight::AllocBytes => match &self.allocations {
                Some(a) => FlameStacks::from_nodes_and_root(&a.contexts, a.root().bytes, |c| {
                    c.counts.bytes
                }),
                None => FlameStacks::default(),
            },
        }
    }
}

/// The folded lines of `stacks`, `root` first on each.
pub(super) fn folded_lines(data: &ReportData, stacks: &[(Vec<Frame>, u64)]) -> String {
    let names = data.method_names();
    let mut escaped: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    let mut name = |f: Frame, names: &MethodNames<'_>| -> String {
        match f {
            Frame::Elided => ELIDED_FRAME.to_string(),
            Frame::Method(m) => escaped
                .entry(m)
                .or_insert_with(|| folded_frame(&names.name(m)))
                .clone(),
        }
    };
    let mut o = String::new();
    for (frames, count) in stacks {
        o.push_str("root");
        for &f in frames {
            o.push(';');
            o.push_str(&name(f, &names));
        }
        let _ = writeln!(o, " {count}");
    }
    o
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
