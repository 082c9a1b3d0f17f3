//! The calling context tree; see the parent module for the contract.

use cab::event::MethodId;
use hashbrown::HashMap;

use super::trie::{Trie, ROOT as ROOT_NODE};
use crate::thread_stacks::ThreadStacks;
use crate::Analysis;

/// One node per distinct call path from the root, with the calls that reached it.
///
/// Node `n` stands for the call path root → … → `n.method`; its count is the number of `Call`
/// words that entered `n.method` along exactly that path. Recursion makes deeper nodes, as in
/// Ammons, Ball and Larus (1997) without their recursion folding: the tree is the dynamic call
/// tree with identical paths merged.
///
/// Resynchronisation (sampling gaps, streams starting mid-run): a `Call` whose caller is not the
/// current node continues from the innermost open node of that caller if there is one (the
/// frames above it lost their `Return`s), from the root if the caller is the root, and otherwise
/// from a node root → caller, made without counting a call of the caller (its `Call` was not
/// seen). So a stream that starts inside `main` shows `main`'s callees under root → main.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallingContextTree {
    /// One node per context; the trie's root is the root context.
    tree: Trie,
    /// Per thread: the open path, as node indices below the root, innermost last.
    threads: ThreadStacks<Vec<u32>>,
    approximate: bool,
    resyncs: u64,
    unmatched_returns: u64,
}

impl CallingContextTree {
    /// A tree holding only the root.
    pub fn new() -> CallingContextTree {
        CallingContextTree::default()
    }

    /// Calls that reached the context `path` (methods from the root's child down, root
    /// excluded); 0 for a context never seen. The empty path (the root) has count 0.
    pub fn count(&self, path: &[MethodId]) -> u64 {
        self.tree
            .walk(ROOT_NODE, path)
            .map_or(0, |n| self.tree.nodes[n as usize].count)
    }

    /// Every context (root excluded) with its count, sorted by path. Contexts made by a
    /// resynchronisation may have count 0.
    pub fn contexts(&self) -> Vec<(Vec<MethodId>, u64)> {
        let t = &self.tree;
        let mut out: Vec<(Vec<MethodId>, u64)> = (1..t.nodes.len())
            .map(|i| (t.path_between(ROOT_NODE, i as u32), t.nodes[i].count))
            .collect();
        out.sort_unstable();
        out
    }

    /// Number of contexts (nodes other than the root).
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// `true` if no call was seen.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total calls counted (the sum over all contexts).
    pub fn total(&self) -> u64 {
        self.tree.nodes.iter().map(|n| n.count).sum()
    }

    /// Depth of the open path of the current thread.
    pub fn open_frames(&self) -> usize {
        self.threads.current.len()
    }

    /// `true` if the tree may differ from the exact one: set by a resynchronisation or an
    /// unmatched `Return`, or by [`set_approximate`](Self::set_approximate).
    pub fn is_approximate(&self) -> bool {
        self.approximate
    }

    /// Mark the tree approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.approximate = approximate;
    }

    /// `Call`s whose caller was not the current node, and `Return`s that closed frames above
    /// their own.
    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    /// `Return`s that matched no open frame and were ignored.
    pub fn unmatched_returns(&self) -> u64 {
        self.unmatched_returns
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
            let node = &self.tree.nodes[n as usize];
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
        todo.extend(self.tree.children_of(n).map(|c| (c, len)));
    }

    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        let current = self.threads.current.last().copied().unwrap_or(ROOT_NODE);
        let current = if self.tree.nodes[current as usize].method == caller {
            current
        } else {
            self.resync_call(caller)
        };
        let c = self.tree.child(current, callee);
        self.tree.nodes[c as usize].count += 1;
        self.threads.current.push(c);
    }

    /// Returns the node to continue from; see the type docs.
    #[cold]
    fn resync_call(&mut self, caller: MethodId) -> u32 {
        self.approximate = true;
        self.resyncs += 1;
        let nodes = &self.tree.nodes;
        let open = &mut self.threads.current;
        if let Some(i) = open
            .iter()
            .rposition(|&n| nodes[n as usize].method == caller)
        {
            open.truncate(i + 1);
            return open[i];
        }
        open.clear();
        if caller == MethodId::ROOT {
            return ROOT_NODE;
        }
        let c = self.tree.child(ROOT_NODE, caller);
        self.threads.current.push(c);
        c
    }

    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        match self.threads.current.last() {
            Some(&n) if self.tree.nodes[n as usize].method == callee => {
                self.threads.current.pop();
            }
            _ => self.resync_return(callee),
        }
    }

    #[cold]
    fn resync_return(&mut self, callee: MethodId) {
        self.approximate = true;
        let nodes = &self.tree.nodes;
        let open = &mut self.threads.current;
        match open
            .iter()
            .rposition(|&n| nodes[n as usize].method == callee)
        {
            Some(i) => {
                open.truncate(i);
                self.resyncs += 1;
            }
            None => self.unmatched_returns += 1,
        }
    }
}

impl super::CallEvents for CallingContextTree {
    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        CallingContextTree::on_call(self, caller, callee);
    }
    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        CallingContextTree::on_return(self, callee);
    }
    fn on_thread(&mut self, id: u64) {
        self.threads.switch_to(id);
    }
}

impl Analysis for CallingContextTree {
    fn consume(&mut self, words: &[u64]) {
        super::feed(self, words);
    }

    fn merge(&mut self, other: CallingContextTree) {
        self.tree.merge(&other.tree);
        self.approximate |= other.approximate;
        self.resyncs += other.resyncs;
        self.unmatched_returns += other.unmatched_returns;
    }
}
