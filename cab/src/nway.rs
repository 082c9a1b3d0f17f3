//! N-way buffering: the producer fills one of N whole sub-buffers while the consumer drains
//! another, and they swap them whole (PiPA, Zhao, Cutcutache, Wong, CGO 2008), improved as the
//! CAB paper does for its comparison (Ha et al., OOPSLA 2009, §6.1): lock-free swaps instead of
//! semaphores, and power-of-two sizes so the producer finds the end of a sub-buffer with a mask
//! and a test.
//!
//! # Contract
//!
//! - One [`Producer`] and one [`Consumer`] per channel; both are `Send`, neither is `Sync` nor
//!   `Clone`. Make a pair with [`channel`] or, generically, [`NWay`] as a [`Transport`].
//! - The buffer of `buffer_bytes` holds `N = buffer_bytes / chunk_bytes` sub-buffers of
//!   `chunk_bytes` each; both must be powers of two
//!   ([`RingConfig::validate_power_of_two`]). Only [`Mode::Exhaustive`](crate::config::Mode::Exhaustive) is accepted.
//! - **Producer**: `push` stores the event, increments its index and tests the index against the
//!   sub-buffer mask; nothing else. The push that fills a sub-buffer hands it over whole and
//!   moves to the next one, waiting there (spin, then back off) until the consumer has released
//!   it — so that push, not the next one, is the one that may block. If the consumer has been
//!   dropped, the producer stops waiting for good: it keeps writing into sub-buffers nobody
//!   reads and counts every event from then on in [`ProducerStats::dropped`].
//! - **Consumer**: [`Consumer::poll_with`] hands the next full sub-buffer to its callback as one
//!   zero-copy `&[u64]` view, then releases it. Every event is delivered once, in order.
//! - **Flush/close**: [`Producer::flush`] hands over the filled part of the producer's current
//!   sub-buffer; the producer goes on filling the same sub-buffer, and the consumer delivers
//!   only what it has not delivered yet (it releases the sub-buffer when it has delivered all of
//!   it). [`Producer::close`] (also run on drop) flushes and marks the end; once everything is
//!   read, `poll` returns [`Poll::Closed`].
//!
//! # Protocol
//!
//! Positions are absolute (events ever written), so sub-buffer number `b` (counting across
//! laps) covers positions `b * chunk .. (b + 1) * chunk` and lives in sub-buffer `b % N`. Each
//! sub-buffer has two words, one per writer:
//!
//! - `handed` (written by the producer): the absolute end of what it has handed over in this
//!   sub-buffer. Filling the sub-buffer stores its end; a flush stores the current position.
//!   Values only grow, so a value left from an earlier lap is never mistaken for new events.
//! - `free_for` (written by the consumer): the sub-buffer number the producer may fill next in
//!   this sub-buffer. It starts at `k` for sub-buffer `k`; the consumer stores `b + N` after
//!   delivering all of sub-buffer number `b`.
//!
//! # Memory orderings
//!
//! The producer's slot stores are `Relaxed` (plain `mov`s): they are published by its `Release`
//! store of `handed`, which the consumer loads with `Acquire` before reading the slots. The
//! consumer's `Release` store of `free_for` after its reads, loaded with `Acquire` by the
//! producer before it writes the sub-buffer again, orders the reads before those writes. The
//! closed flag is `Release`/`Acquire`, stored after the final `handed`.

use crate::config::{ConfigError, RingConfig};
use crate::event::Event;
use crate::sync::{back_off, spin_hint, Arc, AtomicU64, Ordering};
use crate::transport::{ConsumerStats, Poll, ProducerStats, Transport};
use crossbeam_utils::CachePadded;
use std::time::Instant;

/// Spins on a held sub-buffer before the producer starts backing off (yield, then sleep).
/// Under loom every spin is a scheduling point, so a short spin keeps the model small.
const SPINS_BEFORE_BACKOFF: u32 = if cfg!(loom) { 2 } else { 1 << 10 };

/// The hand-over words of one sub-buffer (see the module docs, "Protocol"). Padded so that
/// neighbouring sub-buffers' words do not share a cache line; the two words of one sub-buffer
/// do, as each side touches them about once per sub-buffer.
struct SubBuffer {
    /// Absolute position up to which the producer has handed this sub-buffer's events over.
    /// Only grows; at most the end of the sub-buffer number the producer is filling.
    handed: AtomicU64,
    /// The sub-buffer number the producer may fill next here (`k`, then `b + N`, ...).
    free_for: AtomicU64,
}

/// State both halves see.
struct Shared {
    /// `count * chunk` event slots, sub-buffer `k` at `k * chunk .. (k + 1) * chunk`.
    slots: crate::slots::Slots,
    /// One entry per sub-buffer.
    subs: Box<[CachePadded<SubBuffer>]>,
    /// Slots per sub-buffer, a power of two.
    chunk: usize,
    /// Sub-buffers (`N`), a power of two, at least 4.
    count: usize,
    /// The producer closed (after its final hand-over); the consumer still exists.
    ends: crate::transport::Ends,
}

/// N-way buffering as a [`Transport`], for generic harnesses.
#[derive(Clone, Copy, Debug, Default)]
pub struct NWay;

impl Transport for NWay {
    const NAME: &'static str = "N-way";
    type Producer = Producer;
    type Consumer = Consumer;
    fn channel(config: &RingConfig) -> Result<(Producer, Consumer), ConfigError> {
        channel(config)
    }
}

/// Make a connected N-way producer/consumer pair, or say which setting is wrong.
pub fn channel(config: &RingConfig) -> Result<(Producer, Consumer), ConfigError> {
    crate::transport::exhaustive_only(config, "N-way buffering")?;
    config.validate_power_of_two()?;
    let total = config.slots();
    let chunk = config.chunk_slots();
    let count = total / chunk;
    let slots = crate::slots::Slots::zeroed(total, config.huge_pages)?;
    let subs: Box<[CachePadded<SubBuffer>]> = (0..count)
        .map(|k| {
            CachePadded::new(SubBuffer {
                handed: AtomicU64::new(0),
                free_for: AtomicU64::new(k as u64),
            })
        })
        .collect();
    let shared = Arc::new(Shared {
        slots,
        subs,
        chunk,
        count,
        ends: crate::transport::Ends::new(),
    });
    let producer = Producer {
        base: shared.slots.as_ptr(),
        idx: 0,
        chunk_mask: chunk - 1,
        laps: 0,
        dead_at: None,
        closed: false,
        stats: ProducerStats::default(),
        shared: shared.clone(),
    };
    let consumer = Consumer {
        shared,
        pos: 0,
        stats: ConsumerStats::default(),
    };
    Ok((producer, consumer))
}

/// The application side of an N-way buffer. See the [module docs](self) for the contract.
pub struct Producer {
    /// `shared.slots.as_ptr()`: one load from `self`, no chase through the `Arc`. (The paper's
    /// N-way keeps this load too: a buffer pinned at a fixed address would not allow one buffer
    /// per thread.)
    base: *const AtomicU64,
    /// Slot index of the next write. Between calls it is in `0 .. N * chunk` and the producer
    /// owns its sub-buffer (or the consumer is dead, see `dead_at`).
    idx: usize,
    /// `chunk - 1`: after an increment, `idx & chunk_mask == 0` means the sub-buffer is full.
    chunk_mask: usize,
    /// Times the producer went from the last sub-buffer back to the first.
    laps: u64,
    /// Position at which the producer found the consumer dropped; events from there on are
    /// written where nobody reads them and are counted as dropped.
    dead_at: Option<u64>,
    closed: bool,
    /// `pushed` and `dropped` are derived from the position and `dead_at`; the rest is counted
    /// here.
    stats: ProducerStats,
    shared: Arc<Shared>,
}

// SAFETY: `base` points into `shared.slots`, which the `Arc` keeps alive and never moves; the
// slots are atomics, safe to touch from any thread. Only one thread owns the producer at a time
// (it is neither `Sync` nor `Clone`), which is the single-producer rule.
unsafe impl Send for Producer {}

impl Producer {
    /// Append one event: store, increment, test (PiPA's buffer write with the CAB paper's
    /// power-of-two end test). Filling a sub-buffer swaps to the next one, out of line.
    #[inline(always)]
    pub fn push(&mut self, event: Event) {
        // SAFETY: `idx < N * chunk = slots.len()` between calls (the invariant on the field):
        // it is reset to 0 by `swap` when it reaches `N * chunk`, which is a multiple of
        // `chunk`. The `Arc` keeps the slots alive.
        let slot = unsafe { &*self.base.add(self.idx) };
        // Relaxed: published to the consumer by the Release store of `handed` in `swap`/`flush`.
        slot.store(event.word(), Ordering::Relaxed);
        self.idx += 1;
        if self.idx & self.chunk_mask == 0 {
            self.swap();
        }
    }

    /// The current sub-buffer is full: hand it over, move to the next one and wait until the
    /// consumer has released it (or found to be dropped).
    #[cold]
    #[inline(never)]
    fn swap(&mut self) {
        let sh = &*self.shared;
        let filled = self.idx / sh.chunk - 1;
        // Release: every slot store of the sub-buffer happens-before a consumer that loads this
        // value with Acquire.
        sh.subs[filled]
            .handed
            .store(self.position(), Ordering::Release);
        if self.idx == sh.slots.len() {
            self.idx = 0;
            self.laps += 1;
        }
        if self.dead_at.is_some() {
            return;
        }
        let next = self.idx / sh.chunk;
        let number = self.laps * sh.count as u64 + next as u64;
        let free_for = &sh.subs[next].free_for;
        // Acquire: pairs with the consumer's Release store of `free_for`, so its reads of this
        // sub-buffer's previous contents happen-before our writes.
        if free_for.load(Ordering::Acquire) >= number {
            return;
        }
        self.stats.blocks += 1;
        let started = Instant::now();
        let mut spins = 0u32;
        let mut round = 0u32;
        while free_for.load(Ordering::Acquire) < number {
            if !sh.ends.consumer_alive() {
                self.dead_at = Some(self.position());
                break;
            }
            if spins < SPINS_BEFORE_BACKOFF {
                spins += 1;
                spin_hint();
            } else {
                back_off(round);
                round = round.saturating_add(1);
            }
        }
        self.stats.blocked += started.elapsed();
    }

    /// Events written so far (absolute position).
    #[inline]
    fn position(&self) -> u64 {
        self.laps * self.shared.slots.len() as u64 + self.idx as u64
    }

    /// Hand over the filled part of the current sub-buffer; keep filling it afterwards.
    pub fn flush(&mut self) {
        let current = self.idx / self.shared.chunk;
        // Release: every slot store before the current position happens-before a consumer that
        // loads it with Acquire. At a sub-buffer's start this stores the start, which hands
        // over nothing.
        self.shared.subs[current]
            .handed
            .store(self.position(), Ordering::Release);
    }

    /// Flush and mark the end of the stream. Idempotent; also done on drop.
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.flush();
            // After the final `handed`: a consumer that sees `closed` sees it.
            self.shared.ends.close();
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ProducerStats {
        let position = self.position();
        let handed = self.dead_at.unwrap_or(position);
        ProducerStats {
            pushed: handed,
            dropped: position - handed,
            ..self.stats
        }
    }

    /// Whether the consumer half still exists.
    pub fn consumer_alive(&self) -> bool {
        self.shared.ends.consumer_alive()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.close();
    }
}

/// The analyzer side of an N-way buffer. See the [module docs](self) for the contract.
pub struct Consumer {
    shared: Arc<Shared>,
    /// Absolute position of the next event to deliver. Its sub-buffer number `pos / chunk` is
    /// the one the consumer holds; everything before `pos` has been delivered.
    pos: u64,
    stats: ConsumerStats,
}

impl Consumer {
    /// Deliver the handed-over, not yet delivered part of the current sub-buffer to `f` as one
    /// zero-copy slice; release the sub-buffer once all of it has been delivered.
    pub fn poll_with(&mut self, mut f: impl FnMut(&[u64])) -> Poll {
        let sh = &*self.shared;
        let chunk = sh.chunk as u64;
        let number = self.pos / chunk;
        let sub = &sh.subs[(number % sh.count as u64) as usize];
        // Acquire: pairs with the producer's Release store of `handed`; the slots below it are
        // visible.
        let mut handed = sub.handed.load(Ordering::Acquire);
        if handed <= self.pos {
            // `closed` is stored after the final `handed` (see `Ends`).
            if !sh.ends.producer_closed() {
                return Poll::Empty;
            }
            // Closed: every sub-buffer before the producer's last has its end handed over, so
            // if nothing new is here, this is the last one and it is drained.
            handed = sub.handed.load(Ordering::Acquire);
            if handed <= self.pos {
                return Poll::Closed;
            }
        }
        let end = (number + 1) * chunk;
        debug_assert!(handed <= end, "handed {handed} beyond sub-buffer end {end}");
        let from = (self.pos % sh.slots.len() as u64) as usize;
        let len = (handed - self.pos) as usize;
        let slots = &sh.slots[from..from + len];
        #[cfg(not(loom))]
        {
            // SAFETY: `AtomicU64` has the size and bit validity of `u64`, and alignment at least
            // that of `u64`. The producer stored these slots before its Release store of
            // `handed`, which we loaded with Acquire, so its stores happen-before our reads. It
            // writes this sub-buffer again only after loading `free_for >= number + N` with
            // Acquire, which we store with Release below, after `f` returned and the view is
            // gone. Meanwhile it writes only slots at or after `handed` (after a flush), never
            // these, and never reads slots. So nothing accesses these slots while the view lives.
            let view = unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<u64>(), len) };
            f(view);
        }
        #[cfg(loom)]
        {
            // loom's atomics are not `u64`s: copy (Relaxed is enough, `handed` was Acquired).
            let copy: Vec<u64> = slots.iter().map(|s| s.load(Ordering::Relaxed)).collect();
            f(&copy);
        }
        self.pos = handed;
        if handed == end {
            // Release: our reads of the sub-buffer happen-before the producer's next writes.
            sub.free_for
                .store(number + sh.count as u64, Ordering::Release);
        }
        self.stats.chunks += 1;
        self.stats.delivered += len as u64;
        Poll::Consumed(len)
    }

    /// Counters so far.
    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    /// Whether the producer has closed (its remaining events may still be unread).
    pub fn producer_closed(&self) -> bool {
        self.shared.ends.producer_closed()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.ends.consumer_dropped();
    }
}

crate::transport::forward_transport_traits!(Producer, Consumer);
