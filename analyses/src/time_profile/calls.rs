//! Calls and returns: opening and closing frames, timing them, resynchronising after gaps.

use cabprof_cab::event::{decode, EventKind, MAX_PAYLOAD};

use crate::call_tree::trie::ROOT as ROOT_NODE;
use crate::frame_tracker::CallFrom;

use super::results::{new_histogram, Long, Ticks, COST_ONE};
use super::stack::{opened, Callee, Open, Stamp, LAST_OUTER, NO_STAMP, OUTER};
use super::{method_id, TimeProfile};

impl TimeProfile {
    /// The context node for a call of `method` under `parent`, made if new, counted.
    #[inline]
    fn child(&mut self, parent: u32, method: u32) -> u32 {
        let node = self.node_for(parent, method);
        self.tree.nodes[node as usize].count += 1;
        node
    }

    /// The context node of `method` under `parent`, made if new, not counted.
    #[inline]
    pub(super) fn node_for(&mut self, parent: u32, method: u32) -> u32 {
        let node = self.tree.child(parent, method_id(method));
        if node as usize >= self.node_time.len() {
            self.grow_nodes();
        }
        node
    }

    /// A call that is not the outermost activation of its function.
    #[cold]
    fn count_nested(&mut self, method: u32) {
        let i = method as usize;
        if i >= self.nested.len() {
            self.nested.resize(i + 1, 0);
        }
        self.nested[i] += 1;
    }

    /// What the frame of `caller` (on top of the current thread, or the root) remembers of
    /// its last call: the callee and its context node, and whether that call was outermost
    /// ([`LAST_OUTER`]). Nothing (method 0) if `caller` is not on top.
    #[inline(always)]
    fn last_call(&self, caller: u32) -> (Callee, u8) {
        let st = &self.frames.threads.current;
        match st.stack.open.last() {
            Some(f) if f.method == caller => (f.last, f.state & LAST_OUTER),
            None if caller == 0 => (st.thread.root_last, st.thread.root_last_outer),
            _ => (Callee::default(), 0),
        }
    }

    #[inline(always)]
    pub(super) fn on_call(&mut self, caller: u32, callee: u32) {
        let (last, last_outer) = self.last_call(caller);
        // A repeat of the caller's last call: the same context, and the same answer to
        // "outermost" (what is open below the caller has not changed), not yet in the table.
        let (node, state) = if last.method == callee && callee != 0 && !self.uncached() {
            self.tree.nodes[last.node as usize].count += 1;
            (last.node, if last_outer != 0 { OUTER } else { 0 })
        } else {
            self.call_uncached(caller, callee)
        };
        let st = &mut self.frames.threads.current;
        // The call's own cost is its callers', not its own: counted before it opens.
        st.thread.cost = st.thread.cost.wrapping_add(self.comp_untimed);
        st.stack.open.push(Open {
            method: callee,
            node,
            last: Callee::default(),
            state,
            cost: st.thread.cost,
        });
        st.thread.just_opened = true;
        st.thread.pending_end = NO_STAMP;
        if state & OUTER == 0 {
            self.count_nested(callee);
        }
    }

    /// A `Call` of `callee` directly followed by its untimed `Return`, when the caller's frame
    /// has the callee's context at hand (see [`on_call`](Self::on_call)): the same state as
    /// `on_call` then `on_return`, without the frame pushed and popped. `false`, having done
    /// nothing, where it cannot tell that cheaply: the caller then takes the two words one by
    /// one.
    #[inline(always)]
    pub(super) fn on_leaf(&mut self, caller: u32, callee: u32) -> bool {
        if callee == 0 || self.uncached() {
            return false;
        }
        let (last, last_outer) = self.last_call(caller);
        let st = &mut self.frames.threads.current;
        let depth = st.stack.open.len();
        // `on_return` would close the frame out of line: a poll's first frame, or a stamp.
        if last.method != callee
            || (depth == 0 && !st.polls.is_empty())
            || st.stack.has_stamp(depth)
        {
            return false;
        }
        st.thread.just_opened = false;
        st.thread.pending_end = NO_STAMP;
        st.thread.cost = st.thread.cost.wrapping_add(self.comp_untimed);
        self.tree.nodes[last.node as usize].count += 1;
        if last_outer == 0 {
            self.count_nested(callee);
        }
        true
    }

    /// Whether every call goes through [`call_uncached`](Self::call_uncached) (tests compare
    /// it with the cached path).
    #[inline(always)]
    fn uncached(&self) -> bool {
        #[cfg(test)]
        if self.test_uncached {
            return true;
        }
        false
    }

    /// A call whose context the caller's frame did not have at hand: find (or make) it,
    /// decide from the table whether it is outermost, and remember both in the caller's
    /// frame. Returns the node and the new frame's state (written to the table).
    #[inline(never)]
    fn call_uncached(&mut self, caller: u32, callee: u32) -> (u32, u8) {
        let parent = match self.frames.threads.current.stack.open.last() {
            Some(f) if f.method == caller => f.node,
            None if caller == 0 => ROOT_NODE,
            _ => self.resync_call(caller),
        };
        let node = self.child(parent, callee);
        let st = &mut self.frames.threads.current;
        st.thread.active.write(&mut st.stack.open, st.thread.base);
        let depth = st.thread.base + st.stack.open.len() as u32;
        let outer = st.thread.active.enter(callee, depth);
        let remembered = Callee {
            method: callee,
            node,
        };
        let last_outer = if outer { LAST_OUTER } else { 0 };
        match st.stack.open.last_mut() {
            Some(f) => {
                f.last = remembered;
                f.state = (f.state & !LAST_OUTER) | last_outer;
            }
            None => {
                st.thread.root_last = remembered;
                st.thread.root_last_outer = last_outer;
            }
        }
        (node, opened(outer))
    }

    /// A `Call` whose caller is not on top: the shared tracker continues from the caller's
    /// innermost open frame, closing what is above it, or from the root (this analysis opens
    /// no frame for a caller with none open: the call is charged from the root). Returns the
    /// parent node.
    #[cold]
    fn resync_call(&mut self, caller: u32) -> u32 {
        match self.frames.resync_call(method_id(caller)) {
            CallFrom::Caller => self
                .frames
                .stack()
                .open
                .last()
                .map_or(ROOT_NODE, |f| f.node),
            CallFrom::Root | CallFrom::Missing => ROOT_NODE,
        }
    }

    #[inline]
    pub(super) fn on_time(&mut self, ticks: u64) {
        let st = &mut self.frames.threads.current;
        if std::mem::take(&mut st.thread.just_opened) {
            let Some(top) = st.stack.open.len().checked_sub(1) else {
                return;
            };
            let cost = st.thread.cost;
            match st.stack.stamps.last_mut() {
                // A future resumed: its stamp carries what it polled before.
                Some(s) if s.depth as usize == top => {
                    s.start = ticks;
                    s.cost = cost;
                }
                _ => st.stack.stamps.push(Stamp {
                    depth: top as u32,
                    start: ticks,
                    cost,
                    polled: Ticks::default(),
                }),
            }
        } else {
            st.thread.pending_end = ticks;
            st.thread.end_cost = st.thread.cost;
        }
    }

    /// A `Return`. Inline: the callee's frame on top, popped; what it closes is looked at out
    /// of line only if it has a stamp or is the first frame of a poll's stack (maybe the
    /// future's).
    #[inline(always)]
    pub(super) fn on_return(&mut self, callee: u32) {
        let st = &mut self.frames.threads.current;
        st.thread.just_opened = false;
        let end = std::mem::replace(&mut st.thread.pending_end, NO_STAMP);
        let Some(depth) = st.stack.top_is(callee) else {
            return self.return_below(callee, end);
        };
        let outer = st.thread.active.close(&st.stack.open[depth]);
        if (depth == 0 && !st.polls.is_empty()) || st.stack.has_stamp(depth) {
            self.close_frame(outer, end);
        } else {
            st.stack.open.truncate(depth);
        }
    }

    /// The top frame, an outermost activation if `outer`, closes for a `Return` with closing
    /// stamp `end` ([`NO_STAMP`] if none): its time, if it was timed, goes to its function and
    /// context, or to its future if it was the frame of the future being polled.
    #[inline(never)]
    fn close_frame(&mut self, outer: bool, end: u64) {
        let st = &mut self.frames.threads.current;
        let f = st.stack.open.pop().expect("a frame to close");
        let depth = st.stack.open.len();
        let stamp = st.stack.take_stamp(depth);
        let span = stamp
            .filter(|s| s.start != NO_STAMP && end != NO_STAMP)
            .map(|s| (s.start, end));
        let ticks = stamp.and_then(|s| self.closed_ticks(outer, s, end));
        let timed = ticks.is_some();
        if self.is_future_frame(&f) {
            self.future_returned(f, ticks, span);
        } else if let Some(t) = ticks {
            self.record(f.method, f.node, outer, t);
        }
        // A timed future's frame too: its stamps cost its poller as a timed call's do.
        if timed {
            self.timed_call_closed();
        }
    }

    /// A `Return` whose callee is not on top.
    #[cold]
    #[inline(never)]
    fn return_below(&mut self, callee: u32, end: u64) {
        if self.unwind_to(callee) {
            let st = &mut self.frames.threads.current;
            let outer = st
                .thread
                .active
                .close(st.stack.open.last().expect("unwound to it"));
            self.close_frame(outer, end);
        }
    }

    /// The `TimedReturn` of a call that took `ticks` (a start stamp for it, which this
    /// protocol does not send, is superseded by the duration). Inline as [`on_return`]
    /// (Self::on_return).
    #[inline(always)]
    pub(super) fn on_timed_return(&mut self, callee: u32, ticks: u64) {
        let st = &mut self.frames.threads.current;
        st.thread.just_opened = false;
        st.thread.pending_end = NO_STAMP;
        let Some(depth) = st.stack.top_is(callee) else {
            return self.timed_return_below(callee, ticks);
        };
        let outer = st.thread.active.close(&st.stack.open[depth]);
        if (depth == 0 && !st.polls.is_empty()) || st.stack.has_stamp(depth) {
            self.close_timed_frame(outer, ticks);
        } else {
            // Fields, not the whole frame: a 16-byte load of a frame just written in parts
            // would wait for the stores instead of forwarding them.
            let node = st.stack.open[depth].node;
            let opened_at = st.stack.open[depth].cost;
            st.stack.open.truncate(depth);
            let t = Ticks::one(ticks, self.compensated(ticks, opened_at), outer);
            self.record(callee, node, outer, t);
            self.timed_call_closed();
        }
    }

    /// [`close_frame`](Self::close_frame) for a `TimedReturn` of `ticks`.
    #[inline(never)]
    fn close_timed_frame(&mut self, outer: bool, ticks: u64) {
        let st = &mut self.frames.threads.current;
        let f = st.stack.open.pop().expect("a frame to close");
        let depth = st.stack.open.len();
        st.stack.take_stamp(depth);
        let t = Ticks::one(ticks, self.compensated(ticks, f.cost), outer);
        if self.is_future_frame(&f) {
            self.future_returned(f, Some(t), None);
        } else {
            self.record(f.method, f.node, outer, t);
        }
        self.timed_call_closed();
    }

    /// A `TimedReturn` whose callee is not on top.
    #[cold]
    #[inline(never)]
    fn timed_return_below(&mut self, callee: u32, ticks: u64) {
        if self.unwind_to(callee) {
            let st = &mut self.frames.threads.current;
            let outer = st
                .thread
                .active
                .close(st.stack.open.last().expect("unwound to it"));
            self.close_timed_frame(outer, ticks);
        }
    }

    /// A `LongReturn` of a call of `ticks` (`timed`: in the timed sample): the frame closes as
    /// for a `TimedReturn`, its time going to the long calls instead. Out of line: long calls
    /// are at most about one per coarse tick and frame.
    #[inline(never)]
    pub(super) fn on_long_return(&mut self, callee: u32, ticks: u64, timed: bool) {
        let st = &mut self.frames.threads.current;
        st.thread.just_opened = false;
        st.thread.pending_end = NO_STAMP;
        if st.stack.top_is(callee).is_none() && !self.unwind_to(callee) {
            return;
        }
        let st = &mut self.frames.threads.current;
        let outer = st
            .thread
            .active
            .close(st.stack.open.last().expect("the callee's frame is on top"));
        let f = st.stack.open.pop().expect("a frame to close");
        let depth = st.stack.open.len();
        st.stack.take_stamp(depth);
        // An untimed call's probe has no part inside its interval.
        let inside = if timed { 0.0 } else { self.comp_inside };
        let t = Ticks::one(ticks, self.compensated(ticks, f.cost) + inside, outer);
        if self.is_future_frame(&f) {
            // Not sent for a future's frame (its exit is its last poll's); taken as timed.
            self.future_returned(f, Some(t), None);
        } else {
            self.record_long(f.method, f.node, outer, t, timed);
        }
        if timed {
            self.timed_call_closed();
        }
    }

    /// One long call of `method` at context `node` (`outer_call`: an outermost activation),
    /// of `t` ticks, timed or not.
    #[cold]
    fn record_long(&mut self, method: u32, node: u32, outer_call: bool, t: Ticks, timed: bool) {
        let ft = self.function(method);
        ft.long.add(&Long::one(t.all, t.comp, timed));
        if outer_call {
            ft.outer_long.add(&Long::one(t.outer, t.comp_outer, timed));
        }
        let one = t.comp.max(0.0).round() as u64;
        let h = ft.long_histogram.get_or_insert_with(new_histogram);
        if h.record(one).is_err() {
            h.saturating_record(one);
        }
        self.long_nodes
            .entry(node)
            .or_default()
            .add(&Long::one(t.all, t.comp, timed));
    }

    /// A `Return` below the top: the shared tracker closes the frames above it untimed,
    /// leaving its frame on top; `false` (and counted) if no open frame matches.
    #[cold]
    fn unwind_to(&mut self, callee: u32) -> bool {
        self.frames.unwind_to(method_id(callee))
    }

    /// A timed frame's (ticks, outermost ticks), closing with stamp `end` ([`NO_STAMP`] if
    /// none); `None` if its stamps were lost.
    fn closed_ticks(&mut self, outer: bool, s: Stamp, end: u64) -> Option<Ticks> {
        match (s.start != NO_STAMP, end != NO_STAMP) {
            (true, true) => {
                let t = elapsed(s.start, end);
                let comp = self.compensated_between(
                    t,
                    s.cost,
                    self.frames.threads.current.thread.end_cost,
                );
                Some(s.polled.plus(Ticks::one(t, comp, outer)))
            }
            // A future dropped between polls: its last poll is an empty one, unstamped.
            (false, false) if s.polled.all > 0 => Some(s.polled),
            _ => {
                self.frames.approximate = true;
                None
            }
        }
    }

    /// One timed call of `method` at context `node` (`outer_call`: an outermost activation
    /// when called), of `t` ticks.
    #[inline(never)]
    pub(super) fn record(&mut self, method: u32, node: u32, outer_call: bool, t: Ticks) {
        let ft = self.function(method);
        ft.timed += 1;
        ft.ticks_all = ft.ticks_all.saturating_add(t.all);
        ft.comp_all += t.comp;
        // Auto-resizing: `record` grows the range (`saturating_record` would clamp to it).
        let one = t.comp.max(0.0).round() as u64;
        if ft.histogram.record(one).is_err() {
            ft.histogram.saturating_record(one);
        }
        if outer_call {
            ft.outer_timed += 1;
        }
        ft.ticks_outer = ft.ticks_outer.saturating_add(t.outer);
        ft.comp_outer += t.comp_outer;
        let n = &mut self.node_time[node as usize];
        n.timed += 1;
        n.ticks = n.ticks.saturating_add(t.all);
        n.comp += t.comp;
    }

    /// `ticks` of a frame opened when its thread's cost counter read `opened_at`, less what
    /// the instrumentation cost inside it: its own probe's inside part, and what the calls
    /// and stalls since cost.
    #[inline(always)]
    fn compensated(&self, ticks: u64, opened_at: u64) -> f64 {
        self.compensated_between(ticks, opened_at, self.frames.threads.current.thread.cost)
    }

    /// [`compensated`](Self::compensated) for a frame whose closing stamp came when the cost
    /// counter read `closed_at`.
    #[inline(always)]
    pub(super) fn compensated_between(&self, ticks: u64, opened_at: u64, closed_at: u64) -> f64 {
        let since = closed_at.wrapping_sub(opened_at) as i64 as f64 / COST_ONE;
        ticks as f64 - self.comp_inside - since
    }

    /// A timed call closed: the frames around it lose a timed call's cost, not an untimed
    /// one's (counted when it opened).
    #[inline(always)]
    fn timed_call_closed(&mut self) {
        let st = &mut self.frames.threads.current;
        st.thread.cost = st.thread.cost.wrapping_add(self.comp_timed_extra);
    }

    /// `ticks` spent inside cabprof: out of every frame open on the thread.
    #[cold]
    fn on_stall(&mut self, ticks: u64) {
        self.stalled = self.stalled.saturating_add(ticks);
        self.stalls += 1;
        let st = &mut self.frames.threads.current.thread;
        st.cost = st
            .cost
            .wrapping_add((ticks as f64 * COST_ONE).min(u64::MAX as f64 / 4.0) as u64);
    }

    /// A word other than the four of the per-call path.
    #[inline(never)]
    pub(super) fn on_other(&mut self, w: u64) {
        if let Some(c) = cabprof_cab::event::as_calibration(w) {
            self.calibrations.words += 1;
            return self.on_calibration(c);
        }
        if cabprof_cab::event::is_probe(w) {
            self.calibrations.words += 1;
            return;
        }
        if let Some(ticks) = cabprof_cab::event::as_wake_delay(w) {
            return self.on_wake_delay(ticks);
        }
        match decode(w) {
            Some(EventKind::Call { caller, callee }) => self.on_call(caller.get(), callee.get()),
            Some(EventKind::Return { callee }) => self.on_return(callee.get()),
            Some(EventKind::LongReturn {
                callee,
                ticks,
                timed,
            }) => self.on_long_return(callee.get(), ticks, timed),
            Some(EventKind::Time { ticks }) => self.on_time(ticks),
            Some(EventKind::Stall { ticks }) => self.on_stall(ticks),
            Some(EventKind::Thread { id }) => self.frames.on_thread(id),
            Some(EventKind::Poll {
                method,
                task,
                first,
            }) => self.on_poll(method.get(), task, first),
            Some(EventKind::PollEnd { task, poll, done }) => self.on_poll_end(task, poll, done),
            _ => {}
        }
    }
}

/// Ticks from `start` to `end`, counters taken modulo 2^60.
///
/// An end stamp below its start (two unserialised reads reordered, or a thread moved between
/// cores whose counters disagree) would wrap to about 2^60: it counts as 0 instead, so one bad
/// pair cannot swamp a function's total.
pub(super) fn elapsed(start: u64, end: u64) -> u64 {
    let d = end.wrapping_sub(start) & MAX_PAYLOAD;
    if d > MAX_PAYLOAD / 2 {
        0
    } else {
        d
    }
}
