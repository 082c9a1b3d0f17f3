//! What the workspace's benches, checks and evaluation measure with, kept out of the runtime
//! that every user of `#[profile]` links:
//!
//! - [`cycles`]: a Paoloni-style cycle timer for per-event costs.
//! - [`host`]: the CPU a measurement ran on.
//! - [`rounds`]: the round count a bench reads from its environment, checked, and the
//!   interleaved rounds.
//! - [`stats`]: mean, median, variance and percentiles of measured samples, and the paired,
//!   bootstrapped comparison of two designs on a noisy machine.

pub mod cycles;
pub mod host;
pub mod rounds;
pub mod stats;
