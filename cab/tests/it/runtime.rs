//! The runtime: rings per thread, analyzers, shutdown, failures. One session per process, so
//! every test takes `serial()` first (the one lock of this binary).

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, EventAnalysis, RunMode, RuntimeConfig, Session, SessionError};
use std::collections::HashMap;

use crate::serial;

/// Counts events and sums their payloads; panics on the marker `POISON` if asked to.
#[derive(Default, Clone, Debug, PartialEq)]
struct Count {
    n: u64,
    sum: u64,
    poison: bool,
}

const POISON: u64 = 0xDEAD;

impl EventAnalysis for Count {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(cabprof_cab::EventKind::Marker { value }) = cabprof_cab::event::decode(w) {
                if self.poison && value == POISON {
                    panic!("poisoned analysis");
                }
                self.n += 1;
                self.sum += value;
            }
        }
    }
    fn merge(&mut self, other: Self) {
        self.n += other.n;
        self.sum += other.sum;
    }
}

fn mark(v: u64) {
    emit(Event::marker(v).unwrap());
}

fn small() -> RuntimeConfig {
    RuntimeConfig {
        buffer_bytes: Some(16 << 10),
        chunk_bytes: Some(1 << 10),
        pin: false,
        ..RuntimeConfig::default()
    }
}

/// `small()` in `mode`.
fn small_in(mode: RunMode) -> RuntimeConfig {
    RuntimeConfig { mode, ..small() }
}

/// `threads` threads each emit 1..=per values; returns the expected (n, sum).
fn run_producers(threads: usize, per: u64) -> (u64, u64) {
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("producer-{t}"))
                .spawn(move || {
                    for v in 1..=per {
                        mark(v);
                    }
                })
                .unwrap()
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let n = threads as u64 * per;
    (n, threads as u64 * per * (per + 1) / 2)
}

#[test]
fn exact_totals_for_1_4_16_producers_on_1_and_2_analyzers() {
    let _g = serial();
    for analyzers in [1, 2] {
        for threads in [1, 4, 16] {
            let config = RuntimeConfig {
                analyzers,
                ..small()
            };
            let s = Session::start(config, Count::default).unwrap();
            let (n, sum) = run_producers(threads, 50_000);
            let r = s.finish();
            assert_eq!(
                (r.analysis.n, r.analysis.sum),
                (n, sum),
                "{threads} threads, {analyzers} analyzers"
            );
            assert_eq!(r.totals.events, n);
            assert_eq!(r.totals.dropped, 0);
            assert_eq!(r.threads.len(), threads);
            assert!(r.threads.iter().all(|t| t.events == 50_000));
            assert!(r.analyzer_failures.is_empty());
        }
    }
}

#[test]
fn live_threads_are_drained_at_finish() {
    let _g = serial();
    let s = Session::start(small(), Count::default).unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        for v in 1..=1000 {
            mark(v);
        }
        ready_tx.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    for v in 1..=10 {
        mark(v); // the finishing thread's own events
    }
    ready_rx.recv().unwrap();
    let r = s.finish();
    go_tx.send(()).unwrap();
    h.join().unwrap();
    assert_eq!(r.analysis.n, 1010);
    assert_eq!(r.analysis.sum, 500_500 + 55);
}

#[test]
fn sequential_mode_gives_the_same_totals() {
    let _g = serial();
    let s = Session::start(small_in(RunMode::Sequential), Count::default).unwrap();
    let (n, sum) = run_producers(4, 10_000);
    mark(7);
    let r = s.finish();
    assert_eq!((r.analysis.n, r.analysis.sum), (n + 1, sum + 7));
    assert_eq!(r.threads.len(), 5);
}

/// Regression: a scoped thread's `join` returns before its thread-local destructors run, and
/// in sequential mode that destructor merges the thread's inline results. `finish` right after
/// `scope` used to miss a worker now and then (counts short).
#[test]
fn sequential_mode_merges_scoped_threads_that_just_ended() {
    let _g = serial();
    for round in 0..20 {
        let s = Session::start(small_in(RunMode::Sequential), Count::default).unwrap();
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                scope.spawn(move || {
                    for i in 0..1_000 {
                        emit(Event::marker(t * 1_000 + i + 1).unwrap());
                    }
                });
            }
        });
        let r = s.finish();
        assert_eq!(r.analysis.n, 4_000, "round {round}");
        assert_eq!(r.analysis.sum, (1..=4_000u64).sum::<u64>(), "round {round}");
    }
}

#[test]
fn sampling_mode_never_blocks_and_counts() {
    let _g = serial();
    let s = Session::start(small_in(RunMode::sampling(0.25)), Count::default).unwrap();
    let (n, _) = run_producers(2, 200_000);
    let r = s.finish();
    assert_eq!(
        r.totals.events, n,
        "producer positions are exact after close"
    );
    assert_eq!(r.totals.blocks, 0);
    assert!(r.analysis.n > 0 && r.analysis.n < n);
    assert_eq!(r.rate_used, 0.25);
}

#[test]
fn a_second_session_is_an_error() {
    let _g = serial();
    let s = Session::start(small(), Count::default).unwrap();
    match Session::start(small(), Count::default) {
        Err(SessionError::AlreadyRunning) => {}
        other => panic!("expected AlreadyRunning, got {:?}", other.map(|_| ())),
    }
    drop(s);
    // After the first ends, a new one may start.
    Session::start(small(), Count::default).unwrap().finish();
}

#[test]
fn thread_churn_keeps_memory_bounded_and_counts_exactly() {
    let _g = serial();
    let config = RuntimeConfig {
        buffer_bytes: Some(4 << 10),
        chunk_bytes: Some(256),
        pin: false,
        ..RuntimeConfig::default()
    };
    let s = Session::start(config, Count::default).unwrap();
    let rss_before = rss_kb();
    let mut n = 0;
    for batch in 0..100 {
        let hs: Vec<_> = (0..100)
            .map(|_| {
                std::thread::spawn(|| {
                    for v in 1..=100 {
                        mark(v);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        n += 100 * 100;
        if batch == 50 {
            // Rings of exited threads are freed as they are drained.
            let live = s.live_rings();
            assert!(live <= 200, "{live} rings still held after 5,100 exits");
        }
    }
    let rss_after = rss_kb();
    let r = s.finish();
    assert_eq!(r.analysis.n, n);
    assert_eq!(r.analysis.sum, 10_000 * 5050);
    assert_eq!(r.threads.len(), 1024, "per-thread entries are capped");
    assert_eq!(r.totals.threads, 10_000);
    if let (Some(a), Some(b)) = (rss_before, rss_after) {
        assert!(
            b < a + 64 * 1024,
            "RSS grew from {a} KB to {b} KB over 10,000 threads"
        );
    }
}

fn rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_panicking_producer_still_delivers_its_events() {
    let _g = serial();
    let s = Session::start(small(), Count::default).unwrap();
    let h = std::thread::spawn(|| {
        for v in 1..=1234 {
            mark(v);
        }
        panic!("application thread dies");
    });
    assert!(h.join().is_err());
    let r = s.finish();
    assert_eq!(r.analysis.n, 1234);
}

#[test]
fn a_panicking_analyzer_never_deadlocks_the_application() {
    let _g = serial();
    let s = Session::start(small(), || Count {
        poison: true,
        ..Count::default()
    })
    .unwrap();
    // 16 KB ring = 2048 events: the app pushes far more after the analyzer dies.
    mark(POISON);
    for v in 1..=100_000 {
        mark(v);
    }
    let r = s.finish();
    assert_eq!(r.analyzer_failures.len(), 1, "{:?}", r.analyzer_failures);
    assert!(r.analyzer_failures[0].contains("poisoned analysis"));
    // Every event is accounted for: none analyzed after the failure, all counted as dropped.
    assert_eq!(r.analysis.n, 0);
    assert_eq!(r.totals.dropped, 100_001);
}

/// The default configuration with `pairs` as its `CABPROF_*` variables.
fn config_from(pairs: &[(&str, &str)]) -> Result<RuntimeConfig, cabprof_cab::ConfigError> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut config = RuntimeConfig::default();
    config
        .from_vars(move |k| m.get(k).cloned())
        .map(|()| config)
}

#[test]
fn environment_variables_are_validated_by_name() {
    let env = config_from;
    for (var, val, allowed) in [
        ("CABPROF_MODE", "fast", "exhaustive, sampling or sequential"),
        ("CABPROF_RATE", "1.5", "0.0..=1.0"),
        ("CABPROF_RATE", "abc", "0.0..=1.0"),
        ("CABPROF_BURST", "0", ">= 1"),
        ("CABPROF_BUFFER", "12Q", "byte count"),
        ("CABPROF_CHUNK", "-4", "byte count"),
        ("CABPROF_ANALYZERS", "0", "1..=64"),
        ("CABPROF_PIN", "maybe", "0, 1, true or false"),
        ("CABPROF_ADAPTIVE", "2", "0, 1, true or false"),
        ("CABPROF_HUGE_PAGES", "big", "0, 1, true or false"),
    ] {
        let err = env(&[(var, val)]).unwrap_err();
        assert_eq!(err.field, var);
        assert!(err.allowed.contains(allowed), "{err}");
        assert!(err.to_string().contains(var), "{err}");
    }
    let b = env(&[
        ("CABPROF_RATE", "0.05"),
        ("CABPROF_BUFFER", "2M"),
        ("CABPROF_CHUNK", "128K"),
        ("CABPROF_ANALYZERS", "2"),
    ])
    .unwrap();
    let cfg = b.ring_config().unwrap();
    assert_eq!((cfg.buffer_bytes, cfg.chunk_bytes), (2 << 20, 128 << 10));
    assert!(cfg.huge_pages, "huge pages are on by default");
    let off = env(&[("CABPROF_HUGE_PAGES", "0")]).unwrap();
    assert!(!off.huge_pages);
    assert!(!off.ring_config().unwrap().huge_pages);
    assert_eq!(
        cfg.mode,
        cabprof_cab::Mode::Sampling {
            rate: 0.05,
            burst_words: 8
        }
    );
    // Sizes follow the one byte-size rule the command line uses: `2MB` and `2MiB` are 2 MiB.
    for text in ["2MB", "2MiB", "2048K", "2 M"] {
        let b = env(&[("CABPROF_BUFFER", text), ("CABPROF_CHUNK", "128KB")]).unwrap();
        assert_eq!(b.buffer_bytes, Some(2 << 20), "{text}");
        assert_eq!(b.chunk_bytes, Some(128 << 10), "{text}");
    }
    // An overflow is an error naming the variable, not a wrapped size.
    let err = env(&[("CABPROF_BUFFER", "99999999999999999999G")]).unwrap_err();
    assert_eq!(err.field, "CABPROF_BUFFER");
    let err = env(&[("CABPROF_CHUNK", "17179869184G")]).unwrap_err();
    assert_eq!(err.field, "CABPROF_CHUNK");
    assert!(err.allowed.contains("at most"), "{err}");
    // A ring rule broken through variables is still named, with its variable.
    let err = env(&[("CABPROF_BUFFER", "100K"), ("CABPROF_CHUNK", "64K")])
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(err.field, "buffer_bytes (CABPROF_BUFFER)");
    for (var, value, field) in [
        ("CABPROF_BUFFER", "0", "buffer_bytes (CABPROF_BUFFER)"),
        ("CABPROF_CHUNK", "3", "chunk_bytes (CABPROF_CHUNK)"),
    ] {
        let err = env(&[(var, value)]).unwrap().validate().unwrap_err();
        assert_eq!(err.field, field, "{var}={value}: {err}");
    }
}

#[test]
fn snapshots_see_results_so_far_without_stopping() {
    let _g = serial();
    let s = Session::start_snapshotting(small(), Count::default).unwrap();
    for v in 1..=500 {
        mark(v);
    }
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.analysis.n, 500);
    for v in 1..=500 {
        mark(v);
    }
    let r = s.finish();
    assert_eq!(r.analysis.n, 1000);
}

#[test]
fn adaptive_sampling_lowers_the_rate_when_lapped() {
    let _g = serial();
    #[derive(Default)]
    struct Slow(u64);
    impl EventAnalysis for Slow {
        fn consume(&mut self, words: &[u64]) {
            for &w in words {
                // Deliberately heavy per event so the producer laps the analyzer.
                for k in 0..200u64 {
                    self.0 = std::hint::black_box(self.0.wrapping_mul(31).wrapping_add(w ^ k));
                }
            }
        }
        fn merge(&mut self, o: Self) {
            self.0 ^= o.0;
        }
    }
    let config = small_in(RunMode::Sampling {
        rate: 1.0,
        burst_words: 8,
        adaptive: true,
    });
    let s = Session::start(config, Slow::default).unwrap();
    for v in 1..=2_000_000 {
        mark(v);
    }
    let r = s.finish();
    assert!(r.rate_used < 1.0, "rate stayed at {}", r.rate_used);
}

#[test]
fn baseline_buffer_designs_carry_every_event_too() {
    use cabprof_cab::runtime::BufferDesign;
    let _g = serial();
    for design in [BufferDesign::FastForward, BufferDesign::NWay] {
        let config = RuntimeConfig { design, ..small() };
        let s = Session::start(config, Count::default).unwrap();
        let (n, sum) = run_producers(4, 30_000);
        let r = s.finish();
        assert_eq!((r.analysis.n, r.analysis.sum), (n, sum), "{design:?}");
    }
    // Baselines are exhaustive only, and need power-of-two sizes.
    let err = RuntimeConfig {
        design: BufferDesign::NWay,
        ..small_in(RunMode::sampling(0.5))
    }
    .validate()
    .unwrap_err();
    assert_eq!(err.field, "buffer design (CABPROF_BUFFER_DESIGN)");
    let err = RuntimeConfig {
        buffer_bytes: Some(48 << 10),
        chunk_bytes: Some(4 << 10),
        design: BufferDesign::FastForward,
        ..RuntimeConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(err.field, "buffer_bytes (CABPROF_BUFFER)");
}

#[test]
fn breakdown_modes_write_events_without_analyzing_them() {
    let _g = serial();
    for mode in [RunMode::InstrumentOnly, RunMode::EnqueueOnly] {
        let s = Session::start(small_in(mode), Count::default).unwrap();
        // Far more than the ring holds: neither mode may block.
        run_producers(2, 100_000);
        let r = s.finish();
        assert_eq!(r.analysis.n, 0, "{mode:?} analyzes nothing");
        assert_eq!(r.mode, mode);
    }
}

/// Regression: threads that never exit (pool workers) used to be missing from sequential
/// snapshots and reports. Every mode reports a live thread's events, at a snapshot and at
/// `finish`; the exhaustive and sequential counts are exact.
#[test]
fn live_threads_are_reported_in_every_mode() {
    let _g = serial();
    for mode in [
        RunMode::Exhaustive,
        RunMode::Sequential,
        RunMode::sampling(1.0),
    ] {
        let s = Session::start_snapshotting(small_in(mode), Count::default).unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            for round in 0..2u64 {
                for v in 1..=5_000 {
                    mark(round * 5_000 + v);
                }
                ready_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            }
        });
        ready_rx.recv().unwrap();
        let snap = s.snapshot().expect("snapshotting session");
        go_tx.send(()).unwrap();
        ready_rx.recv().unwrap();
        let r = s.finish();
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        if mode != RunMode::sampling(1.0) {
            assert_eq!(snap.totals.events, 5_000, "{mode:?}: snapshot events");
            assert_eq!(r.totals.events, 10_000, "{mode:?}: events at finish");
            assert_eq!(snap.analysis.n, 5_000, "{mode:?}: snapshot");
            assert_eq!(r.analysis.n, 10_000, "{mode:?}: finish");
            assert_eq!(r.analysis.sum, (1..=10_000u64).sum::<u64>(), "{mode:?}");
        } else {
            // A live sampling producer's position is known as of its last published chunk;
            // `in_flight` bounds the rest.
            assert!(snap.totals.events <= 5_000, "{mode:?}");
            assert!(snap.totals.events + snap.in_flight >= 5_000, "{mode:?}");
            assert!(snap.analysis.n > 0, "{mode:?}: something analyzed");
        }
    }
}

#[test]
fn a_sampling_ring_defaults_to_an_eighth_of_an_exhaustive_one() {
    let env = config_from;
    let exhaustive = RuntimeConfig::default().ring_config().unwrap();
    let sampling = env(&[("CABPROF_RATE", "0.05")])
        .unwrap()
        .ring_config()
        .unwrap();
    assert_eq!(
        exhaustive.chunk_bytes,
        cabprof_cab::hw::recommended_chunk_bytes()
    );
    assert_eq!(
        sampling.chunk_bytes,
        cabprof_cab::hw::recommended_sampling_chunk_bytes()
    );
    assert_eq!(sampling.chunk_bytes, (exhaustive.chunk_bytes / 8).max(4096));
    assert_eq!(sampling.buffer_bytes, 16 * sampling.chunk_bytes);
    sampling.validate().unwrap();
    // Given sizes win in sampling mode too.
    let given = env(&[("CABPROF_RATE", "0.05"), ("CABPROF_CHUNK", "64K")])
        .unwrap()
        .ring_config()
        .unwrap();
    assert_eq!((given.chunk_bytes, given.buffer_bytes), (64 << 10, 1 << 20));
}

#[test]
fn a_burst_that_fits_an_exhaustive_chunk_still_fits_the_default_sampling_chunk() {
    // CABPROF_BURST up to an exhaustive chunk's words was accepted with the default sizes
    // before sampling rings shrank; the default sampling chunk grows to hold it.
    let with = |burst: usize| {
        config_from(&[("CABPROF_BURST", &burst.to_string())])
            .unwrap()
            .ring_config()
    };
    let full_words = cabprof_cab::hw::recommended_chunk_bytes() / 8;
    let small_words = cabprof_cab::hw::recommended_sampling_chunk_bytes() / 8;
    assert!(small_words < full_words);
    // A burst the small chunk holds keeps the small chunk.
    assert_eq!(with(small_words).unwrap().chunk_slots(), small_words);
    for burst in [small_words + 1, full_words / 2 + 3, full_words] {
        let ring = with(burst).unwrap();
        assert_eq!(ring.chunk_slots(), burst, "burst {burst}");
        assert_eq!(ring.buffer_bytes, 16 * ring.chunk_bytes);
        ring.validate().unwrap();
    }
    // Beyond an exhaustive chunk it is refused, as before, naming the field and its range.
    let e = with(full_words + 1).unwrap_err().to_string();
    assert!(
        e.contains("burst_words") && e.contains(&format!("1..={full_words}")),
        "{e}"
    );
}
