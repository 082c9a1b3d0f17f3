//! What the context-tree analyses (the calling context tree, allocations) share about
//! futures: a thread's open path and parked polls, where each future's context is, and moving
//! every reference when subtrees are grafted at merge.

use cabprof_cab::event::MethodId;
use hashbrown::HashMap;

use super::trie::Trie;
use crate::frame_tracker::{FrameTracker, Frames};

/// A future: its `async fn` and its task id.
pub(crate) type TaskKey = (MethodId, u32);

/// One frame of an open path: its context node, and its function (the node's, kept here so
/// that matching a word against the top frame reads the stack alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathFrame {
    pub(crate) node: u32,
    pub(crate) method: MethodId,
}

impl Frames for Vec<PathFrame> {
    type Thread = ();
    #[inline(always)]
    fn depth(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn method(&self, i: usize) -> MethodId {
        self[i].method
    }
    fn truncate(&mut self, n: usize, _: &mut ()) {
        Vec::truncate(self, n);
    }
}

/// Where a future's context is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskBase {
    /// The node of the future's own frame: in the tree if `placed`, else a detached root that
    /// collects what its polls do until the instance that saw its first poll is merged in.
    pub(crate) node: u32,
    pub(crate) placed: bool,
    /// Polls of it this instance saw.
    pub(crate) polls: u32,
    /// How many polls it had in all, once its last poll was seen.
    pub(crate) total: Option<u32>,
}

impl TaskBase {
    /// Every poll is accounted for here: nothing more will refer to it.
    pub(crate) fn finished(&self) -> bool {
        self.placed && self.total.is_some_and(|t| self.polls >= t)
    }
}

/// Nodes in `moved` were grafted elsewhere in `tree`: point every task and every open or
/// parked frame at their new place, and re-derive whether each task is placed.
pub(crate) fn forward(
    tree: &Trie,
    tasks: &mut HashMap<TaskKey, TaskBase>,
    frames: &mut FrameTracker<Vec<PathFrame>>,
    moved: &HashMap<u32, u32>,
) {
    let fwd = |n: &mut u32| {
        if let Some(&m) = moved.get(n) {
            *n = m;
        }
    };
    let attached = tree.attached();
    for t in tasks.values_mut() {
        fwd(&mut t.node);
        t.placed = attached[t.node as usize];
    }
    for path in frames.all_stacks_mut() {
        path.iter_mut().for_each(|f| fwd(&mut f.node));
    }
}

/// Where node `n` went after the grafts so far (a graft may move a node another task uses).
pub(crate) fn resolve(moved: &HashMap<u32, u32>, mut n: u32) -> u32 {
    while let Some(&m) = moved.get(&n) {
        if m == n {
            break;
        }
        n = m;
    }
    n
}

/// Chains in `moved` (a node moved, then its new place moved too) resolve to the last place.
pub(crate) fn resolve_chains(moved: &mut HashMap<u32, u32>) {
    let keys: Vec<u32> = moved.keys().copied().collect();
    for k in keys {
        let n = resolve(moved, k);
        moved.insert(k, n);
    }
}

/// A future seen in two merged streams, at node `ours` here and `theirs` (mapped here): which
/// node to graft onto which, `(from, onto)` (equal: nothing to move). The side that knows
/// where the first poll was has a node with a parent (`placed` is not that: [`forward`] clears
/// it for a first poll seen below a detached node), and only a detached root moves, so the
/// result does not depend on the merge order. Two first polls are a reused task id (ids
/// wrap): ours is kept.
pub(crate) fn graft_ends(tree: &Trie, ours: u32, theirs: u32) -> (u32, u32) {
    let known = |n: u32| tree.nodes[n as usize].parent != super::trie::NONE;
    match (known(ours), known(theirs)) {
        (true, true) => (theirs, theirs),
        (true, false) => (theirs, ours),
        (false, true) => (ours, theirs),
        (false, false) => (theirs, ours),
    }
}
