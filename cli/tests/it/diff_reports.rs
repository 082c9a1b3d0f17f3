//! `cabprof diff` on two reports of one program before and after a change: the changed
//! function and edge come first with the right numbers, a rerun of the same version compares
//! equal (counts, paths and misses do not depend on timing), `--fail-above` gates, and the
//! Bencher Metric Format output holds NEW's values.

use cabprof::{profile, Analysis, LevelConfig, Policy, Session};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Read-only data at a fixed address, so that simulated misses repeat from run to run.
static TABLE: [u64; 8192] = {
    let mut t = [0u64; 8192];
    let mut i = 0;
    while i < t.len() {
        t[i] = (i as u64 * 2654435761) % 8192;
        i += 1;
    }
    t
};

#[profile(memory)]
fn lookup(i: usize) -> u64 {
    let t = &TABLE;
    t[t[i % 8192] as usize]
}

#[profile(paths)]
fn classify(x: u64) -> u64 {
    if x.is_multiple_of(3) {
        x / 3
    } else {
        x + 1
    }
}

#[profile]
fn extra_check(x: u64) -> bool {
    x > 4000
}

#[profile]
fn program(version: u32) -> u64 {
    let mut s = 0;
    for i in 0..2000 {
        let v = lookup(i * 7);
        s += classify(v);
        // Version 2 adds a check to every tenth item.
        if version == 2 && i % 10 == 0 && extra_check(v) {
            s += 1;
        }
    }
    s
}

fn report(version: u32, file: &Path) {
    let _g = crate::serial();
    let session = Session::builder()
        .sequential()
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::Paths,
            Analysis::Cache,
        ])
        .cache_levels(&[
            LevelConfig::new(4096, 4, 64, Policy::Lru),
            LevelConfig::new(32 * 1024, 8, 64, Policy::Lru),
        ])
        .start()
        .unwrap();
    std::hint::black_box(program(version));
    std::fs::write(file, session.finish().json()).unwrap();
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("diff_reports");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn diff(base: &Path, new: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cabprof"))
        .arg("diff")
        .arg(base)
        .arg(new)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn diff_shows_what_a_change_did_and_gates_ci() {
    let (base, rerun, new) = (
        scratch("v1.json"),
        scratch("v1-again.json"),
        scratch("v2.json"),
    );
    report(1, &base);
    report(1, &rerun);
    report(2, &new);

    // The same version twice: every count equal; only the elapsed time (noisy) may differ.
    let out = diff(&base, &rerun, &["--format", "json", "--fail-above", "0"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["metric"] == "l1-misses"));
    for r in rows.iter().filter(|r| r["noisy"] == false) {
        assert_eq!(r["change"], 0.0, "{r}");
    }

    // Version 2: extra_check runs 200 times, from program; nothing else changed.
    let out = diff(&base, &new, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changed: Vec<(String, String, f64, f64)> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["noisy"] == false && r["change"] != 0.0)
        .map(|r| {
            (
                r["metric"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["base"].as_f64().unwrap(),
                r["new"].as_f64().unwrap(),
            )
        })
        .collect();
    let mut expected = vec![
        (
            "calls".to_string(),
            "it::diff_reports::extra_check".to_string(),
            0.0,
            200.0,
        ),
        (
            "edge-calls".to_string(),
            "it::diff_reports::program -> it::diff_reports::extra_check".to_string(),
            0.0,
            200.0,
        ),
    ];
    let mut got = changed.clone();
    got.sort_by(|a, b| a.1.cmp(&b.1));
    expected.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(got, expected, "{changed:?}");

    // The table puts the change first; the gate trips with status 3.
    let out = diff(&base, &new, &["--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(3));
    let table = String::from_utf8(out.stdout).unwrap();
    let first = table.lines().nth(1).unwrap();
    assert!(
        first.contains("extra_check") && first.contains("new"),
        "{table}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("grew by more than 5%"));

    // Bencher Metric Format: NEW's values per function and measure.
    let out = diff(&base, &new, &["--format", "bmf"]);
    let bmf: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        bmf["it::diff_reports::extra_check"]["calls"]["value"],
        200.0
    );
    assert_eq!(bmf["it::diff_reports::lookup"]["calls"]["value"], 2000.0);
    assert_eq!(bmf["it::diff_reports::classify"]["paths"]["value"], 2000.0);
}
