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
//!   allocated exactly `c` elements' bytes;
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
//! Futures: a poll whose future's first poll this instance did not see (the future moved to
//! another thread's ring) is charged below `root → the async fn`, and the result is marked
//! approximate: the function's self counts stay right, its callers' inclusive counts miss it.

use cabprof_cab::event::{decode, EventKind, MethodId};
use hashbrown::HashMap;

use crate::thread_stacks::ThreadStacks;
use crate::EventAnalysis;

/// The root context's node.
const ROOT: u32 = 0;

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
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    parent: u32,
    method: MethodId,
    calls: u64,
    counts: AllocCounts,
}

/// A future: its `async fn` and its task id.
type TaskKey = (MethodId, u32);

/// One thread's open frames (node indices, innermost last) and its polls in progress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Open {
    stack: Vec<u32>,
    polls: Vec<(TaskKey, Vec<u32>)>,
}

/// Allocations by calling context; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocations {
    /// Node 0 is the root; parents come before children.
    nodes: Vec<Node>,
    children: HashMap<(u32, MethodId), u32>,
    threads: ThreadStacks<Open>,
    /// Where each future seen at its first poll, and not finished, has its frame.
    tasks: HashMap<TaskKey, u32>,
    approximate: bool,
    resyncs: u64,
}

impl Default for Allocations {
    fn default() -> Self {
        Allocations {
            nodes: vec![Node {
                parent: ROOT,
                method: MethodId::ROOT,
                calls: 0,
                counts: AllocCounts::default(),
            }],
            children: HashMap::new(),
            threads: ThreadStacks::default(),
            tasks: HashMap::new(),
            approximate: false,
            resyncs: 0,
        }
    }
}

impl Allocations {
    /// No allocation seen yet.
    pub fn new() -> Allocations {
        Allocations::default()
    }

    /// `true` if the attribution may differ from the exact one (a sampled stream, a
    /// resynchronised stack, a future polled here whose first poll was elsewhere). The totals
    /// are exact whenever the stream is complete.
    pub fn is_approximate(&self) -> bool {
        self.approximate
    }

    /// Mark the results approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.approximate = approximate;
    }

    /// `Call`s and `Return`s that did not match the open stack (sampling gaps).
    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    /// Counts over every context.
    pub fn totals(&self) -> AllocCounts {
        let mut t = AllocCounts::default();
        for n in &self.nodes {
            t.add(&n.counts);
        }
        t
    }

    /// The counts of the context `stack` (outermost first; empty for the root), if seen.
    pub fn context(&self, stack: &[MethodId]) -> Option<AllocCounts> {
        let mut n = ROOT;
        for m in stack {
            n = *self.children.get(&(n, *m))?;
        }
        Some(self.nodes[n as usize].counts)
    }

    /// The root context's own counts: what was allocated outside every instrumented function.
    pub fn root(&self) -> AllocCounts {
        self.nodes[ROOT as usize].counts
    }

    /// Every calling context (root excluded) as a node linked to its parent, in the tree's
    /// order: the `k`-th entry is node `k + 1`, and parents come before their children.
    /// Unlike [`contexts`](Self::contexts), this is linear in the number of contexts.
    pub fn context_nodes(&self) -> Vec<AllocContext> {
        self.nodes
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, n)| AllocContext {
                node: i as u32,
                parent: n.parent,
                method: n.method,
                calls: n.calls,
                counts: n.counts,
            })
            .collect()
    }

    /// Every context with allocation activity of its own, sorted by stack. Each stack is
    /// copied in full, so this costs the sum of all depths (quadratic in a deep recursion):
    /// use [`context_nodes`](Self::context_nodes) for reports.
    pub fn contexts(&self) -> Vec<ContextAllocs> {
        let mut out: Vec<ContextAllocs> = (0..self.nodes.len())
            .filter(|&i| !self.nodes[i].counts.is_empty())
            .map(|i| ContextAllocs {
                stack: self.stack_of(i as u32),
                calls: self.nodes[i].calls,
                counts: self.nodes[i].counts,
            })
            .collect();
        out.sort_unstable_by(|a, b| a.stack.cmp(&b.stack));
        out
    }

    /// Self and inclusive counts of every function with any (the root, method 0, holds what
    /// was allocated outside instrumented functions), sorted by method id. Linear in the
    /// number of contexts: a function's inclusive counts are the subtree totals of its
    /// outermost contexts (those with no caller of the same function above them).
    pub fn by_function(&self) -> Vec<FunctionAllocs> {
        fn slot(map: &mut HashMap<MethodId, FunctionAllocs>, m: MethodId) -> &mut FunctionAllocs {
            map.entry(m).or_insert(FunctionAllocs {
                method: m,
                self_: AllocCounts::default(),
                inclusive: AllocCounts::default(),
            })
        }
        let nodes = &self.nodes;
        // Each node's subtree totals: children come after their parents.
        let mut subtree: Vec<AllocCounts> = nodes.iter().map(|n| n.counts).collect();
        for i in (1..nodes.len()).rev() {
            let below = subtree[i];
            subtree[nodes[i].parent as usize].add(&below);
        }
        // Children lists (by index), for a depth-first walk that knows which functions are
        // open above each node.
        let mut first_child = vec![u32::MAX; nodes.len()];
        let mut next_sibling = vec![u32::MAX; nodes.len()];
        for i in (1..nodes.len()).rev() {
            let p = nodes[i].parent as usize;
            next_sibling[i] = first_child[p];
            first_child[p] = i as u32;
        }
        let mut map: HashMap<MethodId, FunctionAllocs> = HashMap::new();
        let mut open: HashMap<MethodId, u32> = HashMap::new();
        // (node, entered): a node is visited on the way down and again on the way up.
        let mut todo: Vec<(u32, bool)> = vec![(ROOT, false)];
        while let Some((n, entered)) = todo.pop() {
            let node = &nodes[n as usize];
            if entered {
                if let Some(c) = open.get_mut(&node.method) {
                    *c -= 1;
                }
                continue;
            }
            if !node.counts.is_empty() {
                slot(&mut map, node.method).self_.add(&node.counts);
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

    fn stack_of(&self, mut n: u32) -> Vec<MethodId> {
        let mut s = Vec::new();
        while n != ROOT {
            let node = &self.nodes[n as usize];
            s.push(node.method);
            n = node.parent;
        }
        s.reverse();
        s
    }

    /// The child of `parent` for `method`, made if new.
    fn child(&mut self, parent: u32, method: MethodId) -> u32 {
        if let Some(&c) = self.children.get(&(parent, method)) {
            return c;
        }
        let c = u32::try_from(self.nodes.len()).expect("allocation contexts outgrew u32");
        self.nodes.push(Node {
            parent,
            method,
            calls: 0,
            counts: AllocCounts::default(),
        });
        self.children.insert((parent, method), c);
        c
    }

    #[inline]
    fn current(&self) -> u32 {
        self.threads.current.stack.last().copied().unwrap_or(ROOT)
    }

    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        let mut at = self.current();
        if self.nodes[at as usize].method != caller {
            at = self.resync_call(caller);
        }
        let c = self.child(at, callee);
        self.nodes[c as usize].calls += 1;
        self.threads.current.stack.push(c);
    }

    /// A `Call` whose caller is not the innermost open frame: continue from the innermost
    /// open frame of the caller, else from the root (caller 0), else from root → caller.
    #[cold]
    fn resync_call(&mut self, caller: MethodId) -> u32 {
        self.approximate = true;
        self.resyncs += 1;
        let nodes = &self.nodes;
        let open = &mut self.threads.current.stack;
        if let Some(i) = open
            .iter()
            .rposition(|&n| nodes[n as usize].method == caller)
        {
            open.truncate(i + 1);
            return open[i];
        }
        open.clear();
        if caller == MethodId::ROOT {
            return ROOT;
        }
        let c = self.child(ROOT, caller);
        self.threads.current.stack.push(c);
        c
    }

    fn on_return(&mut self, callee: MethodId) {
        let nodes = &self.nodes;
        let open = &mut self.threads.current.stack;
        match open.last() {
            Some(&n) if nodes[n as usize].method == callee => {
                open.pop();
            }
            _ => {
                self.approximate = true;
                self.resyncs += 1;
                if let Some(i) = open
                    .iter()
                    .rposition(|&n| nodes[n as usize].method == callee)
                {
                    open.truncate(i);
                }
            }
        }
    }

    fn on_poll(&mut self, method: MethodId, task: u32, first: bool) {
        let key = (method, task);
        let node = if first {
            let open = &mut self.threads.current.stack;
            match open.last() {
                Some(&n) if self.nodes[n as usize].method == method => {
                    open.pop();
                    n
                }
                _ => {
                    self.approximate = true;
                    self.child(ROOT, method)
                }
            }
        } else if let Some(&n) = self.tasks.get(&key) {
            n
        } else {
            // First polled in another stream: its calling context is not known here.
            self.approximate = true;
            self.child(ROOT, method)
        };
        self.tasks.insert(key, node);
        let open = &mut self.threads.current;
        let parked = std::mem::replace(&mut open.stack, vec![node]);
        open.polls.push((key, parked));
    }

    fn on_poll_end(&mut self, task: u32, done: bool) {
        let open = &mut self.threads.current;
        let Some((key, parked)) = open.polls.pop() else {
            self.approximate = true;
            return;
        };
        self.approximate |= key.1 != task;
        open.stack = parked;
        if done {
            self.tasks.remove(&key);
        }
    }

    #[inline]
    fn here(&mut self) -> &mut AllocCounts {
        let n = self.current();
        &mut self.nodes[n as usize].counts
    }
}

impl EventAnalysis for Allocations {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            match decode(w) {
                Some(EventKind::Alloc { size }) => {
                    let c = self.here();
                    c.allocs += 1;
                    c.bytes += size;
                }
                Some(EventKind::Dealloc { size }) => {
                    let c = self.here();
                    c.frees += 1;
                    c.freed_bytes += size;
                }
                Some(EventKind::Realloc { old, new }) => {
                    let c = self.here();
                    c.reallocs += 1;
                    if new >= old {
                        c.bytes += new - old;
                    } else {
                        c.freed_bytes += old - new;
                    }
                }
                Some(EventKind::Call { caller, callee }) => self.on_call(caller, callee),
                Some(EventKind::Return { callee } | EventKind::TimedReturn { callee, .. }) => {
                    self.on_return(callee)
                }
                Some(EventKind::Thread { id }) => {
                    self.threads.switch_to(id);
                }
                Some(EventKind::Poll {
                    method,
                    task,
                    first,
                }) => self.on_poll(method, task, first),
                Some(EventKind::PollEnd { task, done, .. }) => self.on_poll_end(task, done),
                _ => {}
            }
        }
    }

    fn merge(&mut self, other: Allocations) {
        // Parents precede children in both arenas: one pass in index order maps every node.
        let mut to_self = vec![ROOT; other.nodes.len()];
        for (i, node) in other.nodes.iter().enumerate() {
            let n = if i == 0 {
                ROOT
            } else {
                self.child(to_self[node.parent as usize], node.method)
            };
            self.nodes[n as usize].calls += node.calls;
            self.nodes[n as usize].counts.add(&node.counts);
            to_self[i] = n;
        }
        self.approximate |= other.approximate;
        self.resyncs += other.resyncs;
    }
}
