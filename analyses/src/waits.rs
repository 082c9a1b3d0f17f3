//! Where the time waits: lock waits and holds, blocked channel sends and receives, per calling
//! context and per creation site, from the wait words the facade's `cabprof::sync` wrappers
//! send (`cabprof_cab::event::as_wait`).
//!
//! A channel message's latency (a `Latency` word: from its send to its receive) is no wait of
//! either profile: it is counted per channel site only ([`Waits::site_latencies`]).
//!
//! Each wait is charged to the context the thread that wrote it is in: the waiter's for a
//! lock wait, a blocked send or receive (Go's *block* profile), the releasing holder's for a
//! contended hold (Go's *mutex* profile, whose delay is the hold's time after a thread began
//! to wait, once per waiter). Contexts are rebuilt with the shared context tracker (`call_tree::tracker`), as the
//! allocations analysis does; waits outside every instrumented function go to the root.

use cabprof_cab::event::{as_wait, decode, MethodId, WaitKind, WaitWord};
use hashbrown::HashMap;

use crate::call_tree::tracker::{ContextTracker, NodeData};
use crate::call_tree::trie::ROOT;
use crate::EventAnalysis;

/// Contentions and their delay in one profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delay {
    /// Contended acquisitions, blocked operations (block profile) or waiters released
    /// (mutex profile).
    pub count: u64,
    /// Nanoseconds waited.
    pub ns: u64,
}

impl Delay {
    fn add(&mut self, o: &Delay) {
        self.count += o.count;
        self.ns = self.ns.saturating_add(o.ns);
    }
}

/// A context's or a site's waits, in both of Go's profiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// Waits for a lock, a full channel or an empty one (the waiter's).
    pub block: Delay,
    /// Contended holds: the time others waited, charged to the holder (lock sites only).
    pub mutex: Delay,
}

impl WaitCounts {
    /// Add `o`'s counts.
    pub fn add(&mut self, o: &WaitCounts) {
        self.block.add(&o.block);
        self.mutex.add(&o.mutex);
    }

    /// Nothing waited.
    pub fn is_empty(&self) -> bool {
        *self == WaitCounts::default()
    }

    fn record(&mut self, kind: WaitKind, waiters: u32, ns: u64) {
        match kind {
            WaitKind::Hold => self.mutex.add(&Delay {
                count: waiters as u64,
                ns: ns.saturating_mul(waiters as u64),
            }),
            WaitKind::Lock | WaitKind::Send | WaitKind::Receive => {
                self.block.add(&Delay { count: 1, ns })
            }
            // Not a wait: counted per site only ([`ChannelLatency`]).
            WaitKind::Latency => {}
        }
    }
}

/// One calling context as a node ([`Waits::context_nodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitContext {
    /// Its index in the context tree (never 0, the root's).
    pub node: u32,
    /// The index of its calling context (0: the root), which comes earlier in the list.
    pub parent: u32,
    /// The method called in this context.
    pub method: MethodId,
    /// Calls that entered this context.
    pub calls: u64,
    /// Waits while this was the context.
    pub counts: WaitCounts,
}

/// Per node of the context tree, the counts (same indices as the tree's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct NodeCounts(Vec<WaitCounts>);

impl NodeCounts {
    fn at(&mut self, n: u32) -> &mut WaitCounts {
        let n = n as usize;
        if self.0.len() <= n {
            self.0.resize(n + 1, WaitCounts::default());
        }
        &mut self.0[n]
    }

    fn get(&self, n: u32) -> WaitCounts {
        self.0.get(n as usize).copied().unwrap_or_default()
    }
}

impl NodeData for NodeCounts {
    fn moved(&mut self, moved: &HashMap<u32, u32>) {
        for (&from, &onto) in moved {
            let counts = std::mem::take(self.at(from));
            self.at(onto).add(&counts);
        }
    }
}

/// The upper bounds, in nanoseconds, of the buckets a site's single block-profile waits are
/// counted in ([`Waits::site_histograms`]): a microsecond to ten seconds, a decade apart; a
/// last bucket, unbounded, follows them.
pub const WAIT_BUCKETS_NS: [u64; 8] = [
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// A site's block-profile waits per bucket of [`WAIT_BUCKETS_NS`], the unbounded one last.
pub type WaitBuckets = [u64; WAIT_BUCKETS_NS.len() + 1];

/// A channel site's messages, each from the call that sent it to the receive that took it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelLatency {
    /// Messages received with a send time (sent while a session recorded with this analysis).
    pub count: u64,
    /// Their nanoseconds, summed.
    pub ns: u64,
    /// The longest, in nanoseconds.
    pub max_ns: u64,
    /// How many fell in each bucket of [`WAIT_BUCKETS_NS`], the unbounded one last.
    pub buckets: WaitBuckets,
}

impl ChannelLatency {
    fn record(&mut self, ns: u64) {
        self.count += 1;
        self.ns = self.ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
        self.buckets[WAIT_BUCKETS_NS.partition_point(|&b| b < ns)] += 1;
    }

    /// Add `o`'s messages.
    pub fn add(&mut self, o: &ChannelLatency) {
        self.count += o.count;
        self.ns = self.ns.saturating_add(o.ns);
        self.max_ns = self.max_ns.max(o.max_ns);
        for (m, o) in self.buckets.iter_mut().zip(o.buckets) {
            *m += o;
        }
    }
}

/// Waits by calling context and by creation site; see the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waits {
    ctx: ContextTracker,
    counts: NodeCounts,
    /// By creation site number (the facade names them).
    sites: HashMap<u32, WaitCounts>,
    /// By creation site number: its block-profile waits by duration.
    site_buckets: HashMap<u32, WaitBuckets>,
    /// By channel creation site number: its messages' enqueue-to-dequeue latency.
    latency: HashMap<u32, ChannelLatency>,
    /// The wait word whose time word comes next: kind, waiters, site.
    pending: Option<(WaitKind, u32, u32)>,
    /// Wait words whose time word was lost (a sampling gap).
    lost: u64,
}

impl Waits {
    /// Nothing seen yet.
    pub fn new() -> Waits {
        Waits::default()
    }

    /// `true` if the attribution may differ from the exact one (a sampled stream, a
    /// resynchronised stack).
    pub fn is_approximate(&self) -> bool {
        self.ctx.frames.approximate || self.lost > 0
    }

    /// Mark the results approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.ctx.frames.approximate = approximate;
    }

    /// Counts over every context.
    pub fn totals(&self) -> WaitCounts {
        let mut t = WaitCounts::default();
        for c in &self.counts.0 {
            t.add(c);
        }
        t
    }

    /// The root context's own counts: waits outside every instrumented function.
    pub fn root(&self) -> WaitCounts {
        self.counts.get(ROOT)
    }

    /// The counts of the context `stack` (outermost first; empty for the root), if seen.
    pub fn context(&self, stack: &[MethodId]) -> Option<WaitCounts> {
        let n = self.ctx.tree.walk(ROOT, stack)?;
        Some(self.counts.get(n))
    }

    /// Per creation site number, sorted by it.
    pub fn sites(&self) -> Vec<(u32, WaitCounts)> {
        let mut out: Vec<(u32, WaitCounts)> = self.sites.iter().map(|(&s, &c)| (s, c)).collect();
        out.sort_unstable_by_key(|&(s, _)| s);
        out
    }

    /// Per creation site number with block-profile waits, sorted by it: how many of its waits
    /// (lock waits, blocked sends and receives) fell in each bucket of [`WAIT_BUCKETS_NS`].
    pub fn site_histograms(&self) -> Vec<(u32, WaitBuckets)> {
        let mut out: Vec<(u32, WaitBuckets)> =
            self.site_buckets.iter().map(|(&s, &b)| (s, b)).collect();
        out.sort_unstable_by_key(|&(s, _)| s);
        out
    }

    /// Per channel creation site number with received messages that carried a send time,
    /// sorted by it: how long they sat in the channel.
    pub fn site_latencies(&self) -> Vec<(u32, ChannelLatency)> {
        let mut out: Vec<(u32, ChannelLatency)> =
            self.latency.iter().map(|(&s, &l)| (s, l)).collect();
        out.sort_unstable_by_key(|&(s, _)| s);
        out
    }

    /// Every calling context (root excluded) as a node linked to its parent, parents first.
    pub fn context_nodes(&self) -> Vec<WaitContext> {
        let attached = self.ctx.tree.attached();
        self.ctx
            .tree
            .nodes
            .iter()
            .enumerate()
            .skip(1)
            .filter(|&(i, _)| attached[i])
            .map(|(i, n)| WaitContext {
                node: i as u32,
                parent: n.parent,
                method: n.method,
                calls: n.count,
                counts: self.counts.get(i as u32),
            })
            .collect()
    }

    #[cold]
    fn on_wait(&mut self, w: WaitWord) {
        match (w, self.pending.take()) {
            (
                WaitWord::Wait {
                    kind,
                    waiters,
                    site,
                },
                before,
            ) => {
                if before.is_some() {
                    self.lost += 1;
                }
                self.pending = Some((kind, waiters, site));
            }
            (WaitWord::Nanos(ns), Some((WaitKind::Latency, _, site))) => {
                self.latency.entry(site).or_default().record(ns);
            }
            (WaitWord::Nanos(ns), Some((kind, waiters, site))) => {
                let top = self.ctx.top();
                self.counts.at(top).record(kind, waiters, ns);
                self.sites
                    .entry(site)
                    .or_default()
                    .record(kind, waiters, ns);
                if kind != WaitKind::Hold {
                    let k = WAIT_BUCKETS_NS.partition_point(|&b| b < ns);
                    self.site_buckets.entry(site).or_default()[k] += 1;
                }
            }
            // Its wait word was lost (a sampling gap).
            (WaitWord::Nanos(_), None) => self.lost += 1,
            // The timeline's stamps of a wait already counted.
            (WaitWord::From(_) | WaitWord::To(_), before) => self.pending = before,
        }
    }
}

impl EventAnalysis for Waits {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(wait) = as_wait(w) {
                self.on_wait(wait);
                continue;
            }
            if let Some(kind) = decode(w) {
                self.ctx.on_structure(kind, &mut self.counts);
            }
        }
    }

    fn merge(&mut self, other: Waits) {
        let to_self = self.ctx.merge_tree(&other.ctx);
        for (i, c) in other.counts.0.iter().enumerate() {
            self.counts.at(to_self[i]).add(c);
        }
        for (site, c) in other.sites {
            self.sites.entry(site).or_default().add(&c);
        }
        for (site, b) in other.site_buckets {
            let mine = self.site_buckets.entry(site).or_default();
            for (m, o) in mine.iter_mut().zip(b) {
                *m += o;
            }
        }
        for (site, l) in other.latency {
            self.latency.entry(site).or_default().add(&l);
        }
        self.lost += other.lost;
        self.ctx.merge_tasks(other.ctx, &to_self, &mut self.counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cabprof_cab::event::Event;

    fn m(id: u32) -> MethodId {
        MethodId::new(id).unwrap()
    }

    #[test]
    fn waits_go_to_the_context_and_the_site() {
        let words = [
            Event::call(MethodId::ROOT, m(1)).word(),
            Event::call(m(1), m(2)).word(),
            Event::wait(WaitKind::Lock, 1, 7).word(),
            Event::wait_ns(500).word(),
            Event::ret(m(2)).word(),
            Event::wait(WaitKind::Hold, 3, 7).word(),
            Event::wait_ns(100).word(),
            Event::ret(m(1)).word(),
            Event::wait(WaitKind::Send, 1, 9).word(),
            Event::wait_ns(40).word(),
        ];
        let mut a = Waits::new();
        // Split anywhere: a chunk may end between the two words.
        a.consume(&words[..3]);
        a.consume(&words[3..]);
        let inner = a.context(&[m(1), m(2)]).unwrap();
        assert_eq!(inner.block, Delay { count: 1, ns: 500 });
        let outer = a.context(&[m(1)]).unwrap();
        assert_eq!(outer.mutex, Delay { count: 3, ns: 300 });
        assert_eq!(a.root().block, Delay { count: 1, ns: 40 });
        let sites = a.sites();
        assert_eq!(sites.len(), 2);
        assert_eq!(sites[0].0, 7);
        assert_eq!(sites[0].1.block.ns, 500);
        assert_eq!(sites[0].1.mutex.ns, 300);
        assert_eq!(a.totals().block, Delay { count: 2, ns: 540 });
        assert!(!a.is_approximate());

        // Block waits by duration, per site: 500 ns and 40 ns are below a microsecond; the
        // hold is not a wait of the block profile.
        let h = a.site_histograms();
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].0, h[0].1[0], h[0].1.iter().sum::<u64>()), (7, 1, 1));

        let mut b = Waits::new();
        b.consume(&words);
        b.consume(&[
            Event::wait(WaitKind::Lock, 1, 7).word(),
            Event::wait_ns(1_000).word(),
            Event::wait(WaitKind::Receive, 1, 7).word(),
            Event::wait_ns(2_500_000).word(),
            Event::wait(WaitKind::Lock, 1, 7).word(),
            Event::wait_ns(20_000_000_000).word(),
        ]);
        let mut merged = a.clone();
        merged.merge(b);
        assert_eq!(merged.sites()[0].1.mutex.count, 6);
        // A wait of exactly a bound is in that bound's bucket (Prometheus' `le`).
        let h = merged.site_histograms();
        assert_eq!(h[0].1, [3, 0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(h[0].1.iter().sum::<u64>(), merged.sites()[0].1.block.count);
    }

    #[test]
    fn latencies_go_to_the_site_only_and_merge() {
        let words = [
            Event::call(MethodId::ROOT, m(1)).word(),
            Event::wait(WaitKind::Latency, 1, 4).word(),
            Event::wait_ns(2_000).word(),
            Event::wait(WaitKind::Receive, 1, 4).word(),
            Event::wait_ns(300).word(),
            Event::wait(WaitKind::Latency, 1, 4).word(),
            Event::wait_ns(5_000_000).word(),
            Event::ret(m(1)).word(),
        ];
        let mut a = Waits::new();
        a.consume(&words[..2]);
        a.consume(&words[2..]);
        // The context and the site's waits hold the blocked receive alone.
        assert_eq!(
            a.context(&[m(1)]).unwrap().block,
            Delay { count: 1, ns: 300 }
        );
        assert_eq!(a.sites()[0].1.block, Delay { count: 1, ns: 300 });
        assert_eq!(a.site_histograms()[0].1.iter().sum::<u64>(), 1);
        let l = a.site_latencies();
        assert_eq!(l.len(), 1);
        let (site, l) = l[0];
        assert_eq!(
            (site, l.count, l.ns, l.max_ns),
            (4, 2, 5_002_000, 5_000_000)
        );
        assert_eq!(l.buckets, [0, 1, 0, 0, 1, 0, 0, 0, 0]);
        let mut b = Waits::new();
        b.consume(&[
            Event::wait(WaitKind::Latency, 1, 4).word(),
            Event::wait_ns(20_000_000_000).word(),
            Event::wait(WaitKind::Latency, 1, 5).word(),
            Event::wait_ns(1).word(),
        ]);
        a.merge(b);
        let l = a.site_latencies();
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].1.count, l[0].1.max_ns), (3, 20_000_000_000));
        assert_eq!(l[0].1.buckets[8], 1);
        assert_eq!((l[1].0, l[1].1.count, l[1].1.buckets[0]), (5, 1, 1));
    }

    #[test]
    fn a_lost_word_is_counted_not_charged() {
        let mut a = Waits::new();
        a.consume(&[
            Event::wait(WaitKind::Lock, 1, 1).word(),
            Event::wait(WaitKind::Lock, 1, 1).word(),
            Event::wait_ns(5).word(),
            Event::wait_ns(6).word(),
        ]);
        assert_eq!(a.totals().block, Delay { count: 1, ns: 5 });
        assert!(a.is_approximate());
    }
}
