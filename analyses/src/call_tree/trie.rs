//! The arena both call-tree analyses keep their results in: a tree of method ids in which each
//! node counts something about the path from the root to it (the calling context tree counts
//! calls along a call path; the call-tree profile counts invocations with a callee list).
//!
//! Nodes live in one `Vec`, parents before children, each with a sibling list (newest first)
//! and a cached last-used child; a map from `(parent, method)` to the child holds every edge
//! and answers when the sibling list is long. Stepping to a child is then usually one compare
//! (the cached child), otherwise a short walk, and rarely a hash lookup.

use cabprof_cab::event::MethodId;
use hashbrown::HashMap;

/// No node (end of a child or sibling list, or no cached child).
pub(crate) const NONE: u32 = u32::MAX;
/// The root node's index; its method is [`MethodId::ROOT`].
pub(crate) const ROOT: u32 = 0;
/// Siblings compared one by one before a child is looked up in the map.
const SIBLING_SCAN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) parent: u32,
    pub(crate) method: MethodId,
    pub(crate) count: u64,
    first_child: u32,
    next_sibling: u32,
    /// The child most recently stepped to: the common case of a repeated step.
    last_child: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Trie {
    pub(crate) nodes: Vec<Node>,
    children: HashMap<(u32, MethodId), u32>,
}

impl Default for Trie {
    fn default() -> Self {
        Trie {
            nodes: vec![Node {
                parent: NONE,
                method: MethodId::ROOT,
                count: 0,
                first_child: NONE,
                next_sibling: NONE,
                last_child: NONE,
            }],
            children: HashMap::new(),
        }
    }
}

impl Trie {
    /// The child of `parent` for `method`, made if new.
    #[inline]
    pub(crate) fn child(&mut self, parent: u32, method: MethodId) -> u32 {
        let hint = self.nodes[parent as usize].last_child;
        if hint != NONE && self.nodes[hint as usize].method == method {
            return hint;
        }
        self.child_uncached(parent, method)
    }

    /// `child` past a miss of the cached child: walk the sibling list, then ask the map.
    fn child_uncached(&mut self, parent: u32, method: MethodId) -> u32 {
        let mut c = self.nodes[parent as usize].first_child;
        let mut steps = 0;
        while c != NONE && steps < SIBLING_SCAN {
            if self.nodes[c as usize].method == method {
                self.nodes[parent as usize].last_child = c;
                return c;
            }
            c = self.nodes[c as usize].next_sibling;
            steps += 1;
        }
        // The walk reached the end: no such child. Cut short: the map knows.
        let found = if c == NONE {
            None
        } else {
            self.children.get(&(parent, method)).copied()
        };
        let c = found.unwrap_or_else(|| self.new_child(parent, method));
        self.nodes[parent as usize].last_child = c;
        c
    }

    #[cold]
    fn new_child(&mut self, parent: u32, method: MethodId) -> u32 {
        let c = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&c| c != NONE)
            .expect("call-tree arena outgrew u32 node indices");
        self.children.insert((parent, method), c);
        let sibling = self.nodes[parent as usize].first_child;
        self.nodes.push(Node {
            parent,
            method,
            count: 0,
            first_child: NONE,
            next_sibling: sibling,
            last_child: NONE,
        });
        self.nodes[parent as usize].first_child = c;
        c
    }

    /// The child of `parent` for `method`, if there is one (no insertion).
    pub(crate) fn find(&self, parent: u32, method: MethodId) -> Option<u32> {
        self.children.get(&(parent, method)).copied()
    }

    /// The node reached from `from` by stepping through `path`, if every step exists.
    pub(crate) fn walk(&self, from: u32, path: &[MethodId]) -> Option<u32> {
        path.iter().try_fold(from, |n, &m| self.find(n, m))
    }

    /// The methods on the way from `above` (exclusive) down to `n` (inclusive).
    pub(crate) fn path_between(&self, above: u32, mut n: u32) -> Vec<MethodId> {
        let mut path = Vec::new();
        while n != above {
            let node = &self.nodes[n as usize];
            path.push(node.method);
            n = node.parent;
        }
        path.reverse();
        path
    }

    /// The children of `n`, newest first.
    pub(crate) fn children_of(&self, n: u32) -> impl Iterator<Item = u32> + '_ {
        let mut c = self.nodes[n as usize].first_child;
        std::iter::from_fn(move || {
            (c != NONE).then(|| {
                let this = c;
                c = self.nodes[c as usize].next_sibling;
                this
            })
        })
    }

    /// Add `other`'s counts into this arena, node for node (made where missing); returns where
    /// each of `other`'s nodes went. Parents precede children in both arenas, so one pass in
    /// index order maps every node. Detached roots get new detached roots here.
    pub(crate) fn merge(&mut self, other: &Trie) -> Vec<u32> {
        let mut to_self = vec![ROOT; other.nodes.len()];
        for (i, node) in other.nodes.iter().enumerate().skip(1) {
            let c = if node.parent == NONE {
                self.detached(node.method)
            } else {
                debug_assert!((node.parent as usize) < i);
                self.child(to_self[node.parent as usize], node.method)
            };
            self.nodes[c as usize].count += node.count;
            to_self[i] = c;
        }
        self.nodes[ROOT as usize].count += other.nodes[ROOT as usize].count;
        to_self
    }

    /// A new node with no parent: the root of a subtree whose place in the tree is not known
    /// yet (it is [`graft`](Self::graft)ed there once it is).
    pub(crate) fn detached(&mut self, method: MethodId) -> u32 {
        let c = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&c| c != NONE)
            .expect("call-tree arena outgrew u32 node indices");
        self.nodes.push(Node {
            parent: NONE,
            method,
            count: 0,
            first_child: NONE,
            next_sibling: NONE,
            last_child: NONE,
        });
        c
    }

    /// Move the counts below `from` to the same paths below `onto` (made where missing); the
    /// nodes below `from` keep count 0. Records in `moved` where each node below `from` went.
    /// Returns false, moving nothing, if `onto` lies below `from` (or is `from`): the subtree
    /// would grow under itself without end. A well-formed stream never asks for that (a future
    /// is not first polled inside one of its own polls), but a stream that lost words can.
    #[must_use]
    pub(crate) fn graft(&mut self, from: u32, onto: u32, moved: &mut HashMap<u32, u32>) -> bool {
        let mut up = onto;
        while up != NONE {
            if up == from {
                return false;
            }
            up = self.nodes[up as usize].parent;
        }
        let mut todo = vec![(from, onto)];
        while let Some((f, o)) = todo.pop() {
            let kids: Vec<u32> = self.children_of(f).collect();
            for c in kids {
                let n = self.child(o, self.nodes[c as usize].method);
                let count = std::mem::take(&mut self.nodes[c as usize].count);
                self.nodes[n as usize].count += count;
                moved.insert(c, n);
                todo.push((c, n));
            }
        }
        true
    }

    /// For each node, whether it hangs below the root (not below a detached root).
    pub(crate) fn attached(&self) -> Vec<bool> {
        let mut out = vec![true; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            out[i] = node.parent != NONE && out[node.parent as usize];
        }
        out
    }

    /// Nodes other than the root (detached subtrees included).
    pub(crate) fn len(&self) -> usize {
        self.nodes.len() - 1
    }
}
