//! Reuse distance against a brute-force LRU stack, and misses against a brute-force cache.

use cabprof_analyses::ReuseDistance;
use proptest::prelude::*;

/// Distance of each access by searching an explicit LRU stack (most recent first).
fn stack_distances(trace: &[u64]) -> Vec<Option<u64>> {
    let mut stack: Vec<u64> = Vec::new();
    trace
        .iter()
        .map(|&line| {
            let d = stack.iter().position(|&x| x == line);
            if let Some(d) = d {
                stack.remove(d);
            }
            stack.insert(0, line);
            d.map(|d| d as u64)
        })
        .collect()
}

/// Misses of a fully-associative LRU cache of `capacity` lines.
fn lru_misses(trace: &[u64], capacity: usize) -> u64 {
    let mut cache: Vec<u64> = Vec::new(); // most recent first
    let mut misses = 0;
    for &line in trace {
        match cache.iter().position(|&x| x == line) {
            Some(p) => {
                cache.remove(p);
            }
            None => {
                misses += 1;
                if cache.len() == capacity {
                    cache.pop();
                }
            }
        }
        if capacity > 0 {
            cache.insert(0, line);
        }
    }
    misses
}

/// Traces with a working set of `lines` lines and some locality, long enough to compact.
fn trace() -> impl Strategy<Value = Vec<u64>> {
    (1u64..700).prop_flat_map(|lines| {
        prop::collection::vec(
            prop_oneof![
                3 => 0..lines,
                1 => 0..4u64,
            ],
            0..3000,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn distances_equal_an_lru_stack(trace in trace(), min in 1usize..1000) {
        // A small timestamp space, so the trace goes through many compactions.
        let mut r = ReuseDistance::default().with_min_timestamps(min);
        let got: Vec<Option<u64>> = trace.iter().map(|&l| r.access_line(l)).collect();
        prop_assert_eq!(got, stack_distances(&trace));
    }

    #[test]
    fn misses_for_capacity_equal_a_fully_associative_lru_cache(
        trace in trace(),
        compact in any::<bool>(),
    ) {
        let mut r = ReuseDistance::default();
        if compact {
            r = r.with_min_timestamps(64);
        }
        for &l in &trace {
            r.access_line(l);
        }
        let sizes = [0u64, 1, 2, 3, 4, 7, 8, 16, 64, 100, 333, 1000];
        let curve = r.miss_curve(&sizes);
        for (i, &c) in sizes.iter().enumerate() {
            let expected = lru_misses(&trace, c as usize);
            prop_assert_eq!(r.misses_for_capacity(c), expected, "capacity {}", c);
            prop_assert_eq!(curve[i], expected);
        }
    }
}
