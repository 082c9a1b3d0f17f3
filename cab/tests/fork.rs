//! `fork` in a profiled process: the child keeps running with profiling off (its copy of the
//! rings has no analyzer), and `finish` there returns an empty report instead of panicking.
//! The parent's session is unaffected.
//!
//! Its own test binary, not a module of `tests/it/`: it forks the process while a session runs;
//! other tests' threads in the same process would be cut off in the child mid-operation.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{active, emit, RuntimeConfig, Session};
use std::time::{Duration, Instant};

mod support;
use support::Count;

/// What the child does; its exit status says how it went (0: all well).
fn in_child(session: Session<Count>) -> i32 {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        if active() {
            return 2;
        }
        // Many rings' worth: with no analyzer in the child this used to block for ever.
        for v in 0..1_000_000u64 {
            emit(Event::marker(v & 0xFFFF).unwrap());
        }
        let report = session.finish();
        if report.analysis.0 != 0 || report.analyzer_failures.is_empty() {
            return 3;
        }
        0
    }));
    run.unwrap_or(4)
}

#[test]
fn a_forked_child_runs_with_profiling_off_and_finishes() {
    let config = RuntimeConfig {
        buffer_bytes: Some(16 << 10),
        chunk_bytes: Some(1 << 10),
        pin: false,
        ..RuntimeConfig::default()
    };
    let session = Session::start(config, Count::default).unwrap();
    for v in 0..1000 {
        emit(Event::marker(v).unwrap());
    }
    // SAFETY: the child only emits (atomics and its own thread-locals), runs `finish` (which
    // in a child takes no lock) and leaves with `_exit`, never returning into the harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = in_child(session);
        // SAFETY: ends the child at once, without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut status = 0;
    loop {
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: `pid` is our child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status),
        "the child died: status {status:#x}"
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's check failed");
    for v in 0..1000 {
        emit(Event::marker(v).unwrap());
    }
    let report = session.finish();
    assert_eq!(
        report.analysis.0, 2000,
        "the parent's events, and only those"
    );
}
