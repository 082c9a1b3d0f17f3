//! UI tests of `#[cabprof::profile]`: the exact error of each misuse, with cabprof compiled
//! out, whose errors are the instrumenting build's token for token (the attribute's unit test
//! `a_misuse_is_the_same_error_compiled_out`). What must compile, and without warnings, is the
//! facade's `tests/it/compile_pass/`. Regenerate the expected errors with
//! `TRYBUILD=overwrite cargo test -p cabprof-compile-tests --test compiletest` after reviewing them.

#[test]
fn ui() {
    // trybuild builds cabprof and its dependencies again for the cases, in a project of its
    // own that does not take the workspace's profiles: without debug info, as the workspace's
    // dependencies are built. A process-wide variable, but this binary has one test.
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false");
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
