//! The timeline with cabprof's own cost taken out of the calls and shown as slices of its
//! own, on the real clock (threads stay aligned with each other).
//!
//! A timed call costs its caller `timed` in all (the calibration's figure), of which `inside`
//! falls between its own stamps and the rest, `outside`, around them, as the time analysis
//! compensates them. Half of each part is placed at each end: the call's slice becomes
//! `[start + inside/2, end - inside/2]`, and `cabprof` slices at the call's depth cover
//! `[start - outside/2, start + inside/2]` and `[end - inside/2, end + outside/2]`, merged
//! where they overlap, kept inside the parent's slice and between their neighbours. A call's
//! width is then its own time less `inside`, as the time analysis has it, and its self time
//! (its width less its children's and the `cabprof` slices inside it) the time analysis'
//! compensated self time. Polls keep their raw times.

use crate::model::{TimelineSlice, CABPROF_SLICE as CABPROF};

/// `slices` (one thread's, by start, parents first) with the costs taken out: `inside` and
/// `outside` in ns.
pub(crate) fn compensate(
    slices: &[TimelineSlice],
    inside: f64,
    outside: f64,
) -> Vec<TimelineSlice> {
    let (inside, outside) = (inside.max(0.0), outside.max(0.0));
    let mut out: Vec<TimelineSlice> = Vec::with_capacity(slices.len() * 2);
    let mut pieces: Vec<Piece> = Vec::new();
    // The slices that may hold the next: (depth, raw interval, compensated interval). Its
    // parent is the one a level up that holds its start; outer frames still open when the
    // timeline was taken (a thread's `main`) are not slices, so a level may be missing.
    let mut open: Vec<(u32, Span, Span)> = Vec::new();
    for s in slices {
        let (start, end) = (s.start_ns, s.start_ns + s.duration_ns);
        // A poll's cost is its future's call's; a wait costs nothing of cabprof's.
        let plain = s.poll || s.wait.is_some();
        let i = if plain {
            0.0
        } else {
            inside.min(s.duration_ns)
        };
        let t = if plain { 0.0 } else { outside };
        while open
            .last()
            .is_some_and(|&(d, raw, _)| d >= s.depth || start < raw.0 || start > raw.1)
        {
            open.pop();
        }
        let parent = match open.last() {
            Some(&(d, _, own)) if d + 1 == s.depth => own,
            _ => (f64::NEG_INFINITY, f64::INFINITY),
        };
        // Never ending before it starts (rounding, with `inside` its whole duration).
        let own = (start + i / 2.0, (end - i / 2.0).max(start + i / 2.0));
        out.push(TimelineSlice {
            start_ns: own.0,
            duration_ns: own.1 - own.0,
            ..s.clone()
        });
        if i + t > 0.0 {
            let piece = |from: f64, to: f64| TimelineSlice {
                method: CABPROF,
                depth: s.depth,
                poll: false,
                task: None,
                wait: None,
                start_ns: from,
                duration_ns: to - from,
            };
            pieces.push(Piece {
                slice: piece(start - t / 2.0, own.0),
                parent,
                call: own.0,
                entry: true,
            });
            pieces.push(Piece {
                slice: piece(own.1, end + t / 2.0),
                parent,
                call: own.0,
                entry: false,
            });
        }
        open.push((s.depth, (start, end), own));
    }
    place(&mut out, pieces);
    out.sort_by(|a, b| {
        a.start_ns
            .total_cmp(&b.start_ns)
            .then(a.depth.cmp(&b.depth))
    });
    out
}

/// An interval in ns: start, end.
type Span = (f64, f64);

/// What a piece of cabprof's time leaves free at each end, in ns.
const GAP_NS: f64 = 1.0;

/// A piece of cabprof's time at one end of a call.
struct Piece {
    slice: TimelineSlice,
    /// The interval of the parent it must stay in.
    parent: (f64, f64),
    /// Its call's (compensated) start.
    call: f64,
    /// Before its call, or after.
    entry: bool,
}

/// Add the `pieces` to `calls`: each within its parent, clear of the calls at its depth, and
/// merged with the piece before it where they meet.
fn place(calls: &mut Vec<TimelineSlice>, mut pieces: Vec<Piece>) {
    // The calls' intervals by depth, by start: what a piece must stay clear of.
    let mut by_depth: Vec<Vec<(f64, f64)>> = Vec::new();
    for c in calls.iter() {
        let d = c.depth as usize;
        if by_depth.len() <= d {
            by_depth.resize(d + 1, Vec::new());
        }
        by_depth[d].push((c.start_ns, c.start_ns + c.duration_ns));
    }
    for v in &mut by_depth {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    pieces.sort_by(|a, b| {
        (a.slice.depth, a.slice.start_ns)
            .partial_cmp(&(b.slice.depth, b.slice.start_ns))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    // The piece being built: its slice and its interval before the gaps are left.
    let mut last: Option<(TimelineSlice, f64, f64)> = None;
    for Piece {
        slice: p,
        parent: (lo, hi),
        call,
        entry,
    } in pieces
    {
        let mut from = p.start_ns.max(lo);
        let mut to = (p.start_ns + p.duration_ns).min(hi);
        // Clear of its neighbours at its depth: the call before its own (an entry piece) or
        // the one after it (an exit piece).
        let near = &by_depth[p.depth as usize];
        if entry {
            let k = near.partition_point(|c| c.0 < call);
            if let Some(before) = k.checked_sub(1).map(|j| near[j]) {
                from = from.max(before.1);
            }
        } else {
            let k = near.partition_point(|c| c.0 <= call);
            if let Some(after) = near.get(k) {
                to = to.min(after.0);
            }
        }
        if to <= from {
            continue;
        }
        match &mut last {
            // Overlapping the one before: one piece (pieces that only touch stay two, as
            // a call of no width may lie between them).
            Some((l, _, l_to)) if l.depth == p.depth && from < *l_to => *l_to = l_to.max(to),
            _ => {
                calls.extend(last.take().and_then(leave_gaps));
                last = Some((p, from, to));
            }
        }
    }
    calls.extend(last.and_then(leave_gaps));
}

/// The piece `(slice, from, to)` a nanosecond clear of what it meets, if anything is left:
/// the trace formats round to the nanosecond, and a reader that turns complete events into
/// begins and ends may order a begin before an end at the same instant (speedscope then
/// reports a slice ended out of order).
fn leave_gaps((slice, from, to): (TimelineSlice, f64, f64)) -> Option<TimelineSlice> {
    let (from, to) = (from + GAP_NS, to - GAP_NS);
    (to > from).then_some(TimelineSlice {
        start_ns: from,
        duration_ns: to - from,
        ..slice
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(method: u32, depth: u32, start: f64, dur: f64) -> TimelineSlice {
        TimelineSlice {
            method,
            depth,
            poll: false,
            task: None,
            wait: None,
            start_ns: start,
            duration_ns: dur,
        }
    }

    fn spans(v: &[TimelineSlice]) -> Vec<(u32, u32, f64, f64)> {
        v.iter()
            .map(|s| (s.method, s.depth, s.start_ns, s.start_ns + s.duration_ns))
            .collect()
    }

    /// outer 0..1000 calls inner at 100..200 and 300..400; inside 10, outside 20.
    #[test]
    fn costs_become_cabprof_slices_around_each_call() {
        let raw = [
            slice(1, 0, 0.0, 1000.0),
            slice(2, 1, 100.0, 100.0),
            slice(2, 1, 300.0, 100.0),
        ];
        let got = compensate(&raw, 10.0, 20.0);
        assert_eq!(
            spans(&got),
            [
                (0, 0, -9.0, 4.0),
                (1, 0, 5.0, 995.0),
                (0, 1, 91.0, 104.0),
                (2, 1, 105.0, 195.0),
                (0, 1, 196.0, 209.0),
                (0, 1, 291.0, 304.0),
                (2, 1, 305.0, 395.0),
                (0, 1, 396.0, 409.0),
                (0, 0, 996.0, 1009.0),
            ]
        );
        // outer's self time: 990 - 2 * 90 - 4 * 13 = 758: the time analysis' compensated self
        // time, 1000 - 10 - 2 * 100 - 2 * 20 (each call's outside part) = 750, and the 2 ns
        // each piece leaves free.
        let width = |m: u32, d: u32| -> f64 {
            got.iter()
                .filter(|s| s.method == m && s.depth == d)
                .map(|s| s.duration_ns)
                .sum()
        };
        assert_eq!(width(1, 0) - width(2, 1) - width(CABPROF, 1), 758.0);
    }

    #[test]
    fn pieces_stay_inside_the_parent_and_clear_of_neighbours_and_merge() {
        // Two calls 4 ns apart: their pieces (outside 20) meet and are one, clipped to the gap
        // less a nanosecond at each end; the parent starts 2 ns before the first, too little
        // for a piece.
        let raw = [
            slice(1, 0, 0.0, 100.0),
            slice(2, 1, 2.0, 40.0),
            slice(2, 1, 46.0, 40.0),
        ];
        let got = compensate(&raw, 0.0, 20.0);
        assert_eq!(
            spans(&got),
            [
                (0, 0, -9.0, -1.0),
                (1, 0, 0.0, 100.0),
                (2, 1, 2.0, 42.0),
                (0, 1, 43.0, 45.0),
                (2, 1, 46.0, 86.0),
                (0, 1, 87.0, 95.0),
                (0, 0, 101.0, 109.0),
            ]
        );
        // A call shorter than `inside` keeps no width, and nothing overlaps.
        let got = compensate(&[slice(3, 0, 0.0, 8.0)], 10.0, 0.0);
        assert_eq!(
            spans(&got),
            [(0, 0, 1.0, 3.0), (3, 0, 4.0, 4.0), (0, 0, 5.0, 7.0)]
        );
    }

    #[test]
    fn calls_whose_parent_is_not_a_slice_keep_their_pieces() {
        // Three calls at depth 1 under a frame still open (not a slice), after a closed call
        // at depth 0: none is the others' parent, and each keeps both pieces.
        let raw = [
            slice(1, 0, 0.0, 50.0),
            slice(2, 1, 100.0, 100.0),
            slice(2, 1, 300.0, 100.0),
            slice(2, 1, 500.0, 100.0),
        ];
        let got = compensate(&raw, 0.0, 20.0);
        let pieces = got
            .iter()
            .filter(|s| s.method == CABPROF && s.depth == 1)
            .count();
        assert_eq!(pieces, 6, "{:?}", spans(&got));
    }
}
