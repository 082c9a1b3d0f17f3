//! What the simulator counts: straddling accesses, loads against stores, misses per method.

use crate::common::*;
use cabprof_analyses::{CacheSim, EventAnalysis, MissCounts};
use cabprof_cab::event::MethodId;

#[test]
fn an_access_straddling_a_line_boundary_touches_both_lines() {
    let mut sim = CacheSim::default();
    sim.consume(&[load(60, 8)]); // bytes 60..68: lines 0 and 1
    assert_eq!(sim.stats(0).load_misses, 2);
    assert!(sim.contains(0, 0) && sim.contains(0, 64));
    sim.consume(&[load(62, 2)]); // bytes 62..64: line 0 only
    sim.consume(&[load(0, 128)]); // lines 0 and 1
    assert_eq!(sim.stats(0).load_hits, 3);
    sim.access(0, 256, true); // lines 0..4 through the public entry point
    assert_eq!((sim.stats(0).store_hits, sim.stats(0).store_misses), (2, 2));
    assert_eq!(sim.stats(0).accesses(), 9);
}

#[test]
fn loads_and_stores_are_counted_apart_at_every_level() {
    let mut sim = CacheSim::default();
    sim.consume(&[
        store(0, 8),   // store miss
        load(0, 8),    // load hit (same line as the last access)
        load(64, 8),   // load miss
        store(64, 8),  // store hit
        load(0, 8),    // load hit
        store(128, 8), // store miss
    ]);
    let l1 = sim.stats(0);
    assert_eq!(
        (l1.load_hits, l1.load_misses, l1.store_hits, l1.store_misses),
        (2, 1, 1, 2)
    );
    let l2 = sim.stats(1);
    assert_eq!(
        (l2.load_hits, l2.load_misses, l2.store_hits, l2.store_misses),
        (0, 1, 0, 2)
    );
    assert!((l1.miss_rate() - 0.5).abs() < 1e-12);
}

#[test]
fn misses_are_charged_to_the_running_method() {
    let mut sim = CacheSim::default();
    sim.consume(&[
        call(0, 1),
        load(0, 8), // miss in 1
        call(1, 2),
        load(64, 8),   // miss in 2
        store(128, 8), // miss in 2
        load(0, 8),    // hit
        ret(2),
        load(192, 8), // miss in 1
        ret(1),
        load(256, 8), // miss at the root
    ]);
    let mc = |loads, stores| MissCounts { loads, stores };
    for level in 0..2 {
        assert_eq!(sim.method_misses(m(1), level), mc(2, 0));
        assert_eq!(sim.method_misses(m(2), level), mc(1, 1));
        assert_eq!(sim.method_misses(MethodId::ROOT, level), mc(1, 0));
        assert_eq!(sim.method_misses(m(9), level), mc(0, 0));
        assert_eq!(
            sim.misses_by_method(level),
            vec![
                (m(1), mc(2, 0)),
                (m(2), mc(1, 1)),
                (MethodId::ROOT, mc(1, 0))
            ]
        );
    }
}

#[test]
fn attribution_survives_broken_and_multiplexed_streams() {
    let mut sim = CacheSim::default();
    sim.consume(&[
        ret(5),     // unmatched: ignored, still at the root
        load(0, 8), // root
        thread(1),
        call(0, 1),
        call(1, 2),
        thread(2),
        load(64, 8), // thread 2 is at its root
        call(0, 3),
        thread(1),
        load(128, 8), // thread 1 is in 2
        ret(1),       // closes 2 and 1
        load(192, 8), // thread 1 at its root
        thread(2),
        load(256, 8), // thread 2 in 3
    ]);
    assert_eq!(sim.method_misses(MethodId::ROOT, 0).loads, 3);
    assert_eq!(sim.method_misses(m(2), 0).loads, 1);
    assert_eq!(sim.method_misses(m(3), 0).loads, 1);
    assert_eq!(sim.method_misses(m(1), 0).loads, 0);
}

#[test]
fn other_words_are_skipped() {
    let mut sim = CacheSim::default();
    sim.consume(&[path(1, 2), marker(3), 0, u64::MAX, 0x7000_0000_0000_0000]);
    assert_eq!(sim.stats(0).accesses(), 0);
}
