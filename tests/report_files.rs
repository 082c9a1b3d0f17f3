//! Where `CABPROF=1` writes a process's report when other processes of the same run share its
//! name: doctests (rustdoc names every doctest binary `rust_out`), two processes of one binary,
//! and same-named binaries of two packages. This file is the child too: its `child_workload`
//! test does the work, run again by the drivers under names and environments that imitate
//! rustdoc and cargo (an `#[ignore]`d child role, which fails when run without them).
//!
//! Its own test binary, not a module of `tests/it/`: its child runs install the process-wide
//! `CABPROF=1` session under names and environments that imitate rustdoc and cargo.

mod support;

use cabprof::report::ReportData;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::stderr;

/// Set in the children, where the drivers do nothing.
const CHILD: &str = "CABPROF_TEST_REPORT_FILES_CHILD";

#[cabprof::profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(5)
}

#[test]
#[ignore = "a child role: run by doctests_write_under_doctest_and_never_over_each_other and same_named_binaries_of_one_run_keep_each_others_reports"]
fn child_workload() {
    let n: u64 = support::child_role(
        CHILD,
        "same_named_binaries_of_one_run_keep_each_others_reports",
    )
    .parse()
    .unwrap();
    std::hint::black_box((0..n).map(leaf).sum::<u64>());
}

/// The target directory this test was built in.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file() || d.join(".rustc_info.json").is_file())
        .expect("built by cargo")
        .to_path_buf()
}

/// A copy of this test binary at `dir/name`, in a fresh `dir` under the target directory.
fn copy_as(dir: &str, name: &str) -> PathBuf {
    let dir = target_dir().join("report_files_test").join(dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    exe
}

/// Run `exe`'s `child_workload` under `CABPROF=1`, `calls` calls of `leaf`; `cargo` sets
/// `CARGO` as cargo does for what it runs. The report's directory is found from
/// `CARGO_TARGET_DIR`: the copies are not under the target directory.
fn run(exe: &Path, calls: u64, cargo: bool, envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args([
        "child_workload",
        "--ignored",
        "--exact",
        "--test-threads",
        "1",
    ])
    .env("CABPROF", "1")
    .env("CABPROF_PIN", "0")
    .env_remove("CABPROF_OUTPUT")
    .env_remove("RUSTDOC_DOCTEST_RUN_NB_TEST")
    .env("CARGO_TARGET_DIR", target_dir())
    .env(CHILD, calls.to_string());
    if cargo {
        cmd.env("CARGO", "cargo");
    } else {
        cmd.env_remove("CARGO");
    }
    cmd.envs(envs.iter().copied());
    support::passed(&mut cmd)
}

/// The calls of `leaf` in the report at `path`.
fn leaves(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    ReportData::from_json(&text).unwrap().calls("leaf")
}

/// The `<stem>.<pid>.json` files in `dir`.
fn aside(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.strip_prefix(&format!("{stem}."))
                .and_then(|rest| rest.strip_suffix(".json"))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn doctests_write_under_doctest_and_never_over_each_other() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    // As rustdoc runs a doctest of edition 2021: `rust_out` in a `rustdoctest*` directory,
    // under cargo, which sets the crate's name.
    let exe = copy_as("rustdoctestAbC123", "rust_out");
    let dir = target_dir().join("cabprof/doctest/report_files_demo");
    let _ = std::fs::remove_dir_all(&dir);
    let crate_name = [("CARGO_CRATE_NAME", "report_files_demo")];
    let first = run(&exe, 3, true, &crate_name);
    let main = dir.join("rust_out.json");
    assert!(
        stderr(&first).contains(&main.display().to_string()),
        "{}",
        stderr(&first)
    );
    assert_eq!(leaves(&main), 3);
    // The crate's next doctest, in the same run: its own file, the first one's kept.
    let second = run(&exe, 4, true, &crate_name);
    let others = aside(&dir, "rust_out");
    assert_eq!(others.len(), 1, "{others:?}");
    assert_eq!(leaves(&main), 3, "the first doctest's report is kept");
    assert_eq!(leaves(&others[0]), 4);
    let said = stderr(&second);
    assert!(
        said.contains(&others[0].display().to_string())
            && said.contains("holds another process's report of this run"),
        "{said}"
    );
    assert!(
        others[0].with_extension("txt").is_file(),
        "its tables beside it"
    );

    // A merged doctest (edition 2024): the same binary for every test, numbered by rustdoc.
    let merged = [
        ("CARGO_CRATE_NAME", "report_files_demo"),
        ("RUSTDOC_DOCTEST_RUN_NB_TEST", "7"),
    ];
    run(&std::env::current_exe().unwrap(), 5, true, &merged);
    assert_eq!(leaves(&dir.join("doctest_7.json")), 5);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn same_named_binaries_of_one_run_keep_each_others_reports() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    // `tests/twin.rs` of two packages: two binaries named `twin`, run one after the other by
    // one cargo command (this test stands for it: the children's parent).
    let a = copy_as("package_a", "twin");
    let b = copy_as("package_b", "twin");
    let dir = target_dir().join("cabprof");
    let main = dir.join("twin.json");
    let _ = std::fs::remove_file(&main);
    for old in aside(&dir, "twin") {
        std::fs::remove_file(old).unwrap();
    }
    run(&a, 6, true, &[]);
    assert_eq!(leaves(&main), 6);
    run(&b, 8, true, &[]);
    assert_eq!(leaves(&main), 6, "package a's report is kept");
    let others = aside(&dir, "twin");
    assert_eq!(others.len(), 1, "{others:?}");
    assert_eq!(leaves(&others[0]), 8);

    // Outside cargo a process is its own run: a report older than it is an earlier run's,
    // and replaced (once older than the 0.1 s slack the clocks need).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let third = run(&a, 9, false, &[]);
    assert_eq!(leaves(&main), 9, "{}", stderr(&third));
    assert!(
        !stderr(&third).contains("another process"),
        "{}",
        stderr(&third)
    );
    assert_eq!(aside(&dir, "twin"), others, "no new file aside");
    for f in others {
        std::fs::remove_file(&f).unwrap();
        let _ = std::fs::remove_file(f.with_extension("txt"));
    }
}
