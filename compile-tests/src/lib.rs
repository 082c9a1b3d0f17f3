//! The `#[profile]` attribute's compile-pass and compile-fail cases (`tests/ui/`, run by
//! `tests/compiletest.rs` with trybuild), including that instrumented code leaves the
//! standard library's type inference alone and that `crate = path` works.
//!
//! A package of its own because trybuild builds the cases against every dependency and
//! dev-dependency of the package it runs in: here that is cabprof and trybuild alone, not the
//! profilers the benches of `cabprof-checks` race against.
