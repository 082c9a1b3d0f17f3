//! The inclusive hierarchy: back-invalidation, refills, and the subset property.

use cabprof_analyses::{CacheSim, LevelConfig, Policy};
use proptest::prelude::*;

fn lv(size: u64, ways: u32, policy: Policy) -> LevelConfig {
    LevelConfig::new(size, ways, 64, policy)
}

#[test]
fn a_line_evicted_from_l2_is_invalidated_in_l1() {
    // L1: one set of 2 ways. L2: direct-mapped, 2 sets; lines 0 and 2 conflict there.
    let mut sim = CacheSim::new(&[lv(128, 2, Policy::Lru), lv(128, 1, Policy::Lru)]).unwrap();
    sim.access(0, 8, false);
    sim.access(128, 8, false); // L2 evicts line 0, so L1 must drop it too
    assert!(!sim.contains(0, 0));
    assert!(!sim.contains(1, 0));
    assert!(sim.contains(0, 128) && sim.contains(1, 128));
    sim.access(0, 8, false); // would hit L1 without inclusion
    assert_eq!(sim.stats(0).misses(), 3);
    assert_eq!(sim.stats(0).hits(), 0);
    assert_eq!(sim.stats(1).misses(), 3);
}

#[test]
fn a_line_evicted_from_l1_stays_in_l2() {
    let mut sim = CacheSim::new(&[lv(64, 1, Policy::Fifo), lv(1024, 4, Policy::Fifo)]).unwrap();
    for a in [0, 64, 0] {
        sim.access(a, 4, false);
    }
    assert_eq!((sim.stats(0).hits(), sim.stats(0).misses()), (0, 3));
    assert_eq!((sim.stats(1).hits(), sim.stats(1).misses()), (1, 2));
}

#[test]
fn back_invalidated_ways_are_filled_before_evicting() {
    // L1: one set of 2 ways (FIFO). L2: 2 sets of 2 ways (FIFO); even lines share set 0.
    let mut sim = CacheSim::new(&[lv(128, 2, Policy::Fifo), lv(256, 2, Policy::Fifo)]).unwrap();
    sim.access(0, 8, false); // line 0
    sim.access(128, 8, false); // line 2
    sim.access(256, 8, false); // line 4: L2 evicts 0, invalidating it in L1; 4 takes that way
    assert!(sim.contains(0, 128), "line 2 must not be evicted from L1");
    assert!(sim.contains(0, 256) && !sim.contains(0, 0));
    sim.access(128, 8, false);
    assert_eq!(sim.stats(0).hits(), 1);
}

#[test]
fn three_levels() {
    let mut sim = CacheSim::new(&[
        lv(64, 1, Policy::Lru),
        lv(128, 2, Policy::Lru),
        lv(4096, 4, Policy::Fifo),
    ])
    .unwrap();
    for a in [0, 64, 128, 0] {
        sim.access(a, 8, true);
    }
    // Line 0 left L1 (at 64) and L2 (at 128, LRU of two) but is still in L3.
    assert_eq!(sim.stats(0).store_misses, 4);
    assert_eq!(sim.stats(1).store_misses, 4);
    assert_eq!((sim.stats(2).store_hits, sim.stats(2).store_misses), (1, 3));
}

proptest! {
    #[test]
    fn each_level_holds_a_subset_of_the_next(
        addrs in proptest::collection::vec(0u64..64 * 40, 1..300),
        l1_lru in any::<bool>(),
        l2_lru in any::<bool>(),
    ) {
        let p = |lru| if lru { Policy::Lru } else { Policy::Fifo };
        // L2 has fewer ways per set than L1 covers, so inclusion victims are common.
        let mut sim = CacheSim::new(&[lv(4 * 64, 4, p(l1_lru)), lv(6 * 64, 2, p(l2_lru))]).unwrap();
        for &a in &addrs {
            sim.access(a, 1, false);
            for line in 0..40u64 {
                if sim.contains(0, line * 64) {
                    prop_assert!(sim.contains(1, line * 64), "line {} in L1 only", line);
                }
            }
            prop_assert!(sim.contains(0, a) && sim.contains(1, a));
        }
    }
}
