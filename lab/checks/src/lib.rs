//! Tests of the `cabprof` crate that need heavy dev-dependencies, in their own package:
//! cargo builds every dev-dependency of a package for any of its examples, so keeping
//! `proptest` here keeps `cargo run --release --example hot_functions` quick to build from a
//! fresh clone. (The compile tests are in `cabprof-compile-tests`, whose trybuild builds need
//! none of these; the per-call race against other profilers is `cabprof-per-call`, benches
//! only, so that no test builds the peers.)
//!
//! - `tests/it/trace_parser.rs`: property tests of the trace readers.
//! - [`fidelity`]: a program with known costs, built plain and instrumented, which
//!   `tests/it/time_fidelity.rs` and `benches/time_fidelity.rs` profile to check the times.

pub mod fidelity;
