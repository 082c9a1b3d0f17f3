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

mod consumer;
mod producer;

pub use consumer::Consumer;
pub use producer::Producer;

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
