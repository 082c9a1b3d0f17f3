//! The CAB ring: Cache-friendly Asymmetric Buffering (Ha, Arnold, Blackburn, McKinley, OOPSLA
//! 2009, §3.1–3.2, Figures 3 and 5).
//!
//! # Contract
//!
//! - One [`Producer`] (an application thread) and one [`Consumer`] (an analyzer thread) per ring;
//!   both are `Send`, neither is `Sync` nor `Clone`.
//! - The producer sees a continuous ring of `u64` slots and writes one word per event. A slot
//!   holding [`CLEAR`] is free; the extra slot after the last holds [`MAGIC`] and sends the
//!   producer back to the start. Events are never `CLEAR` or `MAGIC` (see [`crate::event`]).
//! - The consumer sees fixed chunks. It takes chunk `n` only once the first slot of chunk `n + 2`
//!   is non-`CLEAR` (the producer has moved past chunk `n + 1`), so the two threads never touch
//!   the same cache lines, except on an explicit [`Producer::flush`].
//! - **Exhaustive** ([`Mode::Exhaustive`]): the producer writes only `CLEAR` slots. When the ring
//!   is full it spins briefly, hands its partial chunk over (a flush), then backs off (yield,
//!   then sleep) until the slot two chunks ahead is `CLEAR` again, so it resumes with two free
//!   chunks. The consumer delivers every event once, in order, and clears the slots it read.
//!   If the consumer is dropped (its thread died), a blocked producer stops waiting, drops the
//!   event and counts it: a dead analyzer never deadlocks the application.
//! - **Sampling** ([`Mode::Sampling`]): the producer never checks for full, and the consumer
//!   only reads the ring: it reads a fraction of each chunk in cache-line bursts. Every chunk
//!   start the producer reaches is *armed*: it holds `MAGIC`, which the fast path already
//!   leaves on, so an armed slot costs nothing extra there. The slow path tells an armed chunk
//!   start from the end-of-ring `MAGIC`, publishes its absolute position (a *beacon*), arms the
//!   next chunk's start (keeping the word it held in a per-chunk side slot, where the consumer
//!   finds it), writes the event and goes on. So the producer announces every chunk it enters,
//!   lap after lap: the consumer opens a chunk once a beacon, a wrap or a flush shows the
//!   producer two chunks past it, and counts the chunk as lapped exactly when a beacon shows
//!   the producer entered it again by the time the chunk has been read, never by comparing
//!   words (see `Consumer::sample`). Chunks the producer overwrote first are counted in
//!   [`ConsumerStats::chunks_lapped`]; `CLEAR` and `MAGIC` are never delivered. The sampling
//!   fast path also prefetches for writing the line `PREFETCH_AHEAD` slots ahead, into padding
//!   past the `MAGIC` slot near the end of the ring: a hint, never a store.
//! - [`Producer::close`] (also run on drop) flushes and marks the end; the consumer then drains
//!   everything and [`Consumer::poll_with`] returns [`Poll::Closed`].
//!
//! # Memory orderings
//!
//! Every slot store by the producer is `Release` and every slot load by the consumer that opens
//! a chunk (the gate) is `Acquire`: seeing the gate word synchronizes with its store, so all the
//! producer's earlier slot stores (the whole chunk `n`) are visible. Symmetrically, the
//! consumer clears with `Release` stores and the producer tests for `CLEAR` with an `Acquire`
//! load, so the consumer's reads of a slot happen before the producer's next write to it. On
//! x86-64 all of these compile to plain `mov`s. The flush position and the closed flag are
//! published with `Release` after the slots they cover and read with `Acquire` before them.
//! In sampling mode the consumer writes nothing; why its lap count holds even when the producer
//! writes the same words lap after lap is argued at `Consumer::sample`.
//!
//! # Example
//!
//! ```
//! use cabprof_cab::{event::{Event, MethodId}, ring, RingConfig, Poll};
//!
//! let (mut producer, mut consumer) = ring::channel(&RingConfig::new(4096, 1024)).unwrap();
//! let f = MethodId::new(7).unwrap();
//! producer.push(Event::call(MethodId::ROOT, f));
//! producer.push(Event::ret(f));
//! producer.close();
//! let mut seen = Vec::new();
//! while consumer.poll_with(|words| seen.extend_from_slice(words)) != Poll::Closed {}
//! assert_eq!(seen, [Event::call(MethodId::ROOT, f).word(), Event::ret(f).word()]);
//! ```

use crate::config::{ConfigError, Mode, RingConfig, MIN_CHUNK_BYTES, WORD_BYTES};
use crate::event::{Event, CLEAR, MAGIC};
use crate::slots::Slots;
use crate::sync::{back_off, spin_hint, Arc, AtomicBool, AtomicU64, Ordering};
use crate::transport::{ConsumerStats, Poll, ProducerStats, Transport};
use crossbeam_utils::CachePadded;
use std::time::Instant;

/// Spins of the producer on a full ring before it flushes and backs off (paper Fig. 3b,
/// `spin_wait()`): long enough to ride out a consumer that is mid-chunk, short next to a sleep.
/// Under loom two spins suffice and let the models reach the back-off path.
const SPINS_BEFORE_BACKOFF: u32 = if cfg!(loom) { 2 } else { 1 << 10 };

/// Slots handed to the consumer's callback at a time and cleared right after: 4 KB, a small
/// part of any L1d, so the lines are still there when they are cleared.
const CLEAR_BLOCK: usize = 512;

/// Sampling: how far ahead of its cursor the producer asks for the line it will write, in
/// slots (1 KiB, 16 cache lines). A line the analyzer has read is shared when the producer
/// comes back to it a lap later (a sampling ring fits in the producer's L2), and the producer's
/// store would wait for the analyzer's copy to be invalidated; `prefetchw` starts that
/// invalidation 64 calls early (a `Call` and a `Return` word each). Not in exhaustive mode:
/// there the consumer may be reading just ahead of a producer on a full ring, and taking its
/// lines slows the consumer. Figures: docs/PERFORMANCE.md, "Sampling".
pub(crate) const PREFETCH_AHEAD: usize = 128;

/// Slots in a cache line (the smallest chunk, one 64-byte line).
const LINE_SLOTS: usize = MIN_CHUNK_BYTES / WORD_BYTES;

/// Ask for the cache line at `at` in a writable state (x86-64 `prefetchw`, which decodes as a
/// no-op on CPUs older than the instruction). A hint only: it never faults and changes no
/// memory. Elsewhere, and under loom, nothing.
#[inline(always)]
fn prefetch_for_write(at: *const AtomicU64) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: a prefetch reads and writes no memory and cannot fault on any address.
    unsafe {
        std::arch::asm!(
            "prefetchw [{}]",
            in(reg) at,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = at;
}

/// State both halves see.
struct Shared {
    /// `capacity` event slots followed by one `MAGIC` slot (and, in sampling mode, padding
    /// that only the producer's prefetch touches: [`PREFETCH_AHEAD`] slots and a cache line's
    /// worth less one).
    slots: Slots,
    /// Sampling: one word per chunk. When the producer arms a chunk's start it first moves the
    /// event there into that chunk's word here, so arming never loses an unread event. Empty in
    /// exhaustive mode.
    firsts: Box<[AtomicU64]>,
    /// Event slots (excluding the `MAGIC` slot). A multiple of `chunk`, at least 4 chunks.
    capacity: usize,
    /// Slots per chunk.
    chunk: usize,
    /// Absolute position (events ever written) up to which the producer has handed events over
    /// explicitly. Only grows. Written by the producer on flush, close and before blocking.
    published: CachePadded<AtomicU64>,
    /// Set (after the final `published`) when the producer is closed or dropped.
    closed: AtomicBool,
    /// A lower bound on the producer's absolute position (events ever written: every slot
    /// before it is written; the producer may be writing the slot at it). Stored at each wrap
    /// and, in sampling mode, at every chunk start, before the slot is written (a beacon).
    /// Only grows.
    reached: CachePadded<AtomicU64>,
    /// Cleared when the consumer is dropped, so a blocked producer stops waiting.
    consumer_alive: AtomicBool,
    /// The producer's slow-path counters, mirrored here (single writer, Relaxed) so the
    /// consumer side can report them while the producer lives on in another thread's TLS.
    counters: CachePadded<ProducerCounters>,
}

/// Producer counters readable from the consumer side. Written only on the producer's slow
/// path (a block, a drop), never on the fast path.
struct ProducerCounters {
    blocks: AtomicU64,
    blocked_ns: AtomicU64,
    dropped: AtomicU64,
}

impl Shared {
    /// The slot at ring index `i` (`0..=capacity`).
    #[inline(always)]
    fn slot(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i <= self.capacity);
        &self.slots[i]
    }
}

/// Make a connected exhaustive CAB producer/consumer pair, or say which setting is wrong.
pub fn channel(config: &RingConfig) -> Result<(Producer, Consumer), ConfigError> {
    if config.mode != Mode::Exhaustive {
        return Err(ConfigError::new(
            "mode",
            format!("{:?}", config.mode),
            "Exhaustive for ring::channel (use ring::sampling_channel for sampling)",
        ));
    }
    make(config)
}

/// Make a connected sampling CAB producer/consumer pair, or say which setting is wrong.
pub fn sampling_channel(config: &RingConfig) -> Result<(Producer<true>, Consumer), ConfigError> {
    if config.mode == Mode::Exhaustive {
        return Err(ConfigError::new(
            "mode",
            "Exhaustive",
            "Sampling { .. } for ring::sampling_channel (use ring::channel for exhaustive)",
        ));
    }
    make(config)
}

fn make<const SAMPLING: bool>(
    config: &RingConfig,
) -> Result<(Producer<SAMPLING>, Consumer), ConfigError> {
    config.validate()?;
    let capacity = config.slots();
    let chunk = config.chunk_slots();
    // A sampling ring has PREFETCH_AHEAD slots past its MAGIC slot, never read or written,
    // and LINE_SLOTS - 1 more so that the whole line of the farthest one is the ring's own
    // whatever the allocation's alignment (the global allocator's is only 8 bytes): the
    // producer's prefetch never takes a line of other memory.
    let pad = if SAMPLING {
        PREFETCH_AHEAD + LINE_SLOTS - 1
    } else {
        0
    };
    let slots = Slots::zeroed(capacity + 1 + pad, config.huge_pages)?;
    slots[capacity].store(MAGIC, Ordering::Relaxed);
    let firsts = if SAMPLING {
        // Arm the first chunk's start; from there the producer arms each next one itself.
        slots[0].store(MAGIC, Ordering::Relaxed);
        (0..capacity / chunk)
            .map(|_| AtomicU64::new(CLEAR))
            .collect()
    } else {
        Box::default()
    };
    let shared = Arc::new(Shared {
        slots,
        firsts,
        capacity,
        chunk,
        published: CachePadded::new(AtomicU64::new(0)),
        closed: AtomicBool::new(false),
        reached: CachePadded::new(AtomicU64::new(0)),
        consumer_alive: AtomicBool::new(true),
        counters: CachePadded::new(ProducerCounters {
            blocks: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }),
    });
    let base = shared.slots.as_ptr();
    let sampling = SAMPLING;
    let producer = Producer {
        cursor: base,
        base,
        wraps: 0,
        closed: false,
        stats: ProducerStats::default(),
        shared: shared.clone(),
    };
    let (rate, burst) = match config.mode {
        Mode::Exhaustive => (1.0, chunk),
        Mode::Sampling { rate, burst_words } => (rate, burst_words),
    };
    let consumer = Consumer {
        shared,
        pos: 0,
        sampling,
        rate,
        burst,
        scratch: if sampling { vec![0; burst] } else { Vec::new() },
        stats: ConsumerStats::default(),
    };
    Ok((producer, consumer))
}

/// The application side of a CAB ring. See the [module docs](self) for the contract.
///
/// `SAMPLING` is a type parameter, not a field, so that each mode's fast path is exactly the
/// paper's: exhaustive tests for `CLEAR`, sampling tests for `MAGIC`, and neither tests a mode.
pub struct Producer<const SAMPLING: bool = false> {
    /// Next slot to write; always within `shared.slots` (`base ..= base + capacity`).
    cursor: *const AtomicU64,
    /// `shared.slots.as_ptr()`, kept here so the wrap needs no pointer chase.
    base: *const AtomicU64,
    /// Wraps done so far; the absolute position is `wraps * capacity + (cursor - base)`.
    wraps: u64,
    closed: bool,
    stats: ProducerStats,
    shared: Arc<Shared>,
}

// SAFETY: `cursor` and `base` point into `shared.slots`, which the `Arc` keeps alive and never
// moves; the slots are atomics, safe to touch from any thread. Only one thread owns the
// producer at a time (it is not `Sync`), which is exactly the single-producer rule.
unsafe impl<const SAMPLING: bool> Send for Producer<SAMPLING> {}

impl<const SAMPLING: bool> Producer<SAMPLING> {
    /// Append one event: the common case is one load, one compare against `CLEAR`, one store
    /// and one pointer increment (paper Fig. 3a, lines 1 and 7). Everything else — the wrap at
    /// `MAGIC`, a full ring, a dead consumer — is out of line in `push_slow`.
    ///
    /// In sampling mode the test is against `MAGIC` only and a full ring is overwritten
    /// (paper Fig. 5a).
    #[inline(always)]
    pub fn push(&mut self, event: Event) {
        // SAFETY: `cursor` is always in `base ..= base + capacity` (the invariant on the field):
        // it starts at `base`, is incremented only after writing an event slot (index <
        // capacity, because the MAGIC slot at `capacity` never reads as CLEAR and is never
        // written) and is reset to `base` on MAGIC. The Arc keeps the slots alive.
        let slot = unsafe { &*self.cursor };
        if SAMPLING {
            // Inside the ring's own memory: `make` pads a sampling ring by PREFETCH_AHEAD.
            prefetch_for_write(self.cursor.wrapping_add(PREFETCH_AHEAD));
        }
        let seen = slot.load(Ordering::Acquire);
        let free = if SAMPLING {
            seen != MAGIC
        } else {
            seen == CLEAR
        };
        if free {
            slot.store(event.word(), Ordering::Release);
            // SAFETY: the slot just written was an event slot (index < capacity), so the next
            // index is <= capacity: still inside the allocation.
            self.cursor = unsafe { self.cursor.add(1) };
        } else {
            self.push_slow(event.word());
        }
    }

    /// The exceptional cases of `push`: wrap on `MAGIC`, publish at an armed chunk start
    /// (sampling), wait on a full ring (paper Fig. 3b), drop and count if the consumer is gone.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, word: u64) {
        let mut spins = 0u32;
        // The clock when the producer first found the ring full, if `Stall` words are on: the
        // wait is told to the analyses in a `Stall` word, after `word` unless `word` opens a
        // frame (the frame's clock is read after the push, so the wait is outside it; a
        // return's or an end stamp's clock was read before, so the wait is outside the frame
        // it closes). Either way it lands in exactly the frames open while the producer waited.
        let mut full_since = None;
        let mut words = [word, 0];
        let (mut next, mut count) = (0, 1);
        loop {
            // SAFETY: as in `push`, the cursor is inside the slots.
            let slot = unsafe { &*self.cursor };
            let seen = slot.load(Ordering::Acquire);
            if seen == MAGIC && (!SAMPLING || self.index() == self.shared.capacity) {
                self.cursor = self.base;
                self.wraps += 1;
                // Release: a consumer that reads this position also sees every slot before it.
                self.shared
                    .reached
                    .store(self.wraps * self.shared.capacity as u64, Ordering::Release);
                continue;
            }
            if SAMPLING && seen == MAGIC {
                self.enter_chunk();
            }
            if seen == CLEAR || SAMPLING {
                if let Some(since) = full_since.take() {
                    let stall = Event::stall(crate::clock::now().saturating_sub(since)).word();
                    words = if crate::event::opens_frame(word) {
                        [stall, word]
                    } else {
                        [word, stall]
                    };
                    count = 2;
                }
                slot.store(words[next], Ordering::Release);
                // SAFETY: not the end-of-ring MAGIC slot (handled above; a sampling chunk
                // start may hold MAGIC too), so this is an event slot; +1 stays in bounds.
                self.cursor = unsafe { self.cursor.add(1) };
                next += 1;
                if next == count {
                    return;
                }
                continue;
            }
            // Full (exhaustive): the slot still holds an unread event.
            if !self.shared.consumer_alive.load(Ordering::Acquire) {
                self.count_drop();
                return;
            }
            if next == 0 && full_since.is_none() && crate::event::stall_words() {
                full_since = Some(crate::clock::now());
            }
            if spins < SPINS_BEFORE_BACKOFF {
                spins += 1;
                spin_hint();
                continue;
            }
            if !self.block() {
                self.count_drop();
                return;
            }
        }
    }

    /// Wait until the slot two chunks ahead of the cursor is `CLEAR` (paper Fig. 3b), so that
    /// the producer resumes with two free chunks. Returns `false` if the consumer died.
    ///
    /// Before waiting, the partial chunk is published: with exactly four chunks and the cursor
    /// on a chunk boundary the consumer could otherwise never open the chunk the producer
    /// waits on (its gate is the very slot the producer is blocked at).
    fn block(&mut self) -> bool {
        self.stats.blocks += 1;
        let started = Instant::now();
        self.publish();
        let here = self.index();
        let poll = (here + 2 * self.shared.chunk) % self.shared.capacity;
        let mut round = 0;
        let alive = loop {
            if self.shared.slot(poll).load(Ordering::Acquire) == CLEAR {
                break true;
            }
            if !self.shared.consumer_alive.load(Ordering::Acquire) {
                break false;
            }
            back_off(round);
            round = round.saturating_add(1);
        };
        let waited = started.elapsed();
        self.stats.blocked += waited;
        let c = &self.shared.counters;
        c.blocks.store(self.stats.blocks, Ordering::Relaxed);
        c.blocked_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        alive
    }

    /// Sampling, at an armed chunk start (the cursor is on it): publish the position (the
    /// beacon) and arm the next chunk's start. Only the producer writes a sampling ring, so
    /// every chunk start it reaches is armed (the first by `make`, each next one here): it
    /// beacons at every chunk it enters, lap after lap, before it writes any slot of it. That
    /// is what lets the consumer tell a lapped chunk from an untouched one (`Consumer::sample`).
    /// Per chunk: two stores and a load more than a plain write, none per event.
    fn enter_chunk(&mut self) {
        let sh = &*self.shared;
        // Release: every slot before this one is visible to a consumer that reads it, and a
        // consumer that reads any slot this lap writes from here on sees this beacon.
        sh.reached.store(self.position(), Ordering::Release);
        let next = (self.index() + sh.chunk) % sh.capacity;
        let slot = sh.slot(next);
        // Relaxed: only this thread writes the slots of a sampling ring.
        let held = slot.load(Ordering::Relaxed);
        // The word the next chunk's start holds (its last lap's first event, perhaps unread)
        // goes to the side slot before MAGIC replaces it; Release/Acquire pairs the two, and
        // orders this beacon before the side word for a consumer that reads it.
        sh.firsts[next / sh.chunk].store(held, Ordering::Release);
        slot.store(MAGIC, Ordering::Release);
    }

    #[cold]
    fn count_drop(&mut self) {
        self.stats.dropped += 1;
        self.shared
            .counters
            .dropped
            .store(self.stats.dropped, Ordering::Relaxed);
    }

    /// Ring index of the cursor (`0..=capacity`).
    #[inline]
    fn index(&self) -> usize {
        // SAFETY: both pointers are into the same allocation, cursor >= base.
        unsafe { self.cursor.offset_from(self.base) as usize }
    }

    /// Events written so far (absolute position).
    #[inline]
    fn position(&self) -> u64 {
        self.wraps * self.shared.capacity as u64 + self.index() as u64
    }

    fn publish(&mut self) {
        let pos = self.position();
        self.stats.pushed = pos;
        // Release: every slot store before `pos` happens-before a consumer that reads `pos`.
        self.shared.published.store(pos, Ordering::Release);
    }

    /// Hand every event pushed so far to the consumer, including a partly written chunk.
    pub fn flush(&mut self) {
        self.publish();
    }

    /// Flush and mark the end of the stream. Idempotent; also done on drop.
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.publish();
            // Release after the final `published`: a consumer that sees `closed` sees it.
            self.shared.closed.store(true, Ordering::Release);
        }
    }

    /// Counters so far (`pushed` is exact after a flush or close).
    pub fn stats(&self) -> ProducerStats {
        ProducerStats {
            pushed: self.position(),
            ..self.stats
        }
    }

    /// Whether the consumer half still exists.
    pub fn consumer_alive(&self) -> bool {
        self.shared.consumer_alive.load(Ordering::Acquire)
    }
}

impl<const SAMPLING: bool> Drop for Producer<SAMPLING> {
    fn drop(&mut self) {
        self.close();
        // What this ring's memory can hold besides zeros, so that keeping it for the next
        // ring zeroes that alone: the slots this producer reached (all of them once it has
        // wrapped), plus, sampling, the chunk start it armed ahead (at most a chunk past the
        // cursor; left in place, it would lie inside a chunk of a next owner with longer
        // chunks, which would take it for a chunk start); and the `MAGIC` slot and the
        // padding after it.
        let sh = &self.shared;
        let reached = if self.wraps > 0 {
            sh.capacity
        } else {
            self.index() + 1 + if SAMPLING { sh.chunk } else { 0 }
        };
        sh.slots.written(reached.min(sh.capacity), sh.capacity);
    }
}

/// The analyzer side of a CAB ring. See the [module docs](self) for the contract.
pub struct Consumer {
    shared: Arc<Shared>,
    /// Absolute position of the next unread event (events ever written before it).
    /// Chunk-aligned except after reading a flushed partial chunk.
    pos: u64,
    sampling: bool,
    /// Fraction of each chunk analyzed (1.0 in exhaustive mode).
    rate: f64,
    /// Slots per sampling burst.
    burst: usize,
    /// Sampling bursts are copied here: the producer may overwrite a chunk while it is read,
    /// so handing out a view of the ring itself would be a data race. Empty when exhaustive.
    scratch: Vec<u64>,
    stats: ConsumerStats,
}

impl Consumer {
    /// Deliver the next ready chunk to `f` as a borrowed slice and clear it.
    ///
    /// Exhaustive: `f` gets the rest of the current chunk in one zero-copy slice once the
    /// producer has moved two chunks on, or the flushed part of it after a flush/close.
    /// Sampling: `f` gets each sampled burst (copied out of the ring, see `scratch`).
    pub fn poll_with(&mut self, mut f: impl FnMut(&[u64])) -> Poll {
        if self.sampling {
            return self.poll_sampling(&mut f);
        }
        let sh = &*self.shared;
        let idx = (self.pos % sh.capacity as u64) as usize;
        let start = idx - idx % sh.chunk;
        let chunk_end = self.pos - (idx - start) as u64 + sh.chunk as u64; // absolute
        let gate = (start + 2 * sh.chunk) % sh.capacity;
        // Exhaustive: the gate's previous occupant (one lap earlier) was consumed and cleared
        // before anything at `pos`, so a non-CLEAR gate was written in this lap: the producer
        // has passed the whole of this chunk.
        let end = if sh.slot(gate).load(Ordering::Acquire) != CLEAR {
            chunk_end
        } else {
            // Acquire `closed` before `published`: a closed producer's final position is then
            // the one we read.
            let closed = sh.closed.load(Ordering::Acquire);
            let published = sh.published.load(Ordering::Acquire);
            if published > self.pos {
                published.min(chunk_end)
            } else if closed {
                return Poll::Closed;
            } else {
                return Poll::Empty;
            }
        };
        let len = (end - self.pos) as usize;
        self.stats.chunks += 1;
        let delivered = self.take(idx, len, f);
        self.pos = end;
        self.stats.delivered += delivered as u64;
        Poll::Consumed(delivered)
    }

    /// Sampling mode (paper Fig. 5b), made safe against a producer that laps the consumer:
    ///
    /// - The producer's position is at least `lower`: the last beacon, wrap or flush. If that
    ///   is more than a whole ring past `pos`, the slot at `pos` was overwritten: whole laps are
    ///   skipped (ring indices unchanged) and counted as lapped.
    /// - A chunk is ready when `lower` is two chunks past its start. No slot's content is
    ///   trusted to say so: a slot may hold a word of any earlier lap.
    /// - After reading, the chunk was overwritten meanwhile exactly if a beacon shows the
    ///   producer entered it again (see `sample`): counted as lapped. `CLEAR` and `MAGIC` words
    ///   are never delivered.
    /// - After close, nothing past the producer's final position is read.
    fn poll_sampling(&mut self, f: &mut impl FnMut(&[u64])) -> Poll {
        let sh = &*self.shared;
        let cap = sh.capacity as u64;
        let chunks = (sh.capacity / sh.chunk) as u64;
        let closed = sh.closed.load(Ordering::Acquire);
        let published = sh.published.load(Ordering::Acquire);
        let lower = sh.reached.load(Ordering::Acquire).max(published);
        if lower > self.pos + cap {
            let skipped = (lower - self.pos - cap).div_ceil(cap);
            self.pos += skipped * cap;
            self.stats.chunks_lapped += skipped * chunks;
        }
        let idx = (self.pos % cap) as usize;
        let start = idx - idx % sh.chunk;
        let chunk_start = self.pos - (idx - start) as u64; // absolute
        let chunk_end = chunk_start + sh.chunk as u64;
        let mut end = if lower >= chunk_start + 2 * sh.chunk as u64 {
            chunk_end
        } else if published > self.pos {
            published.min(chunk_end)
        } else if closed {
            return Poll::Closed;
        } else {
            return Poll::Empty;
        };
        if closed {
            end = end.min(published);
        }
        let len = (end - self.pos) as usize;
        self.stats.chunks += 1;
        let delivered = self.sample(idx, start, len, f);
        self.pos = end;
        self.stats.delivered += delivered as u64;
        Poll::Consumed(delivered)
    }

    /// Exhaustive: hand out slots `idx .. idx + len` and clear them.
    fn take(&mut self, idx: usize, len: usize, mut f: impl FnMut(&[u64])) -> usize {
        // The chunk is handed out in L1-sized blocks, each cleared right after `f` has read
        // it, while its lines are still in the consumer's L1 (the paper clears each event right
        // after processing it, for the same temporal locality). `f` sees the whole chunk, in
        // order, as consecutive zero-copy slices.
        for block in self.shared.slots[idx..idx + len].chunks(CLEAR_BLOCK) {
            #[cfg(not(loom))]
            {
                // SAFETY: `AtomicU64` has the size and alignment of `u64`. These slots were
                // published by the producer (gate or `published` loaded with Acquire by the
                // caller, after its Release stores), and it will not write them again until
                // they read CLEAR, which happens only in the clearing loop below, after `f`
                // returns and the view is gone. Concurrent atomic *loads* by a blocked producer
                // are reads, not a race.
                let view = unsafe {
                    std::slice::from_raw_parts(block.as_ptr().cast::<u64>(), block.len())
                };
                f(view);
            }
            #[cfg(loom)]
            {
                let copy: Vec<u64> = block.iter().map(|s| s.load(Ordering::Relaxed)).collect();
                f(&copy);
            }
            for s in block {
                // Release: our reads above happen-before the producer's next write of this slot.
                s.store(CLEAR, Ordering::Release);
            }
        }
        len
    }

    /// Sampling: read `rate` of slots `idx .. idx + len` (of the chunk starting at ring index
    /// `start`) in bursts; count the chunk as lapped if the producer entered it again before
    /// the reading was over.
    ///
    /// Why the count is right even when the producer writes the very words it wrote a lap
    /// before (the ABA a compare-exchange on the old first word would fall for): the consumer
    /// never judges a slot by its content. Let the chunk start at absolute position `s`
    /// (`chunk_start` below) and be read in lap `s / capacity`.
    ///
    /// - The producer writes the chunk's next lap (from `s + capacity` on) only after its
    ///   beacon `reached = s + capacity`: every chunk start it reaches is armed
    ///   (`Producer::enter_chunk`), and the beacon is stored, Release, before the slot.
    /// - Every slot load here is Acquire. If one returns a word of that next lap (or any later
    ///   one), it synchronizes with that word's store, so the beacon happened before the load
    ///   of `reached` below, which therefore returns at least `s + capacity`: counted. A word
    ///   of an earlier lap cannot be returned: the chunk was opened on a beacon, wrap or flush
    ///   (Acquire) that the producer stored after writing this lap's words.
    /// - The first slot may hold `MAGIC`: the producer armed it on entering the chunk before
    ///   (`s + capacity - chunk`) or a later one, after moving the word there to
    ///   `firsts[start / chunk]` (Release before the `MAGIC`, so the Acquire load of `MAGIC`
    ///   makes it visible). That word is this lap's first event unless a later arming
    ///   replaced it, and that arming follows the beacon at `s + capacity`, seen below through
    ///   the Acquire load of the side word: counted again.
    /// - Conversely, a chunk the producer has not entered again when `reached` is read holds
    ///   only this lap's words in every slot read: it is not counted. The one overcount is a
    ///   producer that beacons between the last slot load and the load of `reached`.
    ///
    /// The loom model `cab_sampling_lap_is_counted_even_with_identical_first_words`
    /// (tests/loom.rs) checks this under every interleaving it explores.
    fn sample(
        &mut self,
        idx: usize,
        start: usize,
        len: usize,
        f: &mut impl FnMut(&[u64]),
    ) -> usize {
        let sh = &*self.shared;
        let chunk_start = self.pos - (idx - start) as u64; // absolute
        let want = (self.rate * len as f64).round() as usize;
        let most = len.div_ceil(self.burst);
        let bursts = want.div_ceil(self.burst).min(most);
        // With fewer bursts than fit, `stride >= burst` (bursts * burst < len), so bursts
        // never overlap; when every burst fits, read the range once, contiguously.
        let stride = if bursts == most {
            self.burst
        } else {
            len.checked_div(bursts).unwrap_or(len)
        };
        // Rotate the bursts' phase from chunk to chunk so periodic programs are not always
        // sampled at the same point of their period.
        let phase = if stride > self.burst {
            (self.stats.chunks as usize).wrapping_mul(0x9E37_79B9) % (stride - self.burst + 1)
        } else {
            0
        };
        let mut delivered = 0;
        for b in 0..bursts {
            let from = b * stride + phase;
            let n = self.burst.min(len - from);
            let mut kept = 0;
            for k in 0..n {
                // Acquire: if this load sees a word of the producer's next lap, its beacon
                // there is visible to the load of `reached` below (see above).
                let at = idx + from + k;
                let mut w = sh.slot(at).load(Ordering::Acquire);
                if w == MAGIC && at == start {
                    // Armed by the producer: the chunk's first event is in the side slot.
                    w = sh.firsts[start / sh.chunk].load(Ordering::Acquire);
                }
                if w != CLEAR && w != MAGIC {
                    self.scratch[kept] = w;
                    kept += 1;
                }
            }
            if kept > 0 {
                f(&self.scratch[..kept]);
                delivered += kept;
            }
        }
        // The producer entered this chunk again (see above). A flush past `s + capacity` needs
        // no test of its own: the producer beaconed on its way there.
        let lapped = sh.reached.load(Ordering::Acquire) >= chunk_start + sh.capacity as u64;
        if lapped {
            self.stats.chunks_lapped += 1;
        }
        delivered
    }

    /// Exhaustive mode only: deliver every event the producer has written so far, without
    /// waiting for chunk gates or a flush — for shutdown and snapshots, when the producer lives
    /// in another thread that cannot be asked to flush. Returns the number delivered.
    ///
    /// Sound because in exhaustive mode a slot is `CLEAR` until the producer writes it and the
    /// producer writes slots strictly in order: the run of non-`CLEAR` slots from the consumer's
    /// position is exactly the unread events, and the producer never writes a non-`CLEAR` slot,
    /// so the view handed out cannot change under `f`. Sampling mode has no such invariant
    /// (slots are never cleared) and returns 0.
    pub fn drain_live(&mut self, f: impl FnMut(&[u64])) -> u64 {
        self.drain_live_to(u64::MAX, f)
    }

    /// [`drain_live`](Self::drain_live), stopping at absolute position `target` (see
    /// [`position`](Self::position)) even if a live producer keeps writing: a snapshot reads
    /// what was there when it was asked for, not everything the producer adds while it reads.
    pub fn drain_live_to(&mut self, target: u64, mut f: impl FnMut(&[u64])) -> u64 {
        if self.sampling {
            return 0;
        }
        let cap = self.shared.capacity;
        let mut total = 0u64;
        while self.pos < target {
            let idx = (self.pos % cap as u64) as usize;
            let chunk_end = idx - idx % self.shared.chunk + self.shared.chunk;
            let chunk_end = chunk_end.min(idx.saturating_add((target - self.pos) as usize));
            let mut end = idx;
            // Acquire per slot: pairs with the producer's Release store of that slot.
            while end < chunk_end && self.shared.slot(end).load(Ordering::Acquire) != CLEAR {
                end += 1;
            }
            if end == idx {
                return total;
            }
            let n = self.take(idx, end - idx, &mut f);
            self.pos += n as u64;
            self.stats.delivered += n as u64;
            total += n as u64;
        }
        total
    }

    /// Absolute position of the next unread event: events the producer wrote before it have
    /// been delivered (or, sampling, skipped as overwritten).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Event slots in the ring.
    pub fn capacity_slots(&self) -> usize {
        self.shared.capacity
    }

    /// The producer's counters as the producer last mirrored them (blocks, time blocked and
    /// drops are exact; `pushed` is the consumer's delivered count in exhaustive mode and the
    /// producer's last published or wrapped position in sampling mode).
    pub fn producer_stats(&self) -> ProducerStats {
        let c = &self.shared.counters;
        let pushed = if self.sampling {
            (self.shared.reached.load(Ordering::Acquire))
                .max(self.shared.published.load(Ordering::Acquire))
        } else {
            self.stats.delivered
        };
        ProducerStats {
            pushed,
            blocks: c.blocks.load(Ordering::Relaxed),
            blocked: std::time::Duration::from_nanos(c.blocked_ns.load(Ordering::Relaxed)),
            dropped: c.dropped.load(Ordering::Relaxed),
        }
    }

    /// Sampling mode: change the fraction of each chunk analyzed (clamped to `0.0..=1.0`).
    /// Used by adaptive sampling. No effect in exhaustive mode.
    pub fn set_rate(&mut self, rate: f64) {
        if self.sampling {
            self.rate = rate.clamp(0.0, 1.0);
        }
    }

    /// The sampling rate in force (1.0 in exhaustive mode).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whether this consumer samples.
    pub fn is_sampling(&self) -> bool {
        self.sampling
    }

    /// Slots per chunk.
    pub fn chunk_slots(&self) -> usize {
        self.shared.chunk
    }

    /// Counters so far.
    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    /// Whether the producer has closed (its remaining events may still be unread).
    pub fn producer_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        // Release so a producer that sees `false` stops waiting; runs on unwind too.
        self.shared.consumer_alive.store(false, Ordering::Release);
    }
}

crate::transport::forward_transport_traits!(@const SAMPLING: bool; Producer<SAMPLING>, Consumer);

/// The CAB design in exhaustive mode, for generic harnesses.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cab;

impl Transport for Cab {
    const NAME: &'static str = "CAB";
    type Producer = Producer;
    type Consumer = Consumer;
    fn channel(config: &RingConfig) -> Result<(Producer, Consumer), ConfigError> {
        channel(config)
    }
}

/// The CAB design in sampling mode, for generic harnesses.
#[derive(Clone, Copy, Debug, Default)]
pub struct CabSampling;

impl Transport for CabSampling {
    const NAME: &'static str = "CAB sampling";
    type Producer = Producer<true>;
    type Consumer = Consumer;
    fn channel(config: &RingConfig) -> Result<(Producer<true>, Consumer), ConfigError> {
        sampling_channel(config)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The producer prefetches the line of the slot `PREFETCH_AHEAD` past its cursor, which
    /// runs up to the MAGIC slot at `capacity`: a sampling ring's own memory must hold that
    /// whole line, whatever the sizes and the alignment, so the hint never takes a line of
    /// someone else's data.
    #[test]
    fn the_sampling_prefetch_stays_inside_the_ring() {
        for (buffer, chunk) in [
            (4096, 1024),
            (8192, 2048),
            (1 << 16, 1 << 12),
            (96 << 10, 24 << 10),
        ] {
            let config = RingConfig::new(buffer, chunk).with_mode(Mode::sampling(0.5));
            let (producer, _consumer) = sampling_channel(&config).unwrap();
            let sh = &producer.shared;
            // The line of slot `capacity + PREFETCH_AHEAD` reaches at most LINE_SLOTS - 1
            // slots past it (when that slot starts the line).
            let last = sh.capacity + PREFETCH_AHEAD + LINE_SLOTS - 1;
            assert!(
                last < sh.slots.len(),
                "{buffer}/{chunk}: prefetch reaches slot {last} of {}",
                sh.slots.len()
            );
            // Exhaustive rings do not prefetch and are not padded.
            let (producer, _consumer) = channel(&RingConfig::new(buffer, chunk)).unwrap();
            assert_eq!(producer.shared.slots.len(), producer.shared.capacity + 1);
        }
    }
}
