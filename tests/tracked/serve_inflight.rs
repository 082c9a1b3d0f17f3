//! `/debug/pprof/inflight`: a thread blocked inside instrumented calls and a future waiting
//! for its next poll are listed, with how long the view has seen them, until they end.

use crate::serve_support::get;
use cabprof::{Analysis, Session};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[cabprof::profile]
fn waits(rx: &mpsc::Receiver<()>) {
    rx.recv().unwrap();
}

#[cabprof::profile]
fn handles(rx: &mpsc::Receiver<()>) {
    waits(rx)
}

#[cabprof::profile]
async fn never_ready() {
    std::future::pending::<()>().await
}

/// The view as JSON.
fn inflight(addr: SocketAddr) -> serde_json::Value {
    let a = get(addr, "/debug/pprof/inflight?format=json");
    assert_eq!(a.status, 200, "{}", a.text());
    serde_json::from_str(&a.text()).unwrap_or_else(|e| panic!("{e}: {}", a.text()))
}

/// The calls of the thread whose innermost call is `waits`, if one is listed.
fn waiting_thread(view: &serde_json::Value) -> Option<Vec<(String, f64)>> {
    view["threads"].as_array()?.iter().find_map(|t| {
        let calls: Vec<(String, f64)> = t["calls"]
            .as_array()?
            .iter()
            .map(|c| {
                let name = c["function"].as_str().unwrap_or_default().to_string();
                (name, c["open_s"].as_f64().unwrap_or(-1.0))
            })
            .collect();
        calls
            .last()
            .is_some_and(|(name, _)| name.ends_with("::waits"))
            .then_some(calls)
    })
}

/// Ask until `done` holds of the view (scrapes share a snapshot up to a second old), for at
/// most a minute.
fn until(addr: SocketAddr, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let view = inflight(addr);
        if done(&view) {
            return view;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "not so after a minute: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_blocked_thread_and_a_pending_future_are_listed_with_their_age() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallTree])
        .serve("127.0.0.1:0")
        .start()
        .expect("start a served session");
    let addr = session.serve_addr().unwrap();
    let (release, released) = mpsc::channel();
    let worker = std::thread::spawn(move || handles(&released));
    let mut future = Box::pin(never_ready());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(future.as_mut().poll(&mut cx).is_pending());

    let first = until(addr, |v| {
        waiting_thread(v).is_some() && v["futures"].as_array().is_some_and(|f| !f.is_empty())
    });
    let calls = waiting_thread(&first).unwrap();
    let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.len() == 2 && names[0].ends_with("::handles"),
        "{first}"
    );
    let text = get(addr, "/debug/pprof/inflight").text();
    assert!(
        text.contains("threads inside instrumented calls") && text.contains("::waits"),
        "{text}"
    );

    // Seen again over a second later (the next shared snapshot): open at least that long.
    std::thread::sleep(Duration::from_millis(1200));
    let later = inflight(addr);
    let calls = waiting_thread(&later).unwrap_or_else(|| panic!("gone: {later}"));
    assert!(calls.iter().all(|(_, open)| *open >= 1.0), "{later}");
    let pending = &later["futures"][0];
    assert!(
        pending["function"]
            .as_str()
            .unwrap()
            .ends_with("::never_ready")
            && pending["pending_s"].as_f64().unwrap() >= 1.0,
        "{later}"
    );

    release.send(()).unwrap();
    worker.join().unwrap();
    until(addr, |v| waiting_thread(v).is_none());
    assert_eq!(
        get(addr, "/debug/pprof/inflight?format=yaml").status,
        400,
        "a format it does not serve"
    );
    drop(future);
    session.finish();
}

/// Without the call-tree analysis the view says what to turn on.
#[test]
fn without_the_call_tree_it_says_what_to_enable() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .serve("127.0.0.1:0")
        .start()
        .unwrap();
    let a = get(session.serve_addr().unwrap(), "/debug/pprof/inflight");
    assert_eq!(a.status, 404);
    assert!(a.text().contains("call-tree"), "{}", a.text());
    session.finish();
}
