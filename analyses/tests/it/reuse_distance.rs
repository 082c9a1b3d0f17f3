//! Reuse distance on hand-built sequences; histogram bins; configuration.

use crate::common::*;
use cabprof_analyses::{EventAnalysis, ReuseBin, ReuseDistance};

#[test]
fn distances_count_distinct_lines_in_between() {
    let mut r = ReuseDistance::default();
    // Lines: a b c a a b c d a
    let got: Vec<Option<u64>> = [0u64, 1, 2, 0, 0, 1, 2, 3, 0]
        .iter()
        .map(|&l| r.access_line(l))
        .collect();
    assert_eq!(
        got,
        vec![
            None,
            None,
            None,
            Some(2),
            Some(0),
            Some(2),
            Some(2),
            None,
            Some(3)
        ]
    );
    assert_eq!(r.cold(), 4);
    assert_eq!(r.accesses(), 9);
    assert_eq!(r.distinct_lines(), 4);
    assert_eq!(r.distribution(), &[1, 0, 3, 1]);
    // Fully-associative LRU: 2 lines miss everything but the a-a repeat; 4 lines only cold.
    assert_eq!(r.misses_for_capacity(0), 9);
    assert_eq!(r.misses_for_capacity(1), 8);
    assert_eq!(r.misses_for_capacity(3), 5);
    assert_eq!(r.misses_for_capacity(4), 4);
    assert_eq!(r.misses_for_capacity(u64::MAX), 4);
    assert_eq!(r.miss_curve(&[0, 1, 2, 3, 4, 100]), vec![9, 8, 8, 5, 4, 4]);
}

#[test]
fn mem_words_touch_every_line_they_cover() {
    let mut r = ReuseDistance::default();
    r.consume(&[
        load(60, 8),     // lines 0, 1: cold, cold
        store(0, 4),     // line 0: distance 1
        call(0, 1),      // skipped
        load(64, 64),    // line 1: distance 1 (and nothing else)
        load(128, 1),    // cold
        store(100, 128), // lines 1, 2, 3: distances 1, 1, cold
    ]);
    assert_eq!(r.cold(), 4);
    assert_eq!(r.distribution(), &[0, 4]);
    r.access(0, 0); // size 0 counts as 1: line 0, after lines 1, 2, 3
    assert_eq!(r.count(3), 1);
}

#[test]
fn line_size_is_configurable() {
    let mut r = ReuseDistance::new(128).unwrap();
    assert_eq!(r.line_bytes(), 128);
    r.access(0, 8);
    r.access(64, 8); // same 128-byte line
    assert_eq!((r.cold(), r.count(0)), (1, 1));
    let mut bytes = ReuseDistance::new(1).unwrap();
    bytes.access(0, 4); // four lines of one byte
    assert_eq!(bytes.cold(), 4);
    let e = ReuseDistance::new(96).unwrap_err();
    assert_eq!((e.field, e.value), ("line_bytes", 96));
    assert!(ReuseDistance::new(0).is_err());
}

#[test]
fn histogram_is_exact_below_the_limit_then_powers_of_two() {
    let mut r = ReuseDistance::default().with_exact_below(4);
    // Distance d: touch line 1000, then d other new lines, then 1000 again.
    let mut next = 0u64;
    for d in [0u64, 1, 3, 4, 5, 7, 8, 20, 20] {
        r.access_line(1000);
        for _ in 0..d {
            r.access_line(next);
            next += 1;
        }
        r.access_line(1000);
    }
    let bins = r.histogram();
    let b = |min, max, count| ReuseBin { min, max, count };
    // The first pair's first access is cold and its second has distance 0; every later pair
    // starts with a distance-0 hit on line 1000 too (after the previous pair's second access).
    assert_eq!(
        bins,
        vec![
            b(0, 0, 9),
            b(1, 1, 1),
            b(3, 3, 1),
            b(4, 7, 3),
            b(8, 15, 1),
            b(16, 31, 2),
        ]
    );
    assert_eq!(
        bins.iter().map(|b| b.count).sum::<u64>() + r.cold(),
        r.accesses()
    );
    // The counts behind the bins stay exact.
    assert_eq!(r.misses_for_capacity(6), r.cold() + 4);
}

#[test]
fn many_lines_force_compactions_without_losing_order() {
    // A cyclic sweep over 3000 lines: every access after the first sweep has distance 2999.
    for min in [
        1,
        64,
        100,
        4096,
        cabprof_analyses::reuse_distance::DEFAULT_MIN_TIMESTAMPS,
    ] {
        let mut r = ReuseDistance::default().with_min_timestamps(min);
        for _ in 0..30 {
            for l in 0..3000u64 {
                r.access_line(l);
            }
        }
        assert_eq!(r.cold(), 3000);
        assert_eq!(r.count(2999), 29 * 3000, "min {min}");
        assert_eq!(r.misses_for_capacity(2999), 30 * 3000);
        assert_eq!(r.misses_for_capacity(3000), 3000);
    }
}
