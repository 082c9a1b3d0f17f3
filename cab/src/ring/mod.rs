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
//! - **Growing** ([`growing_channel`], exhaustive only): the ring is a chain of segments, each
//!   of whole chunks. At the end-of-segment `MAGIC` (the wrap) the producer may move to a new
//!   segment, larger if it found the ring full, blocked during the lap or lapped within a
//!   millisecond (`FAST_LAP`) and the [`Grant`]
//!   allows, smaller after a quiet lap: it sets the old segment's `next`, then its `switch_at`
//!   (the absolute position where the new segment starts, `Release`), then writes on in the
//!   new one. The consumer loads `switch_at` (`Acquire`) before each chunk: once it is set,
//!   every chunk before it is complete; at that position the consumer moves on and frees the
//!   old segment. Positions stay absolute across segments.
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
use crate::sync::{back_off, fence, spin_hint, Arc, AtomicU64, Mutex, Ordering};
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

/// State both halves see, whatever segment they are in.
struct Shared {
    /// Sampling: where the producer leaves the sample for the consumer. `None` in exhaustive
    /// mode, and in sampling mode at rate 0 (nothing is ever copied).
    handoff: Option<handoff::Handoff>,
    /// The most events the ring can hold unread: the slots of every segment it may have live
    /// at once (the sum of its sizes when it grows, its one size otherwise).
    most_unread: usize,
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
/// path (a block, a drop, a segment switch), never on the fast path.
struct ProducerCounters {
    blocks: AtomicU64,
    blocked_ns: AtomicU64,
    dropped: AtomicU64,
    /// Event slots of the largest segment the producer has written.
    largest: AtomicU64,
    /// Segment switches to a larger segment, and to a smaller one.
    grown: AtomicU64,
    shrunk: AtomicU64,
    /// Times the ring's memory grant refused a larger segment, and the time the producer
    /// then blocked at the size it kept (until a later switch or a lap that asked for no
    /// larger one): its wait for ring memory.
    refused: AtomicU64,
    memory_wait_ns: AtomicU64,
}

/// Absolute position [`Segment::switch_at`] holds while the producer is still in the segment.
const NO_SWITCH: u64 = u64::MAX;

/// One stretch of ring memory: `capacity` event slots in chunks of `chunk`, then one `MAGIC`
/// slot. A ring of fixed size has one segment for its whole life; a growing ring
/// ([`growing_channel`]) moves its producer to a new segment at the end-of-ring `MAGIC`
/// (the wrap), and its consumer follows once it has read everything before the switch.
struct Segment {
    slots: Slots,
    capacity: usize,
    chunk: usize,
    /// The absolute position at which the producer left this segment for `next` (a wrap:
    /// positions from it on live in `next`, at index `pos - switch_at`), or [`NO_SWITCH`].
    /// Stored once, with `Release`, after `next` and before any slot of `next` is written.
    switch_at: CachePadded<AtomicU64>,
    /// The segment the producer moved to. Set once, before `switch_at`; read by the consumer
    /// only after it saw `switch_at` set.
    next: Mutex<Option<Arc<Segment>>>,
    /// What the ring's memory grant handed out for this segment (a budget ticket): held as
    /// long as the segment lives, so its memory is counted until it is freed.
    _grant: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Segment {
    fn new(
        capacity: usize,
        chunk: usize,
        huge_pages: bool,
        sampling: bool,
        grant: Option<Box<dyn std::any::Any + Send + Sync>>,
    ) -> Result<Arc<Segment>, ConfigError> {
        let slots = Slots::zeroed(capacity + 1, huge_pages)?;
        slots[capacity].store(MAGIC, Ordering::Relaxed);
        if sampling {
            // Arm the first chunk's start; from there the producer arms each next one itself.
            slots[0].store(MAGIC, Ordering::Relaxed);
        }
        Ok(Arc::new(Segment {
            slots,
            capacity,
            chunk,
            switch_at: CachePadded::new(AtomicU64::new(NO_SWITCH)),
            next: Mutex::new(None),
            _grant: grant,
        }))
    }

    /// Fault its pages in with one store per page, before the segment is published: a page
    /// read first (the producer's and the consumer's `CLEAR` checks) maps the shared zero page,
    /// and the write that follows copies it and flushes the old mapping from every core that
    /// runs the process (an inter-processor interrupt each, a VM exit under a hypervisor),
    /// inside whatever frames are open then. Only for the small segments a growing ring
    /// starts with and the ones it switches to: a fixed ring of megabytes is faulted in lap by
    /// lap, so that a thread that writes little never touches all of it.
    fn fault_in(&self) {
        #[cfg(not(loom))]
        for i in (0..self.capacity).step_by(4096 / WORD_BYTES) {
            // Relaxed: the slot is `CLEAR` already and no other thread has the segment yet.
            self.slot(i).store(CLEAR, Ordering::Relaxed);
        }
    }

    /// The slot at segment index `i` (`0..=capacity`).
    #[inline(always)]
    fn slot(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i <= self.capacity);
        &self.slots[i]
    }

    /// The segment the producer switched to; only called once `switch_at` was seen set.
    fn next(&self) -> Arc<Segment> {
        let next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        next.clone()
            .expect("`next` is set before `switch_at`, which the caller saw set")
    }
}

/// Asked, on the producer's slow path, for the memory of a larger segment (its event bytes):
/// returns what stands for that memory (a budget ticket, dropped when the segment is freed),
/// or `None` to refuse, and the ring stays at the size it has. Never asked for the smallest
/// segment, which a growing ring may always have.
pub type Grant = Box<dyn FnMut(usize) -> Option<Box<dyn std::any::Any + Send + Sync>> + Send>;

/// How a ring made by [`growing_channel`] grows and shrinks. Its sizes run from the smallest
/// at least `initial_bytes` up to the `RingConfig`'s `buffer_bytes`, each twice the one
/// before: halving the chunk count down to [`MIN_CHUNKS`](crate::config::MIN_CHUNKS) chunks of the configured chunk,
/// then halving the chunk (down to one cache line). The ring starts at the smallest.
#[allow(missing_debug_implementations, reason = "holds a closure")]
pub struct Growth {
    initial_bytes: usize,
    grant: Grant,
    script: Option<Vec<usize>>,
}

impl Growth {
    /// Start at the smallest size of at least `initial_bytes`; ask `grant` for larger ones.
    pub fn new(initial_bytes: usize, grant: Grant) -> Growth {
        Growth {
            initial_bytes,
            grant,
            script: None,
        }
    }

    /// For tests: the producer starts at size `levels[0]` (an index into the sizes, smallest
    /// first) and switches, at its `k`-th wrap, to size `levels[k]`, whatever its analyzer
    /// does; past the script's end it wraps in place. The grant is still asked.
    #[doc(hidden)]
    pub fn scripted(mut self, levels: Vec<usize>) -> Growth {
        self.script = Some(levels);
        self
    }
}

/// `config` at the smallest size a growing ring of it starts at for `initial_bytes`: what a
/// thread whose ring the memory budget cannot hold gets instead (outside the budget, as a
/// growing ring's smallest size is).
pub fn smallest(config: &RingConfig, initial_bytes: usize) -> RingConfig {
    let (capacity, chunk) = ladder(
        config.slots(),
        config.chunk_slots(),
        initial_bytes / WORD_BYTES,
    )[0];
    RingConfig {
        buffer_bytes: capacity * WORD_BYTES,
        chunk_bytes: chunk * WORD_BYTES,
        ..*config
    }
}

/// The sizes a growing ring may have, smallest first, as `(capacity, chunk)` in slots.
fn ladder(capacity: usize, chunk: usize, least_slots: usize) -> Vec<(usize, usize)> {
    let mut sizes = vec![(capacity, chunk)];
    loop {
        let (c, k) = sizes[sizes.len() - 1];
        let n = c / k;
        let smaller = if n >= 2 * crate::config::MIN_CHUNKS && n.is_multiple_of(2) {
            (c / 2, k)
        } else if k.is_multiple_of(2) && k / 2 >= LINE_SLOTS {
            (c / 2, k / 2)
        } else {
            break;
        };
        if smaller.0 < least_slots {
            break;
        }
        sizes.push(smaller);
    }
    sizes.reverse();
    sizes
}

/// The producer's side of a growing ring.
pub(crate) struct Grower {
    sizes: Vec<(usize, usize)>,
    level: usize,
    grant: Grant,
    huge_pages: bool,
    script: Option<std::vec::IntoIter<usize>>,
    /// `Producer::stats.blocks` at the last wrap: a block since means the ring was too small.
    blocks_at_wrap: u64,
    /// The last wrap asked for a larger segment and the grant refused it: blocks until the
    /// next wrap are waits for ring memory.
    refused: bool,
    /// When the producer last wrapped or switched: a lap that took [`QUIET_LAP`] says the
    /// ring is larger than the thread needs.
    #[cfg(not(loom))]
    wrapped_at: Instant,
}

/// A lap this long, without a block and without finding the ring full at its end, shrinks a
/// grown ring by one size: the thread writes slowly enough for half the memory.
#[cfg(not(loom))]
const QUIET_LAP: std::time::Duration = std::time::Duration::from_millis(100);

/// A lap shorter than this grows the ring even when its analyzer keeps up: on a small ring a
/// thread that writes this fast has its analyzer reading lines it has just written, each
/// handed from core to core while hot, and every event costs more than on a larger ring.
#[cfg(not(loom))]
const FAST_LAP: std::time::Duration = std::time::Duration::from_millis(1);

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

/// Make a connected exhaustive CAB pair whose ring starts small and grows, while its
/// producer finds it full, up to `config.buffer_bytes`, and shrinks back after quiet laps; see
/// [`Growth`]. Each switch to another size happens at the end-of-ring `MAGIC`, on the
/// producer's slow path; the fast path is that of [`channel`].
pub fn growing_channel(
    config: &RingConfig,
    growth: Growth,
) -> Result<(Producer, Consumer), ConfigError> {
    if config.mode != Mode::Exhaustive {
        return Err(ConfigError::new(
            "mode",
            format!("{:?}", config.mode),
            "Exhaustive for ring::growing_channel (sampling rings have one size)",
        ));
    }
    config.validate()?;
    let sizes = ladder(
        config.slots(),
        config.chunk_slots(),
        growth.initial_bytes / WORD_BYTES,
    );
    let mut script = growth.script.map(|s| s.into_iter());
    let level = script
        .as_mut()
        .and_then(|s| s.next())
        .unwrap_or(0)
        .min(sizes.len() - 1);
    let grower = Grower {
        level,
        grant: growth.grant,
        huge_pages: config.huge_pages,
        script,
        blocks_at_wrap: 0,
        refused: false,
        #[cfg(not(loom))]
        wrapped_at: Instant::now(),
        sizes,
    };
    let (capacity, chunk) = grower.sizes[level];
    let first = RingConfig {
        buffer_bytes: capacity * WORD_BYTES,
        chunk_bytes: chunk * WORD_BYTES,
        ..*config
    };
    let most_unread = grower.sizes.iter().map(|s| s.0).sum();
    make_with(&first, Some(grower), most_unread)
}

fn make<const SAMPLING: bool>(
    config: &RingConfig,
) -> Result<(Producer<SAMPLING>, Consumer), ConfigError> {
    make_with(config, None, config.slots())
}

fn make_with<const SAMPLING: bool>(
    config: &RingConfig,
    grower: Option<Grower>,
    most_unread: usize,
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
    let segment = Segment::new(capacity, chunk, config.huge_pages, SAMPLING, None)?;
    if grower.is_some() {
        segment.fault_in();
    }
    let shared = Arc::new(Shared {
        handoff,
        most_unread,
        published: CachePadded::new(AtomicU64::new(0)),
        reached: CachePadded::new(AtomicU64::new(0)),
        ends: crate::transport::Ends::new(),
        counters: CachePadded::new(ProducerCounters {
            blocks: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            largest: AtomicU64::new(capacity as u64),
            grown: AtomicU64::new(0),
            shrunk: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            memory_wait_ns: AtomicU64::new(0),
        }),
    });
    let base = segment.slots.as_ptr();
    let sampling = SAMPLING;
    let producer = Producer {
        cursor: base,
        base,
        wraps: 0,
        seg_start: 0,
        copied: 0,
        seq: 0,
        closed: false,
        stats: ProducerStats::default(),
        seg: segment.clone(),
        grower,
        shared: shared.clone(),
    };
    let consumer = Consumer {
        shared,
        seg: segment,
        seg_start: 0,
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
            let h = producer.shared.handoff.as_ref().unwrap();
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
