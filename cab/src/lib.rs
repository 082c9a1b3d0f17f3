//! `cab`: the CAB ring (Cache-friendly Asymmetric Buffering, Ha et al., OOPSLA 2009), the
//! baselines it is raced against, and (as later work fills it) cabprof's runtime.
//!
//! An instrumented application thread writes one 64-bit [`event::Event`] word per event into
//! its own single-producer/single-consumer ring; an analyzer thread takes whole chunks. The
//! producer's common case is one load, one compare, one store and one increment. Exhaustive
//! mode delivers every event once, in order; sampling mode never blocks the application.
//!
//! ```
//! use cab::{event::{Event, MethodId}, ring, Poll, RingConfig};
//!
//! let (mut tx, mut rx) = ring::channel(&RingConfig::new(64 * 1024, 8 * 1024)).unwrap();
//! let worker = std::thread::spawn(move || {
//!     let mut total = 0u64;
//!     loop {
//!         match rx.poll_with(|words| total += words.len() as u64) {
//!             Poll::Closed => return total,
//!             Poll::Empty => std::thread::yield_now(),
//!             Poll::Consumed(_) => {}
//!         }
//!     }
//! });
//! let f = MethodId::new(1).unwrap();
//! for _ in 0..100_000 {
//!     tx.push(Event::call(MethodId::ROOT, f));
//! }
//! tx.close();
//! assert_eq!(worker.join().unwrap(), 100_000);
//! ```
//!
//! Modules:
//! - [`event`]: the event word layout; no event can equal `CLEAR` or `MAGIC`.
//! - [`config`]: ring sizes and modes, validated with errors that name the field.
//! - [`ring`]: the CAB ring itself (paper Figures 3 and 5).
//! - [`transport`]: the trait shared by CAB and its baselines.
//! - [`runtime`]: sessions, a ring per thread, pinned analyzers, shutdown, snapshots, Ctrl-C.
//! - [`fastforward`]: FastForward (Giacomoni et al., PPoPP 2008).
//! - [`nway`]: N-way buffering (PiPA, Zhao et al., CGO 2008), improved as in the CAB paper §6.1.
//! - [`hw`]: host cache geometry from sysfs and an X-Ray style probe (Yotov et al.).
//! - [`cycles`]: a Paoloni-style cycle timer for per-event costs.
//! - [`stats`]: mean, median, variance and percentiles of measured samples.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod config;
pub mod cycles;
pub mod event;
pub mod fastforward;
pub mod hw;
pub mod nway;
pub mod registry;
pub mod ring;
pub mod runtime;
pub mod stats;
mod sync;
pub mod transport;

pub use config::{ConfigError, Mode, RingConfig};
pub use event::{Event, EventKind, MethodId};
pub use transport::{ConsumerStats, EventConsumer, EventProducer, Poll, ProducerStats, Transport};
