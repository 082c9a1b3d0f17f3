//! Heap allocations per function and per calling context, from the `Alloc`, `Dealloc` and
//! `Realloc` words an allocation-tracking global allocator sends (the facade's
//! `cabprof::alloc::Tracked`).
//!
//! Each allocation word is charged to the context the thread is in when it allocates: the
//! innermost instrumented function and its callers, rebuilt from `Call`/`Return` words with a
//! shadow stack per thread (and per task between `Poll` and `PollEnd`, as the call-tree
//! analyses do). Allocations outside every instrumented function go to the root.
//!
//! What is counted, per context ([`AllocCounts`]):
//! - `allocs`, `bytes`: blocks allocated and their sizes (`alloc`, `alloc_zeroed`);
//! - `reallocs`: blocks resized; a resize that grows adds the growth to `bytes`, one that
//!   shrinks adds the shrinkage to `freed_bytes`, so a `Vec` grown to capacity `c` has
//!   allocated exactly `c` elements' bytes. A resize of half a gigabyte or more comes as two
//!   words, `ReallocFrom` then `ReallocTo`, which count as one resize;
//! - `frees`, `freed_bytes`: blocks freed and their sizes, charged where they are freed (a
//!   block made on one thread and freed on another balances in the totals, since each word
//!   carries its size).
//!
//! So `bytes - freed_bytes` over the whole run is the net growth of the heap, exactly, in
//! exhaustive and sequential modes. Per function, [`Allocations::by_function`] gives the
//! *self* counts (allocations made while the function was innermost) and the *inclusive*
//! ones (while it was anywhere on the stack; a recursive function counts each allocation
//! once).
//!
//! Futures: contexts belong to tasks, as in the call-tree analyses. A future's calling context
//! is the one of its first poll, and what its later polls allocate, on whatever thread, is
//! charged below it. A poll whose future's first poll this instance did not see (the future
//! moved to another thread's ring) is charged below a detached node, which
//! [`merge`](EventAnalysis::merge) grafts onto the future's context once the instance that saw
//! the first poll is merged in; until then it counts in the totals and in the function's self
//! counts, not in any context.

use cabprof_cab::event::{as_block, decode, EventKind, MethodId};
use hashbrown::HashMap;

use crate::call_tree::tracker::{ContextTracker, NodeData};
use crate::call_tree::trie::{NONE, ROOT};
use crate::EventAnalysis;

/// Allocation counts of one context or function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocCounts {
    /// Blocks allocated.
    pub allocs: u64,
    /// Bytes allocated: the blocks' sizes plus the growth of reallocations.
    pub bytes: u64,
    /// Blocks resized.
    pub reallocs: u64,
    /// Blocks freed.
    pub frees: u64,
    /// Bytes freed: the freed blocks' sizes plus the shrinkage of reallocations.
    pub freed_bytes: u64,
}

impl AllocCounts {
    /// Add `o`'s counts.
    pub fn add(&mut self, o: &AllocCounts) {
        self.allocs += o.allocs;
        self.bytes += o.bytes;
        self.reallocs += o.reallocs;
        self.frees += o.frees;
        self.freed_bytes += o.freed_bytes;
    }

    /// No allocation, resize or free.
    pub fn is_empty(&self) -> bool {
        *self == AllocCounts::default()
    }

    /// `bytes - freed_bytes`: what these allocations added to the heap (negative if more was
    /// freed here than allocated).
    pub fn net_bytes(&self) -> i64 {
        self.bytes as i64 - self.freed_bytes as i64
    }
}

/// One function's counts: where it was innermost (`self_`) and where it was on the stack
/// (`inclusive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionAllocs {
    /// The function ([`MethodId::ROOT`] for allocations outside instrumented functions).
    pub method: MethodId,
    /// While it was the innermost instrumented function.
    pub self_: AllocCounts,
    /// While it was anywhere on the stack.
    pub inclusive: AllocCounts,
}

/// One calling context's own counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextAllocs {
    /// Methods from the outermost frame to the innermost (empty: the root).
    pub stack: Vec<MethodId>,
    /// Calls that entered this context.
    pub calls: u64,
    /// Allocations made while this was the context.
    pub counts: AllocCounts,
}

/// One calling context as a node ([`Allocations::context_nodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocContext {
    /// Its index in the context tree (never 0, the root's).
    pub node: u32,
    /// The index of its calling context (0: the root), which comes earlier in the list.
    pub parent: u32,
    /// The method called in this context: the innermost frame of its stack.
    pub method: MethodId,
    /// Calls that entered this context.
    pub calls: u64,
    /// Allocations made while this was the context.
    pub counts: AllocCounts,
    /// The blocks allocated in this context and not freed (as far as the stream tells).
    pub live: LiveCounts,
}

/// Blocks allocated and not freed, and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Blocks.
    pub blocks: u64,
    /// Their sizes.
    pub bytes: u64,
}

/// The most live blocks an instance keeps by address (about 32 MiB of table); beyond it a
/// block is counted in [`Allocations::untracked_blocks`] and in no context's live counts.
pub const MAX_LIVE_BLOCKS: usize = 1 << 20;

/// Allocations by calling context; see the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allocations {
    /// The contexts (node 0 is the root; parents come before children; a node's count is
    /// the calls that entered it), each thread's open path, the futures.
    ctx: ContextTracker,
    /// Per node, same indices as the tree's (nodes past its end have none yet).
    counts: NodeCounts,
    /// Resizes whose `ReallocFrom` has come and whose `ReallocTo` has not yet: the old size,
    /// by thread (the ids of `Thread` words). Kept across `consume` calls, since a chunk may
    /// end between the two words; empty but for that moment.
    resizing: HashMap<u64, u64>,
    /// The allocation word whose block word comes next.
    pending: Option<Pending>,
}

/// An allocation word waiting for its block word (or, for a resize, words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// A block of `size` bytes made in context `node`.
    Alloc { node: u32, size: u64 },
    /// A block freed.
    Free,
    /// A block resized to `size` bytes in context `node`: the old block's address next.
    ResizeFrom { node: u32, size: u64 },
    /// The same, the old address known: the new block's next.
    ResizeTo { node: u32, size: u64, old: u64 },
}

/// Per node of the context tree: the counts, and the live blocks by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct NodeCounts {
    counts: Vec<AllocCounts>,
    /// Address to (the node it was allocated in, its size); at most [`MAX_LIVE_BLOCKS`].
    live: HashMap<u64, (u32, u64)>,
    /// Frees of blocks this stream did not see allocated (before the session, or by a thread
    /// whose stream another instance reads): a merge cancels the other side's live block.
    /// At most [`MAX_LIVE_BLOCKS`].
    orphans: hashbrown::HashSet<u64>,
    /// Blocks not kept for want of room.
    untracked: u64,
}

impl NodeCounts {
    /// The counts of node `n`, made (empty) with those before it if new.
    #[inline]
    fn at(&mut self, n: u32) -> &mut AllocCounts {
        let n = n as usize;
        if self.counts.len() <= n {
            self.counts.resize(n + 1, AllocCounts::default());
        }
        &mut self.counts[n]
    }

    /// A block made at `addr` in `node`.
    fn made(&mut self, addr: u64, node: u32, size: u64) {
        if self.live.len() < MAX_LIVE_BLOCKS || self.live.contains_key(&addr) {
            self.live.insert(addr, (node, size));
        } else {
            self.untracked += 1;
        }
    }

    /// The block at `addr` freed: its entry goes, or the free waits for a merge.
    fn freed(&mut self, addr: u64) -> Option<(u32, u64)> {
        let gone = self.live.remove(&addr);
        if gone.is_none() && self.orphans.len() < MAX_LIVE_BLOCKS {
            self.orphans.insert(addr);
        }
        gone
    }
}

impl NodeData for NodeCounts {
    fn moved(&mut self, moved: &HashMap<u32, u32>) {
        for (&from, &onto) in moved {
            let counts = std::mem::take(self.at(from));
            self.at(onto).add(&counts);
        }
        for (node, _) in self.live.values_mut() {
            if let Some(&onto) = moved.get(node) {
                *node = onto;
            }
        }
    }
}

impl Allocations {
    /// No allocation seen yet.
    pub fn new() -> Allocations {
        Allocations::default()
    }

    /// `true` if the attribution may differ from the exact one (a sampled stream, a
    /// resynchronised stack). The totals are exact whenever the stream is complete.
    pub fn is_approximate(&self) -> bool {
        self.ctx.frames.approximate
    }

    /// Mark the results approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.ctx.frames.approximate = approximate;
    }

    /// `Call`s and `Return`s that did not match the open stack (sampling gaps).
    pub fn resyncs(&self) -> u64 {
        self.ctx.frames.resyncs + self.ctx.frames.unmatched_returns
    }

    /// Counts over every context.
    pub fn totals(&self) -> AllocCounts {
        let mut t = AllocCounts::default();
        for c in &self.counts.counts {
            t.add(c);
        }
        t
    }

    /// The counts of the context `stack` (outermost first; empty for the root), if seen.
    pub fn context(&self, stack: &[MethodId]) -> Option<AllocCounts> {
        let n = self.ctx.tree.walk(ROOT, stack)?;
        Some(self.counts_at(n))
    }

    /// The root context's own counts: what was allocated outside every instrumented function.
    pub fn root(&self) -> AllocCounts {
        self.counts_at(ROOT)
    }

    fn counts_at(&self, n: u32) -> AllocCounts {
        self.counts
            .counts
            .get(n as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Futures this instance saw polled whose calling context is still unknown to it (their
    /// first poll was in a stream not merged in yet) or whose other polls may still come from
    /// other streams.
    pub fn pending_tasks(&self) -> usize {
        self.ctx.tasks.len()
    }

    /// Every calling context (root excluded) as a node linked to its parent, in the tree's
    /// order: parents come before their children. Unlike [`contexts`](Self::contexts), this is
    /// linear in the number of contexts.
    pub fn context_nodes(&self) -> Vec<AllocContext> {
        let attached = self.ctx.tree.attached();
        let live = self.live_by_node();
        self.ctx
            .tree
            .nodes
            .iter()
            .enumerate()
            .skip(1)
            .filter(|&(i, _)| attached[i])
            .map(|(i, n)| AllocContext {
                node: i as u32,
                parent: n.parent,
                method: n.method,
                calls: n.count,
                counts: self.counts_at(i as u32),
                live: live.get(i).copied().unwrap_or_default(),
            })
            .collect()
    }

    /// The root context's live blocks: made outside every instrumented function.
    pub fn root_live(&self) -> LiveCounts {
        self.live_by_node()
            .get(ROOT as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Every context with allocation activity of its own, sorted by stack. Each stack is
    /// copied in full, so this costs the sum of all depths (quadratic in a deep recursion):
    /// use [`context_nodes`](Self::context_nodes) for reports.
    pub fn contexts(&self) -> Vec<ContextAllocs> {
        let attached = self.ctx.tree.attached();
        let mut out: Vec<ContextAllocs> = (0..self.ctx.tree.nodes.len())
            .filter(|&i| attached[i] && !self.counts_at(i as u32).is_empty())
            .map(|i| ContextAllocs {
                stack: self.ctx.tree.path_between(ROOT, i as u32),
                calls: self.ctx.tree.nodes[i].count,
                counts: self.counts_at(i as u32),
            })
            .collect();
        out.sort_unstable_by(|a, b| a.stack.cmp(&b.stack));
        out
    }

    /// Self and inclusive counts of every function with any (the root, method 0, holds what
    /// was allocated outside instrumented functions), sorted by method id. Linear in the
    /// number of contexts: a function's inclusive counts are the subtree totals of its
    /// outermost contexts (those with no caller of the same function above them). What a
    /// detached subtree holds (polls of a future whose first poll is in a stream not merged
    /// in) counts as if the subtree hung from the root.
    pub fn by_function(&self) -> Vec<FunctionAllocs> {
        fn slot(map: &mut HashMap<MethodId, FunctionAllocs>, m: MethodId) -> &mut FunctionAllocs {
            map.entry(m).or_insert(FunctionAllocs {
                method: m,
                self_: AllocCounts::default(),
                inclusive: AllocCounts::default(),
            })
        }
        let nodes = &self.ctx.tree.nodes;
        // Each node's subtree totals: children come after their parents.
        let mut subtree: Vec<AllocCounts> =
            (0..nodes.len()).map(|i| self.counts_at(i as u32)).collect();
        for i in (1..nodes.len()).rev() {
            let below = subtree[i];
            if nodes[i].parent != NONE {
                subtree[nodes[i].parent as usize].add(&below);
            }
        }
        // Children lists (by index), for a depth-first walk that knows which functions are
        // open above each node.
        let mut first_child = vec![u32::MAX; nodes.len()];
        let mut next_sibling = vec![u32::MAX; nodes.len()];
        for i in (1..nodes.len()).rev() {
            if nodes[i].parent == NONE {
                continue;
            }
            let p = nodes[i].parent as usize;
            next_sibling[i] = first_child[p];
            first_child[p] = i as u32;
        }
        let mut map: HashMap<MethodId, FunctionAllocs> = HashMap::new();
        let mut open: HashMap<MethodId, u32> = HashMap::new();
        // (node, entered): a node is visited on the way down and again on the way up. The
        // detached roots are walked like the root.
        let mut todo: Vec<(u32, bool)> = (1..nodes.len())
            .rev()
            .filter(|&i| nodes[i].parent == NONE)
            .map(|i| (i as u32, false))
            .collect();
        todo.push((ROOT, false));
        while let Some((n, entered)) = todo.pop() {
            let node = &nodes[n as usize];
            let counts = self.counts_at(n);
            if entered {
                if let Some(c) = open.get_mut(&node.method) {
                    *c -= 1;
                }
                continue;
            }
            if !counts.is_empty() {
                slot(&mut map, node.method).self_.add(&counts);
            }
            let above = open.entry(node.method).or_insert(0);
            if *above == 0 && !subtree[n as usize].is_empty() {
                slot(&mut map, node.method)
                    .inclusive
                    .add(&subtree[n as usize]);
            }
            *above += 1;
            todo.push((n, true));
            let mut c = first_child[n as usize];
            while c != u32::MAX {
                todo.push((c, false));
                c = next_sibling[c as usize];
            }
        }
        let mut out: Vec<FunctionAllocs> = map.into_values().collect();
        out.sort_unstable_by_key(|f| f.method);
        out
    }

    #[inline]
    fn here(&mut self) -> &mut AllocCounts {
        self.counts.at(self.ctx.top())
    }

    /// Live blocks and bytes per node (same indices as the tree's; empty when nothing is
    /// live, so that a report of many contexts and no live block costs nothing more).
    fn live_by_node(&self) -> Vec<LiveCounts> {
        if self.counts.live.is_empty() {
            return Vec::new();
        }
        let mut out = vec![LiveCounts::default(); self.ctx.tree.nodes.len()];
        for &(node, size) in self.counts.live.values() {
            if let Some(l) = out.get_mut(node as usize) {
                l.blocks += 1;
                l.bytes += size;
            }
        }
        out
    }

    /// Blocks allocated while more than [`MAX_LIVE_BLOCKS`] were live, whose frees this
    /// instance cannot match: in no context's live counts.
    pub fn untracked_blocks(&self) -> u64 {
        self.counts.untracked
    }

    /// A block word: the address of the block the allocation word before it was about.
    #[cold]
    fn on_block(&mut self, addr: u64) {
        match self.pending.take() {
            Some(Pending::Alloc { node, size }) => self.counts.made(addr, node, size),
            Some(Pending::Free) => {
                self.counts.freed(addr);
            }
            Some(Pending::ResizeFrom { node, size }) => {
                self.pending = Some(Pending::ResizeTo {
                    node,
                    size,
                    old: addr,
                });
            }
            Some(Pending::ResizeTo { node, size, old }) => {
                // The block keeps the context it was made in, if this stream saw it made.
                let node = self.counts.freed(old).map_or(node, |(n, _)| n);
                self.counts.made(addr, node, size);
            }
            // Its allocation word was lost (a sampling gap, already approximate).
            None => {}
        }
    }

    /// A word other than a block word while one was awaited: the stream has no addresses (a
    /// hand-made one), or the word was lost (a sampling gap, already approximate). Only the
    /// live blocks miss it; the counts are whole.
    #[cold]
    fn block_lost(&mut self) {
        self.pending = None;
    }

    /// A block resized from `old` to `new` bytes, here.
    #[inline]
    fn resized(&mut self, old: u64, new: u64) {
        let c = self.here();
        c.reallocs += 1;
        if new >= old {
            c.bytes += new - old;
        } else {
            c.freed_bytes += old - new;
        }
    }

    /// An allocation word while this thread's two-word resize is half seen: its `ReallocTo`
    /// was lost (a sampling gap). The resize is dropped, like any lost word.
    #[cold]
    fn half_resize_lost(&mut self) {
        if self
            .resizing
            .remove(&self.ctx.frames.threads.current_id())
            .is_some()
        {
            self.ctx.frames.approximate = true;
        }
    }
}

impl EventAnalysis for Allocations {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(addr) = as_block(w) {
                self.on_block(addr);
                continue;
            }
            if self.pending.is_some() {
                self.block_lost();
            }
            match decode(w) {
                Some(EventKind::Alloc { size }) => {
                    if !self.resizing.is_empty() {
                        self.half_resize_lost();
                    }
                    let c = self.here();
                    c.allocs += 1;
                    c.bytes += size;
                    let node = self.ctx.top();
                    self.pending = Some(Pending::Alloc { node, size });
                }
                Some(EventKind::Dealloc { size }) => {
                    if !self.resizing.is_empty() {
                        self.half_resize_lost();
                    }
                    let c = self.here();
                    c.frees += 1;
                    c.freed_bytes += size;
                    self.pending = Some(Pending::Free);
                }
                Some(EventKind::Realloc { old, new }) => {
                    if !self.resizing.is_empty() {
                        self.half_resize_lost();
                    }
                    self.resized(old, new);
                    let node = self.ctx.top();
                    self.pending = Some(Pending::ResizeFrom { node, size: new });
                }
                // A resize too large for one word: counted, where the thread is, once its
                // second word comes (the next allocation word of the thread, by construction).
                Some(EventKind::ReallocFrom { old }) => {
                    if !self.resizing.is_empty() {
                        self.half_resize_lost();
                    }
                    self.resizing
                        .insert(self.ctx.frames.threads.current_id(), old);
                }
                Some(EventKind::ReallocTo { new }) => {
                    match self.resizing.remove(&self.ctx.frames.threads.current_id()) {
                        Some(old) => {
                            self.resized(old, new);
                            let node = self.ctx.top();
                            self.pending = Some(Pending::ResizeFrom { node, size: new });
                        }
                        // Its first word was lost (a sampling gap): the old size is unknown.
                        None => self.ctx.frames.approximate = true,
                    }
                }
                Some(kind) => {
                    self.ctx.on_structure(kind, &mut self.counts);
                }
                None => {}
            }
        }
    }

    fn merge(&mut self, other: Allocations) {
        // Parents precede children in both arenas: one pass in index order maps every node.
        let to_self = self.ctx.merge_tree(&other.ctx);
        for (i, c) in other.counts.counts.iter().enumerate() {
            self.counts.at(to_self[i]).add(c);
        }
        // Live blocks: what one stream freed of what the other made is gone (a block freed on
        // another thread than the one that made it).
        for &addr in &other.counts.orphans {
            if self.counts.live.remove(&addr).is_none()
                && self.counts.orphans.len() < MAX_LIVE_BLOCKS
            {
                self.counts.orphans.insert(addr);
            }
        }
        for (addr, (node, size)) in other.counts.live {
            if !self.counts.orphans.remove(&addr) {
                self.counts.made(addr, to_self[node as usize], size);
            }
        }
        self.counts.untracked += other.counts.untracked;
        self.ctx.merge_tasks(other.ctx, &to_self, &mut self.counts);
        // `other.resizing` is not merged: `other`'s stream has ended (a closed ring, a
        // snapshot's copy), so a resize half seen there never completes, and its thread ids
        // are not this stream's.
    }
}
