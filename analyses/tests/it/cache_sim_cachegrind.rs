//! Counting as Valgrind's Cachegrind (`CacheSim::cachegrind`, `ReuseDistance::with_counting`),
//! by hand counts; `cli/tests/it/cachegrind_counts.rs` checks it against
//! cachegrind itself.

use cabprof_analyses::cache_sim::IFETCH_MARKER;
use cabprof_analyses::{CacheSim, Counting, EventAnalysis, LevelConfig, Policy, ReuseDistance};
use cabprof_cab::event::Event;
use proptest::prelude::*;

fn lru(size: u64, ways: u32) -> LevelConfig {
    LevelConfig::new(size, ways, 64, Policy::Lru)
}

fn sim(d1: LevelConfig, ll: LevelConfig) -> CacheSim {
    CacheSim::cachegrind(lru(32 << 10, 8), d1, ll).unwrap()
}

#[test]
fn a_line_crossing_access_is_one_access_and_at_most_one_miss() {
    let mut s = sim(lru(4096, 4), lru(65536, 8));
    s.access(60, 8, false); // lines 0 and 1, both cold
    assert_eq!((s.stats(0).load_misses, s.stats(0).accesses()), (1, 1));
    assert_eq!((s.stats(1).load_misses, s.stats(1).accesses()), (1, 1));
    s.access(62, 4, true); // lines 0 and 1 again: one hit
    assert_eq!((s.stats(0).store_hits, s.stats(0).accesses()), (1, 2));
    // Per-line counting on the same accesses: two lines each.
    let mut per_line = CacheSim::new(&[lru(4096, 4), lru(65536, 8)]).unwrap();
    per_line.access(60, 8, false);
    per_line.access(62, 4, true);
    assert_eq!(per_line.stats(0).accesses(), 4);
    assert_eq!(per_line.stats(0).load_misses, 2);
}

#[test]
fn the_last_level_does_not_back_invalidate_the_first() {
    // D1: 4 lines, fully associative; LL: 2 lines, fully associative.
    let mut s = sim(lru(256, 4), lru(128, 2));
    for line in [0, 1, 2] {
        s.access(line * 64, 8, false);
    }
    // Line 0 left the LL, but stays in D1: a hit under cachegrind's non-inclusive levels.
    s.access(0, 8, false);
    assert_eq!(s.stats(0).load_misses, 3);
    assert_eq!(s.stats(0).load_hits, 1);
    let mut inclusive = CacheSim::new(&[lru(256, 4), lru(128, 2)]).unwrap();
    for line in [0, 1, 2, 0] {
        inclusive.access(line * 64, 8, false);
    }
    assert_eq!(inclusive.stats(0).load_misses, 4);
}

#[test]
fn fetches_go_through_i1_and_share_the_last_level() {
    let mut s = sim(lru(4096, 4), lru(65536, 8));
    let words: Vec<u64> = [
        Event::marker(IFETCH_MARKER).unwrap(),
        Event::mem(0x1000, 4, false).unwrap(),
        Event::mem(0x1000, 8, false).unwrap(),
    ]
    .iter()
    .map(|e| e.word())
    .collect();
    s.consume(&words);
    let (i1, ll) = (s.fetch_stats(0), s.fetch_stats(1));
    assert_eq!((i1.load_misses, ll.load_misses), (1, 1));
    // The data access misses D1 and hits the line the fetch brought into the LL.
    assert_eq!(s.stats(0).load_misses, 1);
    assert_eq!((s.stats(1).load_hits, s.stats(1).load_misses), (1, 0));
    // Per-line simulators take the marker for nothing: two loads.
    let mut per_line = CacheSim::new(&[lru(4096, 4)]).unwrap();
    per_line.consume(&words);
    assert_eq!(per_line.stats(0).accesses(), 2);
}

#[test]
fn cachegrind_geometry_is_checked_by_field() {
    let e = CacheSim::cachegrind(
        lru(32 << 10, 8),
        LevelConfig::new(4096, 4, 64, Policy::Fifo),
        lru(65536, 8),
    )
    .unwrap_err();
    assert_eq!((e.level, e.field), (Some(0), "policy"));
    let e = CacheSim::cachegrind(lru(32 << 10, 8), lru(4096, 4), lru(3 * 65536, 8)).unwrap_err();
    assert_eq!((e.level, e.field), (Some(1), "size_bytes"));
    let e = CacheSim::cachegrind(lru(3 * 4096, 4), lru(4096, 4), lru(65536, 8)).unwrap_err();
    assert_eq!((e.level, e.field), (None, "size_bytes"));
    assert!(e.to_string().contains("I1"), "{e}");
}

proptest! {
    /// Under cachegrind counting the reuse-distance curve at C lines equals the misses of a
    /// fully-associative LRU D1 of C lines, crossing accesses included.
    #[test]
    fn reuse_distance_predicts_a_fully_associative_d1(
        accesses in prop::collection::vec((0u64..4096, 0u32..5), 1..400),
        lines in 1u32..16,
    ) {
        let ways = lines.next_power_of_two();
        let mut s = sim(lru(64 * ways as u64, ways), lru(64 * 64, 64));
        let mut r = ReuseDistance::new(64).unwrap().with_counting(Counting::Cachegrind);
        for &(addr, log) in &accesses {
            s.access(addr, 1 << log, false);
            r.access(addr, 1 << log);
        }
        prop_assert_eq!(r.accesses(), accesses.len() as u64);
        prop_assert_eq!(r.misses_for_capacity(ways as u64), s.stats(0).load_misses);
    }
}
