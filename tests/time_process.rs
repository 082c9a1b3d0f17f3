//! The process-wide session with the time analysis (`CABPROF=1`): its calibration, which runs
//! a session of its own before the real one starts, loses no other thread's calls. Threads
//! that make their first calls while the first thread's call is starting the session wait for
//! it and are counted, as without the time analysis. With sampled timing, the coarse clock's
//! ticker thread neither keeps the process from exiting nor a child forked meanwhile. Each
//! case runs this binary again as a child with the variables set, on an `#[ignore]`d child
//! role that fails when run without them.
//!
//! Its own test binary, not a module of `tests/it/`: its child runs install the process-wide
//! `CABPROF=1` session, with calibration, which counts every thread of the process.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

const SCENARIO: &str = "CABPROF_TEST_TIME_PROCESS";
const FORK_SCENARIO: &str = "CABPROF_TEST_TIME_FORK";

#[cabprof::profile]
fn work(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(3)
}

#[test]
#[ignore = "a child role: run by threads_starting_during_the_calibration_are_counted"]
fn scenario() {
    support::child_role(
        SCENARIO,
        "threads_starting_during_the_calibration_are_counted",
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                // Staggered across the session's start: 0 to 300 µs after the first call.
                std::thread::sleep(Duration::from_micros(t * 100));
                (0..2000).fold(0, |a, i| a ^ work(i))
            })
        })
        .collect();
    std::hint::black_box(work(7));
    for t in threads {
        std::hint::black_box(t.join().unwrap());
    }
}

#[test]
fn threads_starting_during_the_calibration_are_counted() {
    let dir = std::env::temp_dir().join(format!("cabprof-time-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for round in 0..5 {
        let out = dir.join(format!("r{round}.json"));
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["scenario", "--ignored", "--exact", "--test-threads", "1"])
            .env(SCENARIO, "1")
            .env("CABPROF", "1")
            .env("CABPROF_ANALYSES", "method-count,time")
            .env("CABPROF_OUTPUT", &out)
            .status()
            .unwrap();
        assert!(status.success());
        let data = cabprof::ReportData::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(data.calls("work"), 8001, "round {round}");
        assert_eq!(data.totals.dropped, 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[cabprof::profile]
fn long_call() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(30) {
        std::hint::spin_loop();
    }
}

/// Sampled timing: calls, one long one, then a fork whose child calls instrumented code and
/// exits through `exit` (its exit handlers run), then the parent's own exit, which finishes
/// the session and stops the ticker.
#[test]
#[ignore = "a child role: run by the_ticker_lets_a_process_and_its_forked_child_exit"]
fn fork_scenario() {
    support::child_role(
        FORK_SCENARIO,
        "the_ticker_lets_a_process_and_its_forked_child_exit",
    );
    let x = (0..1000).fold(0, |a, i| a ^ work(i));
    long_call();
    std::hint::black_box(x);
    // SAFETY: the child calls an instrumented function (profiling is off in a forked child)
    // and exits; the parent waits for it.
    let child_ok = unsafe {
        match libc::fork() {
            0 => {
                std::hint::black_box(work(3));
                long_call();
                libc::exit(0)
            }
            pid => {
                let deadline = Instant::now() + Duration::from_secs(20);
                let mut status = 0;
                loop {
                    if libc::waitpid(pid, &mut status, libc::WNOHANG) == pid {
                        break libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
                    }
                    if Instant::now() > deadline {
                        libc::kill(pid, libc::SIGKILL);
                        break false;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    };
    assert!(child_ok, "the forked child exited by itself");
}

#[test]
fn the_ticker_lets_a_process_and_its_forked_child_exit() {
    let dir = std::env::temp_dir().join(format!("cabprof-time-fork-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("fork.json");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "fork_scenario",
            "--ignored",
            "--exact",
            "--test-threads",
            "1",
        ])
        .env(FORK_SCENARIO, "1")
        .env("CABPROF", "1")
        .env("CABPROF_ANALYSES", "method-count,time")
        .env("CABPROF_TIME_SAMPLE", "4")
        .env("CABPROF_OUTPUT", &out)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let data = cabprof::ReportData::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    // The parent's calls only (the child's were not recorded), the long one among them.
    assert_eq!(data.calls("work"), 1000);
    let t = data.time.as_ref().unwrap();
    assert!(t.tick_ns.is_some());
    let long = t
        .functions
        .iter()
        .find(|f| data.name(f.method).ends_with("long_call"))
        .expect("long_call was timed");
    assert_eq!((long.calls, long.long), (1, Some(1)));
    let _ = std::fs::remove_dir_all(&dir);
}
