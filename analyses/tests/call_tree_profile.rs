//! The depth-two call-tree profile on hand-built streams, including broken ones.

mod common;

use analyses::{Analysis, CallTreeProfile};
use common::*;

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
