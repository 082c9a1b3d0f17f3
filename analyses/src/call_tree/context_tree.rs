//! The calling context tree; see the parent module for the contract.

use cabprof_cab::event::MethodId;
use hashbrown::HashMap;

use super::tracker::ContextTracker;
use super::trie::{NONE, ROOT as ROOT_NODE};
use crate::EventAnalysis;

/// One node per distinct call path from the root, with the calls that reached it.
///
/// Node `n` stands for the call path root → … → `n.method`; its count is the number of `Call`
/// words that entered `n.method` along exactly that path. Recursion makes deeper nodes, as in
/// Ammons, Ball and Larus (1997) without their recursion folding: the tree is the dynamic call
/// tree with identical paths merged.
///
/// Resynchronisation (sampling gaps, streams starting mid-run) is the shared tracker's (see
/// `ContextTracker`): a stream that starts inside `main` shows `main`'s callees under
/// root → main.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallingContextTree {
    /// The contexts, each thread's open path, the futures.
    ctx: ContextTracker,
    /// The open paths of the instances merged into this one (other threads'), as method paths,
    /// sorted so that the order of merges does not show; at most [`MAX_OPEN_MERGED`].
    open_merged: Vec<Vec<MethodId>>,
}

/// The most open paths kept from merged instances. A thread ends with its frames closed, but a
/// sampled stream that lost its last `Return`s leaves some open: with many threads coming and
/// going, those would pile up in the results the analyzer keeps of ended threads.
pub const MAX_OPEN_MERGED: usize = 1024;

impl CallingContextTree {
    /// A tree holding only the root.
    pub fn new() -> CallingContextTree {
        CallingContextTree::default()
    }

    /// Calls that reached the context `path` (methods from the root's child down, root
    /// excluded); 0 for a context never seen. The empty path (the root) has count 0.
    pub fn count(&self, path: &[MethodId]) -> u64 {
        self.ctx
            .tree
            .walk(ROOT_NODE, path)
            .map_or(0, |n| self.ctx.tree.nodes[n as usize].count)
    }

    /// Every context (root excluded) with its count, sorted by path. Contexts made by a
    /// resynchronisation may have count 0. Each path is copied in full, so this costs the sum
    /// of all depths: use [`nodes`](Self::nodes) for deep trees.
    pub fn contexts(&self) -> Vec<(Vec<MethodId>, u64)> {
        let t = &self.ctx.tree;
        let attached = t.attached();
        let mut out: Vec<(Vec<MethodId>, u64)> = (1..t.nodes.len())
            .filter(|&i| attached[i])
            .map(|i| (t.path_between(ROOT_NODE, i as u32), t.nodes[i].count))
            .collect();
        out.sort_unstable();
        out
    }

    /// Every context (root excluded) as a node: `(node, parent, method, count)`, where `node`
    /// and `parent` are indices of this tree (the root is 0), parents before their children.
    /// Unlike [`contexts`](Self::contexts), whose paths cost the sum of all depths (quadratic
    /// in a deep recursion), this is linear in the number of contexts.
    pub fn nodes(&self) -> Vec<(u32, u32, MethodId, u64)> {
        let t = &self.ctx.tree;
        let attached = t.attached();
        (1..t.nodes.len())
            .filter(|&i| attached[i])
            .map(|i| {
                let n = &t.nodes[i];
                (i as u32, n.parent, n.method, n.count)
            })
            .collect()
    }

    /// Number of contexts (nodes other than the root).
    pub fn len(&self) -> usize {
        if self.ctx.tasks.is_empty() {
            return self.ctx.tree.len();
        }
        self.ctx
            .tree
            .attached()
            .iter()
            .skip(1)
            .filter(|&&a| a)
            .count()
    }

    /// `true` if no call was seen.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total calls counted (the sum over all contexts).
    pub fn total(&self) -> u64 {
        let attached = self.ctx.tree.attached();
        self.ctx
            .tree
            .nodes
            .iter()
            .zip(attached)
            .filter(|(_, a)| *a)
            .map(|(n, _)| n.count)
            .sum()
    }

    /// The calls open now: for each thread with open frames, the calling context of its
    /// innermost one (methods from the root's child down; a poll in progress shows the
    /// future's context), those of the instances merged in included (at most
    /// [`MAX_OPEN_MERGED`] of those). A thread that ended inside instrumented calls (through
    /// `exit`, say, or in a sampled stream that lost its last `Return`s) keeps them. Sorted.
    pub fn open_stacks(&self) -> Vec<Vec<MethodId>> {
        let mut out = self.open_merged.clone();
        let own = std::iter::once(&self.ctx.frames.threads.current)
            .chain(self.ctx.frames.threads.parked());
        out.extend(
            own.filter_map(|open| open.stack.last())
                .map(|f| self.context_of(f.node)),
        );
        out.sort_unstable();
        out
    }

    /// The futures polled and not finished (their last poll not seen): each `async fn`, its
    /// task id and the calling context of its frame (methods from the root's child down; up to
    /// the future itself only when the poll that placed it is in another stream not merged in).
    /// Sorted.
    pub fn pending_futures(&self) -> Vec<(MethodId, u32, Vec<MethodId>)> {
        let mut out: Vec<(MethodId, u32, Vec<MethodId>)> = self
            .ctx
            .tasks
            .iter()
            .filter(|(_, t)| !t.finished())
            .map(|(&(method, task), t)| (method, task, self.context_of(t.node)))
            .collect();
        out.sort_unstable();
        out
    }

    /// The methods from the root's child down to node `n` (a detached node's path starts at
    /// its detached root).
    fn context_of(&self, mut n: u32) -> Vec<MethodId> {
        let mut path = Vec::new();
        while n != ROOT_NODE && n != NONE {
            let node = &self.ctx.tree.nodes[n as usize];
            path.push(node.method);
            n = node.parent;
        }
        path.reverse();
        path
    }

    /// Depth of the open path of the current thread (of the poll in progress, if any).
    pub fn open_frames(&self) -> usize {
        self.ctx.frames.threads.current.stack.len()
    }

    /// Futures this instance saw polled whose calling context is still unknown to it (their
    /// first poll was in a stream not merged in yet) or whose other polls may still come from
    /// other streams.
    pub fn pending_tasks(&self) -> usize {
        self.ctx.tasks.len()
    }

    /// `true` if the tree may differ from the exact one: set by a resynchronisation or an
    /// unmatched `Return`, or by [`set_approximate`](Self::set_approximate).
    pub fn is_approximate(&self) -> bool {
        self.ctx.frames.approximate
    }

    /// Mark the tree approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.ctx.frames.approximate = approximate;
    }

    /// `Call`s whose caller was not the current node, and `Return`s that closed frames above
    /// their own.
    pub fn resyncs(&self) -> u64 {
        self.ctx.frames.resyncs
    }

    /// `Return`s that matched no open frame and were ignored.
    pub fn unmatched_returns(&self) -> u64 {
        self.ctx.frames.unmatched_returns
    }

    /// Folded stacks (the input of inferno, speedscope and `flamegraph.pl`): one line
    /// `root;a;b count` per context with a non-zero count, where `count` is the calls that
    /// reached it, sorted. `name` gives each method's frame name; `;` and line breaks in names
    /// are replaced by `_` so every line stays parseable.
    pub fn folded(&self, name: &dyn Fn(MethodId) -> String) -> String {
        let mut names: HashMap<MethodId, String> = HashMap::new();
        let mut lines: Vec<String> = Vec::new();
        let mut path = String::from("root");
        // (node, length of its parent's path in `path`)
        let mut todo: Vec<(u32, usize)> = Vec::new();
        self.push_children(ROOT_NODE, path.len(), &mut todo);
        while let Some((n, parent_len)) = todo.pop() {
            let node = &self.ctx.tree.nodes[n as usize];
            path.truncate(parent_len);
            path.push(';');
            path.push_str(
                names
                    .entry(node.method)
                    .or_insert_with(|| name(node.method).replace([';', '\n', '\r'], "_")),
            );
            if node.count > 0 {
                lines.push(format!("{path} {}", node.count));
            }
            self.push_children(n, path.len(), &mut todo);
        }
        lines.sort_unstable();
        let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    fn push_children(&self, n: u32, len: usize, todo: &mut Vec<(u32, usize)>) {
        todo.extend(self.ctx.tree.children_of(n).map(|c| (c, len)));
    }
}

impl super::CallEvents for CallingContextTree {
    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        self.ctx.on_call(caller, callee);
    }
    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        self.ctx.on_return(callee);
    }
    /// The leaf's context is counted; nothing is pushed or popped. On a caller that is not
    /// on top, the resynchronising path.
    #[inline]
    fn on_leaf(&mut self, caller: MethodId, callee: MethodId) {
        self.ctx.on_leaf(caller, callee);
    }
    fn on_thread(&mut self, id: u64) {
        self.ctx.on_thread(id);
    }
    fn on_poll(&mut self, method: MethodId, task: u32, first: bool) {
        self.ctx.on_poll(method, task, first, &mut ());
    }
    fn on_poll_end(&mut self, task: u32, poll: u32, done: bool) {
        self.ctx.on_poll_end(task, poll, done);
    }
}

impl EventAnalysis for CallingContextTree {
    fn consume(&mut self, words: &[u64]) {
        super::feed(self, words);
    }

    fn merge(&mut self, other: CallingContextTree) {
        let theirs = other.open_stacks();
        if !theirs.is_empty() {
            self.open_merged.extend(theirs);
            self.open_merged.sort_unstable();
            self.open_merged.truncate(MAX_OPEN_MERGED);
        }
        let to_self = self.ctx.merge_tree(&other.ctx);
        self.ctx.merge_tasks(other.ctx, &to_self, &mut ());
    }
}
