//! `CABPROF=1 cargo test`: a test binary run with its tests on parallel threads writes one
//! report, of every test's events, when it exits. This file is that binary: its `workload_*`
//! tests are the suite, and the driver runs the file's own executable again on them. They and
//! the other children's tests are `#[ignore]`d child roles, which fail when run without their
//! driver's variable.
//!
//! Its own test binary, not a module of `tests/it/`: its child run is the binary under
//! `CABPROF=1`, and the report it writes must hold exactly this file's `workload_*` tests,
//! named after this binary.

mod support;

use cabprof::report::ReportData;
use std::future::Future;
use std::path::PathBuf;
use std::process::Command;

/// Set in the child run, where the drivers do nothing and the `workload_*` roles run.
const CHILD: &str = "CABPROF_TEST_PROCESS_MODE_CHILD";

/// The driver that runs the `workload_*` roles.
const PROFILED: &str = "the_whole_binary_is_profiled_with_no_code_change";

#[cabprof::profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(3)
}

#[cabprof::profile]
fn work(n: u64) -> u64 {
    (0..n).map(leaf).sum()
}

#[test]
#[ignore = "a child role: run by the_whole_binary_is_profiled_with_no_code_change"]
fn workload_a() {
    support::child_role(CHILD, PROFILED);
    for _ in 0..10 {
        work(100);
    }
}

#[test]
#[ignore = "a child role: run by the_whole_binary_is_profiled_with_no_code_change"]
fn workload_b() {
    support::child_role(CHILD, PROFILED);
    for _ in 0..20 {
        work(50);
    }
}

#[test]
#[ignore = "a child role: run by the_whole_binary_is_profiled_with_no_code_change"]
fn workload_c() {
    support::child_role(CHILD, PROFILED);
    std::thread::scope(|s| {
        s.spawn(|| work(7));
    });
    work(3);
}

#[test]
#[ignore = "a child role: run by the_whole_binary_is_profiled_with_no_code_change"]
fn workload_d() {
    support::child_role(CHILD, PROFILED);
    let handles: Vec<_> = (0..3).map(|_| std::thread::spawn(|| work(11))).collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Where cabprof puts the report of this binary: `target/cabprof/process_mode.json`.
fn default_report() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file() || d.join(".rustc_info.json").is_file())
        .expect("built by cargo")
        .to_path_buf();
    target.join("cabprof").join("process_mode.json")
}

fn calls(data: &ReportData, name: &str) -> u64 {
    let counts = data
        .method_count
        .as_ref()
        .expect("method count runs by default");
    counts
        .iter()
        .filter(|c| data.name(c.method).ends_with(name))
        .map(|c| c.count)
        .sum()
}

#[test]
fn the_whole_binary_is_profiled_with_no_code_change() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let path = default_report();
    let _ = std::fs::remove_file(&path);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["workload_", "--ignored", "--test-threads", "4"])
        .env("CABPROF", "1")
        .env("CABPROF_PIN", "0")
        .env_remove("CABPROF_OUTPUT")
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("4 passed"), "{stdout}");
    assert!(stderr.contains("report written to"), "{stderr}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let data = ReportData::from_json(&text).unwrap();
    let tables = std::fs::read_to_string(path.with_extension("txt")).unwrap();
    assert!(tables.contains("process_mode::leaf"), "{tables}");
    // Counted by hand from the workload tests above.
    let works = 10 + 20 + 2 + 3;
    let leaves = 10 * 100 + 20 * 50 + 7 + 3 + 3 * 11;
    assert_eq!(calls(&data, "::work"), works);
    assert_eq!(calls(&data, "::leaf"), leaves);
    // One Call and one Return each, nothing lost, from the three test threads that call
    // `work` themselves and the four threads the tests spawned (`workload_d`'s own thread
    // emits nothing).
    assert_eq!(data.totals.events, 2 * (works + leaves));
    assert_eq!(data.totals.dropped, 0);
    assert_eq!(data.totals.threads, 7, "{:?}", data.threads);
}

/// Set in a child whose first instrumented event comes from one form of `#[profile]`, which
/// the value names.
const FIRST_EVENT_CHILD: &str = "CABPROF_TEST_FIRST_EVENT_CHILD";

/// `-> impl Trait`: the guard form.
#[cabprof::profile]
fn evens(n: u64) -> impl Iterator<Item = u64> {
    (0..n).filter(|x| x.is_multiple_of(2))
}

#[cabprof::profile(paths)]
fn collatz_step(x: u64) -> u64 {
    if x.is_multiple_of(2) {
        x / 2
    } else {
        3 * x + 1
    }
}

#[cabprof::profile]
async fn next_of(x: u64) -> u64 {
    x + 1
}

#[cabprof::profile(memory)]
#[allow(clippy::needless_range_loop)] // indexing is what `memory` records
fn sum_of(v: &[u64]) -> u64 {
    let mut s = 0;
    for i in 0..v.len() {
        s += v[i];
    }
    s
}

#[test]
#[ignore = "a child role: run by every_form_of_the_attribute_starts_the_session_at_the_first_event"]
fn first_event_child() {
    let form = support::child_role(
        FIRST_EVENT_CHILD,
        "every_form_of_the_attribute_starts_the_session_at_the_first_event",
    );
    let r = match form.as_str() {
        "closure" => leaf(1),
        "guard" => evens(10).count() as u64,
        "paths" => collatz_step(7),
        "async" => {
            let mut f = std::pin::pin!(next_of(1));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match f.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(v) => v,
                std::task::Poll::Pending => unreachable!("nothing to wait for"),
            }
        }
        "memory" => sum_of(&[1, 2, 3]),
        other => panic!("no form {other}"),
    };
    std::hint::black_box(r);
}

/// With `CABPROF=1`, the process's first instrumented event starts the session whichever form
/// of `#[profile]` emits it (the starter travels in each function's `Site`): the function is
/// in the report, its one call counted.
#[test]
fn every_form_of_the_attribute_starts_the_session_at_the_first_event() {
    if std::env::var_os(CHILD).is_some() || std::env::var_os(FIRST_EVENT_CHILD).is_some() {
        return;
    }
    for (form, name) in [
        ("closure", "::leaf"),
        ("guard", "::evens"),
        ("paths", "::collatz_step"),
        ("async", "::next_of"),
        ("memory", "::sum_of"),
    ] {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("first_{form}.json"));
        let _ = std::fs::remove_file(&out);
        let o = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "first_event_child",
                "--test-threads=1",
            ])
            .env(FIRST_EVENT_CHILD, form)
            .env("CABPROF", "1")
            .env("CABPROF_PIN", "0")
            .env("CABPROF_OUTPUT", &out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{form}: {o:?}");
        let text = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{form}: {e}"));
        let data = ReportData::from_json(&text).unwrap();
        assert_eq!(calls(&data, name), 1, "{form}: {:?}", data.method_count);
    }
}

/// With the timeline, the report written at exit has its Chrome trace beside it, named in the
/// exit message.
#[test]
fn with_the_timeline_the_exit_writes_its_trace_beside_the_report() {
    if std::env::var_os(CHILD).is_some() || std::env::var_os(FIRST_EVENT_CHILD).is_some() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join("exit_timeline.json");
    let trace = dir.join("exit_timeline.trace.json");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&trace);
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "first_event_child",
            "--test-threads=1",
        ])
        .env(FIRST_EVENT_CHILD, "closure")
        .env("CABPROF", "1")
        .env("CABPROF_PIN", "0")
        .env("CABPROF_ANALYSES", "method-count,timeline")
        .env("CABPROF_OUTPUT", &out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("(timeline: {})", trace.display())),
        "{err}"
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.starts_with("{\"traceEvents\":["), "{text}");
    assert!(
        text.contains("::leaf\",\"cat\":\"call\",\"ph\":\"X\""),
        "{text}"
    );
}

/// Set in the child that reports SIGTERM's handler.
const SIGNALS_CHILD: &str = "CABPROF_TEST_SIGNALS_CHILD";

/// Whether SIGTERM has its default action in this process.
fn sigterm_is_default() -> bool {
    // SAFETY: a query only (no new action); `old` is a zeroed, valid `sigaction` to fill.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(
            libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old),
            0
        );
        old.sa_sigaction == libc::SIG_DFL
    }
}

#[test]
#[ignore = "a child role: run by cabprof_signals_0_leaves_the_signals_to_the_program"]
fn child_reports_sigterm() {
    support::child_role(
        SIGNALS_CHILD,
        "cabprof_signals_0_leaves_the_signals_to_the_program",
    );
    // As `nohup` leaves a program: SIGHUP ignored before its first instrumented call.
    // SAFETY: sets an ignore disposition; no handler runs.
    unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    work(5);
    println!("sigterm default: {}", sigterm_is_default());
    // SAFETY: a query only, into a zeroed `sigaction`.
    let hup_ignored = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut old);
        old.sa_sigaction == libc::SIG_IGN
    };
    println!("sighup still ignored: {hup_ignored}");
    // A child forked without exec has no thread to run the handler: its signals are its own.
    // SAFETY: the child only queries a disposition and calls `_exit`.
    let child_default = unsafe {
        match libc::fork() {
            0 => libc::_exit(if sigterm_is_default() { 0 } else { 1 }),
            pid => {
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
            }
        }
    };
    println!("forked child sigterm default: {child_default}");
}

/// With `CABPROF=1` the session takes SIGTERM to write its report, but not a signal the program
/// ignores (SIGHUP under `nohup`), and a child forked without exec gets the default back;
/// `CABPROF_SIGNALS=0` leaves the signals to the program (one that installs its own handler
/// after its first instrumented call), and a bad value is an error naming the variable.
#[test]
fn cabprof_signals_0_leaves_the_signals_to_the_program() {
    if std::env::var_os(CHILD).is_some() || std::env::var_os(SIGNALS_CHILD).is_some() {
        return;
    }
    let run = |signals: Option<&str>| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("signals_child.json");
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--ignored",
            "--exact",
            "child_reports_sigterm",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SIGNALS_CHILD, "1")
        .env("CABPROF", "1")
        .env("CABPROF_OUTPUT", &out)
        .env_remove("CABPROF_SIGNALS");
        if let Some(v) = signals {
            cmd.env("CABPROF_SIGNALS", v);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{o:?}");
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (taken, _) = run(None);
    assert!(taken.contains("sigterm default: false"), "{taken}");
    assert!(taken.contains("sighup still ignored: true"), "{taken}");
    assert!(
        taken.contains("forked child sigterm default: true"),
        "{taken}"
    );
    let (left, _) = run(Some("0"));
    assert!(left.contains("sigterm default: true"), "{left}");
    let (_, err) = run(Some("maybe"));
    assert!(err.contains("CABPROF_SIGNALS"), "{err}");
}
