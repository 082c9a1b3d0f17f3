//! Tests of the `cabprof` crate that need heavy dev-dependencies, in their own package:
//! cargo builds every dev-dependency of a package for any of its examples, so keeping
//! `trybuild` and `proptest` here keeps `cargo run --release --example hot_functions` quick
//! to build from a fresh clone.
//!
//! - `tests/compiletest.rs`: the `#[profile]` attribute's compile-pass and compile-fail
//!   cases (`tests/ui/`), including that instrumented code leaves the standard library's type
//!   inference alone and that `crate = path` works.
//! - `tests/trace_parser.rs`: property tests of the trace readers.
//! - [`fidelity`]: a program with known costs, built plain and instrumented, which
//!   `tests/time_fidelity.rs` and `benches/time_fidelity.rs` profile to check the times.
//! - [`bench`](mod@bench): what the benches share.

pub mod bench;
pub mod fidelity;
