//! The depth-two call-tree profile on hand-built streams, including broken ones.

use crate::common::*;
use cabprof_analyses::{CallTreeProfile, EventAnalysis};

/// main(1) calls a(2), b(3), a(2); the first a calls c(4).
fn main_run() -> Vec<u64> {
    vec![
        call(0, 1),
        call(1, 2),
        call(2, 4),
        load(0, 8),
        ret(4),
        ret(2),
        call(1, 3),
        path(3, 1),
        ret(3),
        call(1, 2),
        ret(2),
        ret(1),
    ]
}

#[test]
fn records_each_invocation_with_its_ordered_callees() {
    let mut words = main_run();
    words.extend(main_run());
    let mut p = CallTreeProfile::new();
    p.consume(&words);
    let ids = |v: &[u32]| v.iter().map(|&i| m(i)).collect::<Vec<_>>();
    assert_eq!(
        p.sorted(),
        vec![
            (m(1), ids(&[2, 3, 2]), 2),
            (m(2), ids(&[]), 2),
            (m(2), ids(&[4]), 2),
            (m(3), ids(&[]), 2),
            (m(4), ids(&[]), 2),
        ]
    );
    assert_eq!(p.count(m(1), &ids(&[2, 3, 2])), 2);
    assert_eq!(p.count(m(1), &ids(&[2, 2, 3])), 0, "order matters");
    assert_eq!(p.patterns_of(m(2)).len(), 2);
    assert_eq!(p.total(), 10);
    assert_eq!(p.len(), 5);
    assert!(!p.is_approximate());
    assert_eq!(
        (p.resyncs(), p.unmatched_returns(), p.open_frames()),
        (0, 0, 0)
    );
}

#[test]
fn open_frames_are_not_recorded() {
    let mut p = CallTreeProfile::new();
    p.consume(&[call(0, 1), call(1, 2), call(2, 3), ret(3)]);
    assert_eq!(p.open_frames(), 2);
    assert_eq!(p.sorted(), vec![(m(3), vec![], 1)]);
}

#[test]
fn stream_starting_mid_run_records_only_whole_invocations() {
    // The run was already inside main → a when the stream starts.
    let mut p = CallTreeProfile::new();
    p.consume(&[call(2, 4), ret(4), ret(2), call(1, 3), ret(3), ret(1)]);
    assert_eq!(p.sorted(), vec![(m(3), vec![], 1), (m(4), vec![], 1)]);
    assert_eq!(p.resyncs(), 2);
    assert_eq!(p.unmatched_returns(), 0);
    assert!(p.is_approximate());
}

#[test]
fn unmatched_return_is_counted_and_ignored() {
    let mut p = CallTreeProfile::new();
    p.consume(&[ret(9), call(0, 1), ret(1)]);
    assert_eq!(p.unmatched_returns(), 1);
    assert_eq!(p.sorted(), vec![(m(1), vec![], 1)]);
    assert!(p.is_approximate());
}

#[test]
fn lost_returns_drop_the_frames_a_gap_touched() {
    // ret(3) was lost: 2's return closes 3 too; neither 3, 2 nor 1 (on top after the gap) is
    // recorded, and 5, called afterwards, is.
    let mut p = CallTreeProfile::new();
    p.consume(&[
        call(0, 1),
        call(1, 2),
        call(2, 3),
        ret(2),
        call(1, 5),
        ret(5),
        ret(1),
    ]);
    assert_eq!(p.sorted(), vec![(m(5), vec![], 1)]);
    assert_eq!(p.resyncs(), 1);

    // ret(3) and ret(2) were lost: a call from 1 resumes in 1's frame.
    let mut p = CallTreeProfile::new();
    p.consume(&[
        call(0, 1),
        call(1, 2),
        call(2, 3),
        call(1, 6),
        ret(6),
        ret(1),
    ]);
    assert_eq!(p.sorted(), vec![(m(6), vec![], 1)]);
    assert_eq!(p.resyncs(), 1);

    // A call from the root while frames are open: they lost their returns.
    let mut p = CallTreeProfile::new();
    p.consume(&[call(0, 1), call(0, 2), ret(2)]);
    assert_eq!(p.sorted(), vec![(m(2), vec![], 1)]);
    assert_eq!(p.open_frames(), 0);
}

#[test]
fn thread_words_switch_stacks() {
    let words = [
        thread(1),
        call(0, 1),
        thread(2),
        call(0, 5),
        call(5, 6),
        thread(1),
        call(1, 2),
        ret(2),
        thread(2),
        ret(6),
        ret(5),
        thread(1),
        ret(1),
    ];
    let mut p = CallTreeProfile::new();
    p.consume(&words);
    assert_eq!(
        p.sorted(),
        vec![
            (m(1), vec![m(2)], 1),
            (m(2), vec![], 1),
            (m(5), vec![m(6)], 1),
            (m(6), vec![], 1),
        ]
    );
    assert!(!p.is_approximate());
}

#[test]
fn approximate_can_be_set_for_sampled_runs_and_survives_merge() {
    let mut a = CallTreeProfile::new();
    a.set_approximate(true);
    let mut b = CallTreeProfile::new();
    b.merge(a);
    assert!(b.is_approximate());
}

/// Random balanced call trees against a plain reference (a stack of callee lists and a map
/// keyed by the whole list): the same patterns and counts, also when the stream is consumed
/// in arbitrary chunks and when two independent streams are profiled apart and merged. The
/// methods come from a small set so patterns recur, and a node may get many children (more
/// than the trie's sibling walk covers).
mod against_a_reference {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Emit a random call tree under `caller`: `budget` bounds its size.
    fn tree(rng: &mut u64, caller: u32, depth: u32, budget: &mut u32, out: &mut Vec<u64>) {
        let next = |r: &mut u64| {
            *r ^= *r << 13;
            *r ^= *r >> 7;
            *r ^= *r << 17;
            *r
        };
        let calls = if depth > 5 { 0 } else { next(rng) % 14 };
        for _ in 0..calls {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let callee = 1 + (next(rng) % 12) as u32;
            out.push(call(caller, callee));
            tree(rng, callee, depth + 1, budget, out);
            out.push(ret(callee));
        }
    }

    fn reference(
        words: &[u64],
    ) -> Vec<(
        cabprof_cab::event::MethodId,
        Vec<cabprof_cab::event::MethodId>,
        u64,
    )> {
        let mut stack: Vec<(
            cabprof_cab::event::MethodId,
            Vec<cabprof_cab::event::MethodId>,
        )> = Vec::new();
        let mut counts = HashMap::new();
        for &w in words {
            match cabprof_cab::event::decode(w) {
                Some(cabprof_cab::event::EventKind::Call { callee, .. }) => {
                    if let Some(top) = stack.last_mut() {
                        top.1.push(callee);
                    }
                    stack.push((callee, Vec::new()));
                }
                Some(cabprof_cab::event::EventKind::Return { .. }) => {
                    let done = stack.pop().unwrap();
                    *counts.entry(done).or_insert(0u64) += 1;
                }
                _ => {}
            }
        }
        let mut out: Vec<_> = counts.into_iter().map(|((m, c), n)| (m, c, n)).collect();
        out.sort_unstable();
        out
    }

    proptest! {
        #[test]
        fn same_patterns(seed in 1u64.., size in 1u32..600, chunk in 1usize..50) {
            let (mut r1, mut r2) = (seed, seed.rotate_left(17) | 1);
            let (mut one, mut two) = (Vec::new(), Vec::new());
            tree(&mut r1, 0, 0, &mut size.clone(), &mut one);
            tree(&mut r2, 0, 0, &mut size.clone(), &mut two);
            let mut p = CallTreeProfile::new();
            for c in one.chunks(chunk) {
                p.consume(c);
            }
            prop_assert_eq!(p.sorted(), reference(&one));
            prop_assert!(!p.is_approximate());
            let mut q = CallTreeProfile::new();
            q.consume(&two);
            p.merge(q);
            let both: Vec<u64> = one.iter().chain(&two).copied().collect();
            prop_assert_eq!(p.sorted(), reference(&both));
            for (m, callees, n) in reference(&both) {
                prop_assert_eq!(p.count(m, &callees), n);
            }
        }
    }
}

/// `consume_both` gives both call-tree analyses exactly what separate passes give them, on a
/// stream with two threads, a gap (a lost Return) and a stream starting mid-run.
#[test]
fn consume_both_equals_separate_passes() {
    use cabprof_analyses::call_tree::consume_both;
    use cabprof_analyses::CallingContextTree;
    let thread = |id: u64| cabprof_cab::event::Event::thread(id).unwrap().word();
    let mut words = vec![call(5, 6), ret(6), ret(5)]; // starts inside 5
    words.extend(main_run());
    words.push(thread(2));
    words.extend(main_run());
    words.extend([call(0, 1), call(1, 2), ret(1)]); // 2's Return lost
    words.push(thread(1));
    words.extend(main_run());
    let (mut p1, mut t1) = (CallTreeProfile::new(), CallingContextTree::new());
    let (mut p2, mut t2) = (CallTreeProfile::new(), CallingContextTree::new());
    for c in words.chunks(5) {
        consume_both(&mut p1, &mut t1, c);
        p2.consume(c);
        t2.consume(c);
    }
    assert_eq!(p1, p2);
    assert_eq!(t1, t2);
    assert!(p1.resyncs() > 0 && p1.total() > 0 && t1.total() > 0);
}

/// Leaf invocations (no callees) are counted apart from the pattern table, for small and
/// large method ids alike; they list, count, total and merge like every other pattern.
#[test]
fn leaves_of_small_and_large_method_ids() {
    let big = 200_000;
    let words = vec![
        call(0, 1),
        call(1, 2),
        ret(2),
        call(1, big),
        ret(big),
        call(1, big),
        call(big, 2),
        ret(2),
        ret(big),
        ret(1),
    ];
    let mut p = CallTreeProfile::new();
    p.consume(&words);
    assert_eq!(
        p.sorted(),
        vec![
            (m(1), vec![m(2), m(big), m(big)], 1),
            (m(2), vec![], 2),
            (m(big), vec![], 1),
            (m(big), vec![m(2)], 1),
        ]
    );
    assert_eq!((p.len(), p.total()), (4, 5));
    assert_eq!(p.count(m(2), &[]), 2);
    assert_eq!(p.count(m(big), &[]), 1);
    let mut q = CallTreeProfile::new();
    q.consume(&words);
    q.merge(p.clone());
    assert_eq!(q.count(m(2), &[]), 4);
    assert_eq!(q.count(m(big), &[]), 2);
    assert_eq!(q.total(), 10);
    assert_ne!(p, q);
}

#[test]
fn an_invocation_with_too_many_calls_is_counted_not_kept() {
    use cabprof_analyses::call_tree::MAX_CALLEES;
    let mut p = CallTreeProfile::new();
    // main(1) calls a(2) 3 x MAX_CALLEES times: a main loop open for the whole session.
    p.consume(&[call(0, 1)]);
    for _ in 0..3 * MAX_CALLEES {
        p.consume(&[call(1, 2), ret(2)]);
    }
    // While it runs, its state stays bounded: a snapshot's copy holds at most MAX_CALLEES ids.
    let open = format!("{:?}", p.clone()).len();
    assert!(open < 20 * MAX_CALLEES, "{open} bytes of debug output");
    // An ordinary invocation after it is recorded as before.
    p.consume(&[call(1, 3), call(3, 2), ret(2), ret(3), ret(1)]);
    assert_eq!(p.overlong(), 1);
    assert!(
        p.sorted().iter().all(|(f, _, _)| *f != m(1)),
        "main is not a pattern"
    );
    assert!(p.sorted().contains(&(m(3), vec![m(2)], 1)));
}
