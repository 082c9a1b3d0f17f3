//! Calling contexts as nodes linked to their parents, shared by the call tree's, the time
//! analysis' and the allocation analysis' lists: the walks over them (stacks, depths) and the
//! flame-graph stacks made from them.

use super::stacks::StackSet;
use super::*;

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

/// A calling context as a node linked to its parent: what the call tree's, the time
/// analysis' and the allocation analysis' contexts share, so that one set of walks (stacks,
/// depths, flame graphs, text rows) serves them all.
pub trait ContextNode {
    /// The context's id (never 0).
    fn id(&self) -> u32;
    /// The calling context's id (0: the root).
    fn parent(&self) -> u32;
    /// The method called in this context.
    fn method(&self) -> u32;
}

/// [`ContextNode`] for entry types with `id`, `parent` and `method` fields.
macro_rules! context_node {
    ($($entry:ty),*) => {$(
        impl ContextNode for $entry {
            fn id(&self) -> u32 {
                self.id
            }
            fn parent(&self) -> u32 {
                self.parent
            }
            fn method(&self) -> u32 {
                self.method
            }
        }
    )*};
}

context_node!(ContextEntry, ContextTimeEntry, AllocContextEntry);

/// For each node, the index in `nodes` of its parent (`None`: the root). A parent that is not
/// an earlier entry counts as the root, so walking parents always ends.
pub fn parent_indices<N: ContextNode>(nodes: &[N]) -> Vec<Option<usize>> {
    let mut index: std::collections::HashMap<u32, usize> =
        std::collections::HashMap::with_capacity(nodes.len());
    nodes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = if c.parent() == 0 {
                None
            } else {
                index.get(&c.parent()).copied()
            };
            index.entry(c.id()).or_insert(i);
            p
        })
        .collect()
}

/// The depth of each node (1 for a child of the root), from [`parent_indices`].
pub fn context_depths(parents: &[Option<usize>]) -> Vec<usize> {
    let mut depth = vec![0usize; parents.len()];
    for i in 0..parents.len() {
        depth[i] = parents[i].map_or(0, |p| depth[p]) + 1;
    }
    depth
}

/// The stack of node `i`, outermost first: costs its depth.
pub fn context_stack<N: ContextNode>(nodes: &[N], parents: &[Option<usize>], i: usize) -> Vec<u32> {
    let mut out = Vec::new();
    let mut n = Some(i);
    while let Some(j) = n {
        out.push(nodes[j].method());
        n = parents[j];
    }
    out.reverse();
    out
}
