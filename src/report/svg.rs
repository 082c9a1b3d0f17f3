//! A flame graph of the calling-context tree, as SVG (drawn by inferno from the folded
//! stacks).
//!
//! inferno reads folded lines, sorts them as text, merges neighbouring lines' equal frames and
//! then drops every frame narrower than its minimum width (0.01 % of the total by default)
//! before drawing. Handing it every line would take the whole folded text (each context's
//! stack written out, many times the report's size) and inferno's own frame for every frame.
//! So the lines are sorted here as inferno would sort them, the frames' widths are worked out
//! from that order, and each line is cut after the last frame wide enough to be drawn, equal
//! neighbours merged: inferno then draws the same frames at the same places from a few
//! thousand short lines.

use super::folded::{folded_frame, frame_names};
use super::Weight;
use crate::model::{ReportData, StackSet};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

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
    /// how much. The SVG is the one inferno draws from the folded lines, but made without
    /// them: what it takes beyond the report is a few bytes per frame of each stack, and the
    /// folded text of the frames wide enough to be drawn.
    pub fn svg_by(&self, weight: Weight) -> String {
        let stacks = self.stack_set_by(weight);
        let (mut opts, missing) = self.svg_options(weight, stacks.shift());
        if stacks.len() == 0 {
            return format!(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">{missing}</text></svg>\n"
            );
        }
        let lines = DrawnLines::new(self, &stacks, opts.min_width);
        drop(stacks);
        // The lines are in the order inferno's sort gives the full lines, which cut lines do
        // not always keep as text: `flame_chart` takes lines as given (it reverses them, hence
        // the reversed order, and checks no sort order) and changes nothing else.
        opts.flame_chart = true;
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, lines.iter().rev(), &mut out)
            .expect("folded stacks are well-formed");
        String::from_utf8(out).expect("inferno writes UTF-8")
    }

    /// inferno's options for a graph weighted by `weight` whose weights were divided by
    /// `2^shift`, and what the SVG says when there is nothing to draw.
    fn svg_options(
        &self,
        weight: Weight,
        shift: u32,
    ) -> (inferno::flamegraph::Options<'static>, &'static str) {
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
        if shift > 0 {
            opts.subtitle = Some(format!(
                "{unit} divided by 2^{shift}: their sum exceeds 2^64"
            ));
        }
        opts.count_name = unit.into();
        (opts, missing)
    }
}

/// The folded lines inferno draws the same flame graph from: in its order, each cut after its
/// last frame wide enough to be drawn, neighbours that then read the same merged.
struct DrawnLines {
    text: String,
    lines: Vec<Range<usize>>,
}

impl DrawnLines {
    /// The lines of `stacks` for a graph that drops frames narrower than `min_width` percent
    /// of the total (inferno's `Options::min_width`).
    fn new(data: &ReportData, stacks: &StackSet, min_width: f64) -> DrawnLines {
        let names = frame_names(data, stacks);
        // Tokens of equal names get one id: inferno compares frames by name.
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let name_id: Vec<u32> = names
            .iter()
            .map(|n| {
                let next = ids.len() as u32;
                *ids.entry(n.as_str()).or_insert(next)
            })
            .collect();
        drop(ids);
        let same = |a: u32, b: u32| name_id[a as usize] == name_id[b as usize];
        let mut order: Vec<u32> = (0..stacks.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| compare_lines(stacks, &names, &same, a, b));

        // The frames of a line are `root` (depth 0 here) and its stack's, so the frames two
        // neighbours share are `root` and their common prefix by name.
        let shared = |prev: Option<u32>, line: u32| -> usize {
            let Some(prev) = prev else { return 0 };
            let (a, b) = (stacks.tokens(prev as usize), stacks.tokens(line as usize));
            1 + a.iter().zip(b).take_while(|&(&x, &y)| same(x, y)).count()
        };
        let depth = |line: u32| 1 + stacks.tokens(line as usize).len();

        // First walk: each frame's width (inferno's: the run of neighbouring lines that share
        // it), and which frames are drawn, by the order they open in. The threshold is
        // inferno's, computed as inferno computes it, less a hair so that no rounding can drop
        // a frame inferno draws; a frame kept beyond that inferno drops itself.
        let total: u64 = (0..stacks.len()).map(|i| stacks.weight(i)).sum();
        let min_time = min_width / (100.0 / total as f64);
        let kept = |width: u64| width as f64 >= min_time * 0.999;
        let mut open: Vec<(u64, u64)> = Vec::new();
        let mut drawn: Vec<u64> = Vec::new();
        let (mut time, mut opened, mut prev) = (0u64, 0u64, None);
        for &line in &order {
            let s = shared(prev, line);
            while open.len() > s {
                let (start, n) = open.pop().expect("more than s frames are open");
                if kept(time - start) {
                    drawn.push(n);
                }
            }
            while open.len() < depth(line) {
                open.push((time, opened));
                opened += 1;
            }
            time += stacks.weight(line as usize);
            prev = Some(line);
        }
        for (start, n) in open.drain(..) {
            if kept(time - start) {
                drawn.push(n);
            }
        }
        drawn.sort_unstable();

        // Second walk: the same frames open in the same order; each line keeps its frames
        // up to its deepest drawn one (a frame is at most as wide as its caller, so the drawn
        // ones come first), and a line that keeps the very frames of the line before it adds
        // its weight to that one.
        let mut out = DrawnLines {
            text: String::new(),
            lines: Vec::new(),
        };
        let mut open: Vec<bool> = Vec::new();
        let (mut opened, mut next_drawn, mut prev) = (0u64, 0usize, None);
        // The line waiting to be written: its stack, the frames it keeps, its weight.
        let mut pending: Option<(u32, usize, u64)> = None;
        for &line in &order {
            let s = shared(prev, line);
            open.truncate(s);
            while open.len() < depth(line) {
                let is_drawn = drawn.get(next_drawn) == Some(&opened);
                if is_drawn {
                    next_drawn += 1;
                }
                open.push(is_drawn);
                opened += 1;
            }
            let keep = open.iter().take_while(|&&d| d).count();
            let weight = stacks.weight(line as usize);
            prev = Some(line);
            if let Some((_, k, w)) = &mut pending {
                if *k == keep && s >= keep {
                    *w += weight;
                    continue;
                }
            }
            if let Some(p) = pending.take() {
                out.push(stacks, &names, p);
            }
            pending = Some((line, keep, weight));
        }
        if let Some(p) = pending {
            out.push(stacks, &names, p);
        }
        out
    }

    /// Write the line of stack `line` cut to its first `keep` frames (`root` included).
    fn push(
        &mut self,
        stacks: &StackSet,
        names: &[String],
        (line, keep, weight): (u32, usize, u64),
    ) {
        let start = self.text.len();
        self.text.push_str("root");
        for &t in &stacks.tokens(line as usize)[..keep.saturating_sub(1)] {
            self.text.push(';');
            self.text.push_str(&names[t as usize]);
        }
        self.text.push(' ');
        self.text.push_str(&weight.to_string());
        self.lines.push(start..self.text.len());
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.lines.iter().map(|r| &self.text[r.clone()])
    }
}

/// Compare the folded lines of stacks `a` and `b` as text (`root;name;… weight`), as inferno
/// sorts them, without writing them: past their common frames, byte by byte.
fn compare_lines(
    stacks: &StackSet,
    names: &[String],
    same: &impl Fn(u32, u32) -> bool,
    a: u32,
    b: u32,
) -> Ordering {
    let (ta, tb) = (stacks.tokens(a as usize), stacks.tokens(b as usize));
    let common = ta.iter().zip(tb).take_while(|&(&x, &y)| same(x, y)).count();
    let (ra, rb) = (&ta[common..], &tb[common..]);
    if let (Some(&x), Some(&y)) = (ra.first(), rb.first()) {
        // Both lines go on with `;` and these two names: a byte where the names differ within
        // the shorter decides, as one slice comparison.
        let (na, nb) = (names[x as usize].as_bytes(), names[y as usize].as_bytes());
        let n = na.len().min(nb.len());
        if na[..n] != nb[..n] {
            return na[..n].cmp(&nb[..n]);
        }
    }
    let (mut da, mut db) = ([0u8; 20], [0u8; 20]);
    let wa = decimal(stacks.weight(a as usize), &mut da);
    let wb = decimal(stacks.weight(b as usize), &mut db);
    line_from(ra, names, wa).cmp(line_from(rb, names, wb))
}

/// The bytes of a folded line from some frame on: `;name` per frame, then ` weight`.
fn line_from<'a>(
    tokens: &'a [u32],
    names: &'a [String],
    weight: &'a [u8],
) -> impl Iterator<Item = u8> + 'a {
    tokens
        .iter()
        .flat_map(move |&t| std::iter::once(b';').chain(names[t as usize].bytes()))
        .chain(std::iter::once(b' '))
        .chain(weight.iter().copied())
}

/// `n` in decimal, in `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

#[cfg(test)]
mod tests {
    use crate::model::{CallTreeData, ContextEntry, MethodEntry, ReportData, ELIDED_FRAME, SCHEMA};
    use crate::report::Weight;

    /// A call tree of `n` contexts under 40 methods with names that sort oddly as text (one a
    /// prefix of another, followed by a space or a digit; two methods of one name), stacks
    /// past the 64 frames kept whole, a few hot contexts and many of one call each (too
    /// narrow to draw beside the hot ones); `hot` scales the hot ones' counts.
    fn odd_report(n: u32, hot: u64) -> ReportData {
        let names = [
            "zz",
            "zz2",
            "zz 5a",
            "foo",
            "foo bar",
            "foo",
            "a;b",
            "<T as Tr>::f",
        ];
        let methods = (1..=40u32)
            .map(|id| MethodEntry {
                id,
                name: names.get(id as usize % 10).map_or_else(
                    || format!("crate::module::function_{id}"),
                    |n| n.to_string(),
                ),
                module: "crate".into(),
                file: "src/lib.rs".into(),
                line: id,
            })
            .collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut contexts: Vec<ContextEntry> = Vec::new();
        for id in 1..=n {
            let r = next();
            // Mostly a child of the context just made (long chains), else of any earlier one.
            let parent = match (id, r % 16) {
                (1, _) => 0,
                (_, 0) => (r >> 8) as u32 % id,
                _ => id - 1,
            };
            contexts.push(ContextEntry {
                id,
                parent,
                method: 1 + (r >> 20) as u32 % 40,
                count: if r % 97 == 0 {
                    hot * (1 + (r >> 40) % 1000)
                } else {
                    1
                },
                estimated: None,
            });
        }
        ReportData {
            schema: SCHEMA.into(),
            methods,
            call_tree: Some(CallTreeData {
                approximate: false,
                patterns: Vec::new(),
                contexts,
                overlong: None,
            }),
            ..ReportData::default()
        }
    }

    /// The SVG is byte for byte what inferno draws from the whole folded text (sorted by
    /// inferno), whether most frames are drawn or most are too narrow, weights shifted or not.
    /// Each graph is drawn on a thread of its own: inferno picks colours from a per-thread
    /// sequence.
    #[test]
    fn svg_is_what_inferno_draws_from_the_folded_lines() {
        let fresh =
            |f: &(dyn Fn() -> Vec<u8> + Sync)| std::thread::scope(|s| s.spawn(f).join().unwrap());
        for (n, hot) in [(3_000, 1), (3_000, 1_000), (3_000, u64::MAX / 2_000)] {
            let d = odd_report(n, hot);
            let whole = fresh(&|| {
                let stacks = d.flame_stacks_by(Weight::Calls);
                let (mut opts, _) = d.svg_options(Weight::Calls, stacks.shift);
                let folded = d.folded_by(Weight::Calls);
                assert!(folded.contains(ELIDED_FRAME), "some stacks are elided");
                let mut whole = Vec::new();
                inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut whole).unwrap();
                whole
            });
            let svg = fresh(&|| d.svg_by(Weight::Calls).into_bytes());
            assert!(
                svg == whole,
                "{n} contexts, hot x{hot}: the SVG differs from inferno's of the folded text"
            );
            let drawn = String::from_utf8(svg).unwrap().matches("<title>").count();
            assert!(
                drawn > 100,
                "{n} contexts, hot x{hot}: {drawn} frames drawn"
            );
        }
    }
}
