//! The buffer designs a session can carry events through, declared once in [`DESIGNS`], and
//! the two type-erased halves the rest of the runtime holds: a thread's [`ThreadProducer`]
//! and an analyzer's [`RingConsumer`].
//!
//! Adding a design is one [`Transport`] impl (in its own module, like
//! [`fastforward`](crate::fastforward)) plus one [`BufferDesign`] variant with its line in
//! [`DESIGNS`]. Its producer is reached from [`emit`](super::emit) through one indirect call
//! (`push_erased::<P>`); only CAB, the hot design, is pushed inline (see `tls`).

use crate::config::{ConfigError, Mode, RingConfig};
use crate::event::Event;
use crate::fastforward::FastForward;
use crate::nway::NWay;
use crate::ring::{self, Consumer};
use crate::transport::{
    ConsumerStats, EventConsumer, EventProducer, Poll, ProducerStats, Transport,
};
use std::any::TypeId;

/// Which buffer carries events from application threads to analyzers. CAB is the design;
/// the others are the baselines the paper compares it with (Figure 7), exhaustive mode only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferDesign {
    /// Cache-friendly Asymmetric Buffering.
    Cab,
    /// FastForward (Giacomoni et al. 2008).
    FastForward,
    /// N-way buffering (PiPA, Zhao et al. 2008).
    NWay,
}

/// One registered design: how it is named, checked and built.
struct Registration {
    design: BufferDesign,
    /// Names accepted by `CABPROF_BUFFER_DESIGN` (case-insensitive); the first is canonical.
    names: &'static [&'static str],
    /// Whether it supports sampling mode (only CAB does).
    samples: bool,
    /// Whether buffer and chunk sizes must be powers of two (designs that find the end of a
    /// buffer by masking).
    power_of_two: bool,
    /// A connected pair for one application thread.
    channel: fn(&RingConfig) -> Result<(ThreadProducer, RingConsumer), ConfigError>,
}

/// Every buffer design, once.
const DESIGNS: &[Registration] = &[
    Registration {
        design: BufferDesign::Cab,
        names: &["cab"],
        samples: true,
        power_of_two: false,
        channel: cab_channel,
    },
    baseline::<FastForward>(BufferDesign::FastForward, &["fastforward", "ff"]),
    baseline::<NWay>(BufferDesign::NWay, &["nway", "n-way"]),
];

/// The registration of an exhaustive-only, power-of-two design reached through its
/// [`Transport`] impl.
const fn baseline<T: Transport>(
    design: BufferDesign,
    names: &'static [&'static str],
) -> Registration
where
    T::Producer: 'static,
    T::Consumer: 'static,
{
    Registration {
        design,
        names,
        samples: false,
        power_of_two: true,
        channel: transport_channel::<T>,
    }
}

fn transport_channel<T: Transport>(
    config: &RingConfig,
) -> Result<(ThreadProducer, RingConsumer), ConfigError>
where
    T::Producer: 'static,
    T::Consumer: 'static,
{
    let (p, c) = T::channel(config)?;
    let slots = config.slots() as u64;
    Ok((
        ThreadProducer::new(p),
        RingConsumer::Other(Box::new(c), slots),
    ))
}

/// An exhaustive CAB ring that starts small and grows (see [`ring::Growth`]).
pub(super) fn growing_cab_channel(
    config: &RingConfig,
    growth: ring::Growth,
) -> Result<(ThreadProducer, RingConsumer), ConfigError> {
    let (p, c) = ring::growing_channel(config, growth)?;
    Ok((ThreadProducer::new(p), RingConsumer::Cab(c)))
}

/// CAB in either mode; its consumer is kept concrete for the sampling controls.
fn cab_channel(config: &RingConfig) -> Result<(ThreadProducer, RingConsumer), ConfigError> {
    Ok(match config.mode {
        Mode::Exhaustive => {
            let (p, c) = ring::channel(config)?;
            (ThreadProducer::new(p), RingConsumer::Cab(c))
        }
        Mode::Sampling { .. } => {
            let (p, c) = ring::sampling_channel(config)?;
            (ThreadProducer::new(p), RingConsumer::Cab(c))
        }
    })
}

impl BufferDesign {
    /// Every design, in registration order: CAB first, then the baselines.
    pub const ALL: [BufferDesign; 3] = [
        BufferDesign::Cab,
        BufferDesign::FastForward,
        BufferDesign::NWay,
    ];

    /// The canonical name, the first that `CABPROF_BUFFER_DESIGN` accepts: `cab`,
    /// `fastforward` or `nway`.
    pub fn name(self) -> &'static str {
        self.registration().names[0]
    }

    fn registration(self) -> &'static Registration {
        DESIGNS
            .iter()
            .find(|r| r.design == self)
            .expect("every BufferDesign has a line in DESIGNS")
    }

    /// The design named `text` (as in `CABPROF_BUFFER_DESIGN`), or an error naming `field`.
    pub(super) fn parse(field: &str, text: &str) -> Result<BufferDesign, ConfigError> {
        let name = text.trim().to_ascii_lowercase();
        DESIGNS
            .iter()
            .find(|r| r.names.contains(&name.as_str()))
            .map(|r| r.design)
            .ok_or_else(|| {
                let names: Vec<&str> = DESIGNS.iter().map(|r| r.names[0]).collect();
                ConfigError::new(field, text, join_or(&names))
            })
    }

    /// Check `config` against this design's rules.
    pub(super) fn validate(self, config: &RingConfig) -> Result<(), ConfigError> {
        let r = self.registration();
        if !r.samples && config.mode != Mode::Exhaustive {
            let exhaustive_only: Vec<String> = DESIGNS
                .iter()
                .filter(|r| !r.samples)
                .map(|r| format!("{:?}", r.design))
                .collect();
            return Err(ConfigError::new(
                "buffer design",
                format!("{self:?}"),
                format!(
                    "Cab in sampling mode ({} are exhaustive only)",
                    exhaustive_only.join(" and ")
                ),
            ));
        }
        if r.power_of_two {
            config.validate_power_of_two()
        } else {
            config.validate()
        }
    }

    /// A connected producer/consumer pair for one application thread.
    pub(super) fn channel(
        self,
        config: &RingConfig,
    ) -> Result<(ThreadProducer, RingConsumer), ConfigError> {
        (self.registration().channel)(config)
    }
}

/// `a, b or c`.
fn join_or(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The push function of a producer of type `P`, behind a type-erased pointer. The runtime's
/// one dynamic producer dispatch: [`ThreadProducer::push`] and `tls`'s fast path call it.
///
/// # Safety
///
/// `producer` must point to a live `P` (from [`ThreadProducer::new::<P>`]) that nothing else
/// accesses during the call.
pub(super) unsafe fn push_erased<P: EventProducer>(producer: *mut (), event: Event) {
    // SAFETY: the caller guarantees `producer` is a live, unaliased `P`.
    unsafe { (*producer.cast::<P>()).push(event) }
}

/// The `push_erased` of no producer, for a thread-local that has none. Never called: the
/// fast path calls a thread-local's push only when its key matches, which requires a producer.
///
/// # Safety
///
/// None needed; it does nothing.
pub(super) unsafe fn push_nothing(_producer: *mut (), _event: Event) {}

/// Flush a type-erased `P`.
///
/// # Safety
///
/// As [`push_erased`].
unsafe fn flush_erased<P: EventProducer>(producer: *mut ()) {
    // SAFETY: the caller guarantees `producer` is a live, unaliased `P`.
    unsafe { (*producer.cast::<P>()).flush() }
}

/// Free a type-erased `P` (dropping a producer closes it).
///
/// # Safety
///
/// `producer` came from `Box::<P>::into_raw` and is not used again.
unsafe fn drop_erased<P: EventProducer>(producer: *mut ()) {
    // SAFETY: the caller guarantees `producer` is a `Box<P>` pointer given up for good.
    drop(unsafe { Box::from_raw(producer.cast::<P>()) })
}

/// One application thread's producer, of whichever design, owned by the thread's `LOCAL`.
/// Held as a raw pointer (from `Box::into_raw`) so that the pointer `tls` caches in `FAST` and
/// the one used here are the same, with no `Box` uniqueness claim between them.
///
/// Invariant: `producer` points to a live `P` made by [`new::<P>`](Self::new), freed only by
/// `Drop`, and `push`, `flush`, `drop` and `type_id` were all made for that same `P`.
pub(super) struct ThreadProducer {
    producer: *mut (),
    push: unsafe fn(*mut (), Event),
    flush: unsafe fn(*mut ()),
    drop: unsafe fn(*mut ()),
    type_id: TypeId,
}

// SAFETY: a `ThreadProducer` owns its `P` (a `Box` given up to a raw pointer) and `P` is an
// `EventProducer`, which is `Send`; the function pointers are plain data. Moving it moves the
// `P`, which is used only through it or, once its thread published it, through that thread's
// `FAST` cache.
unsafe impl Send for ThreadProducer {}

impl ThreadProducer {
    pub(super) fn new<P: EventProducer + 'static>(producer: P) -> ThreadProducer {
        ThreadProducer {
            producer: Box::into_raw(Box::new(producer)).cast(),
            push: push_erased::<P>,
            flush: flush_erased::<P>,
            drop: drop_erased::<P>,
            type_id: TypeId::of::<P>(),
        }
    }

    /// The erased pointer and push function, for `tls`'s fast path.
    pub(super) fn raw(&self) -> (*mut (), unsafe fn(*mut (), Event)) {
        (self.producer, self.push)
    }

    /// Whether the producer is a `P` (checked before the fast path relies on it).
    pub(super) fn is<P: 'static>(&self) -> bool {
        self.type_id == TypeId::of::<P>()
    }

    pub(super) fn push(&mut self, event: Event) {
        // SAFETY: by the invariant `producer` is a live `P` and `push` is `push_erased::<P>`;
        // `&mut self` means nothing else uses it now.
        unsafe { (self.push)(self.producer, event) }
    }

    pub(super) fn flush(&mut self) {
        // SAFETY: by the invariant `producer` is a live `P` and `flush` is `flush_erased::<P>`;
        // `&mut self` means nothing else uses it now.
        unsafe { (self.flush)(self.producer) }
    }
}

impl Drop for ThreadProducer {
    fn drop(&mut self) {
        // SAFETY: by the invariant `producer` came from `Box::<P>::into_raw` and `drop` is
        // `drop_erased::<P>`; this is its one drop. `tls` clears `FAST` before dropping it.
        unsafe { (self.drop)(self.producer) }
    }
}

impl std::fmt::Debug for ThreadProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadProducer")
            .field("producer", &self.producer)
            .finish_non_exhaustive()
    }
}

/// An analyzer's consumer of one ring. CAB's is kept concrete: its poll inlines into the
/// analyzer loop and it alone can sample and read a live producer's tail. Every other design
/// is reached through [`EventConsumer`].
pub(super) enum RingConsumer {
    Cab(Consumer),
    /// Another design's consumer, and the number of event slots of its buffer.
    Other(Box<dyn EventConsumer>, u64),
}

impl RingConsumer {
    #[inline]
    pub(super) fn poll_with(&mut self, mut f: impl FnMut(&[u64])) -> Poll {
        match self {
            RingConsumer::Cab(c) => c.poll_with(f),
            RingConsumer::Other(c, _) => c.poll(&mut f),
        }
    }

    /// Events a live producer has written but not handed over: only CAB can read them
    /// without the producer's help (the baselines' threads are joined before `finish` in the
    /// evaluations that use them).
    pub(super) fn drain_live(&mut self, f: impl FnMut(&[u64])) -> u64 {
        self.drain_live_to(u64::MAX, f)
    }

    /// [`drain_live`](Self::drain_live), stopping once [`progress`](Self::progress) reaches
    /// `target`.
    pub(super) fn drain_live_to(&mut self, target: u64, f: impl FnMut(&[u64])) -> u64 {
        match self {
            RingConsumer::Cab(c) => c.drain_live_to(target, f),
            RingConsumer::Other(..) => 0,
        }
    }

    /// How far this consumer has read: CAB's absolute ring position, or, sampling, the
    /// handoff blocks read or skipped; other designs' events delivered.
    pub(super) fn progress(&self) -> u64 {
        match self {
            RingConsumer::Cab(c) if c.is_sampling() => c.blocks_read(),
            RingConsumer::Cab(c) => c.position(),
            RingConsumer::Other(c, _) => c.stats().delivered,
        }
    }

    /// The [`progress`](Self::progress) past every event the producer had written when this
    /// is called, so that a snapshot reads what was emitted before it was asked for and not
    /// what a busy producer keeps adding. An exhaustive producer is at most one buffer ahead
    /// of its consumer; a sampling producer has handed over the blocks it has finished (the
    /// chunk it is in follows when it ends).
    pub(super) fn snapshot_target(&self) -> u64 {
        match self {
            RingConsumer::Cab(c) if c.is_sampling() => c.blocks_done(),
            RingConsumer::Cab(c) => c.position().saturating_add(c.capacity_slots() as u64),
            RingConsumer::Other(c, slots) => c.stats().delivered.saturating_add(*slots),
        }
    }

    pub(super) fn stats(&self) -> ConsumerStats {
        match self {
            RingConsumer::Cab(c) => c.stats(),
            RingConsumer::Other(c, _) => c.stats(),
        }
    }

    /// The producer's counters as the consumer sees them (other designs: what was delivered).
    pub(super) fn producer_stats(&self) -> ProducerStats {
        match self {
            RingConsumer::Cab(c) => c.producer_stats(),
            RingConsumer::Other(c, _) => ProducerStats {
                pushed: c.stats().delivered,
                ..Default::default()
            },
        }
    }

    pub(super) fn is_sampling(&self) -> bool {
        matches!(self, RingConsumer::Cab(c) if c.is_sampling())
    }

    /// See [`Consumer::unread_bound`]; 0 for other designs (exhaustive only).
    pub(super) fn unread_bound(&self) -> u64 {
        match self {
            RingConsumer::Cab(c) => c.unread_bound(),
            RingConsumer::Other(..) => 0,
        }
    }

    /// The largest size the ring reached in bytes, and its size changes (a CAB ring; the
    /// other designs' `slots` as given).
    pub(super) fn ring_size(&self) -> (u64, u64) {
        let word = std::mem::size_of::<u64>();
        match self {
            RingConsumer::Cab(c) => {
                let (grown, shrunk) = c.resizes();
                let slots = c.largest_slots().max(c.segment_slots());
                ((slots * word) as u64, grown + shrunk)
            }
            RingConsumer::Other(_, slots) => (*slots * word as u64, 0),
        }
    }

    /// Larger segments refused by the ring memory's budget, and the producer's wait at the
    /// size it kept.
    pub(super) fn memory_waits(&self) -> (u64, std::time::Duration) {
        match self {
            RingConsumer::Cab(c) => c.memory_waits(),
            RingConsumer::Other(..) => (0, std::time::Duration::ZERO),
        }
    }

    pub(super) fn rate(&self) -> f64 {
        match self {
            RingConsumer::Cab(c) => c.rate(),
            RingConsumer::Other(..) => 1.0,
        }
    }

    pub(super) fn set_rate(&mut self, rate: f64) {
        if let RingConsumer::Cab(c) = self {
            c.set_rate(rate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_registered_design_once_in_order_and_names_parse_back() {
        let registered: Vec<BufferDesign> = DESIGNS.iter().map(|r| r.design).collect();
        assert_eq!(BufferDesign::ALL.to_vec(), registered);
        for d in BufferDesign::ALL {
            assert_eq!(BufferDesign::parse("design", d.name()).unwrap(), d);
        }
        let names: Vec<&str> = BufferDesign::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(names, ["cab", "fastforward", "nway"]);
    }
}
