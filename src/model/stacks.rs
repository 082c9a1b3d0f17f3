//! Flame-graph stacks: [`FlameStacks`], the public list, and [`StackSet`], the same stacks
//! held compactly for the renderers: every stack's frames back to back in one vector of
//! 4-byte tokens, each stack a range of it with its weight. [`FlameStacks`] holds a vector per
//! stack (a copy of up to 65 frames with its own allocation), which for a report of many
//! contexts would be most of what rendering it costs; [`StackSet`] holds the same stacks, in
//! the same order, in 4 bytes per frame, and the renderers walk it in place.

use super::contexts::{parent_links, ContextNode, ROOT};
#[cfg(doc)]
use super::ReportData;
use hashbrown::HashTable;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

/// Frames of a flame-graph stack kept around an elision (see [`ReportData::flame_stacks`]):
/// the outermost ones.
pub const FLAME_OUTER_FRAMES: usize = 24;
/// Frames of a flame-graph stack kept around an elision: the innermost ones.
pub const FLAME_INNER_FRAMES: usize = 40;
/// The name of the frame that stands for the elided middle of a deep stack.
pub const ELIDED_FRAME: &str = "[deep stack: frames elided]";

/// A frame of a flame-graph stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Frame {
    /// A method id.
    Method(u32),
    /// The elided middle of a deep stack ([`ELIDED_FRAME`]).
    Elided,
}

/// The calling contexts as flame-graph stacks ([`ReportData::flame_stacks`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlameStacks {
    /// Each distinct stack (outermost frame first, root excluded) with its calls, sorted by
    /// stack; stacks with no calls are left out.
    pub stacks: Vec<(Vec<Frame>, u64)>,
    /// The counts were divided by `2^shift` (rounded down) because their sum exceeds
    /// `u64::MAX`, which flame-graph tools cannot total; 0 normally.
    pub shift: u32,
}

impl FlameStacks {
    /// Flame-graph stacks from context nodes (each after its parent) and a weight per node,
    /// elided and merged as [`ReportData::flame_stacks`] describes: linear in the number of
    /// nodes, whatever their depth.
    pub fn from_nodes<N: ContextNode>(nodes: &[N], weight: impl Fn(&N) -> u64) -> FlameStacks {
        FlameStacks::from_nodes_and_root(nodes, 0, weight)
    }

    /// [`from_nodes`](Self::from_nodes), plus the root's own weight `root` (drawn as a stack
    /// of no frames) for analyses that count something outside every context.
    pub fn from_nodes_and_root<N: ContextNode>(
        nodes: &[N],
        root: u64,
        weight: impl Fn(&N) -> u64,
    ) -> FlameStacks {
        StackSet::from_nodes(nodes, root, |_, n| weight(n)).to_flame_stacks()
    }
}

/// One stack of a [`StackSet`]: its tokens' range and its weight before the shift.
#[derive(Clone, Copy, Debug)]
struct Stack {
    start: usize,
    len: u32,
    weight: u128,
}

/// The stacks [`FlameStacks`] describes (deep stacks elided, equal stacks merged, sorted by
/// frames, weights shifted to fit `u64`, zero weights left out), with their frames as tokens
/// into a table of frames ordered like [`Frame`] (methods by id, then the elided frame), so
/// that comparing two stacks' token slices compares their frames.
#[derive(Debug, Default)]
pub(crate) struct StackSet {
    /// Token → frame, in [`Frame`]'s order.
    frames: Vec<Frame>,
    /// Every stack's tokens, outermost frame first, back to back.
    tokens: Vec<u32>,
    /// Sorted by frames, each stack once, every weight non-zero after the shift.
    stacks: Vec<Stack>,
    /// As [`FlameStacks::shift`].
    shift: u32,
}

impl StackSet {
    /// The stacks of context nodes (each after its parent), a weight per node chosen by its
    /// index, and the root's own weight `root` (a stack of no frames), elided and merged as
    /// [`ReportData::flame_stacks`](super::ReportData::flame_stacks) describes.
    ///
    /// One function, a little over a hundred lines: the walk up, the elision and the merge of
    /// equal stacks share the token buffer, the tokens' table and the hash table of stacks
    /// seen, which pieces would pass between them.
    pub(crate) fn from_nodes<N: ContextNode>(
        nodes: &[N],
        root: u64,
        weight: impl Fn(usize, &N) -> u64,
    ) -> StackSet {
        let parents = parent_links(nodes);
        let mut methods: Vec<u32> = nodes.iter().map(|n| n.method()).collect();
        methods.sort_unstable();
        methods.dedup();
        let token_of: HashMap<u32, u32> = methods
            .iter()
            .enumerate()
            .map(|(t, &m)| (m, t as u32))
            .collect();
        let node_token: Vec<u32> = nodes.iter().map(|n| token_of[&n.method()]).collect();
        drop(token_of);
        let elided = methods.len() as u32;
        let mut frames: Vec<Frame> = methods.into_iter().map(Frame::Method).collect();
        frames.push(Frame::Elided);

        let (depth, outer) = depths_and_outer(&parents);
        // The tokens of `steps` nodes from `from` up, innermost first.
        let walk = |from: u32, steps: usize, out: &mut Vec<u32>| {
            let mut n = from;
            for _ in 0..steps {
                if n == ROOT {
                    break;
                }
                out.push(node_token[n as usize]);
                n = parents[n as usize];
            }
        };
        // Equal stacks are merged as they come, so that only distinct ones are kept (a deep
        // recursion's contexts are thousands of one elided stack).
        let hasher = RandomState::new();
        let mut distinct: HashTable<u32> = HashTable::new();
        let mut tokens: Vec<u32> = Vec::new();
        let mut stacks: Vec<Stack> = Vec::new();
        if root > 0 {
            stacks.push(Stack {
                start: 0,
                len: 0,
                weight: root as u128,
            });
        }
        for (i, node) in nodes.iter().enumerate() {
            let w = weight(i, node);
            if w == 0 {
                continue;
            }
            let start = tokens.len();
            let d = depth[i] as usize;
            if d <= FLAME_OUTER_FRAMES + FLAME_INNER_FRAMES {
                walk(i as u32, d, &mut tokens);
                tokens[start..].reverse();
            } else {
                walk(outer[i], FLAME_OUTER_FRAMES, &mut tokens);
                tokens[start..].reverse();
                tokens.push(elided);
                let at = tokens.len();
                walk(i as u32, FLAME_INNER_FRAMES, &mut tokens);
                tokens[at..].reverse();
            }
            let (kept, new) = tokens.split_at(start);
            let of = |s: &Stack| &tokens[s.start..s.start + s.len as usize];
            let hash = hasher.hash_one(new);
            let found = distinct
                .find(hash, |&s| {
                    let s = &stacks[s as usize];
                    &kept[s.start..s.start + s.len as usize] == new
                })
                .copied();
            match found {
                Some(s) => {
                    stacks[s as usize].weight += w as u128;
                    tokens.truncate(start);
                }
                None => {
                    let len = (tokens.len() - start) as u32;
                    distinct.insert_unique(hash, stacks.len() as u32, |&s| {
                        hasher.hash_one(of(&stacks[s as usize]))
                    });
                    stacks.push(Stack {
                        start,
                        len,
                        weight: w as u128,
                    });
                }
            }
        }
        drop(distinct);
        drop((parents, depth, outer, node_token));
        let mut set = StackSet {
            frames,
            tokens,
            stacks,
            shift: 0,
        };
        set.sort_and_shift();
        set
    }

    /// Sort the (distinct) stacks by frames, and shift the weights down if their total
    /// exceeds `u64::MAX`, leaving out those that become 0.
    fn sort_and_shift(&mut self) {
        let tokens = &self.tokens;
        let of = |s: &Stack| &tokens[s.start..s.start + s.len as usize];
        self.stacks.sort_unstable_by(|a, b| of(a).cmp(of(b)));
        let total: u128 = self.stacks.iter().map(|s| s.weight).sum();
        self.shift = (128 - total.leading_zeros()).saturating_sub(64);
        let shift = self.shift;
        self.stacks.retain(|s| s.weight >> shift > 0);
    }

    /// How many stacks.
    pub(crate) fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Stack `i`'s tokens, outermost frame first.
    pub(crate) fn tokens(&self, i: usize) -> &[u32] {
        let s = &self.stacks[i];
        &self.tokens[s.start..s.start + s.len as usize]
    }

    /// Stack `i`'s weight, shifted.
    pub(crate) fn weight(&self, i: usize) -> u64 {
        (self.stacks[i].weight >> self.shift) as u64
    }

    /// The frame a token stands for.
    pub(crate) fn frame(&self, token: u32) -> Frame {
        self.frames[token as usize]
    }

    /// Every frame a token may stand for, by token.
    pub(crate) fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The weights were divided by `2^shift` ([`FlameStacks::shift`]).
    pub(crate) fn shift(&self) -> u32 {
        self.shift
    }

    /// The same stacks as a [`FlameStacks`], a vector per stack.
    pub(crate) fn to_flame_stacks(&self) -> FlameStacks {
        FlameStacks {
            stacks: (0..self.len())
                .map(|i| {
                    let frames = self.tokens(i).iter().map(|&t| self.frame(t)).collect();
                    (frames, self.weight(i))
                })
                .collect(),
            shift: self.shift,
        }
    }
}

/// For each node of [`parent_links`] `parents`, its depth (1 for a child of the root) and, for
/// a node deeper than [`FLAME_OUTER_FRAMES`], its ancestor at that depth (else itself): where
/// the outer frames kept around an elision end.
pub(crate) fn depths_and_outer(parents: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let mut depth = vec![0u32; parents.len()];
    let mut outer = vec![0u32; parents.len()];
    for (i, &p) in parents.iter().enumerate() {
        depth[i] = if p == ROOT {
            1
        } else {
            depth[p as usize].saturating_add(1)
        };
        outer[i] = if p != ROOT && depth[i] as usize > FLAME_OUTER_FRAMES {
            outer[p as usize]
        } else {
            i as u32
        };
    }
    (depth, outer)
}

/// The parent of node `i` from [`parent_links`], `None` for the root.
pub(crate) fn parent_of(links: &[u32], i: usize) -> Option<usize> {
    match links[i] {
        ROOT => None,
        p => Some(p as usize),
    }
}
