//! Replacement within a level: FIFO against LRU, associativity conflicts, odd set counts.

use cabprof_analyses::{CacheSim, LevelConfig, LevelStats, Policy};

fn one_level(size: u64, ways: u32, policy: Policy) -> CacheSim {
    CacheSim::new(&[LevelConfig::new(size, ways, 64, policy)]).unwrap()
}

fn loads(sim: &mut CacheSim, addrs: &[u64]) {
    for &a in addrs {
        sim.access(a, 8, false);
    }
}

fn hits_misses(s: LevelStats) -> (u64, u64) {
    (s.hits(), s.misses())
}

const A: u64 = 0;
const B: u64 = 64;
const C: u64 = 128;

#[test]
fn fifo_and_lru_differ_when_a_hit_would_refresh_a_line() {
    // One set of two ways. A B A C A:
    // FIFO: A, B miss; A hits but stays oldest; C evicts A; A misses again.
    // LRU:  A, B miss; A hits and becomes newest; C evicts B; A hits.
    let mut fifo = one_level(128, 2, Policy::Fifo);
    loads(&mut fifo, &[A, B, A, C, A]);
    assert_eq!(hits_misses(fifo.stats(0)), (1, 4));
    assert!(fifo.contains(0, A) && fifo.contains(0, C) && !fifo.contains(0, B));

    let mut lru = one_level(128, 2, Policy::Lru);
    loads(&mut lru, &[A, B, A, C, A]);
    assert_eq!(hits_misses(lru.stats(0)), (2, 3));
    assert!(lru.contains(0, A) && lru.contains(0, C) && !lru.contains(0, B));
}

#[test]
fn lru_evicts_least_recent_among_four() {
    // Lines 0..4 fill a 4-way set; touching 0, 1 makes 2 the LRU; line 4 evicts it.
    let mut lru = one_level(256, 4, Policy::Lru);
    loads(&mut lru, &[0, 64, 128, 192, 0, 64, 256]);
    assert!(!lru.contains(0, 128));
    assert!(lru.contains(0, 0) && lru.contains(0, 64) && lru.contains(0, 192));
    let mut fifo = one_level(256, 4, Policy::Fifo);
    loads(&mut fifo, &[0, 64, 128, 192, 0, 64, 256]);
    assert!(!fifo.contains(0, 0), "FIFO evicts the first filled");
}

#[test]
fn direct_mapped_conflicts_where_two_ways_do_not() {
    // 128 bytes: direct-mapped has 2 sets, lines 0 and 2 (addresses 0 and 128) share set 0.
    let mut dm = one_level(128, 1, Policy::Fifo);
    loads(&mut dm, &[0, 128, 0, 128]);
    assert_eq!(hits_misses(dm.stats(0)), (0, 4));
    // Lines 0 and 1 sit in different sets.
    let mut dm = one_level(128, 1, Policy::Fifo);
    loads(&mut dm, &[0, 64, 0, 64]);
    assert_eq!(hits_misses(dm.stats(0)), (2, 2));
    // The same capacity, 2-way: no conflict.
    let mut two = one_level(128, 2, Policy::Fifo);
    loads(&mut two, &[0, 128, 0, 128]);
    assert_eq!(hits_misses(two.stats(0)), (2, 2));
}

#[test]
fn set_count_need_not_be_a_power_of_two() {
    // 3 sets, 1 way: line l maps to set l % 3.
    let mut sim = one_level(192, 1, Policy::Lru);
    loads(&mut sim, &[0, 64, 128, 0, 64, 128]);
    assert_eq!(hits_misses(sim.stats(0)), (3, 3));
    let mut sim = one_level(192, 1, Policy::Lru);
    loads(&mut sim, &[0, 192, 0]); // lines 0 and 3 share set 0
    assert_eq!(hits_misses(sim.stats(0)), (0, 3));
}

#[test]
fn repeated_line_hits_without_changing_state() {
    let mut sim = one_level(128, 2, Policy::Lru);
    loads(&mut sim, &[A, A + 8, A + 56, B, B, A, C]);
    // A miss, 2 hits (same line), B miss, B hit, A hit, C evicts B (LRU).
    assert_eq!(hits_misses(sim.stats(0)), (4, 3));
    assert!(!sim.contains(0, B));
}
