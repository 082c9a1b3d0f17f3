//! FastForward: a cache-optimized single-producer/single-consumer lock-free queue (Giacomoni,
//! Moseley, Vachharajani, "FastForward for Efficient Pipeline Parallelism", PPoPP 2008), one of
//! the two baselines the CAB paper races against (Ha et al., OOPSLA 2009, §6.1).
//!
//! # Contract
//!
//! - One [`Producer`] and one [`Consumer`] per queue; both are `Send`, neither is `Sync` nor
//!   `Clone`. Make a pair with [`channel`] or, generically, [`FastForward`] as a [`Transport`].
//! - The queue is a ring of `buffer_bytes / 8` slots (a power of two, so an index is wrapped by
//!   masking). `chunk_bytes` must pass [`RingConfig::validate_power_of_two`] but is otherwise
//!   ignored: FastForward has no chunks, it hands over single events (the CAB paper: "equivalent
//!   to CAB using a chunk size of one event"). Only [`Mode::Exhaustive`](crate::config::Mode::Exhaustive) is accepted.
//! - **Producer**: a slot holding [`CLEAR`] (FastForward's `NULL`) is free. `push` writes the slot
//!   at the head if it is free; otherwise the queue is full and the producer waits (spins, then
//!   backs off) until the consumer empties that slot. If the consumer has been dropped, a full
//!   queue no longer blocks: the event is dropped and counted in [`ProducerStats::dropped`].
//!   Waits are counted in [`ProducerStats::blocks`] and timed in [`ProducerStats::blocked`].
//! - **Consumer**: takes events one slot at a time, in order, each exactly once, and empties the
//!   slot right after reading it. *Temporal slipping* keeps it away from the cache lines the
//!   producer is writing: when the producer is less than the *dangerous distance* ahead, the
//!   consumer waits until it is the *safe distance* ahead. The CAB paper sets these to two and
//!   six cache lines (16 and 48 events) "as specified in the FastForward paper"; rings too small
//!   for that use an eighth and three eighths of the ring instead (see [`slip_distances`]).
//! - **Batches**: FastForward dequeues per event, but [`EventConsumer::poll`](crate::transport::EventConsumer::poll) hands out slices,
//!   so [`Consumer::poll_with`] copies up to [`BATCH`] dequeued events into a small local buffer
//!   and calls the callback once per batch. The copy is part of this design's cost; the CAB ring
//!   instead lends a zero-copy view of a whole chunk.
//! - **Flush/close**: [`Producer::flush`] publishes its absolute position; the consumer may then
//!   read up to it regardless of the slip distances. [`Producer::close`] (also run on drop)
//!   flushes and marks the end; once everything is read, `poll` returns [`Poll::Closed`].
//!
//! So the last `danger` events (16 on rings of 128 slots or more) before the producer's head
//! stay unread until the producer pushes on or flushes: a producer that pushes a handful of
//! events and goes quiet must flush them, as with CAB.
//!
//! # Memory orderings
//!
//! Slot stores are `Release` and slot loads `Acquire` on both sides. FastForward's payloads are
//! pointers to data written before the enqueue; ours are the words themselves, but a consumer
//! that reads slot `i + d` as filled relies on it to see slots `i ..= i + d`, which the producer
//! stored earlier (an assertion, on in debug builds and under loom, checks this). The consumer's
//! emptying store is `Release` so that its read of the old value happens-before the producer's
//! overwrite. On x86-64 all of these are plain `mov`s. The flush position and the closed flag
//! are `Release`/`Acquire`, published after the slots they cover.

use crate::config::{ConfigError, RingConfig, MIN_CHUNK_BYTES, WORD_BYTES};
use crate::event::{Event, CLEAR};
use crate::sync::{back_off, spin_hint, Arc, AtomicU64, Ordering};
use crate::transport::{ConsumerStats, Poll, ProducerStats, Transport};
use crossbeam_utils::CachePadded;
use std::time::Instant;

/// Most events a single [`Consumer::poll_with`] dequeues and hands to its callback: 4 KiB of
/// copy buffer, small enough to stay in L1, large enough that the callback's per-call overhead
/// is amortized.
pub const BATCH: usize = 512;

/// Events per 64-byte cache line: the unit in which FastForward measures slip distances.
const WORDS_PER_LINE: u64 = (MIN_CHUNK_BYTES / WORD_BYTES) as u64;
/// FastForward's dangerous distance as set by the CAB paper (§6.1): two cache lines.
const DANGER_LINES: u64 = 2;
/// FastForward's safe distance as set by the CAB paper (§6.1): six cache lines.
const SAFE_LINES: u64 = 6;

/// Spins on a full queue before the producer starts backing off (yield, then sleep). Under
/// loom every spin is a scheduling point, so a short spin keeps the model small.
const SPINS_BEFORE_BACKOFF: u32 = if cfg!(loom) { 2 } else { 1 << 10 };

/// `(dangerous, safe)` distances in events for a ring of `slots` slots: the paper's 16 and 48,
/// or for rings under 128 slots `slots / 8` and `3 * slots / 8`, keeping the paper's 1:3 ratio.
///
/// The safe distance must stay below the ring size: the consumer learns the distance by testing
/// whether slot `tail + d` is filled, which only means "the producer is more than `d` ahead"
/// while `d < slots`.
pub fn slip_distances(slots: usize) -> (u64, u64) {
    let slots = slots as u64;
    let danger = (DANGER_LINES * WORDS_PER_LINE).min(slots / 8).max(1);
    let safe = (SAFE_LINES * WORDS_PER_LINE).min(3 * slots / 8).max(danger);
    (danger, safe)
}

/// State both halves see.
struct Shared {
    /// The ring. A power-of-two number of slots, at least 32 (4 chunks of at least 64 bytes).
    slots: crate::slots::Slots,
    /// `slots.len() - 1`.
    mask: usize,
    /// Absolute position (events ever written) up to which the producer has flushed. Only grows.
    published: CachePadded<AtomicU64>,
    /// The producer closed (after its final hand-over); the consumer still exists.
    ends: crate::transport::Ends,
}

impl Shared {
    /// The slot holding absolute position `pos`.
    #[inline(always)]
    fn slot(&self, pos: u64) -> &AtomicU64 {
        &self.slots[pos as usize & self.mask]
    }
}

/// FastForward as a [`Transport`], for generic harnesses.
#[derive(Clone, Copy, Debug, Default)]
pub struct FastForward;

impl Transport for FastForward {
    const NAME: &'static str = "FastForward";
    type Producer = Producer;
    type Consumer = Consumer;
    fn channel(config: &RingConfig) -> Result<(Producer, Consumer), ConfigError> {
        channel(config)
    }
}

/// Make a connected FastForward producer/consumer pair, or say which setting is wrong.
pub fn channel(config: &RingConfig) -> Result<(Producer, Consumer), ConfigError> {
    crate::transport::exhaustive_only(config, "FastForward")?;
    config.validate_power_of_two()?;
    let n = config.slots();
    let slots = crate::slots::Slots::zeroed(n, config.huge_pages)?;
    let shared = Arc::new(Shared {
        slots,
        mask: n - 1,
        published: CachePadded::new(AtomicU64::new(0)),
        ends: crate::transport::Ends::new(),
    });
    let (danger, safe) = slip_distances(n);
    let producer = Producer {
        base: shared.slots.as_ptr(),
        mask: n - 1,
        head: 0,
        closed: false,
        stats: ProducerStats::default(),
        shared: shared.clone(),
    };
    let consumer = Consumer {
        shared,
        tail: 0,
        ready_until: 0,
        slipping: false,
        danger,
        safe,
        batch: vec![0; BATCH].into_boxed_slice(),
        stats: ConsumerStats::default(),
    };
    Ok((producer, consumer))
}

/// The application side of a FastForward queue. See the [module docs](self) for the contract.
pub struct Producer {
    /// `shared.slots.as_ptr()`, so that `push` needs no pointer chase through the `Arc`.
    base: *const AtomicU64,
    /// `shared.mask`, copied for the same reason.
    mask: usize,
    /// Absolute position of the next write (events written so far); its slot is `head & mask`.
    head: u64,
    closed: bool,
    /// `pushed` is derived from `head`; the rest is counted here.
    stats: ProducerStats,
    shared: Arc<Shared>,
}

// SAFETY: `base` points into `shared.slots`, which the `Arc` keeps alive and never moves; the
// slots are atomics, safe to touch from any thread. Only one thread owns the producer at a time
// (it is neither `Sync` nor `Clone`), which is the single-producer rule.
unsafe impl Send for Producer {}

impl Producer {
    /// Append one event (FastForward's `enqueue`): load the head slot, and if it is `CLEAR`
    /// store the event and advance the head. A full queue is handled out of line.
    #[inline(always)]
    pub fn push(&mut self, event: Event) {
        // SAFETY: `head & mask < slots.len()` because the ring has `mask + 1` slots, and the
        // `Arc` in `self.shared` keeps them alive.
        let slot = unsafe { &*self.base.add(self.head as usize & self.mask) };
        // Acquire: pairs with the consumer's Release emptying store, so its read of the previous
        // occupant happens-before our overwrite.
        if slot.load(Ordering::Acquire) == CLEAR {
            // Release: a consumer that sees this word (or a later one) sees every earlier slot.
            slot.store(event.word(), Ordering::Release);
            self.head += 1;
        } else {
            self.push_full(event.word());
        }
    }

    /// The queue is full: wait until the consumer empties the head slot (spin, then back off),
    /// or drop and count the event if the consumer is gone.
    #[cold]
    #[inline(never)]
    fn push_full(&mut self, word: u64) {
        // SAFETY: as in `push`.
        let slot = unsafe { &*self.base.add(self.head as usize & self.mask) };
        let ends = &self.shared.ends;
        if !ends.consumer_alive() {
            self.stats.dropped += 1;
            return;
        }
        self.stats.blocks += 1;
        let started = Instant::now();
        let mut spins = 0u32;
        let mut round = 0u32;
        loop {
            // Acquire: as in `push`.
            if slot.load(Ordering::Acquire) == CLEAR {
                // Release: as in `push`.
                slot.store(word, Ordering::Release);
                self.head += 1;
                break;
            }
            if !ends.consumer_alive() {
                self.stats.dropped += 1;
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

    /// Let the consumer read every event pushed so far, ignoring the slip distances.
    pub fn flush(&mut self) {
        // Release: every slot store before `head` happens-before a consumer that reads it.
        self.shared.published.store(self.head, Ordering::Release);
    }

    /// Flush and mark the end of the stream. Idempotent; also done on drop.
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.flush();
            // After the final `published`: a consumer that sees `closed` sees it.
            self.shared.ends.close();
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ProducerStats {
        ProducerStats {
            pushed: self.head,
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

/// The analyzer side of a FastForward queue. See the [module docs](self) for the contract.
pub struct Consumer {
    shared: Arc<Shared>,
    /// Absolute position of the next event to dequeue.
    tail: u64,
    /// Positions below this are known to be filled and readable without coming closer than the
    /// dangerous distance to the producer (or were flushed). `tail <= ready_until` after every
    /// `refresh` that returns `true`.
    ready_until: u64,
    /// Temporal slipping in progress: the producer came within `danger` and the consumer waits
    /// until it is `safe` ahead (or a flush hands events over).
    slipping: bool,
    /// Dangerous distance in events, `1 <= danger <= safe < slots`.
    danger: u64,
    /// Safe distance in events.
    safe: u64,
    /// Events dequeued by one poll, handed to the callback in one slice (`BATCH` long).
    batch: Box<[u64]>,
    stats: ConsumerStats,
}

impl Consumer {
    /// Dequeue up to [`BATCH`] events, in order, and hand them to `f` as one slice.
    ///
    /// Returns [`Poll::Empty`] when nothing may be read yet (the queue is empty, or the producer
    /// is within the slip distance and has not flushed), [`Poll::Closed`] once the producer has
    /// closed and every event has been delivered.
    pub fn poll_with(&mut self, mut f: impl FnMut(&[u64])) -> Poll {
        let mut n = self.fill();
        if n == 0 {
            // `closed` follows the producer's final `published` (see `Ends`); `fill` then reads
            // that final position.
            if !self.shared.ends.producer_closed() {
                return Poll::Empty;
            }
            n = self.fill();
            if n == 0 {
                return Poll::Closed;
            }
        }
        f(&self.batch[..n]);
        self.stats.chunks += 1;
        self.stats.delivered += n as u64;
        Poll::Consumed(n)
    }

    /// Dequeue into `batch` until it is full or the next event may not be read yet.
    fn fill(&mut self) -> usize {
        let mut n = 0;
        while n < BATCH {
            if self.tail >= self.ready_until && !self.refresh() {
                break;
            }
            let slot = self.shared.slot(self.tail);
            // Acquire: pairs with the producer's Release store of this word.
            let word = slot.load(Ordering::Acquire);
            // `refresh` saw this slot or a later one filled (or flushed), and only we empty it.
            // Checked under loom too (its models run optimized), where it tests the orderings.
            if cfg!(any(debug_assertions, loom)) {
                assert_ne!(word, CLEAR, "slot {} announced but empty", self.tail);
            }
            if word == CLEAR {
                break;
            }
            self.batch[n] = word;
            // Release: our read of the word happens-before the producer's next write here.
            slot.store(CLEAR, Ordering::Release);
            self.tail += 1;
            n += 1;
        }
        n
    }

    /// Find out how far the consumer may read (FastForward's `adjust_slip`, made non-blocking:
    /// the caller's poll loop is the wait). Returns `false` if it may not read `tail` yet.
    fn refresh(&mut self) -> bool {
        let sh = &*self.shared;
        // Acquire: pairs with the producer's Release in `flush`; every slot below it is filled.
        let published = sh.published.load(Ordering::Acquire);
        if published > self.tail {
            self.ready_until = published;
            return true;
        }
        // Slot `tail + d` (with `d < slots`) is filled exactly when the producer is more than
        // `d` ahead: every slot behind the consumer is empty and the producer writes in order.
        // Acquire: seeing it filled makes the producer's earlier stores, `tail ..= tail + d`,
        // visible.
        if sh.slot(self.tail + self.safe).load(Ordering::Acquire) != CLEAR {
            // At least `safe + 1` ahead: read until `danger` remains between us.
            self.slipping = false;
            self.ready_until = self.tail + self.safe - self.danger + 1;
            return true;
        }
        if !self.slipping && sh.slot(self.tail + self.danger).load(Ordering::Acquire) != CLEAR {
            // Between the two distances and not slipping: one more event keeps `danger`.
            self.ready_until = self.tail + 1;
            return true;
        }
        // Within the dangerous distance: slip until the safe distance is reached.
        self.slipping = true;
        false
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
