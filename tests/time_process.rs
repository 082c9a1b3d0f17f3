//! The process-wide session with the time analysis (`CABPROF=1`): its calibration, which runs
//! a session of its own before the real one starts, loses no other thread's calls. Threads
//! that make their first calls while the first thread's call is starting the session wait for
//! it and are counted, as without the time analysis. Each case runs this binary again as a
//! child with the variables set.
//!
//! Its own test binary, not a module of `tests/it/`: its child runs install the process-wide
//! `CABPROF=1` session, with calibration, which counts every thread of the process.

use std::process::Command;
use std::time::Duration;

const SCENARIO: &str = "CABPROF_TEST_TIME_PROCESS";

#[cabprof::profile]
fn work(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(3)
}

#[test]
fn scenario() {
    if std::env::var_os(SCENARIO).is_none() {
        return;
    }
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
            .args(["scenario", "--exact", "--test-threads", "1"])
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
