//! The waits analysis' part of the report model: lock waits and holds, blocked channel
//! operations, per calling context and per creation site; and the channels' message latency,
//! per creation site.

use miniserde::{Deserialize, Serialize};

/// Contentions and their delay in one of Go's profiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayEntry {
    /// Contended acquisitions and blocked operations (block profile), or waiters a
    /// contended release let go (mutex profile).
    pub count: u64,
    /// Nanoseconds waited.
    pub ns: u64,
}

/// Waits of a context or a site, in both profiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitCountsEntry {
    /// The waiters' side (Go's block profile): lock waits, blocked sends and receives.
    pub block: DelayEntry,
    /// The holders' side (Go's mutex profile): the time others waited during a hold, once
    /// per waiter, charged where the holder released the lock.
    pub mutex: DelayEntry,
}

impl WaitCountsEntry {
    /// The delay of `profile` (`mutex` or anything else: `block`).
    pub fn of(&self, profile: WaitProfile) -> DelayEntry {
        match profile {
            WaitProfile::Mutex => self.mutex,
            WaitProfile::Block => self.block,
        }
    }
}

/// One of Go's two wait profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitProfile {
    /// Holders' contexts, each contended hold's delay once per waiter.
    Mutex,
    /// Waiters' contexts, each wait's delay.
    Block,
}

impl WaitProfile {
    /// `mutex` or `block`, as Go's endpoints name them.
    pub fn name(self) -> &'static str {
        match self {
            WaitProfile::Mutex => "mutex",
            WaitProfile::Block => "block",
        }
    }
}

/// One calling context's own waits: a node of the calling-context tree, linked to its parent
/// like a [`ContextEntry`](super::ContextEntry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitContextEntry {
    /// The context's id, unique among these contexts and never 0 (the root).
    pub id: u32,
    /// The id of the calling context (0: the root), which comes earlier in the list.
    pub parent: u32,
    /// The method called in this context.
    pub method: u32,
    /// Calls that entered this context.
    pub calls: u64,
    /// Waits while this was the context.
    pub counts: WaitCountsEntry,
}

/// One creation site's waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitSiteEntry {
    /// `Mutex`, `RwLock`, `channel`, `sync_channel`, `crossbeam::bounded`,
    /// `crossbeam::unbounded`, `tokio::mpsc::channel` or `tokio::mpsc::unbounded_channel`.
    pub kind: String,
    /// Where it was made: `file:line:column`.
    pub site: String,
    /// Its waits, over every context.
    pub counts: WaitCountsEntry,
    /// Its block-profile waits (lock waits, blocked sends and receives) by duration: how many
    /// took at most 1 µs, 10 µs, ... 10 s (a decade apart), and the last, longer. Absent
    /// where it had none, and in older files.
    pub block_buckets: Option<Vec<u64>>,
    /// A channel's messages, from their send to their receive. Absent for locks, for a channel
    /// no stamped message came out of, and in older files.
    pub latency: Option<LatencyEntry>,
}

/// A channel site's enqueue-to-dequeue latency: how long its messages took through the
/// channel, from the call that sent each (a wait for room included) to the receive that took it
/// out. Only messages sent while a session recorded with the waits analysis carry a send time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyEntry {
    /// Messages received.
    pub count: u64,
    /// Their nanoseconds, summed.
    pub ns: u64,
    /// The longest, in nanoseconds (in a window: the longest of the whole session so far).
    pub max_ns: u64,
    /// How many took at most 1 µs, 10 µs, ... 10 s (a decade apart, as `block_buckets`), and
    /// the last, longer.
    pub buckets: Vec<u64>,
}

impl LatencyEntry {
    /// The mean, in nanoseconds (0 without messages).
    pub fn mean_ns(&self) -> u64 {
        self.ns.checked_div(self.count).unwrap_or(0)
    }

    /// The `q` quantile (0 to 1), in nanoseconds, as an upper bound: the bound of the bucket
    /// it falls in, or the longest latency if that is shorter (or if it is in the last
    /// bucket). 0 without messages.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        // The rank of the quantile, 1-based: at least the first message.
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let bound = cabprof_analyses::WAIT_BUCKETS_NS
                    .get(i)
                    .copied()
                    .unwrap_or(u64::MAX);
                return bound.min(self.max_ns);
            }
        }
        self.max_ns
    }
}

/// The waits analysis' results.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitsData {
    /// Attribution may be off (a sampled stream, resynchronised stacks, lost words).
    pub approximate: bool,
    /// Over every context.
    pub totals: WaitCountsEntry,
    /// Outside every instrumented function.
    pub root: WaitCountsEntry,
    /// The contexts with waits in their subtree, each after its parent (the child whose
    /// subtree waited longest first).
    pub contexts: Vec<WaitContextEntry>,
    /// Per creation site, longest block delay first.
    pub sites: Vec<WaitSiteEntry>,
}
