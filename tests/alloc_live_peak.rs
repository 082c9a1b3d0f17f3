//! Live and peak bytes are process-wide, so they are checked in a process of their own (no
//! test harness threads allocating meanwhile): a `Vec<u64>` grown to 100 elements (capacity
//! 128: 1024 bytes at its largest) and freed, then a 100-byte box kept past the session's end.
//!
//! Then, in a child run with `CABPROF=1`: before the first instrumented call nothing has
//! decided whether the process-wide session runs, and the wrapper must treat that as no
//! session (no slow path, no counting) until a call starts it; the session's live and peak
//! bytes then start from its start.

use cabprof::alloc::{global_counts, GlobalCounts, Tracked};
use cabprof::report::ReportData;
use cabprof::{profile, Analysis, Session};
use cabprof_cab::runtime::{activity, Activity};
use std::process::Command;

/// Set in the child run (`CABPROF=1`).
const CHILD: &str = "CABPROF_TEST_ALLOC_UNDECIDED_CHILD";

#[global_allocator]
static ALLOC: Tracked = Tracked::system();

#[profile]
fn grow() -> usize {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..100 {
        v.push(i);
    }
    std::hint::black_box(&v);
    v.capacity()
}

#[profile]
fn keep() -> Box<[u8; 100]> {
    std::hint::black_box(Box::new([3u8; 100]))
}

/// The child, run with `CABPROF=1`: allocations before any instrumented call, then one.
/// Prints nothing before the session (a first print allocates stdout's buffer, which the
/// exit then frees inside the session).
fn undecided_child() {
    assert_eq!(
        activity(),
        Activity::Undecided,
        "CABPROF=1: nothing decided yet"
    );
    // About 1 MB made before the session and kept.
    let before: Vec<Box<[u8; 1000]>> = (0..1000).map(|_| Box::new([1u8; 1000])).collect();
    std::hint::black_box(&before);
    assert_eq!(
        global_counts(),
        GlobalCounts::default(),
        "with no session decided the wrapper counted allocations: it took the event path"
    );
    assert_eq!(
        activity(),
        Activity::Undecided,
        "an allocation never decides"
    );
    // The first instrumented call starts the process-wide session; its box is counted.
    let kept = keep();
    assert_eq!(activity(), Activity::Recording);
    std::mem::forget((before, kept));
}

/// Run the child and read the report the process-wide session wrote at its exit.
fn undecided_then_started() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("alloc_live_peak");
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join(format!("undecided-{}.json", std::process::id()));
    let out = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .env("CABPROF", "1")
        .env("CABPROF_ANALYSES", "allocations")
        .env("CABPROF_PIN", "0")
        .env("CABPROF_OUTPUT", &output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child with CABPROF=1: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let data = ReportData::from_json(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let a = data.allocations.as_ref().expect("allocations ran");
    let keep = a
        .functions
        .iter()
        .find(|f| f.method != 0 && data.name(f.method).ends_with("keep"))
        .expect("keep() is in the report");
    assert_eq!((keep.self_.allocs, keep.self_.bytes), (1, 100), "{a:?}");
    // Counted from the session's start: the megabyte made before it is in neither live nor
    // peak bytes. (The root's figures are not exact: the process-wide session's own setup
    // and exit make a few small blocks outside the runtime's scope.)
    assert!(
        a.live_bytes < 100_000 && a.peak_bytes < 100_000,
        "blocks made before the session counted: {a:?}"
    );
    let _ = std::fs::remove_file(&output);
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        return undecided_child();
    }
    let session = Session::builder()
        .analyses(&[Analysis::Allocations])
        .pin(false)
        .start()
        .expect("session starts");
    assert_eq!(grow(), 128);
    let kept = keep();
    let report = session.finish();
    let a = report.data.allocations.as_ref().expect("allocations ran");
    assert_eq!((a.live_bytes, a.peak_bytes), (100, 1024), "{a:?}");
    assert_eq!(a.totals.bytes, 1024 + 100);
    assert_eq!(a.totals.freed_bytes, 1024);
    assert!(a.runtime.allocs > 0, "{:?}", a.runtime);
    drop(kept);
    undecided_then_started();
    println!("2 passed, 0 failed");
}
