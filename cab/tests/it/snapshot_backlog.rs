//! A snapshot while the analyzer is the bottleneck covers what was emitted before it was
//! asked for, and returns in time proportional to that backlog (at most a ring per thread),
//! not when a producer that keeps emitting finally stops.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, EventAnalysis, RuntimeConfig, Session};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counts events, sleeping on every batch: far slower than the producer.
#[derive(Default, Clone)]
struct SlowCount(u64);

impl EventAnalysis for SlowCount {
    fn consume(&mut self, words: &[u64]) {
        self.0 += words.len() as u64;
        std::thread::sleep(Duration::from_millis(1));
    }
    fn merge(&mut self, other: Self) {
        self.0 += other.0;
    }
}

#[test]
fn a_snapshot_returns_while_a_busy_producer_keeps_emitting() {
    let _g = crate::serial();
    let config = RuntimeConfig {
        buffer_bytes: Some(64 << 10),
        chunk_bytes: Some(4 << 10),
        pin: false,
        ..RuntimeConfig::default()
    };
    let session = Session::start_snapshotting(config, SlowCount::default).unwrap();
    // At ~512 words per millisecond the analyzer needs seconds for this many events; a snapshot
    // that waited for the producer to stop would return only then.
    const MOST: u64 = 4_000_000;
    let emitted = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for v in 0..MOST {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                emit(Event::marker(v & 0xFFFF).unwrap());
                emitted.store(v + 1, Ordering::Relaxed);
            }
            done.store(true, Ordering::Release);
        });
        while emitted.load(Ordering::Relaxed) < 100_000 {
            std::thread::yield_now();
        }
        let before = emitted.load(Ordering::Relaxed);
        let asked = Instant::now();
        let snapshot = session.snapshot().expect("a snapshotting session");
        let took = asked.elapsed();
        let producer_done = done.load(Ordering::Acquire);
        stop.store(true, Ordering::Relaxed);
        eprintln!(
            "snapshot of {} events ({} emitted before it) in {took:?}",
            snapshot.analysis.0, before
        );
        assert!(
            !producer_done,
            "the snapshot waited for the producer to stop ({took:?})"
        );
        // It reads what the rings held when it was asked for: at most one ring past what had
        // been consumed, plus the few chunks the analyzer's current round and the producer's
        // last moments before the request add.
        let ring_words = (64 << 10) / 8;
        let chunk_words = (4 << 10) / 8;
        assert!(
            snapshot.analysis.0 <= before + ring_words + 6 * chunk_words,
            "the snapshot kept reading after it was asked for: {} events, {before} emitted \
             before it",
            snapshot.analysis.0
        );
        assert!(
            snapshot.analysis.0 >= before,
            "the snapshot has {} events, {before} were emitted before it",
            snapshot.analysis.0
        );
    });
    let report = session.finish();
    assert_eq!(report.analysis.0, emitted.load(Ordering::Relaxed));
}
