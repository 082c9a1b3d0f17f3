//! The calling-context tracker the context-tree analyses share (the calling context tree,
//! allocations, waits): the tree of contexts over the shared frame tracker (each thread's open
//! path and parked polls, resynchronisation after lost words), where each future's context is,
//! and merging two streams' trackers.
//! An analysis keeps its own data per node beside it ([`NodeData`]); the tracker tells it when
//! nodes move.

use cabprof_cab::event::{EventKind, MethodId};
use hashbrown::HashMap;

use super::tasks::{self, PathFrame, TaskBase, TaskKey};
use super::trie::{Trie, ROOT};
use crate::frame_tracker::{CallFrom, FrameTracker};

/// What an analysis keeps per node of the tracker's tree, beside the trie's own call count.
pub(crate) trait NodeData {
    /// The nodes of `moved` (keys) were grafted onto others (values): their data goes there.
    fn moved(&mut self, moved: &HashMap<u32, u32>);
}

/// No data beyond the trie's counts.
impl NodeData for () {
    fn moved(&mut self, _: &HashMap<u32, u32>) {}
}

/// The calling contexts of a stream, rebuilt from its `Call`, `Return`, `Thread`, `Poll` and
/// `PollEnd` words.
///
/// The frames, the polls and resynchronisation after lost words are the shared
/// [`FrameTracker`]'s: a `Call` whose caller has no open frame continues from a node root →
/// caller, made without counting a call of the caller (its `Call` was not seen).
///
/// Futures: a future's frame lives between polls in [`tasks`](Self::tasks); a poll parks the
/// thread's open path and continues from the future's node. A poll whose first poll this
/// tracker did not see collects below a detached node, grafted where the future belongs when
/// the tracker that saw its first poll is merged in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ContextTracker {
    /// One node per context; the trie's root is the root context.
    pub(crate) tree: Trie,
    /// Per thread: the open path and the polls in progress; what resynchronising cost.
    pub(crate) frames: FrameTracker<Vec<PathFrame>>,
    /// The futures seen polled and not known to be finished everywhere: where their context is.
    pub(crate) tasks: HashMap<TaskKey, TaskBase>,
}

impl ContextTracker {
    /// The node of the current thread's innermost open frame (the root if none).
    #[inline]
    pub(crate) fn top(&self) -> u32 {
        self.frames.stack().last().map_or(ROOT, |f| f.node)
    }

    /// A `Call`: the callee's context is entered, and counted.
    #[inline]
    pub(crate) fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        let at = if self.frames.calls_from_top(caller) {
            self.top()
        } else {
            self.resync_call(caller)
        };
        let c = self.tree.child(at, callee);
        self.tree.nodes[c as usize].count += 1;
        self.frames.stack_mut().push(PathFrame {
            node: c,
            method: callee,
        });
    }

    /// A `Call` directly followed by its `Return`: the callee's context is counted, and nothing
    /// is pushed or popped where the caller is on top.
    #[inline]
    pub(crate) fn on_leaf(&mut self, caller: MethodId, callee: MethodId) {
        if !self.frames.calls_from_top(caller) {
            self.on_call(caller, callee);
            self.on_return(callee);
            return;
        }
        let c = self.tree.child(self.top(), callee);
        self.tree.nodes[c as usize].count += 1;
    }

    /// Returns the node to continue from; see the type docs.
    #[cold]
    fn resync_call(&mut self, caller: MethodId) -> u32 {
        match self.frames.resync_call(caller) {
            CallFrom::Caller => self.top(),
            CallFrom::Root => ROOT,
            CallFrom::Missing => {
                let c = self.tree.child(ROOT, caller);
                self.frames.stack_mut().push(PathFrame {
                    node: c,
                    method: caller,
                });
                c
            }
        }
    }

    /// A `Return` (or a timed or long one).
    #[inline]
    pub(crate) fn on_return(&mut self, callee: MethodId) {
        if self.frames.returns_top(callee) {
            self.frames.stack_mut().pop();
        } else {
            self.frames.resync_return(callee);
        }
    }

    /// A `Thread` word: the events that follow are thread `id`'s.
    pub(crate) fn on_thread(&mut self, id: u64) {
        self.frames.on_thread(id);
    }

    /// One of the words that shape the contexts (a call, any return, a thread switch, a
    /// poll's start or end): followed, `data` kept with the nodes. `false` for any other word,
    /// which the analysis reads itself.
    pub(crate) fn on_structure(&mut self, kind: EventKind, data: &mut impl NodeData) -> bool {
        match kind {
            EventKind::Call { caller, callee } => self.on_call(caller, callee),
            EventKind::Return { callee }
            | EventKind::TimedReturn { callee, .. }
            | EventKind::LongReturn { callee, .. } => self.on_return(callee),
            EventKind::Thread { id } => self.on_thread(id),
            EventKind::Poll {
                method,
                task,
                first,
            } => self.on_poll(method, task, first, data),
            EventKind::PollEnd { task, poll, done } => self.on_poll_end(task, poll, done),
            _ => return false,
        }
        true
    }

    /// A poll of future `task` of `method` begins: park the thread's stack and continue from
    /// the future's own frame.
    pub(crate) fn on_poll(
        &mut self,
        method: MethodId,
        task: u32,
        first: bool,
        data: &mut impl NodeData,
    ) {
        let key = (method, task);
        let base = if first {
            // Its `Call` just opened its frame on the polling context's stack; between polls
            // the frame is off that stack.
            let open = self.frames.stack_mut();
            let node = match open.last() {
                Some(&f) if f.method == method => {
                    open.pop();
                    f.node
                }
                _ => {
                    // The `Call` was lost (sampling): place it under the root.
                    self.frames.approximate = true;
                    self.tree.child(ROOT, method)
                }
            };
            self.place(key, node, data)
        } else {
            let tree = &mut self.tree;
            let t = self.tasks.entry(key).or_insert_with(|| TaskBase {
                // First polled in a stream this tracker did not see: a detached root collects
                // this poll's contexts until `merge` finds where it belongs.
                node: tree.detached(method),
                placed: false,
                polls: 0,
                total: None,
            });
            t.polls = t.polls.saturating_add(1);
            t.node
        };
        self.frames
            .park(key, vec![PathFrame { node: base, method }]);
    }

    /// `key`'s frame is `node` (in the tree): record it, and move there whatever its polls
    /// seen before (on other threads of this stream) collected.
    fn place(&mut self, key: TaskKey, node: u32, data: &mut impl NodeData) -> u32 {
        if let Some(t) = self.tasks.get(&key).copied() {
            if !t.placed && t.node != node {
                let mut moved = HashMap::new();
                if self.graft(t.node, node, &mut moved, data) {
                    tasks::forward(&self.tree, &mut self.tasks, &mut self.frames, &moved);
                }
            }
        }
        let t = self.tasks.entry(key).or_insert(TaskBase {
            node,
            placed: true,
            polls: 0,
            total: None,
        });
        t.node = node;
        t.placed = true;
        t.polls = t.polls.saturating_add(1);
        node
    }

    /// Graft the subtree of `from` onto `onto` (see [`Trie::graft`]), the nodes' data with it;
    /// records in `moved` where each node went, `from` included. `false` (and approximate) if
    /// `onto` is below `from`.
    fn graft(
        &mut self,
        from: u32,
        onto: u32,
        moved: &mut HashMap<u32, u32>,
        data: &mut impl NodeData,
    ) -> bool {
        let mut here = HashMap::new();
        if !self.tree.graft(from, onto, &mut here) {
            self.frames.approximate = true;
            return false;
        }
        here.insert(from, onto);
        data.moved(&here);
        moved.extend(here);
        true
    }

    /// The innermost poll ends: back to the stack it parked.
    pub(crate) fn on_poll_end(&mut self, task: u32, poll: u32, done: bool) {
        let Some((key, _)) = self.frames.unpark(task) else {
            return;
        };
        if let Some(t) = self.tasks.get_mut(&key) {
            if done {
                t.total = Some(poll.saturating_add(1));
            }
            if t.finished() {
                self.tasks.remove(&key);
            }
        }
    }

    /// Merge `other`'s tree into this one: returns where each of its nodes went. Its tasks are
    /// merged by [`merge_tasks`](Self::merge_tasks), after the analysis has added its nodes'
    /// data at those places.
    pub(crate) fn merge_tree(&mut self, other: &ContextTracker) -> Vec<u32> {
        self.tree.merge(&other.tree)
    }

    /// Futures polled in both streams: what one saw goes where the other placed it, with the
    /// nodes' data. `to_self` is what [`merge_tree`](Self::merge_tree) returned for `other`.
    pub(crate) fn merge_tasks(
        &mut self,
        other: ContextTracker,
        to_self: &[u32],
        data: &mut impl NodeData,
    ) {
        let mut moved = HashMap::new();
        for (key, mut o) in other.tasks {
            o.node = tasks::resolve(&moved, to_self[o.node as usize]);
            let Some(t) = self.tasks.get_mut(&key) else {
                self.tasks.insert(key, o);
                continue;
            };
            t.node = tasks::resolve(&moved, t.node);
            let (from, onto) = tasks::graft_ends(&self.tree, t.node, o.node);
            t.node = if from == t.node { onto } else { t.node };
            t.placed |= o.placed;
            t.polls = t.polls.saturating_add(o.polls);
            t.total = t.total.or(o.total);
            if from != onto {
                self.graft(from, onto, &mut moved, data);
            }
        }
        if !moved.is_empty() {
            tasks::resolve_chains(&mut moved);
            tasks::forward(&self.tree, &mut self.tasks, &mut self.frames, &moved);
        }
        self.tasks.retain(|_, t| !t.finished());
        self.frames.merge_counts(&other.frames);
    }
}
