//! The attribute's compile-pass cases: code `#[profile]` must instrument without changing
//! what it means or adding a warning (each module denies warnings), compiled as this one test
//! binary and run by it. The compile-fail cases, which need their exact errors, are
//! trybuild's (`tests/compiletest.rs`).

// Each case is a module as it was a crate of its own: its `pub` items are exported, and the
// lints are rustc's defaults (each module denies their warnings), not the workspace's extra ones.
#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]
// The cases are odd code on purpose (loops that never loop, `&*q`, futures dropped): clippy
// objects to them with or without the attribute. What clippy says of instrumented code, against
// the same code compiled out, is `cabprof-checks`' user-lints test.
#![allow(clippy::all)]

pub mod items;
pub mod memory_constructs;
pub mod paths_constructs;
pub mod renamed_crate;
pub mod tail_types;

#[test]
fn every_kind_of_item() {
    items::main();
}

#[test]
fn memory_rewrites_keep_meaning() {
    memory_constructs::main();
}

#[test]
fn paths_numbering_keeps_meaning() {
    paths_constructs::main();
}

#[test]
fn a_renamed_crate_path() {
    renamed_crate::main();
}

#[test]
fn tail_types_are_inferred_as_before() {
    tail_types::main();
}
