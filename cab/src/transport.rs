//! One interface over CAB and its baselines, so the same harness, tests and benches drive all
//! of them (the paper's Figure 7 compares them carrying the same events).

use crate::config::{ConfigError, Mode, RingConfig};
use crate::event::Event;
use crate::sync::{AtomicBool, Ordering};
use std::time::Duration;

/// What one [`EventConsumer::poll`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// Handed `n` events to the callback (in sampling mode: `n` sampled events).
    Consumed(usize),
    /// Nothing ready yet; the producer is alive. Poll again later.
    Empty,
    /// The producer closed and every event it handed over has been delivered.
    Closed,
}

/// Counters kept by a producer, read when it is done (or on a snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Events written into the buffer.
    pub pushed: u64,
    /// Times the producer found the buffer full and had to wait (exhaustive mode).
    pub blocks: u64,
    /// Total time spent waiting for a full buffer.
    pub blocked: Duration,
    /// Events dropped because the consumer was gone while the buffer was full.
    pub dropped: u64,
}

/// Counters kept by a consumer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Events handed to the callback.
    pub delivered: u64,
    /// Chunks (or buffers) taken; sampling CAB: handoff blocks read (one per chunk, and one
    /// per flush).
    pub chunks: u64,
    /// Sampling mode: what the producer overwrote before (or while) it was read; sampling
    /// CAB: handoff blocks lost.
    pub chunks_lapped: u64,
    /// Sampling CAB: the events the lost blocks' ranges held (the positions between the
    /// blocks read), all of them sampled or not.
    pub events_lapped: u64,
}

/// The application side: pushes one event word at a time.
pub trait EventProducer: Send {
    /// Append one event. Exhaustive designs wait while full; sampling never waits.
    fn push(&mut self, event: Event);
    /// Hand every event pushed so far to the consumer, even from a partly filled chunk.
    fn flush(&mut self);
    /// Flush and tell the consumer no more events will come. Dropping the producer does this
    /// too.
    fn close(&mut self);
    /// Counters so far.
    fn stats(&self) -> ProducerStats;
}

/// The analyzer side: takes events in whatever batches the design produces.
pub trait EventConsumer: Send {
    /// Deliver the next ready batch (or batches, for sampling bursts) to `f`.
    fn poll(&mut self, f: &mut dyn FnMut(&[u64])) -> Poll;
    /// Counters so far.
    fn stats(&self) -> ConsumerStats;
}

/// A buffer design: makes a connected producer/consumer pair from a [`RingConfig`].
pub trait Transport {
    /// Short name for tables ("CAB", "FastForward", "N-way").
    const NAME: &'static str;
    /// The producer half.
    type Producer: EventProducer;
    /// The consumer half.
    type Consumer: EventConsumer;
    /// A new pair, or the config rule it breaks.
    fn channel(config: &RingConfig) -> Result<(Self::Producer, Self::Consumer), ConfigError>;
}

/// What a design's two halves tell each other about their ends: the producer has closed (set
/// after its final hand-over), the consumer still exists (cleared when it is dropped, so a
/// producer waiting on a full buffer stops waiting).
#[derive(Debug)]
pub(crate) struct Ends {
    closed: AtomicBool,
    consumer_alive: AtomicBool,
}

impl Ends {
    pub(crate) fn new() -> Ends {
        Ends {
            closed: AtomicBool::new(false),
            consumer_alive: AtomicBool::new(true),
        }
    }

    /// The producer closed. Release, stored after its final hand-over: a consumer that sees
    /// `closed` sees that hand-over too.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the producer has closed. Acquire: pairs with [`close`](Self::close).
    pub(crate) fn producer_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The consumer is gone. Release: a producer that sees it stops waiting; runs on unwind
    /// too, from the consumer's `Drop`.
    pub(crate) fn consumer_dropped(&self) {
        self.consumer_alive.store(false, Ordering::Release);
    }

    /// Whether the consumer still exists. Acquire: pairs with
    /// [`consumer_dropped`](Self::consumer_dropped).
    pub(crate) fn consumer_alive(&self) -> bool {
        self.consumer_alive.load(Ordering::Acquire)
    }
}

/// The baselines carry every event: a `config` in another mode is refused, naming `design`.
pub(crate) fn exhaustive_only(config: &RingConfig, design: &str) -> Result<(), ConfigError> {
    if config.mode == Mode::Exhaustive {
        return Ok(());
    }
    Err(ConfigError::new(
        "mode",
        format!("{:?}", config.mode),
        format!("Exhaustive for {design} (only the CAB ring samples)"),
    ))
}

/// Implement [`EventProducer`] and [`EventConsumer`] for a design whose `Producer` and
/// `Consumer` already have inherent `push`/`flush`/`close`/`stats` and `poll_with`/`stats`
/// methods: the traits only forward to them, identically for every design. Also `Debug`
/// (the counters so far).
macro_rules! forward_transport_traits {
    ($(@const $g:ident: $t:ty;)? $producer:ty, $consumer:ty) => {
        impl$(<const $g: $t>)? $crate::transport::EventProducer for $producer {
            #[inline(always)]
            fn push(&mut self, event: $crate::event::Event) {
                <$producer>::push(self, event)
            }
            fn flush(&mut self) {
                <$producer>::flush(self)
            }
            fn close(&mut self) {
                <$producer>::close(self)
            }
            fn stats(&self) -> $crate::transport::ProducerStats {
                <$producer>::stats(self)
            }
        }

        impl $crate::transport::EventConsumer for $consumer {
            fn poll(&mut self, f: &mut dyn FnMut(&[u64])) -> $crate::transport::Poll {
                self.poll_with(f)
            }
            fn stats(&self) -> $crate::transport::ConsumerStats {
                <$consumer>::stats(self)
            }
        }

        impl$(<const $g: $t>)? ::std::fmt::Debug for $producer {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct("Producer")
                    .field("stats", &<$producer>::stats(self))
                    .finish_non_exhaustive()
            }
        }

        impl ::std::fmt::Debug for $consumer {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct("Consumer")
                    .field("stats", &<$consumer>::stats(self))
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use forward_transport_traits;
