//! The `#[profile]` attribute's compile-pass cases (`tests/pass/`, one ordinary test binary:
//! every kind of item, `paths` and `memory` on odd control flow, `crate = path`, return types
//! inferred as before, each under `deny(warnings)`) and compile-fail cases (`tests/ui/fail/`,
//! run by `tests/compiletest.rs` with trybuild against their exact errors).
//!
//! A package of its own because trybuild builds the cases against every dependency and
//! dev-dependency of the package it runs in: here that is cabprof and trybuild alone, not the
//! profilers the benches of `cabprof-checks` race against.
