//! An `async fn`'s wall time, polled time and suspended time: ten rounds of 1 ms of work and a
//! 50 ms sleep give about 510 ms of wall time, about 10 ms polled and about 500 ms suspended,
//! on tokio's current-thread and multi-thread runtimes (where its polls may move threads).
//! Ranges, not a timed test of cabprof: a loaded host stretches the work and the sleeps.

use cabprof::{profile, Analysis, ReportData, Session};
use std::time::{Duration, Instant};

use crate::support::serial;

/// 1 ms of work: spinning, so that it is polled time.
fn work_1ms() {
    let until = Instant::now() + Duration::from_millis(1);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[profile]
async fn rounds_of_work_and_sleep() -> u32 {
    for _ in 0..10 {
        work_1ms();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    10
}

/// Runs the future on `rt`: spawned as a task (`spawn`: on a worker of a multi-thread
/// runtime, where its polls may move threads) or in `block_on`.
fn run(mut rt: tokio::runtime::Builder, spawn: bool) -> (ReportData, f64) {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    let rt = rt.enable_time().build().unwrap();
    let began = Instant::now();
    let n = if spawn {
        rt.block_on(async { tokio::spawn(rounds_of_work_and_sleep()).await.unwrap() })
    } else {
        rt.block_on(rounds_of_work_and_sleep())
    };
    assert_eq!(n, 10);
    let took = began.elapsed().as_secs_f64() * 1e3;
    drop(rt);
    (s.finish().data.clone(), took)
}

fn check(d: &ReportData, took_ms: f64, runtime: &str) {
    let f = d
        .time
        .as_ref()
        .unwrap()
        .functions
        .iter()
        .find(|f| d.name(f.method).ends_with("::rounds_of_work_and_sleep"))
        .expect("the async fn was timed");
    let wall = f.wall_ns.expect("wall time of an async fn") / 1e6;
    let suspended = f.suspended_ns.expect("suspended time") / 1e6;
    let polled = wall - suspended;
    // The program's own clock around `block_on` bounds the future's wall time.
    assert!(
        (500.0..=took_ms + 1.0).contains(&wall),
        "{runtime}: wall {wall:.1} ms (block_on took {took_ms:.1} ms)"
    );
    assert!(
        (9.0..=60.0).contains(&polled),
        "{runtime}: polled {polled:.1} ms of {wall:.1}"
    );
    assert!(
        (495.0..=wall).contains(&suspended),
        "{runtime}: suspended {suspended:.1} ms of {wall:.1}"
    );
    eprintln!("{runtime}: wall {wall:.1} ms, polled {polled:.1}, suspended {suspended:.1}");
    let text = d.text(10);
    assert!(text.contains("async functions, wall time"), "{text}");
}

#[test]
fn an_async_fn_is_wall_polled_and_suspended_on_a_current_thread_runtime() {
    let (d, took) = run(tokio::runtime::Builder::new_current_thread(), false);
    check(&d, took, "current-thread");
}

#[test]
fn an_async_fn_is_wall_polled_and_suspended_on_a_multi_thread_runtime() {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2);
    let (d, took) = run(b, true);
    check(&d, took, "multi-thread");
}
