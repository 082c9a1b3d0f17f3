//! pprof files and windows carry every analysis that has values per calling context: calls,
//! wall time (self time per context) and allocations, read back by `go tool pprof`, with the
//! stacks of whichever analysis has them. Fails, rather than skips, without `go` under `CI`.

use crate::go_pprof;

use cabprof::{Analysis, ReportData, Session};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[cabprof::profile]
fn outer(n: usize) -> usize {
    (0..n).map(|i| alloc_one(i + 1)).sum()
}

#[cabprof::profile]
fn alloc_one(len: usize) -> usize {
    let v = std::hint::black_box(vec![7u8; 1000 + len]);
    v.len()
}

fn available() -> bool {
    let ok = Command::new("go").arg("version").output().is_ok();
    if !ok {
        let message = "`go` is not installed (Debian package `golang-go`): this test cannot \
                       check the file with the real reader";
        assert!(std::env::var_os("CI").is_none(), "{message}, and CI is set");
        eprintln!("SKIPPED: {message}");
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pprof_windows");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `go tool pprof -top` rows of `sample_index`: function name → (flat, cum).
fn top(file: &Path, sample_index: &str) -> BTreeMap<String, (u64, u64)> {
    let out = Command::new("go")
        .args([
            "tool",
            "pprof",
            "-top",
            "-nodecount=1000",
            "-nodefraction=0",
            &format!("-sample_index={sample_index}"),
            // Whole bytes and nanoseconds, not scaled to kB or µs.
            match sample_index {
                "alloc_space" => "-unit=B",
                "wall" => "-unit=ns",
                _ => "-unit=minimum",
            },
        ])
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    go_pprof::top_rows(&text)
        .into_iter()
        .map(|(name, v)| (name.rsplit("::").next().unwrap().to_string(), v))
        .collect()
}

fn self_bytes(d: &ReportData, name: &str) -> u64 {
    let a = d.allocations.as_ref().unwrap();
    a.functions
        .iter()
        .filter(|f| d.name(f.method).ends_with(name))
        .map(|f| f.self_.bytes)
        .sum()
}

#[test]
fn a_window_holds_calls_wall_time_and_allocations() {
    if !available() {
        return;
    }
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::CallTree, Analysis::Time, Analysis::Allocations])
        .start()
        .unwrap();
    outer(5);
    let earlier = session.snapshot().unwrap().data;
    outer(3);
    outer(4);
    let later = session.snapshot().unwrap().data;
    session.finish();

    let window = later.since(&earlier);
    let file = scratch("window.pb.gz");
    std::fs::write(&file, later.pprof_since(&earlier, &[("service_name", "t")])).unwrap();

    let calls = top(&file, "calls");
    assert_eq!(calls["outer"], (2, 9));
    assert_eq!(calls["alloc_one"], (7, 7));

    // Bytes: alloc_one's own vectors in the window, 1000 + 1..=3 and 1000 + 1..=4.
    let space = top(&file, "alloc_space");
    let expected = self_bytes(&window, "alloc_one");
    assert_eq!(expected, 7000 + (1 + 2 + 3) + (1 + 2 + 3 + 4));
    assert_eq!(space["alloc_one"].0, expected);
    assert_eq!(top(&file, "alloc_objects")["alloc_one"].0, 7);

    // Wall: flat is each function's self time in the window (rounded per context).
    let wall = top(&file, "wall");
    let t = window.time.as_ref().unwrap();
    for name in ["outer", "alloc_one"] {
        let own: f64 = t
            .contexts
            .iter()
            .filter(|c| window.name(c.method).ends_with(name))
            .map(|c| c.exclusive_ns.round())
            .sum();
        assert_eq!(wall[name].0, own as u64, "{name}");
        assert!(own > 0.0);
    }
}

#[test]
fn without_the_call_tree_stacks_come_from_the_time_analysis() {
    if !available() {
        return;
    }
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::Time])
        .start()
        .unwrap();
    outer(6);
    let data = session.finish().data;
    let file = scratch("time_only.pb.gz");
    std::fs::write(&file, data.pprof()).unwrap();
    // Cumulative calls of outer include its callees: the stacks are two frames deep.
    let calls = top(&file, "calls");
    assert_eq!(calls["outer"], (1, 7));
    assert_eq!(calls["alloc_one"], (6, 6));
}
