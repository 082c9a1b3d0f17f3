//! UI tests of `#[cabprof::profile]`: what must compile (without warnings) and the exact error
//! of each misuse. Regenerate the expected errors with
//! `TRYBUILD=overwrite cargo test -p cabprof-compile-tests --test compiletest` after reviewing them.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
