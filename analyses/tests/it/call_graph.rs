//! Call-graph profiling on hand-built streams.

use crate::common::*;
use cabprof_analyses::{CallGraph, EventAnalysis};
use cabprof_cab::event::MethodId;

#[test]
fn counts_edges_with_root_as_caller_of_entry_points() {
    let words = [
        call(0, 1),
        call(1, 2),
        ret(2),
        call(1, 2),
        store(0x80, 4),
        ret(2),
        call(1, 3),
        call(3, 2),
        ret(2),
        ret(3),
        ret(1),
        call(0, 4),
        ret(4),
    ];
    let mut cg = CallGraph::new();
    cg.consume(&words);
    assert_eq!(cg.count(MethodId::ROOT, m(1)), 1);
    assert_eq!(cg.count(MethodId::ROOT, m(4)), 1);
    assert_eq!(cg.count(m(1), m(2)), 2);
    assert_eq!(cg.count(m(3), m(2)), 1);
    assert_eq!(cg.count(m(2), m(1)), 0);
    assert_eq!(cg.total(), 6);
    assert_eq!(cg.len(), 5);
    assert_eq!(cg.callees_of(m(1)), vec![(m(2), 2), (m(3), 1)]);
    assert_eq!(
        cg.sorted_edges(),
        vec![
            (m(0), m(1), 1),
            (m(0), m(4), 1),
            (m(1), m(2), 2),
            (m(1), m(3), 1),
            (m(3), m(2), 1),
        ]
    );
}

#[test]
fn sampled_calls_need_no_stack() {
    // A stream cut out of the middle of a run: each Call still names its caller.
    let mut cg = CallGraph::new();
    cg.consume(&[ret(9), call(7, 8), ret(8), call(7, 8)]);
    assert_eq!(cg.count(m(7), m(8)), 2);
    assert_eq!(cg.total(), 2);
}

/// Many edges sharing the cache's few entries (collisions, evictions, edges coming back):
/// every count equals a plain map's, and merging two halves gives the whole.
#[test]
fn counts_match_a_plain_map_with_many_colliding_edges() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let calls: Vec<(u32, u32)> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // A few hot edges and a long tail over 3,000 distinct ones.
            let r = (x % 100) as u32;
            if r < 60 {
                (1, 2 + r % 3)
            } else {
                ((x >> 8) as u32 % 60, (x >> 20) as u32 % 50)
            }
        })
        .collect();
    let mut want: std::collections::HashMap<(u32, u32), u64> = Default::default();
    let (mut whole, mut a, mut b) = (CallGraph::new(), CallGraph::new(), CallGraph::new());
    for (i, &(c, d)) in calls.iter().enumerate() {
        *want.entry((c, d)).or_default() += 1;
        let w = [call(c, d)];
        whole.consume(&w);
        if i % 2 == 0 {
            a.consume(&w)
        } else {
            b.consume(&w)
        }
    }
    assert_eq!(whole.len(), want.len());
    for (&(c, d), &n) in &want {
        let id = |i: u32| MethodId::new(i).unwrap();
        assert_eq!(whole.count(id(c), id(d)), n, "{c} -> {d}");
    }
    a.merge(b);
    assert_eq!(a, whole);
    assert_eq!(whole.total(), calls.len() as u64);
}

/// The call graph's calls per callee are what method counting counts on the same words (calls
/// among returns, stamps and calls of the root), whole and merged from two halves: a session
/// running both takes its method counts from the call graph.
#[test]
fn calls_per_callee_equal_method_counts() {
    use cabprof_analyses::MethodCount;
    use cabprof_cab::event::Event;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let words: Vec<u64> = (0..100_000)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (c, d) = ((x >> 8) as u32 % 40, (x >> 20) as u32 % 40);
            match i % 5 {
                3 => Event::ret(MethodId::new(d.max(1)).unwrap()).word(),
                4 => Event::time(x >> 40).word(),
                _ => call(c, d),
            }
        })
        .collect();
    let sorted = |mc: &MethodCount| {
        let mut v: Vec<(MethodId, u64)> = mc.iter().filter(|e| e.1 > 0).collect();
        v.sort();
        v
    };
    let mut mc = MethodCount::new();
    mc.consume(&words);
    let mut whole = CallGraph::new();
    whole.consume(&words);
    let (mut a, mut b) = (CallGraph::new(), CallGraph::new());
    a.consume(&words[..words.len() / 2]);
    b.consume(&words[words.len() / 2..]);
    a.merge(b);
    assert!(sorted(&mc).len() > 30);
    assert_eq!(sorted(&whole.call_counts()), sorted(&mc));
    assert_eq!(sorted(&a.call_counts()), sorted(&mc));
}
