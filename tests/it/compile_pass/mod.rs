//! The attribute's compile-pass cases: code `#[profile]` must instrument without changing
//! what it means or adding a warning (each module denies warnings), run as tests. Each case
//! module is written as a crate of its own would be: its `pub` items are exported (this
//! module is `pub` at the binary's root), and its lints are rustc's defaults, not the
//! workspace's extra ones (allowed where the module is declared, with clippy: the cases are
//! odd code on purpose, and what clippy says of instrumented code against the same code
//! compiled out is `cabprof-checks`' user-lints test). The compile-fail cases, which need
//! their exact errors, are `cabprof-compile-tests`' (trybuild).
//!
//! Their functions are instrumented, so each test holds the session lock: a session of
//! another test would count their calls.

pub mod items;
pub mod memory_constructs;
pub mod paths_constructs;
pub mod renamed_crate;
pub mod tail_types;

/// A test that runs one case's `main` under the session lock.
macro_rules! case {
    ($($test:ident: $module:ident),* $(,)?) => {$(
        #[test]
        fn $test() {
            let _one = crate::support::serial();
            $module::main();
        }
    )*};
}

case! {
    every_kind_of_item: items,
    memory_rewrites_keep_meaning: memory_constructs,
    paths_numbering_keeps_meaning: paths_constructs,
    a_renamed_crate_path: renamed_crate,
    tail_types_are_inferred_as_before: tail_types,
}
