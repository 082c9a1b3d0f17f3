//! Phase 2: Ball-Larus numbering of the edges of the acyclic path graph.
//!
//! The algorithm of Ball & Larus, "Efficient Path Profiling" (MICRO 1996): visiting nodes in
//! reverse topological order, `paths(EXIT) = 1`, `paths(v) = Σ paths(w)` over `v`'s out-edges
//! `v -> w`, and the i-th out-edge of `v` gets the value `Σ_{j<i} paths(w_j)`. The sum of the
//! values along every ENTRY-to-EXIT path is then a distinct number in `0..paths(ENTRY)`, which
//! the runtime decodes back into the path with the tables [`emit`](super::emit) writes.
//!
//! One choice is specific to cabprof: out-edges are ordered so that the edge without code (at
//! most one per node, checked here) comes first and gets the value 0, so no code is needed to
//! take it. Path counts are computed exactly (in `u128`, saturating) to decide whether the
//! function must be split or hashed; edge values are kept modulo 2^64, which is what the
//! generated code adds into its 64-bit register.

use super::graph::{Graph, EXIT};

/// Edge values of a [`Graph`].
#[derive(Debug)]
pub(super) struct Numbering {
    /// Out-edges of each node, in value order (the edge without code first).
    pub(super) out: Vec<Vec<usize>>,
    /// Paths from each node to EXIT, exact (saturating).
    pub(super) paths: Vec<u128>,
    /// Value of each edge, modulo 2^64 (exact when `paths[ENTRY]` fits).
    pub(super) value: Vec<u64>,
}

impl Graph {
    /// Nodes in postorder of a depth-first search (every edge goes from a later node to an
    /// earlier one), or an error if the graph has a cycle (an internal error).
    fn postorder(&self, out: &[Vec<usize>]) -> Result<Vec<usize>, String> {
        let mut state = vec![0u8; self.nodes]; // 0 new, 1 on stack, 2 done
        let mut order = Vec::with_capacity(self.nodes);
        for root in 0..self.nodes {
            if state[root] != 0 {
                continue;
            }
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some((v, i)) = stack.pop() {
                if let Some(&e) = out[v].get(i) {
                    stack.push((v, i + 1));
                    let w = self.edges[e].to;
                    match state[w] {
                        0 => {
                            state[w] = 1;
                            stack.push((w, 0));
                        }
                        1 => return Err("cycle in the path graph".into()),
                        _ => {}
                    }
                } else {
                    state[v] = 2;
                    order.push(v);
                }
            }
        }
        Ok(order)
    }

    /// Ball & Larus's numbering of the graph's edges (see the module documentation).
    pub(super) fn number(&self) -> Result<Numbering, String> {
        let mut out = vec![Vec::new(); self.nodes];
        for (i, e) in self.edges.iter().enumerate() {
            out[e.from].push(i);
        }
        for list in &mut out {
            // Stable: edges with code keep their creation order.
            list.sort_by_key(|&e| self.edges[e].site.is_some());
            if list.len() > 1
                && list
                    .iter()
                    .filter(|&&e| self.edges[e].site.is_none())
                    .count()
                    > 1
            {
                return Err("two edges without code leave one node".into());
            }
        }
        let order = self.postorder(&out)?;
        let mut paths = vec![0u128; self.nodes];
        let mut wrap = vec![0u64; self.nodes];
        let mut value = vec![0u64; self.edges.len()];
        for &v in &order {
            if v == EXIT {
                paths[v] = 1;
                wrap[v] = 1;
                continue;
            }
            let (mut p, mut w) = (0u128, 0u64);
            for &e in &out[v] {
                let to = self.edges[e].to;
                value[e] = w;
                p = p.saturating_add(paths[to]);
                w = w.wrapping_add(wrap[to]);
            }
            paths[v] = p;
            wrap[v] = w;
        }
        Ok(Numbering { out, paths, value })
    }
}
