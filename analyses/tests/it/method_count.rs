//! Method counting on hand-built streams.

use crate::common::*;
use cabprof_analyses::{EventAnalysis, MethodCount};

#[test]
fn counts_calls_by_callee_and_skips_other_words() {
    let words = [
        call(0, 1),
        load(0x40, 8),
        call(1, 2),
        path(2, 3),
        ret(2),
        call(1, 2),
        ret(2),
        call(1, 3),
        marker(7),
        ret(3),
        ret(1),
        0,        // CLEAR
        u64::MAX, // MAGIC
    ];
    let mut mc = MethodCount::new();
    mc.consume(&words);
    assert_eq!(mc.count(m(1)), 1);
    assert_eq!(mc.count(m(2)), 2);
    assert_eq!(mc.count(m(3)), 1);
    assert_eq!(mc.count(m(4)), 0);
    assert_eq!(mc.total(), 4);
    assert_eq!(mc.len(), 3);
    assert_eq!(
        mc.iter().collect::<Vec<_>>(),
        vec![(m(1), 1), (m(2), 2), (m(3), 1)]
    );
}

#[test]
fn large_ids_are_counted_without_a_huge_array() {
    let big = cabprof_cab::event::MAX_METHOD_ID;
    let mut mc = MethodCount::new();
    mc.consume(&[call(0, big), call(big, 5), call(0, big)]);
    assert_eq!(mc.count(m(big)), 2);
    assert_eq!(mc.count(m(5)), 1);
    let map = mc.to_map();
    assert_eq!(map.len(), 2);
    assert_eq!(map[&m(big)], 2);
    assert_eq!(mc.iter().last(), Some((m(big), 2)));
}

#[test]
fn empty_profile() {
    let mc = MethodCount::new();
    assert!(mc.is_empty());
    assert_eq!(mc.total(), 0);
    assert_eq!(mc.count(m(1)), 0);
}

#[test]
fn runs_of_one_callee_count_like_single_calls_in_any_batching() {
    // Runs of the same callee (counted in a register and added once), broken by other
    // callees, other words and batch boundaries, including ids past the dense table.
    let mut seed = 7u64;
    let mut words = Vec::new();
    let mut want = std::collections::HashMap::<u32, u64>::new();
    for _ in 0..5_000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let callee = match seed >> 60 {
            0..=9 => 3,
            10..=12 => 1 + (seed >> 40) as u32 % 5,
            13 => 70_000,
            _ => 9,
        };
        let run = 1 + (seed >> 20) % 6;
        for _ in 0..run {
            words.push(call(0, callee));
            *want.entry(callee).or_default() += 1;
            if seed & 1 == 0 {
                words.push(ret(callee));
            }
        }
    }
    for batch in [1, 2, 3, 7, 64, words.len()] {
        let mut mc = MethodCount::new();
        for chunk in words.chunks(batch) {
            mc.consume(chunk);
        }
        for (&id, &n) in &want {
            assert_eq!(mc.count(m(id)), n, "method {id}, batches of {batch}");
        }
    }
}
