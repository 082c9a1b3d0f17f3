//! A pprof profile's stacks, leaf first, held as the context nodes they end at: a sample's
//! frames are read by walking from its node up through the parents, which is the order pprof
//! lists them in, so no stack is ever copied. Which stacks there are (deep ones elided, equal
//! ones merged, weights shifted to fit `u64`) is what [`ReportData::flame_stacks`] describes.

use crate::model::{
    depths_and_outer, parent_links, ContextNode, Frame, ReportData, FLAME_INNER_FRAMES,
    FLAME_OUTER_FRAMES, ROOT,
};
use hashbrown::HashTable;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};

/// The tree of a list of context nodes, in a few arrays of 4 bytes per node.
pub(super) struct NodeTree {
    method: Vec<u32>,
    /// The parent's index, [`ROOT`] for the root.
    parent: Vec<u32>,
    /// The depth (1 for a child of the root).
    depth: Vec<u32>,
    /// For a node deeper than [`FLAME_OUTER_FRAMES`], its ancestor at that depth: where the
    /// outer frames kept around an elision start, leaf first.
    outer: Vec<u32>,
}

impl NodeTree {
    /// The tree of `nodes`, each after its parent.
    pub(super) fn new<N: ContextNode>(nodes: &[N]) -> NodeTree {
        let parent = parent_links(nodes);
        let (depth, outer) = depths_and_outer(&parent);
        NodeTree {
            method: nodes.iter().map(|n| n.method()).collect(),
            parent,
            depth,
            outer,
        }
    }

    /// One node per method, each a child of the root.
    fn of_methods(methods: impl Iterator<Item = u32>) -> NodeTree {
        let method: Vec<u32> = methods.collect();
        let n = method.len();
        NodeTree {
            method,
            parent: vec![ROOT; n],
            depth: vec![1; n],
            outer: (0..n as u32).collect(),
        }
    }

    /// The frames of the stack ending at `node` ([`ROOT`]: none), leaf first.
    fn frames(&self, node: u32) -> LeafFirst<'_> {
        let deep = node != ROOT
            && self.depth[node as usize] as usize > FLAME_OUTER_FRAMES + FLAME_INNER_FRAMES;
        LeafFirst {
            tree: self,
            node,
            left: if deep { FLAME_INNER_FRAMES } else { usize::MAX },
            then_outer: deep,
        }
    }
}

/// A stack's frames, leaf first: up from its node, and for an elided stack its innermost
/// frames, the elided frame, then its outermost ones.
struct LeafFirst<'a> {
    tree: &'a NodeTree,
    node: u32,
    /// Frames to take from `node` up before the elision.
    left: usize,
    then_outer: bool,
}

impl Iterator for LeafFirst<'_> {
    type Item = Frame;

    fn next(&mut self) -> Option<Frame> {
        if self.left == 0 && self.then_outer {
            self.then_outer = false;
            self.left = FLAME_OUTER_FRAMES;
            self.node = self.tree.outer[self.node as usize];
            return Some(Frame::Elided);
        }
        if self.node == ROOT || self.left == 0 {
            return None;
        }
        let n = self.node as usize;
        self.left -= 1;
        // Past the last inner frame, `node` stays where the outer ones are looked up from.
        if self.left > 0 || !self.then_outer {
            self.node = self.tree.parent[n];
        }
        Some(Frame::Method(self.tree.method[n]))
    }
}

/// A stack: the node it ends at and its weight before the shift (96 bits: a sum of up to
/// 2^32 weights of 64).
#[derive(Clone, Copy)]
struct Entry {
    node: u32,
    high: u32,
    low: u64,
}

impl Entry {
    fn weight(&self) -> u128 {
        (self.high as u128) << 64 | self.low as u128
    }

    fn set_weight(&mut self, w: u128) {
        self.high = (w >> 64) as u32;
        self.low = w as u64;
    }
}

/// One column's stacks: each distinct one once, sorted by frames leaf first.
pub(super) struct LeafStacks<'t> {
    tree: &'t NodeTree,
    stacks: Vec<Entry>,
    shift: u32,
}

impl<'t> LeafStacks<'t> {
    /// The stacks of `tree`'s nodes weighted by `weight` (by node index), plus the root's
    /// own `root` as a stack of no frames.
    pub(super) fn new(tree: &'t NodeTree, root: u64, weight: impl Fn(usize) -> u64) -> Self {
        // Equal stacks are merged as they come, so that only distinct ones are kept (a deep
        // recursion's contexts are thousands of one elided stack).
        let hasher = RandomState::new();
        let hash = |node: u32| {
            let mut h = hasher.build_hasher();
            tree.frames(node).for_each(|f| f.hash(&mut h));
            h.finish()
        };
        let mut distinct: HashTable<u32> = HashTable::new();
        let mut stacks: Vec<Entry> = Vec::new();
        let nodes = std::iter::once((ROOT, root))
            .chain((0..tree.method.len()).map(|i| (i as u32, weight(i))));
        for (node, w) in nodes {
            if w == 0 {
                continue;
            }
            let h = hash(node);
            let found = distinct
                .find(h, |&s| {
                    tree.frames(stacks[s as usize].node).eq(tree.frames(node))
                })
                .copied();
            match found {
                Some(s) => {
                    let e = &mut stacks[s as usize];
                    e.set_weight(e.weight() + w as u128);
                }
                None => {
                    distinct
                        .insert_unique(h, stacks.len() as u32, |&s| hash(stacks[s as usize].node));
                    stacks.push(Entry {
                        node,
                        high: 0,
                        low: w,
                    });
                }
            }
        }
        drop(distinct);
        stacks.sort_unstable_by(|a, b| tree.frames(a.node).cmp(tree.frames(b.node)));
        let total: u128 = stacks.iter().map(Entry::weight).sum();
        let shift = (128 - total.leading_zeros()).saturating_sub(64);
        stacks.retain(|s| s.weight() >> shift > 0);
        LeafStacks {
            tree,
            stacks,
            shift,
        }
    }

    /// [`new`](Self::new) for one stack per node of a tree of single frames, weights as
    /// given: a method's sample in a profile of method counts.
    pub(super) fn unshifted(tree: &'t NodeTree, weights: &[u64]) -> Self {
        let stacks = (0..tree.method.len() as u32)
            .zip(weights)
            .filter(|&(_, &w)| w > 0)
            .map(|(node, &w)| Entry {
                node,
                high: 0,
                low: w,
            })
            .collect();
        LeafStacks {
            tree,
            stacks,
            shift: 0,
        }
    }

    /// How many stacks.
    fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Stack `i`'s frames, leaf first.
    pub(super) fn frames(&self, i: usize) -> impl Iterator<Item = Frame> + '_ {
        self.tree.frames(self.stacks[i].node)
    }

    /// Stack `i`'s weight, shifted.
    fn weight(&self, i: usize) -> u64 {
        (self.stacks[i].weight() >> self.shift) as u64
    }
}

/// Calls per method as single-frame stacks, their counts added up saturating (and never
/// shifted): a profile's calls when methods alone were counted.
pub(super) fn method_tree(data: &ReportData) -> Option<(NodeTree, Vec<u64>)> {
    let counts = data.method_count.as_ref()?;
    let mut by_method: BTreeMap<u32, u64> = BTreeMap::new();
    for m in counts {
        let c = by_method.entry(m.method).or_default();
        *c = c.saturating_add(m.count);
    }
    let tree = NodeTree::of_methods(by_method.keys().copied());
    Some((tree, by_method.into_values().collect()))
}

/// The samples of the columns' stacks, merged: each distinct stack once, in the order of its
/// frames leaf first, with its value in every column.
pub(super) struct Samples<'a, 't> {
    columns: &'a [LeafStacks<'t>],
    width: usize,
}

impl<'a, 't> Samples<'a, 't> {
    /// Samples of `columns`, `width` values each (the columns first, then 0s).
    pub(super) fn new(columns: &'a [LeafStacks<'t>], width: usize) -> Self {
        Samples { columns, width }
    }

    /// Call `f` with each sample: a column holding its stack, the stack's index there, and
    /// its value in each column (weights through `scale`, 0 where a column lacks it).
    pub(super) fn for_each(
        &self,
        scale: &impl Fn(u64) -> i64,
        mut f: impl FnMut(usize, usize, &[i64]),
    ) {
        let cmp = |a: (usize, usize), b: (usize, usize)| -> Ordering {
            self.columns[a.0]
                .frames(a.1)
                .cmp(self.columns[b.0].frames(b.1))
        };
        let mut at = vec![0usize; self.columns.len()];
        let mut value = vec![0i64; self.width];
        loop {
            // The least stack at the columns' cursors.
            let mut least: Option<(usize, usize)> = None;
            for (c, column) in self.columns.iter().enumerate() {
                if at[c] >= column.len() {
                    continue;
                }
                if least.is_none_or(|l| cmp((c, at[c]), l) == Ordering::Less) {
                    least = Some((c, at[c]));
                }
            }
            let Some(least) = least else { return };
            value.iter_mut().for_each(|v| *v = 0);
            for (c, column) in self.columns.iter().enumerate() {
                if at[c] < column.len() && cmp((c, at[c]), least) == Ordering::Equal {
                    value[c] = scale(column.weight(at[c]));
                    at[c] += 1;
                }
            }
            f(least.0, least.1, &value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LeafStacks, NodeTree};
    use crate::model::{ContextEntry, FlameStacks, Frame};

    /// A tree of chains of 1 to 150 calls under a few branches, two contexts of one method
    /// under one parent now and then (as a crafted file may have), counts of 0 to 3.
    fn contexts() -> Vec<ContextEntry> {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut out: Vec<ContextEntry> = Vec::new();
        for id in 1..=4_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let parent = match x % 150 {
                0 => 0,
                1 => (x >> 8) as u32 % id,
                2 if id > 1 => out[id as usize - 2].parent,
                _ => id - 1,
            };
            out.push(ContextEntry {
                id,
                parent,
                method: 1 + (x >> 32) as u32 % 6,
                count: (x >> 16) % 4,
                estimated: None,
            });
        }
        out
    }

    /// The stacks walked from the nodes, leaf first, are the flame graphs' stacks (made by
    /// copying each one's frames) reversed, with the same weights, in the order of their
    /// reversed frames: elided, merged and shifted alike.
    #[test]
    fn leaf_first_stacks_are_the_flame_stacks_reversed() {
        let nodes = contexts();
        let tree = NodeTree::new(&nodes);
        for (root, scale) in [(0u64, 1u64), (7, 1), (0, u64::MAX / 3)] {
            let flame = FlameStacks::from_nodes_and_root(&nodes, root, |c| c.count * scale);
            assert!(flame.stacks.iter().any(|(s, _)| s.contains(&Frame::Elided)));
            assert_eq!(flame.shift > 0, scale > 1, "weights too large are shifted");
            let mut expected: Vec<(Vec<Frame>, u64)> = flame
                .stacks
                .into_iter()
                .map(|(mut s, w)| {
                    s.reverse();
                    (s, w)
                })
                .collect();
            expected.sort();
            let leaf = LeafStacks::new(&tree, root, |i| nodes[i].count * scale);
            let got: Vec<(Vec<Frame>, u64)> = (0..leaf.len())
                .map(|i| (leaf.frames(i).collect(), leaf.weight(i)))
                .collect();
            assert_eq!(leaf.shift, flame.shift, "root {root}, x{scale}");
            assert_eq!(got, expected, "root {root}, x{scale}");
        }
    }
}
