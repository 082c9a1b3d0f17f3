//! `#[cabprof::profile]` keeps the user's lints: clippy on an annotated crate
//! (`tests/lints`, rust-version 1.70) reports the same warnings, by lint, file and line, with
//! the attribute instrumenting as with it compiled out (`cabprof` without `enabled` hands the
//! items back unchanged, which is the plain crate).
//!
//! Warnings are counted per (lint, file, line): a lint reported twice on one line is a change
//! the user sees. The one tolerated is `result_large_err` a second time on a function that has
//! it (see the test).
//!
//! Two ways this broke before: generated code that is not the user's made the user's code look
//! macro-expanded, so clippy skipped it (`new_without_default`, `result_large_err`,
//! `needless_borrow` lost); and generated code called std APIs newer than the user's
//! `rust-version` (`incompatible_msrv` at the attribute).
//!
//! The fixture is built in its own target dir under this test's, so it does not wait on the
//! outer build's lock; the first run checks cabprof's dependencies for it once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How many warnings and errors about the fixture's own code each (lint, file, line) has: a
/// count, since a lint that fires twice on one line (once on the function, once on something
/// generated with the user's span) is a change the user sees.
type Lints = BTreeMap<(String, String, u64), usize>;

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The outer build's target dir (if set by the environment) is not the fixture's.
    c.env_remove("CARGO_TARGET_DIR");
    c
}

fn clippy_installed() -> bool {
    cargo()
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A copy of the fixture that depends on this checkout, with the workspace's lock file.
fn fixture(dir: &Path) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here
        .parent()
        .and_then(Path::parent)
        .expect("lab/checks/ is in the repository");
    let src = here.join("tests/lints");
    let dst = dir.join("fixture");
    std::fs::create_dir_all(dst.join("src")).unwrap();
    let manifest = std::fs::read_to_string(src.join("Cargo.toml")).unwrap();
    let dep = r#"path = "../../../..""#;
    assert!(
        manifest.contains(dep),
        "the fixture's cabprof dependency moved"
    );
    let manifest = manifest.replace(dep, &format!("path = {:?}", root.display().to_string()));
    write_if_changed(&dst.join("Cargo.toml"), &manifest);
    write_if_changed(
        &dst.join("src/lib.rs"),
        &std::fs::read_to_string(src.join("src/lib.rs")).unwrap(),
    );
    // The same dependency versions as the workspace (cargo drops the entries it does not use).
    if !dst.join("Cargo.lock").exists() {
        std::fs::copy(root.join("Cargo.lock"), dst.join("Cargo.lock")).unwrap();
    }
    dst
}

/// Rewriting an unchanged file would make cargo check the fixture again for nothing.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}

fn clippy(fixture: &Path, target: &Path, profiled: bool) -> Lints {
    let mut c = cargo();
    c.current_dir(fixture)
        .args(["clippy", "--quiet", "--message-format=json", "--target-dir"])
        .arg(target);
    if profiled {
        c.args(["--features", "profiled"]);
    }
    let out = c.output().expect("run cargo clippy");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo clippy failed (profiled: {profiled}):\n{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lints = Lints::new();
    for line in stdout.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-message" || msg["target"]["name"] != "cabprof_lints_fixture" {
            continue;
        }
        let m = &msg["message"];
        let Some(code) = m["code"]["code"].as_str() else {
            // Summaries ("N warnings emitted") have no code.
            continue;
        };
        let span = m["spans"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["is_primary"] == true))
            .unwrap_or_else(|| panic!("no primary span: {m}"));
        *lints
            .entry((
                code.to_owned(),
                span["file_name"].as_str().unwrap_or("?").to_owned(),
                span["line_start"].as_u64().unwrap_or(0),
            ))
            .or_default() += 1;
    }
    lints
}

#[test]
fn clippy_sees_the_same_warnings_with_the_attribute_instrumenting() {
    if !clippy_installed() {
        assert!(
            std::env::var_os("CI").is_none(),
            "`cargo clippy` is not installed, and CI must run this test"
        );
        eprintln!("skipped: `cargo clippy` is not installed (rustup component add clippy)");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("user_lints");
    let fixture = fixture(&dir);
    let target = dir.join("target");
    let plain = clippy(&fixture, &target, false);
    let profiled = clippy(&fixture, &target, true);
    // The fixture has warnings of every kind it means to check, so equal sets say something.
    for lint in [
        "clippy::new_without_default",
        "clippy::result_large_err",
        "clippy::needless_borrow",
        "clippy::len_zero",
        "clippy::needless_range_loop",
    ] {
        assert!(
            plain.keys().any(|(l, ..)| l == lint),
            "the plain fixture has no {lint}: {plain:#?}"
        );
    }
    // (lint, file, line) -> (plain count, instrumented count), where they differ.
    let changed: BTreeMap<_, _> = plain
        .keys()
        .chain(profiled.keys())
        .map(|k| {
            let n = |m: &Lints| m.get(k).copied().unwrap_or(0);
            (k, (n(&plain), n(&profiled)))
        })
        .filter(|(_, (a, b))| a != b)
        // The one known difference: clippy (1.94 on) checks closures for `result_large_err`
        // too, and the closure holding an instrumented body returns the function's type, so
        // a function that has the warning gets it a second time at the same line. Allowing the
        // lint on that closure would break crates that `forbid` it (or `clippy::perf`,
        // `clippy::all`): an `allow` under a `forbid` is an error (E0453).
        .filter(|((lint, ..), (a, b))| {
            !(lint == "clippy::result_large_err" && *a >= 1 && *b == a + 1)
        })
        .collect();
    assert!(
        changed.is_empty(),
        "instrumenting changed the crate's warnings, as (lint, file, line): (plain, \
         instrumented) counts: {changed:#?}"
    );
}
