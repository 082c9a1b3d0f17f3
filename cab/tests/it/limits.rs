//! Sizes a session cannot honour are errors at start, naming the setting; never an overflow,
//! a wrapped size or an abort on the first instrumented call.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, RunMode, RuntimeConfig, Session, SessionError};
use cabprof_cab::RingConfig;
use std::collections::HashMap;

use crate::serial;

use crate::support::Count;

fn from_vars(vars: &[(&str, &str)]) -> Result<RuntimeConfig, cabprof_cab::ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut config = RuntimeConfig {
        pin: false,
        ..RuntimeConfig::default()
    };
    config.from_vars(|k| map.get(k).cloned())?;
    Ok(config)
}

fn start_error(config: RuntimeConfig) -> String {
    let _g = serial();
    match Session::start(config, Count::default) {
        Ok(session) => {
            drop(session);
            panic!("the session started")
        }
        Err(SessionError::Config(e)) => e.to_string(),
        Err(e) => panic!("not a config error: {e}"),
    }
}

#[test]
fn a_chunk_whose_default_ring_overflows_is_an_error_naming_it() {
    // 2^61 × 16 chunks does not fit in a usize: it used to panic (debug) or wrap (release).
    let config = from_vars(&[("CABPROF_CHUNK", "2305843009213693952")]).unwrap();
    let err = config.validate().unwrap_err();
    assert!(err.field.contains("CABPROF_CHUNK"), "{err}");
    assert!(start_error(config).contains("chunk_bytes"));
}

#[test]
fn a_ring_of_chunks_too_large_to_count_is_an_error_not_an_overflow() {
    let c = 1usize << 62;
    let err = RingConfig::new(c, c).validate().unwrap_err();
    assert_eq!(err.field, "buffer_bytes");
    assert!(err.allowed.contains("at most"), "{err}");
}

#[test]
fn a_ring_larger_than_memory_is_refused_at_start() {
    // The case: this used to start, then abort the program on the first event with
    // "memory allocation of 68719476744 bytes failed".
    // Here: more gigabytes than the machine has, in whole chunks of 1G.
    let physical_g = cabprof_cab::hw::physical_memory().expect("sysconf") >> 30;
    let buffer = format!("{}G", (physical_g + 4).max(64));
    let config = from_vars(&[("CABPROF_BUFFER", &buffer), ("CABPROF_CHUNK", "1G")]).unwrap();
    let msg = start_error(config);
    assert!(msg.contains("buffer_bytes"), "{msg}");
}

#[test]
fn a_budget_below_one_ring_is_an_error_naming_it() {
    let config = from_vars(&[
        ("CABPROF_BUFFER", "1M"),
        ("CABPROF_CHUNK", "64K"),
        ("CABPROF_RING_MEMORY", "512K"),
    ])
    .unwrap();
    assert_eq!(config.ring_memory, Some(512 << 10));
    let msg = start_error(config);
    assert!(msg.contains("CABPROF_RING_MEMORY"), "{msg}");
    let err = from_vars(&[("CABPROF_RING_MEMORY", "lots")]).unwrap_err();
    assert_eq!(err.field, "CABPROF_RING_MEMORY");
}

/// Sampling: a thread whose ring would exceed the budget gets the smallest ring instead,
/// outside the budget, and samples from it: nothing is dropped. A sampling ring is charged
/// with its handoff (at rate 1.0 a little larger than the buffer): a budget of one buffer and a
/// half does not hold one.
#[test]
fn sampling_threads_beyond_the_budget_get_the_smallest_ring() {
    let ring = 64 << 10;
    let mut config = RuntimeConfig {
        mode: RunMode::sampling(1.0),
        buffer_bytes: Some(ring),
        chunk_bytes: Some(4 << 10),
        pin: false,
        ..RuntimeConfig::default()
    };
    let one = config.ring_config().unwrap().ring_memory_bytes();
    // The buffer; 16 blocks of a whole 512-word chunk, a 2-word head and padding to a line;
    // a line's alignment.
    assert_eq!(one, ring + (16 * 520 + 7) * 8);
    config.ring_memory = Some(3 * ring / 2);
    let msg = start_error(config.clone());
    assert!(msg.contains("sampling handoff"), "{msg}");
    config.ring_memory = Some(2 * one);
    let _g = serial();
    let session = Session::start(config, Count::default).unwrap();
    // Four threads alive at once, each with its first event before any ends: two get rings.
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                emit(Event::marker(1).unwrap());
                barrier.wait();
                for v in 0..999 {
                    emit(Event::marker(v).unwrap());
                }
            });
        }
    });
    let report = session.finish();
    assert!(
        report
            .threads
            .iter()
            .all(|t| !t.thread.contains("without a ring")),
        "{:?}",
        report.threads
    );
    assert_eq!(report.totals.dropped, 0);
    assert_eq!(report.totals.events, 4000);
    // At rate 1.0 and 1,000 events a thread, the smallest rings (16 KiB) lose nothing either.
    assert_eq!(report.analysis.0 + report.totals.events_lapped, 4000);
    let sizes: Vec<u64> = report.threads.iter().map(|t| t.ring_bytes.1).collect();
    let small = sizes.iter().filter(|&&b| b < ring as u64).count();
    assert_eq!(small, 2, "two threads beyond the budget: {sizes:?}");
}
