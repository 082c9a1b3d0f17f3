//! Objects the runtime builds and hands to the program (snapshots, finished reports, a
//! snapshotter that outlives its session) hold blocks allocated as the runtime's own work.
//! When the program drops them while a session records, their frees must not count as the
//! program's: a program that allocates nothing shows no frees and no live bytes, whoever
//! frees the runtime's blocks.
//!
//! Alone in its binary and without the test harness: the wrapper's counters are process-wide,
//! so no other thread may allocate meanwhile.

use cabprof::alloc::Tracked;
use cabprof::report::AllocationsData;
use cabprof::{Analysis, Report, RunMode, Session};

#[global_allocator]
static ALLOC: Tracked = Tracked::system();

fn session(mode: RunMode) -> Session {
    Session::builder()
        .analyses(&[Analysis::Allocations])
        .mode(mode)
        .pin(false)
        .buffer_bytes(64 << 10)
        .chunk_bytes(4 << 10)
        .start()
        .expect("session starts")
}

fn allocations(report: &Report) -> &AllocationsData {
    report.data.allocations.as_ref().expect("allocations ran")
}

/// The program allocated, resized and freed nothing: no counts, no live bytes, no peak.
fn assert_untouched(report: &Report, what: &str) {
    let a = allocations(report);
    let t = &a.totals;
    assert_eq!(
        (t.allocs, t.reallocs, t.frees, t.bytes, t.freed_bytes),
        (0, 0, 0, 0, 0),
        "{what}: the program's counts include the runtime's blocks: {a:?}"
    );
    assert_eq!(
        (a.live_bytes, a.peak_bytes),
        (0, 0),
        "{what}: live and peak bytes include the runtime's blocks: {a:?}"
    );
    // The frees were seen, and counted apart as the runtime's.
    assert!(a.runtime.frees > 0, "{what}: {a:?}");
}

/// 200 snapshots, half from the session and half from a snapshotter, each dropped by the
/// program at once.
fn snapshots_dropped_by_the_program(mode: RunMode) {
    let s = session(mode);
    let snapshotter = s.snapshotter();
    for i in 0..200 {
        let report = if i % 2 == 0 {
            s.snapshot()
        } else {
            snapshotter.snapshot()
        };
        drop(report.expect("the session runs"));
    }
    drop(snapshotter);
    let report = s.finish();
    assert_untouched(&report, &format!("{mode:?}: 200 snapshots dropped"));
}

/// Finished sessions' reports and a snapshotter holding the last reference to its finished
/// session, all dropped while the next session records.
fn earlier_sessions_objects_dropped_in_the_next(mode: RunMode) {
    let whole = session(mode).finish();
    let parts = session(mode).finish();
    let first = session(mode);
    let snapshotter = first.snapshotter();
    let snapshot = first.snapshot().expect("the session runs");
    drop(first.finish());

    let s = session(mode);
    drop(whole);
    drop(parts);
    drop(snapshot);
    // The session's own state goes with its last handle.
    drop(snapshotter);
    let report = s.finish();
    assert_untouched(
        &report,
        &format!("{mode:?}: an earlier session's objects dropped"),
    );
}

fn main() {
    for mode in [RunMode::Exhaustive, RunMode::Sequential] {
        snapshots_dropped_by_the_program(mode);
        earlier_sessions_objects_dropped_in_the_next(mode);
    }
    println!("4 passed, 0 failed");
}
