//! The `#[profile]` attribute's compile-fail cases (`tests/ui/fail/`, run by
//! `tests/compiletest.rs` with trybuild against their exact errors). cabprof is compiled out
//! here: a misuse is the same error either way, and trybuild then builds the attribute's
//! crates alone for the cases. The compile-pass cases, which need the attribute
//! instrumenting, are the facade's `tests/it/compile_pass/`.
//!
//! A package of its own because trybuild builds the cases against every dependency and
//! dev-dependency of the package it runs in: here that is cabprof and trybuild alone, not the
//! profilers the benches of `cabprof-checks` race against.
