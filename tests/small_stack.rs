//! A thread's first instrumented call fits a 16 KiB stack: the first event of the process
//! (`CABPROF=1` starts the process-wide session there), the first event of a new thread in a
//! running session (exhaustive, sampling, sequential, with sampled timing), a function's first
//! call, `cabprof::test_profile()`, and the thread's exit. regex-syntax's test suite runs such
//! a thread (`no_stack_overflow_on_drop`), and an overflow aborts the whole test binary.
//!
//! Each situation runs in a child process (this file's own executable, on its `scenario`
//! test, an `#[ignore]`d child role that fails when run without its variable): an overflow
//! kills the child, which the parent reports as a failure, and each child has the process to
//! itself (one session per process, and the process-wide one lives until exit).
//! `CABPROF_TEST_SMALL_STACK_BYTES` sets the threads' stack size (default 16 KiB), to find the
//! smallest that works.
//!
//! Its own test binary, not a module of `tests/it/`: CI runs it by name in a release build too
//! (`--test small_stack`), and its child runs install the process-wide `CABPROF=1` session.

mod support;

use cabprof::report::ReportData;
use cabprof::{Analysis, RunMode, Session, SessionBuilder};
use std::process::Command;

/// Set in a child: the situation it runs.
const SCENARIO: &str = "CABPROF_TEST_SMALL_STACK";
/// The small threads' stack size in bytes (default 16 KiB).
const STACK_BYTES: &str = "CABPROF_TEST_SMALL_STACK_BYTES";

/// Calls each small thread makes.
const CALLS: u64 = 1_000;

#[cabprof::profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9).rotate_left(7)
}

/// Called first on the small thread: registered there.
#[cabprof::profile]
fn fresh(x: u64) -> u64 {
    leaf(x) ^ 1
}

fn stack_bytes() -> usize {
    std::env::var(STACK_BYTES)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16 * 1024)
}

/// `CALLS` instrumented calls (`fresh`, which calls `leaf`), the first ones of the process for
/// both functions, on a new thread with a small stack that then exits.
fn calls_on_a_small_thread() {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("small".into())
            .stack_size(stack_bytes())
            .spawn_scoped(s, || {
                let mut x = 0;
                for i in 0..CALLS {
                    x ^= fresh(i);
                }
                std::hint::black_box(x);
            })
            .expect("spawn a small thread")
            .join()
            .expect("the small thread ran");
    });
}

/// The small thread's calls were all counted, and its events are all the report holds
/// besides `extra` others (and, with the time analysis, a `Stall` word per ring attached and
/// name registered: the time spent inside cabprof; and one per wait on a full ring, which a
/// ring that starts small and grows on this thread's stack may have, and no counter gives).
fn check(data: &ReportData, extra: u64) {
    assert_eq!(data.calls("fresh"), CALLS, "{data:?}");
    assert_eq!(data.calls("leaf"), CALLS);
    let stalls = data
        .time
        .as_ref()
        .map_or(0, |t| t.inside_cabprof_entries.unwrap_or(0));
    let base = 4 * CALLS + extra + stalls;
    if data.time.is_some() {
        assert!(
            data.totals.events >= base,
            "{} < {base}",
            data.totals.events
        );
    } else {
        assert_eq!(data.totals.events, base);
    }
    assert_eq!(data.totals.dropped, 0);
}

/// A session of `builder` running while a small thread makes its calls.
fn in_session(builder: SessionBuilder) -> ReportData {
    let session = builder.pin(false).start().expect("start");
    calls_on_a_small_thread();
    session.finish().data
}

/// The child's side: run the situation `SCENARIO` names.
#[test]
#[ignore = "a child role: run by this file's other tests, through `run_child`"]
fn scenario() {
    let name = support::child_role(
        SCENARIO,
        "the_first_event_of_the_process_starts_the_session_on_a_small_stack",
    );
    match name.as_str() {
        // The parent reads the report written at exit.
        "process" => calls_on_a_small_thread(),
        "exhaustive" => check(
            &in_session(Session::builder().mode(RunMode::Exhaustive).analyzers(1)),
            0,
        ),
        "sampling" => {
            let data = in_session(Session::builder().sampling(0.5));
            assert_eq!(data.totals.events, 4 * CALLS, "{data:?}");
        }
        "sequential" => check(&in_session(Session::builder().sequential()), 0),
        "sampled-timing" => {
            let data = in_session(
                Session::builder()
                    .analyses(&[
                        Analysis::MethodCount,
                        Analysis::CallGraph,
                        Analysis::CallTree,
                        Analysis::Time,
                    ])
                    .time_sample(4),
            );
            check(&data, 0);
            let time = data.time.as_ref().expect("time ran");
            let fresh = time
                .functions
                .iter()
                .find(|f| data.name(f.method).ends_with("::fresh"))
                .expect("fresh timed");
            assert_eq!(fresh.calls, CALLS);
            assert!(fresh.timed > 0 && fresh.timed < CALLS, "{fresh:?}");
        }
        "test-profile" => std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("small".into())
                .stack_size(stack_bytes())
                .spawn_scoped(s, || {
                    let profile = cabprof::test_profile();
                    let mut x = 0;
                    for i in 0..CALLS {
                        x ^= fresh(i);
                    }
                    std::hint::black_box(x);
                    // And the profile's begin and end marks.
                    check(&profile.finish().data, 2);
                })
                .expect("spawn a small thread")
                .join()
                .expect("the small thread ran");
        }),
        other => panic!("unknown {SCENARIO} {other:?}"),
    }
}

/// Run `scenario` in a child process with `vars` set; panics with its output if it failed.
fn run_child(name: &str, vars: &[(&str, &str)]) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "scenario",
        "--ignored",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(SCENARIO, name)
    .env_remove("CABPROF")
    .env_remove("CABPROF_OUTPUT");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{name} on a {} byte stack: {}\n{}\n{}",
        stack_bytes(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_first_event_of_the_process_starts_the_session_on_a_small_stack() {
    if std::env::var_os(SCENARIO).is_some() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("small_stack");
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join(format!("report-{}.json", std::process::id()));
    run_child(
        "process",
        &[
            ("CABPROF", "1"),
            ("CABPROF_PIN", "0"),
            ("CABPROF_OUTPUT", output.to_str().unwrap()),
        ],
    );
    let text = std::fs::read_to_string(&output).unwrap();
    check(&ReportData::from_json(&text).unwrap(), 0);
}

#[test]
fn a_new_thread_attaches_on_a_small_stack_exhaustive() {
    if std::env::var_os(SCENARIO).is_none() {
        run_child("exhaustive", &[]);
    }
}

#[test]
fn a_new_thread_attaches_on_a_small_stack_sampling() {
    if std::env::var_os(SCENARIO).is_none() {
        run_child("sampling", &[]);
    }
}

#[test]
fn a_new_thread_attaches_on_a_small_stack_sequential() {
    if std::env::var_os(SCENARIO).is_none() {
        run_child("sequential", &[]);
    }
}

#[test]
fn sampled_timing_starts_on_a_small_stack() {
    if std::env::var_os(SCENARIO).is_none() {
        run_child("sampled-timing", &[]);
    }
}

#[test]
fn test_profile_starts_on_a_small_stack() {
    if std::env::var_os(SCENARIO).is_none() {
        run_child("test-profile", &[]);
    }
}
