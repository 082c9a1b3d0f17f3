//! What the analyses whose results are calling contexts (the call tree, time) share: the
//! order their nodes are listed in, and the rows the text report shows for them. Both cost the
//! number of contexts (and of rows shown), never the sum of their depths.

use crate::model::{context_depths, parent_indices, ContextNode, MethodNames};

/// The report order of a tree's nodes, given as `(node, parent)` indices of the analysis'
/// tree (the root is 0 and is not listed; a parent that is not listed counts as the root;
/// indices are those of the analysis' arena, so at most its length): a depth-first walk, the
/// children of a node ordered by `key` (of their positions in `nodes`). Returns, in report
/// order, each node's position in `nodes` and its parent's report id (0: the root), the report
/// id of the `k`-th entry being `k + 1`. So the ids do not depend on the order the analysis
/// made its nodes in. Linear in the number of nodes (plus sorting siblings), with a few `u32`
/// per node: the children lists share one array.
pub(crate) fn depth_first<K: Ord>(
    nodes: &[(u32, u32)],
    key: impl Fn(usize) -> K,
) -> Vec<(u32, u32)> {
    const NONE: u32 = u32::MAX;
    let n = nodes.len();
    // Each node's children, as positions in `nodes`: those of the node at position `p` are
    // `children[first[p]..first[p + 1]]`, the roots' (children of position `n`) last.
    let mut first = vec![0u32; n + 2];
    let mut children = vec![0u32; n];
    {
        // Node index of the tree → position in `nodes`.
        let top = nodes.iter().map(|x| x.0 as usize + 1).max().unwrap_or(0);
        let mut at = vec![NONE; top];
        for (i, &(node, _)) in nodes.iter().enumerate() {
            at[node as usize] = i as u32;
        }
        let parent: Vec<u32> = nodes
            .iter()
            .map(|&(_, p)| match at.get(p as usize) {
                Some(&q) if q != NONE => q,
                _ => n as u32,
            })
            .collect();
        drop(at);
        for &p in &parent {
            first[p as usize] += 1;
        }
        // Running sums: `first[p]` is now where the lists up to `p`'s end.
        for p in 1..=n {
            first[p] += first[p - 1];
        }
        first[n + 1] = n as u32;
        // Filled from the back, so each list keeps position order and `first[p]` ends up at
        // its start.
        for i in (0..n).rev() {
            let p = parent[i] as usize;
            first[p] -= 1;
            children[first[p] as usize] = i as u32;
        }
    }
    for p in 0..=n {
        children[first[p] as usize..first[p + 1] as usize].sort_by_key(|&i| key(i as usize));
    }
    let below = |p: usize| &children[first[p] as usize..first[p + 1] as usize];
    let mut out = Vec::with_capacity(n);
    // (position in `nodes`, id of its parent in the report)
    let mut todo: Vec<(u32, u32)> = below(n).iter().rev().map(|&r| (r, 0)).collect();
    while let Some((i, parent)) = todo.pop() {
        out.push((i, parent));
        let id = out.len() as u32;
        todo.extend(below(i as usize).iter().rev().map(|&c| (c, id)));
    }
    out
}

/// One text row per context of `order` (indices into `nodes`): its stack as `a > b > c`, at
/// most five frames of it (a deeper stack keeps its outermost two and innermost three around
/// a count of the hidden frames), then ` (depth N)`, with `, context #ID` added where two rows
/// would otherwise read the same. Costs the number of nodes plus the rows shown, whatever the
/// depth.
pub(crate) fn stack_rows<N: ContextNode>(
    nodes: &[N],
    order: &[usize],
    names: &MethodNames<'_>,
) -> Vec<String> {
    let parents = parent_indices(nodes);
    let depth = context_depths(&parents);
    // Each context's ancestor at depth 2, found for all in one pass.
    let mut second = vec![0usize; parents.len()];
    for i in 0..parents.len() {
        second[i] = match parents[i] {
            Some(p) if depth[i] > 2 => second[p],
            _ => i,
        };
    }
    let walk = |from: usize, steps: usize| {
        let mut frames = Vec::new();
        let mut n = Some(from);
        for _ in 0..steps {
            let Some(j) = n else { break };
            frames.push(names.name(nodes[j].method()));
            n = parents[j];
        }
        frames.reverse();
        frames
    };
    let stacks: Vec<String> = order
        .iter()
        .map(|&i| {
            if depth[i] > 6 {
                let mut frames = walk(second[i], 2);
                frames.push(format!("…{} frames…", depth[i] - 5));
                frames.extend(walk(i, 3));
                frames.join(" > ")
            } else {
                walk(i, depth[i]).join(" > ")
            }
        })
        .collect();
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in &stacks {
        *seen.entry(r).or_default() += 1;
    }
    order
        .iter()
        .zip(&stacks)
        .map(|(&i, stack)| {
            // Two deep contexts can look alike once their middles are elided: those rows
            // name their context's id (its whole stack is in the JSON report).
            if seen[stack.as_str()] > 1 {
                format!("{stack} (depth {}, context #{})", depth[i], nodes[i].id())
            } else {
                format!("{stack} (depth {})", depth[i])
            }
        })
        .collect()
}

/// The contexts that have something of their own or below them (`own`), in report order:
/// each kept node's position in `nodes`, and its parent's report id (0: the root), the child
/// whose subtree weighs most (`weight`) first. `node` and `parent` give a node's tree index
/// and its parent's (0: the root); nodes come in index order, each after its parent. Linear
/// in the number of contexts, whatever their depth.
pub(crate) fn kept_in_order<N>(
    nodes: &[N],
    node: impl Fn(&N) -> u32,
    parent: impl Fn(&N) -> u32,
    method: impl Fn(&N) -> u32,
    own: impl Fn(&N) -> bool,
    weight: impl Fn(&N) -> u64,
) -> Vec<(u32, u32)> {
    let mut active: Vec<bool> = nodes.iter().map(&own).collect();
    let mut subtree: Vec<u64> = nodes.iter().map(&weight).collect();
    // Each node's place in the list.
    let mut at = vec![u32::MAX; nodes.last().map_or(0, |n| node(n) as usize + 1)];
    for (i, n) in nodes.iter().enumerate() {
        at[node(n) as usize] = i as u32;
    }
    for i in (0..nodes.len()).rev() {
        if parent(&nodes[i]) != 0 {
            let p = at[parent(&nodes[i]) as usize] as usize;
            active[p] |= active[i];
            subtree[p] = subtree[p].saturating_add(subtree[i]);
        }
    }
    drop(at);
    let kept: Vec<u32> = (0..nodes.len() as u32)
        .filter(|&i| active[i as usize])
        .collect();
    drop(active);
    let links: Vec<(u32, u32)> = kept
        .iter()
        .map(|&i| (node(&nodes[i as usize]), parent(&nodes[i as usize])))
        .collect();
    depth_first(&links, |k| {
        let i = kept[k] as usize;
        (std::cmp::Reverse(subtree[i]), method(&nodes[i]))
    })
    .into_iter()
    .map(|(j, p)| (kept[j as usize], p))
    .collect()
}
