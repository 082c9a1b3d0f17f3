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
//! - **Sampling** ([`Mode::Sampling`]): the producer never checks for full (paper Fig. 5a) and
//!   the consumer never reads the ring. Every chunk start the producer reaches is *armed*: it
//!   holds `MAGIC`, which the fast path already leaves on, so an armed slot costs nothing
//!   extra there. The slow path tells an armed chunk start from the end-of-ring `MAGIC`,
//!   copies the sampled bursts of the chunk it just finished into a block of the *handoff*
//!   (`ring/handoff.rs`), arms the next chunk's start and goes on; a flush copies the part of
//!   a chunk written so far. The consumer reads the handoff's blocks in order, each at most
//!   once, drops one the producer began to overwrite while it was read, and counts in
//!   [`ConsumerStats::chunks_lapped`] every block it lost that way or by falling a whole
//!   handoff behind. `CLEAR` and `MAGIC` are never delivered. This departs from the paper's
//!   Figure 5b, whose consumer reads the bursts in place; why, in `ring/handoff.rs`.
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
//! In sampling mode the consumer writes nothing and reads only the handoff, a seqlock whose
//! orderings are argued in `ring/handoff.rs`.
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
use crate::sync::{back_off, fence, spin_hint, Arc, AtomicU64, Ordering};
use crate::transport::{ConsumerStats, Poll, ProducerStats, Transport};
use crossbeam_utils::CachePadded;
use std::time::Instant;

mod consumer;
pub(crate) mod handoff;
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

/// Slots in a cache line (the smallest chunk, one 64-byte line).
const LINE_SLOTS: usize = MIN_CHUNK_BYTES / WORD_BYTES;

/// State both halves see.
struct Shared {
    /// `capacity` event slots followed by one `MAGIC` slot.
    slots: Slots,
    /// Sampling: where the producer leaves the sample for the consumer. `None` in exhaustive
    /// mode, and in sampling mode at rate 0 (nothing is ever copied).
    handoff: Option<handoff::Handoff>,
    /// Event slots (excluding the `MAGIC` slot). A multiple of `chunk`, at least 4 chunks.
    capacity: usize,
    /// Slots per chunk.
    chunk: usize,
    /// Absolute position (events ever written) up to which the producer has handed events over
    /// explicitly. Only grows. Written by the producer on flush, close and before blocking.
    published: CachePadded<AtomicU64>,
    /// A lower bound on the producer's absolute position (events ever written: every slot
    /// before it is written; the producer may be writing the slot at it). Stored at each wrap.
    /// Only grows.
    reached: CachePadded<AtomicU64>,
    /// The producer closed (after its final `published`); the consumer still exists (a
    /// blocked producer stops waiting when it is gone).
    ends: crate::transport::Ends,
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
    let (rate, burst) = match config.mode {
        Mode::Exhaustive => (1.0, chunk),
        Mode::Sampling { rate, burst_words } => (rate, burst_words),
    };
    let block = if SAMPLING {
        handoff::block_slots(chunk, rate, burst)
    } else {
        0
    };
    let handoff = if block > 0 {
        Some(
            handoff::Handoff::new(block, capacity / chunk, burst, rate).ok_or_else(|| {
                ConfigError::new(
                    "buffer_bytes",
                    config.buffer_bytes,
                    format!(
                        "a ring whose sampling handoff ({} bytes) the system can allocate \
                         (allocating it failed: not enough memory)",
                        config.handoff_bytes()
                    ),
                )
            })?,
        )
    } else {
        None
    };
    let slots = Slots::zeroed(capacity + 1, config.huge_pages)?;
    slots[capacity].store(MAGIC, Ordering::Relaxed);
    if SAMPLING {
        // Arm the first chunk's start; from there the producer arms each next one itself.
        slots[0].store(MAGIC, Ordering::Relaxed);
    }
    let shared = Arc::new(Shared {
        slots,
        handoff,
        capacity,
        chunk,
        published: CachePadded::new(AtomicU64::new(0)),
        reached: CachePadded::new(AtomicU64::new(0)),
        ends: crate::transport::Ends::new(),
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
        copied: 0,
        seq: 0,
        closed: false,
        stats: ProducerStats::default(),
        shared: shared.clone(),
    };
    let consumer = Consumer {
        shared,
        pos: 0,
        next: 0,
        sampling,
        rate,
        max_rate: rate,
        scratch: vec![0; block],
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

    /// A sampling ring has a handoff of one block per chunk, each holding what the rate takes
    /// of a chunk; the memory a session charges for it is what it holds. An exhaustive ring,
    /// or a sampling ring at rate 0, has none.
    #[test]
    fn the_handoff_has_a_block_per_chunk() {
        for (buffer, chunk, rate) in [
            (4096, 1024, 0.5),
            (8192, 2048, 0.1),
            (1 << 16, 1 << 12, 1.0),
            (96 << 10, 24 << 10, 0.01),
        ] {
            let config = RingConfig::new(buffer, chunk).with_mode(Mode::sampling(rate));
            let (producer, _consumer) = sampling_channel(&config).unwrap();
            let sh = &producer.shared;
            let h = sh.handoff.as_ref().unwrap();
            assert_eq!(h.blocks, buffer / chunk);
            // What the rate takes, rounded up to a whole burst (8 words), with its head,
            // rounded up to a line (8 words).
            let taken = (rate * (chunk / WORD_BYTES) as f64).round() as usize;
            assert!(h.block >= taken + handoff::HEAD && h.block < taken + handoff::HEAD + 16);
            assert_eq!(
                config.handoff_bytes(),
                (h.blocks * h.block + LINE_SLOTS - 1) * WORD_BYTES
            );
            let (producer, _consumer) = channel(&RingConfig::new(buffer, chunk)).unwrap();
            assert!(producer.shared.handoff.is_none());
            let idle = RingConfig::new(buffer, chunk).with_mode(Mode::sampling(0.0));
            let (producer, _consumer) = sampling_channel(&idle).unwrap();
            assert!(producer.shared.handoff.is_none());
            assert_eq!(idle.handoff_bytes(), 0);
        }
    }
}
