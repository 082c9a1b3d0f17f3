//! Splitting paths when a body has more than the budget allows.
//!
//! When `paths(ENTRY)` exceeds the budget, paths are *split*: a split point before a statement
//! works like a back edge (the path ends there, a new one starts there), so the number of paths
//! through that point turns from a product into a sum. This module chooses the points, greedily;
//! the [`builder`](super::builder) then walks the body again with them.

use super::graph::{Graph, ENTRY, EXIT};
use std::collections::{HashMap, HashSet};

impl Graph {
    /// Greedy split points: repeatedly cut the statement boundary that removes the most
    /// paths (cutting node `c` turns `to(c) * from(c)` paths into `to(c) + from(c)`), until
    /// at most `limit` remain. `None` if no boundary helps enough.
    pub(super) fn choose_cuts(&self, limit: u64) -> Option<HashSet<usize>> {
        // Adjacency by target node, which cuts rewrite.
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); self.nodes];
        for e in &self.edges {
            out[e.from].push(e.to);
        }
        let mut first_candidate: HashMap<usize, usize> = HashMap::new();
        for (id, c) in self.candidates.iter().enumerate() {
            if let Some(c) = c {
                first_candidate.entry(*c).or_insert(id);
            }
        }
        let mut chosen = HashSet::new();
        let mut cut = HashSet::new();
        loop {
            let n = out.len();
            // Postorder over the rewritten adjacency.
            let mut state = vec![0u8; n];
            let mut order = Vec::with_capacity(n);
            for root in 0..n {
                if state[root] != 0 {
                    continue;
                }
                let mut stack = vec![(root, 0usize)];
                state[root] = 1;
                while let Some((v, i)) = stack.pop() {
                    if let Some(&w) = out[v].get(i) {
                        stack.push((v, i + 1));
                        if state[w] == 0 {
                            state[w] = 1;
                            stack.push((w, 0));
                        }
                    } else {
                        state[v] = 2;
                        order.push(v);
                    }
                }
            }
            let mut from = vec![0u128; n];
            for &v in &order {
                from[v] = if v == EXIT {
                    1
                } else {
                    out[v].iter().fold(0u128, |a, &w| a.saturating_add(from[w]))
                };
            }
            if from[ENTRY] <= limit as u128 {
                return Some(chosen);
            }
            let mut to = vec![0u128; n];
            to[ENTRY] = 1;
            for &v in order.iter().rev() {
                for &w in &out[v] {
                    to[w] = to[w].saturating_add(to[v]);
                }
            }
            let best = first_candidate
                .iter()
                .filter(|(c, _)| !cut.contains(*c))
                .map(|(&c, &id)| {
                    let gain = to[c]
                        .saturating_mul(from[c])
                        .saturating_sub(to[c].saturating_add(from[c]));
                    (gain, std::cmp::Reverse(id), c)
                })
                .max()?;
            if best.0 == 0 {
                return None;
            }
            let c = best.2;
            let c2 = out.len();
            let moved = std::mem::replace(&mut out[c], vec![EXIT]);
            out.push(moved);
            out[ENTRY].push(c2);
            cut.insert(c);
            chosen.insert(first_candidate[&c]);
        }
    }
}
