//! Sequential mode's snapshot holds no lock a program thread waits on for longer than its own
//! thread's copy: while a snapshot copies one thread's analysis, another thread's first event
//! and its exit go on, and the counts stay whole.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, EventAnalysis, RunMode, RuntimeConfig, Session};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::serial;

/// The first copy made once this is set waits until [`RELEASED`] (for at most a minute).
static ARMED: AtomicBool = AtomicBool::new(false);
/// A copy is waiting.
static IN_COPY: AtomicBool = AtomicBool::new(false);
/// The copy may end.
static RELEASED: AtomicBool = AtomicBool::new(false);
/// The waiting copy saw [`RELEASED`] before its minute was up.
static RELEASED_IN_TIME: AtomicBool = AtomicBool::new(false);

/// Counts marker events; its copy can be held (see [`ARMED`]).
#[derive(Default, Debug)]
struct Held {
    n: u64,
}

impl Clone for Held {
    fn clone(&self) -> Self {
        if ARMED.swap(false, Ordering::AcqRel) {
            IN_COPY.store(true, Ordering::Release);
            let t0 = Instant::now();
            while !RELEASED.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(1));
            }
            RELEASED_IN_TIME.store(RELEASED.load(Ordering::Acquire), Ordering::Release);
        }
        Held { n: self.n }
    }
}

impl EventAnalysis for Held {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(cabprof_cab::EventKind::Marker { .. }) = cabprof_cab::event::decode(w) {
                self.n += 1;
            }
        }
    }
    fn merge(&mut self, other: Self) {
        self.n += other.n;
    }
}

fn mark(n: u64) {
    for v in 1..=n {
        emit(Event::marker(v).unwrap());
    }
}

#[test]
fn a_threads_first_event_and_exit_do_not_wait_for_another_threads_copy() {
    let _g = serial();
    let config = RuntimeConfig {
        mode: RunMode::Sequential,
        pin: false,
        ..RuntimeConfig::default()
    };
    let s = Session::start_snapshotting(config, Held::default).unwrap();
    // A live thread, whose copy the snapshot holds.
    let (ready, is_ready) = mpsc::channel();
    let (stop, stopped) = mpsc::channel::<()>();
    let live = std::thread::spawn(move || {
        mark(100);
        ready.send(()).unwrap();
        let _ = stopped.recv();
    });
    is_ready.recv().unwrap();

    ARMED.store(true, Ordering::Release);
    let snapshots = s.snapshotter();
    let snapshot = std::thread::spawn(move || snapshots.snapshot().expect("a running session"));
    let t0 = Instant::now();
    while !IN_COPY.load(Ordering::Acquire) {
        assert!(t0.elapsed() < Duration::from_secs(60), "no copy began");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Meanwhile a thread starts (its first event registers it) and ends.
    std::thread::spawn(|| mark(10)).join().unwrap();
    RELEASED.store(true, Ordering::Release);
    let snapshot = snapshot.join().unwrap();
    assert!(
        RELEASED_IN_TIME.load(Ordering::Acquire),
        "the new thread waited for the snapshot's copy of another"
    );
    assert_eq!(
        snapshot.analysis.n, 100,
        "the live thread, not the one that came later"
    );
    stop.send(()).unwrap();
    live.join().unwrap();
    let r = s.finish();
    assert_eq!(r.analysis.n, 110);
}
