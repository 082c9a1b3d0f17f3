//! Per-thread state: the stack of open frames and their stamps, and the table of what is open.

use cabprof_cab::event::MethodId;

use super::futures::PollState;
use super::results::Ticks;
use super::{method_id, ThreadState};
use crate::frame_tracker::Frames;

/// One open frame: a call, or a future (whose frame spans its polls). An untimed call, most
/// calls under sampled timing, costs a push and a pop of this, the count of its context and
/// its thread's open count of its function.
#[derive(Clone, Copy, Debug)]
pub(super) struct Open {
    pub(super) method: u32,
    /// Its context node (in the tree, or below a detached root). Whether it is an outermost
    /// activation is not stored: frames on a thread nest, so it is when closing it brings
    /// its function's open count back to 0.
    pub(super) node: u32,
    /// The callee this frame called last and that call's context node: a loop calling the
    /// same function finds its context here, without a walk of the tree.
    pub(super) last: Callee,
    /// [`OUTER`], [`WRITTEN`] and [`LAST_OUTER`] bits.
    pub(super) state: u8,
    /// The thread's [`ThreadState::cost`](super::ThreadState::cost) when it opened.
    pub(super) cost: u64,
}

/// [`Open::state`]: the frame is its function's outermost open activation on its thread.
pub(super) const OUTER: u8 = 1;
/// [`Open::state`]: the frame is in its thread's [`Active`] table (if [`OUTER`]: its
/// function's entry holds its depth). The frames written are the stack's outermost ones.
const WRITTEN: u8 = 2;
/// [`Open::state`]: the call [`Open::last`] is an outermost activation.
pub(super) const LAST_OUTER: u8 = 4;

/// A callee and its context node (`method` 0: none yet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Callee {
    pub(super) method: u32,
    pub(super) node: u32,
}

/// The timing of the open frame at `depth` of the same stack (timed frames only).
#[derive(Clone, Copy, Debug)]
pub(super) struct Stamp {
    pub(super) depth: u32,
    /// Start stamp of the call (or of the current poll of a future); [`NO_STAMP`] if none.
    pub(super) start: u64,
    /// The thread's [`ThreadState::cost`](super::ThreadState::cost) at `start`.
    pub(super) cost: u64,
    /// A future's ticks polled before the current poll.
    pub(super) polled: Ticks,
}

/// No stamp: stamps are 60-bit, so this is never one.
pub(super) const NO_STAMP: u64 = u64::MAX;

/// No open activation of a method (see [`Active`]).
const FREE: u32 = u32::MAX;

/// Per method id: the depth on its thread (parked stacks included) of its outermost open
/// activation written here, [`FREE`] if none. A frame is outermost if its method was free
/// when it opened; it frees it when it closes. Frames on a thread nest, so this is the same
/// as counting the open activations, with plain stores instead of read-modify-writes of one
/// counter per call. Kept lazily (see the [`time_profile`](super) docs): right once the stack is
/// [written](Active::write).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Active(Vec<u32>);

impl Active {
    /// An activation of `m` opens at `depth`; returns whether it is the outermost one.
    #[inline]
    pub(super) fn enter(&mut self, m: u32, depth: u32) -> bool {
        let d = self.slot(m);
        if *d == FREE {
            *d = depth;
            true
        } else {
            false
        }
    }

    /// `m`'s entry, made if new.
    #[inline(always)]
    fn slot(&mut self, m: u32) -> &mut u32 {
        let i = m as usize;
        if i < self.0.len() {
            &mut self.0[i]
        } else {
            self.grow(i)
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) -> &mut u32 {
        self.0.resize(i + 1, FREE);
        &mut self.0[i]
    }

    /// Frame `f` closes (or leaves the thread: a future suspended); returns whether it was
    /// its function's outermost activation.
    #[inline(always)]
    pub(super) fn close(&mut self, f: &Open) -> bool {
        if f.state & (OUTER | WRITTEN) == OUTER | WRITTEN {
            if let Some(d) = self.0.get_mut(f.method as usize) {
                *d = FREE;
            }
        }
        f.state & OUTER != 0
    }

    /// Write the frames of `open` (the first at depth `base`) not yet in the table: they are
    /// the innermost ones.
    pub(super) fn write(&mut self, open: &mut [Open], base: u32) {
        let from = open
            .iter()
            .rposition(|f| f.state & WRITTEN != 0)
            .map_or(0, |i| i + 1);
        for (i, f) in open.iter_mut().enumerate().skip(from) {
            if f.state & OUTER != 0 {
                let d = self.slot(f.method);
                debug_assert_eq!(*d, FREE, "a frame taken as outermost has one open below");
                *d = base + i as u32;
            }
            f.state |= WRITTEN;
        }
    }
}

/// A stack of open frames and the stamps of its timed ones (innermost last, depths rising);
/// in a poll, what the poll knows of its future.
#[derive(Clone, Debug, Default)]
pub(super) struct Stack {
    pub(super) open: Vec<Open>,
    pub(super) stamps: Vec<Stamp>,
    pub(super) poll: Option<PollState>,
}

/// The shared tracker's view: frames closed by a resynchronisation close on their thread.
impl Frames for Stack {
    type Thread = ThreadState;
    #[inline(always)]
    fn depth(&self) -> usize {
        self.open.len()
    }
    #[inline(always)]
    fn method(&self, i: usize) -> MethodId {
        method_id(self.open[i].method)
    }
    fn truncate(&mut self, n: usize, thread: &mut ThreadState) {
        Stack::truncate(self, n, &mut thread.active);
    }
}

impl Stack {
    /// Keep the `n` outermost frames (and their stamps); the others close on the thread.
    pub(super) fn truncate(&mut self, n: usize, active: &mut Active) {
        for f in self.open.iter().skip(n) {
            active.close(f);
        }
        self.open.truncate(n);
        while self.stamps.last().is_some_and(|s| s.depth as usize >= n) {
            self.stamps.pop();
        }
    }

    /// If the top frame is `method`'s, its depth.
    #[inline(always)]
    pub(super) fn top_is(&self, method: u32) -> Option<usize> {
        match self.open.last() {
            Some(f) if f.method == method => Some(self.open.len() - 1),
            _ => None,
        }
    }

    /// Whether the frame at `depth` is timed.
    #[inline(always)]
    pub(super) fn has_stamp(&self, depth: usize) -> bool {
        self.stamps
            .last()
            .is_some_and(|s| s.depth as usize == depth)
    }

    /// The stamp of the frame at `depth`, if it is timed (it is then the last stamp).
    #[inline]
    pub(super) fn take_stamp(&mut self, depth: usize) -> Option<Stamp> {
        match self.stamps.last() {
            Some(s) if s.depth as usize == depth => self.stamps.pop(),
            _ => None,
        }
    }
}

/// The state of a frame opened and written to the table, outermost if `outer`.
pub(super) fn opened(outer: bool) -> u8 {
    WRITTEN | if outer { OUTER } else { 0 }
}

/// A frame of `method` at `node`.
pub(super) fn open_at(method: u32, node: u32) -> Open {
    Open {
        method,
        node,
        last: Callee::default(),
        state: 0,
        cost: 0,
    }
}
