//! Calling contexts as nodes linked to their parents, shared by the call tree's, the time
//! analysis' and the allocation analysis' lists: the walks over them (stacks, depths). The
//! flame-graph stacks made from them are `stacks.rs`'.

use super::*;
use std::collections::HashMap;

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

context_node!(
    ContextEntry,
    ContextTimeEntry,
    AllocContextEntry,
    super::WaitContextEntry
);

/// No parent: the root.
pub(crate) const ROOT: u32 = u32::MAX;

/// For each node, the index in `nodes` of its parent (`None`: the root). A parent that is not
/// an earlier entry counts as the root, so walking parents always ends.
pub fn parent_indices<N: ContextNode>(nodes: &[N]) -> Vec<Option<usize>> {
    parent_links(nodes)
        .into_iter()
        .map(|p| (p != ROOT).then_some(p as usize))
        .collect()
}

/// For each node, the index in `nodes` of its parent, [`ROOT`] for the root; a parent that is
/// not an earlier entry counts as the root, as in [`parent_indices`],
/// in 4 bytes a node rather than 16.
pub(crate) fn parent_links<N: ContextNode>(nodes: &[N]) -> Vec<u32> {
    let mut index: HashMap<u32, u32> = HashMap::with_capacity(nodes.len());
    nodes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = if c.parent() == 0 {
                ROOT
            } else {
                index.get(&c.parent()).copied().unwrap_or(ROOT)
            };
            index.entry(c.id()).or_insert(i as u32);
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
