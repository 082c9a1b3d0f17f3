//! Futures: their polls, the tasks between polls, and grafting what other streams saw of them.

use hashbrown::HashMap;

use crate::call_tree::trie::ROOT as ROOT_NODE;

use super::calls::elapsed;
use super::results::Ticks;
use super::stack::{open_at, opened, Callee, Open, Stack, Stamp, NO_STAMP, OUTER};
use super::{method_id, TimeProfile};

/// A future this instance saw polled: between polls, finished in a stream that did not see
/// all its polls, or (inside [`PollState`]) being polled.
#[derive(Clone, Copy, Debug)]
pub(super) struct Task {
    /// Its frame: a node of the tree if `placed`, else a detached root collecting what its
    /// polls called until the instance that saw its first poll is merged in.
    pub(super) open: Open,
    /// This instance saw its first poll.
    pub(super) placed: bool,
    /// Its `Call` was an outermost activation (what the call counts as).
    pub(super) outer_call: bool,
    /// Polls of it this instance saw.
    pub(super) polls: u32,
    /// How many polls it had in all, once its last poll was seen.
    pub(super) total: Option<u32>,
    /// Ticks polled (if it was timed).
    pub(super) polled: Option<Ticks>,
    /// Its first poll's start and its latest poll's end seen (clock readings, if timed): its
    /// wall time, polled and suspended, once every poll is accounted for.
    pub(super) span: Option<(u64, u64)>,
}

impl Task {
    /// Every poll is accounted for here: its time can be recorded.
    pub(super) fn finished(&self) -> bool {
        self.placed && self.total.is_some_and(|t| self.polls >= t)
    }
}

/// A poll in progress, kept with the poll's stack (the shared tracker parks the stack it
/// interrupted): the future, and, once its frame returned in this poll, the frame and its
/// (ticks, outermost ticks) if timed.
#[derive(Clone, Debug)]
pub(super) struct PollState {
    task: Task,
    returned: Option<(Open, Option<Ticks>)>,
    /// The start and end stamps of the poll in which it returned, if timed.
    returned_span: Option<(u64, u64)>,
}

pub(super) type TaskKey = (u32, u32);

impl TimeProfile {
    /// The poll just begun came `ticks` after its future was woken: the innermost poll's
    /// function's scheduling delay.
    pub(super) fn on_wake_delay(&mut self, ticks: u64) {
        let Some(method) = self.frames.threads.current.polls.last().map(|p| p.0 .0) else {
            return;
        };
        let f = self.function(method.get());
        f.woken_polls += 1;
        f.wake_delay = f.wake_delay.saturating_add(ticks);
    }

    /// A future of `method` (`first`: its first poll) is polled: park the thread's stack and
    /// continue from the future's frame.
    pub(super) fn on_poll(&mut self, method: u32, task: u32, first: bool) {
        let key = (method, task);
        let st = &mut self.frames.threads.current;
        // The poll's own cost (its words, the wrapper) is its poller's: counted before the
        // future's frame resumes, so the frames open below it lose it.
        st.thread.cost = st.thread.cost.wrapping_add(self.comp_poll);
        self.polls += 1;
        // The stack is parked: all of it in the table, and calls from an empty stack no longer
        // have the same things open below them.
        st.thread.active.write(&mut st.stack.open, st.thread.base);
        st.thread.root_last = Callee::default();
        let mut t = if first {
            let t = match st.stack.open.last() {
                Some(&f) if f.method == method => {
                    // Its `Call` opened the frame, counted open on this thread: its depth
                    // there is the depth of the poll's first frame.
                    st.stack.open.pop();
                    let depth = st.stack.open.len();
                    // A stamp between its `Call` and first `Poll` is not ours to make.
                    st.stack.take_stamp(depth);
                    new_task(f, true, f.state & OUTER != 0)
                }
                _ => {
                    // Its `Call` was lost (sampling): place it below the root.
                    self.frames.approximate = true;
                    let node = self.node_for(ROOT_NODE, method);
                    let st = &mut self.frames.threads.current;
                    let outer = st
                        .thread
                        .active
                        .enter(method, st.thread.base + st.stack.open.len() as u32);
                    let mut t = new_task(open_at(method, node), true, outer);
                    t.open.state = opened(outer);
                    t
                }
            };
            self.place(key, t)
        } else {
            let outer = st
                .thread
                .active
                .enter(method, st.thread.base + st.stack.open.len() as u32);
            let mut t = match self.tasks.remove(&key) {
                Some(t) => t,
                None => {
                    // First polled in a stream this instance did not see: a detached root
                    // collects this poll's calls until `merge` finds where it belongs.
                    let node = self.tree.detached(method_id(method));
                    self.grow_nodes();
                    new_task(open_at(method, node), false, false)
                }
            };
            // What is open below the frame is not what was at its last poll: its last call
            // is forgotten.
            t.open.last = Callee::default();
            t.open.state = opened(outer);
            t
        };
        t.polls = t.polls.saturating_add(1);
        let mut stack = Stack {
            open: vec![t.open],
            stamps: Vec::new(),
            poll: Some(PollState {
                task: t,
                returned: None,
                returned_span: None,
            }),
        };
        if let Some(polled) = t.polled {
            stack.stamps.push(Stamp {
                depth: 0,
                start: NO_STAMP,
                cost: 0,
                polled,
            });
        }
        let st = &mut self.frames.threads.current;
        st.thread.base += st.stack.open.len() as u32;
        self.frames.park((method_id(method), task), stack);
        let st = &mut self.frames.threads.current;
        st.thread.just_opened = true;
        st.thread.pending_end = NO_STAMP;
    }

    /// The first poll of `key` found its frame: what polls of it seen earlier (on other
    /// threads of this stream) collected below a detached root moves there.
    fn place(&mut self, key: TaskKey, mut t: Task) -> Task {
        if let Some(old) = self.tasks.remove(&key) {
            if old.placed {
                // A task id reused (ids wrap): the old future's polls end here.
                self.give_up(old);
            } else {
                let mut moved = HashMap::new();
                self.graft(old.open.node, t.open.node, &mut moved);
                self.forward(&moved);
                t = combine(t, old);
            }
        }
        t
    }

    pub(super) fn on_poll_end(&mut self, task: u32, poll: u32, done: bool) {
        let st = &mut self.frames.threads.current;
        st.thread.just_opened = false;
        let end = std::mem::replace(&mut st.thread.pending_end, NO_STAMP);
        // The tracker marks a `PollEnd` of another future approximate.
        let Some(((method, id), mut stack)) = self.frames.unpark(task) else {
            self.unmatched += 1;
            return;
        };
        let key = (method.get(), id);
        let Some(p) = stack.poll.take() else {
            return; // every poll's stack has its state
        };
        let st = &mut self.frames.threads.current;
        let base = st.thread.base;
        st.thread.base = base.saturating_sub(st.stack.open.len() as u32);
        st.thread.root_last = Callee::default();
        // Frames left open above the future's own, or after it returned (lost `Return`s).
        let keep = usize::from(p.returned.is_none());
        if stack.open.len() > keep {
            stack.truncate(keep, &mut st.thread.active);
            self.frames.approximate = true;
        }
        let mut t = p.task;
        // This poll's start and end stamps, when it was timed and both came.
        let mut p_span = p.returned_span;
        let (f, ticks, done) = match p.returned {
            // Completed in this poll: its `Return` closed the frame.
            Some((f, ticks)) => {
                self.frames.approximate |= !done;
                (f, ticks, true)
            }
            None => {
                let Some(f) = stack.open.pop() else {
                    return; // its frame was closed by a resynchronisation
                };
                let outer = st.thread.active.close(&f);
                if f.method != key.0 {
                    self.frames.approximate = true;
                    return;
                }
                let ticks = stack.take_stamp(0).map(|s| {
                    if s.start != NO_STAMP && end != NO_STAMP {
                        p_span = Some((s.start, end));
                        let d = elapsed(s.start, end);
                        let end_cost = self.frames.threads.current.thread.end_cost;
                        s.polled.plus(Ticks::one(
                            d,
                            self.compensated_between(d, s.cost, end_cost),
                            outer,
                        ))
                    } else {
                        s.polled
                    }
                });
                // Dropped or completed without a `Return` seen: what was polled still counts.
                self.frames.approximate |= done;
                (f, ticks, done)
            }
        };
        t.open = f;
        t.polled = ticks;
        t.span = widen(t.span, p_span);
        if done {
            t.total = Some(poll.saturating_add(1));
        }
        if t.finished() {
            self.finish(t);
        } else {
            self.tasks.insert(key, t);
        }
    }

    /// Whether `f`, just closed, was the frame of the future being polled.
    #[inline]
    pub(super) fn is_future_frame(&self, f: &Open) -> bool {
        let st = &self.frames.threads.current;
        st.stack.open.is_empty() && st.polls.last().is_some_and(|p| p.0 .0.get() == f.method)
    }

    /// The future being polled returned: it is recorded when its poll ends, if every poll of
    /// it is accounted for by then.
    #[cold]
    pub(super) fn future_returned(
        &mut self,
        f: Open,
        ticks: Option<Ticks>,
        span: Option<(u64, u64)>,
    ) {
        if let Some(p) = self.frames.threads.current.stack.poll.as_mut() {
            p.returned = Some((f, ticks));
            p.returned_span = span;
        }
    }

    /// A future whose every poll is accounted for: its time, if it was timed, and its wall
    /// time from its first poll's start to its last poll's end.
    pub(super) fn finish(&mut self, t: Task) {
        if let Some(p) = t.polled {
            self.record(t.open.method, t.open.node, t.outer_call, p);
        }
        if let Some((first, last)) = t.span {
            let f = self.function(t.open.method);
            f.wall = f.wall.saturating_add(elapsed(first, last));
            f.futures += 1;
        }
    }

    /// A future whose other polls will never be seen: its time polled stays its function's.
    pub(super) fn give_up(&mut self, t: Task) {
        if let Some(p) = t.polled {
            let f = self.function(t.open.method);
            f.open_polled = f.open_polled.saturating_add(p.all);
            f.comp_open_polled += p.comp;
        }
    }

    /// Move what is below `from` (and `from`'s own time) to the same paths below `onto`;
    /// records in `moved` where each node went.
    pub(super) fn graft(&mut self, from: u32, onto: u32, moved: &mut HashMap<u32, u32>) {
        if from == onto {
            return;
        }
        let mut here = HashMap::new();
        if !self.tree.graft(from, onto, &mut here) {
            self.frames.approximate = true;
            return;
        }
        self.grow_nodes();
        here.insert(from, onto);
        for (&c, &n) in &here {
            let t = std::mem::take(&mut self.node_time[c as usize]);
            self.node_time[n as usize].add(t);
            if let Some(l) = self.long_nodes.remove(&c) {
                self.long_nodes.entry(n).or_default().add(&l);
            }
        }
        moved.extend(here);
    }

    /// Nodes in `moved` were grafted elsewhere: point every reference at their new place.
    pub(super) fn forward(&mut self, moved: &HashMap<u32, u32>) {
        if moved.is_empty() {
            return;
        }
        let fwd = |n: &mut u32| {
            if let Some(&m) = moved.get(n) {
                *n = m;
            }
        };
        let fwd_open = |f: &mut Open| {
            fwd(&mut f.node);
            fwd(&mut f.last.node);
        };
        for t in self.tasks.values_mut() {
            fwd_open(&mut t.open);
        }
        for open in self.frames.threads.all_mut() {
            fwd(&mut open.thread.root_last.node);
            let parked = open.polls.iter_mut().map(|p| &mut p.1);
            for stack in std::iter::once(&mut open.stack).chain(parked) {
                stack.open.iter_mut().for_each(fwd_open);
                if let Some(p) = &mut stack.poll {
                    fwd_open(&mut p.task.open);
                    if let Some((f, _)) = &mut p.returned {
                        fwd_open(f);
                    }
                }
            }
        }
    }
}

/// A future whose frame is `open`, no poll counted yet.
fn new_task(open: Open, placed: bool, outer_call: bool) -> Task {
    Task {
        open,
        placed,
        outer_call,
        polls: 0,
        total: None,
        polled: None,
        span: None,
    }
}

/// The span from the earlier of two first starts to the later of two last ends (clock
/// readings modulo 2^60, compared by their difference).
pub(super) fn widen(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<(u64, u64)> {
    match (a, b) {
        (Some((s1, e1)), Some((s2, e2))) => Some((
            if elapsed(s2, s1) > 0 { s2 } else { s1 },
            if elapsed(e1, e2) > 0 { e2 } else { e1 },
        )),
        (x, None) | (None, x) => x,
    }
}

/// One future's state as two streams saw it; `a`'s frame is kept if `a` is placed or `b` is not.
pub(super) fn combine(a: Task, b: Task) -> Task {
    let first = if a.placed || !b.placed { a } else { b };
    Task {
        open: first.open,
        outer_call: first.outer_call,
        placed: a.placed || b.placed,
        polls: a.polls.saturating_add(b.polls),
        total: a.total.or(b.total),
        polled: match (a.polled, b.polled) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or_default().plus(y.unwrap_or_default())),
        },
        span: widen(a.span, b.span),
    }
}
