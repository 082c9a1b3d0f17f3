//! The calling context tree on hand-built streams, including broken ones, and folded output.

use crate::common::*;
use cabprof_analyses::{CallingContextTree, EventAnalysis};
use cabprof_cab::event::MethodId;

fn name(id: MethodId) -> String {
    ["root", "main", "a", "b", "c", "d;e", "f"][id.get() as usize].to_string()
}

fn ids(v: &[u32]) -> Vec<MethodId> {
    v.iter().map(|&i| m(i)).collect()
}

/// main(1) calls a(2), b(3), a(2); the first a calls c(4); b calls a.
fn main_run() -> Vec<u64> {
    vec![
        call(0, 1),
        call(1, 2),
        call(2, 4),
        ret(4),
        ret(2),
        call(1, 3),
        call(3, 2),
        ret(2),
        ret(3),
        call(1, 2),
        ret(2),
        ret(1),
    ]
}

#[test]
fn rebuilds_contexts_exactly() {
    let mut words = main_run();
    words.extend(main_run());
    let mut t = CallingContextTree::new();
    t.consume(&words);
    assert_eq!(
        t.contexts(),
        vec![
            (ids(&[1]), 2),
            (ids(&[1, 2]), 4),
            (ids(&[1, 2, 4]), 2),
            (ids(&[1, 3]), 2),
            (ids(&[1, 3, 2]), 2),
        ]
    );
    assert_eq!(t.count(&ids(&[1, 3, 2])), 2);
    assert_eq!(t.count(&ids(&[2])), 0);
    assert_eq!(t.count(&[]), 0);
    assert_eq!(t.total(), 12);
    assert_eq!(t.len(), 5);
    assert!(!t.is_approximate());
    assert_eq!(
        (t.resyncs(), t.unmatched_returns(), t.open_frames()),
        (0, 0, 0)
    );
}

#[test]
fn folded_lines_are_sorted_and_parseable() {
    let mut t = CallingContextTree::new();
    t.consume(&main_run());
    t.consume(&[call(0, 5), call(5, 6), ret(6), ret(5)]);
    assert_eq!(
        t.folded(&name),
        "root;d_e 1\n\
         root;d_e;f 1\n\
         root;main 1\n\
         root;main;a 2\n\
         root;main;a;c 1\n\
         root;main;b 1\n\
         root;main;b;a 1\n"
    );
    assert_eq!(CallingContextTree::new().folded(&name), "");
}

#[test]
fn recursion_makes_deeper_contexts() {
    let mut t = CallingContextTree::new();
    t.consume(&[call(0, 1), call(1, 1), call(1, 1), ret(1), ret(1), ret(1)]);
    assert_eq!(
        t.contexts(),
        vec![(ids(&[1]), 1), (ids(&[1, 1]), 1), (ids(&[1, 1, 1]), 1)]
    );
}

#[test]
fn stream_starting_mid_run_hangs_callees_under_root_then_caller() {
    let mut t = CallingContextTree::new();
    t.consume(&[call(2, 4), ret(4), ret(2), call(1, 3), ret(3), ret(1)]);
    assert_eq!(
        t.contexts(),
        vec![
            (ids(&[1]), 0),
            (ids(&[1, 3]), 1),
            (ids(&[2]), 0),
            (ids(&[2, 4]), 1)
        ]
    );
    assert_eq!(t.folded(&name), "root;a;c 1\nroot;main;b 1\n");
    assert_eq!((t.resyncs(), t.unmatched_returns()), (2, 0));
    assert!(t.is_approximate());
}

#[test]
fn lost_returns_resume_at_the_callers_open_node() {
    // ret(4) and ret(2) were lost: the call from main continues under main.
    let mut t = CallingContextTree::new();
    t.consume(&[
        call(0, 1),
        call(1, 2),
        call(2, 4),
        call(1, 3),
        ret(3),
        ret(1),
    ]);
    assert_eq!(t.count(&ids(&[1, 3])), 1);
    assert_eq!(t.resyncs(), 1);
    assert_eq!(t.open_frames(), 0);

    // A Return for a frame below the top closes everything above it.
    let mut t = CallingContextTree::new();
    t.consume(&[call(0, 1), call(1, 2), call(2, 4), ret(2), call(1, 3)]);
    assert_eq!(t.count(&ids(&[1, 3])), 1);
    assert_eq!(t.resyncs(), 1);

    // A call from the root closes every open frame.
    let mut t = CallingContextTree::new();
    t.consume(&[call(0, 1), call(1, 2), call(0, 3)]);
    assert_eq!(t.count(&ids(&[3])), 1);
    assert_eq!(t.open_frames(), 1);
}

#[test]
fn unmatched_return_is_counted_and_ignored() {
    let mut t = CallingContextTree::new();
    t.consume(&[call(0, 1), ret(7), call(1, 2)]);
    assert_eq!(t.unmatched_returns(), 1);
    assert_eq!(t.count(&ids(&[1, 2])), 1);
    assert!(t.is_approximate());
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
    let mut t = CallingContextTree::new();
    t.consume(&words);
    assert_eq!(
        t.contexts(),
        vec![
            (ids(&[1]), 1),
            (ids(&[1, 2]), 1),
            (ids(&[5]), 1),
            (ids(&[5, 6]), 1)
        ]
    );
    assert!(!t.is_approximate());
}

/// A node with many children (more than the sibling walk covers, so the child map answers),
/// called in a scrambled order, with children made between lookups: every count is exact,
/// also after merging two halves of the stream analysed separately.
#[test]
fn wide_nodes_count_every_child_exactly() {
    let mut words = vec![call(0, 1)];
    let mut expect = std::collections::HashMap::new();
    for k in 0..2_000u32 {
        let child = 2 + (k * 7919) % 40; // 40 children of main, in a scrambled order
        words.push(call(1, child));
        words.push(ret(child));
        *expect.entry(child).or_insert(0u64) += 1;
    }
    words.push(ret(1));
    let mut whole = CallingContextTree::new();
    whole.consume(&words);
    for (&child, &n) in &expect {
        assert_eq!(whole.count(&ids(&[1, child])), n, "main -> {child}");
    }
    assert_eq!(whole.len(), 41);
    // The same contexts from two instances that each saw whole invocations of main.
    let mut a = CallingContextTree::new();
    let mut b = CallingContextTree::new();
    a.consume(&words);
    b.consume(&words[..words.len() / 2 + 1]);
    b.consume(&[ret(1)]);
    a.merge(b);
    assert_eq!(a.count(&ids(&[1])), 2);
}

/// The calls open now: each thread's innermost open context, the threads of merged instances
/// included, until they return.
#[test]
fn open_stacks_are_each_threads_innermost_open_context() {
    let mut first = CallingContextTree::new();
    first.consume(&[call(0, 1), call(1, 2), call(2, 4)]);
    assert_eq!(first.open_stacks(), vec![ids(&[1, 2, 4])]);
    let mut second = CallingContextTree::new();
    second.consume(&[call(0, 1), call(1, 3)]);
    first.merge(second);
    assert_eq!(first.open_stacks(), vec![ids(&[1, 2, 4]), ids(&[1, 3])]);
    first.consume(&[ret(4), ret(2), ret(1)]);
    assert_eq!(first.open_stacks(), vec![ids(&[1, 3])]);
    // A multiplexed ring: each thread's state is listed.
    let mut shared = CallingContextTree::new();
    shared.consume(&[thread(1), call(0, 1), thread(2), call(0, 3), call(3, 2)]);
    assert_eq!(shared.open_stacks(), vec![ids(&[1]), ids(&[3, 2])]);
}

/// Open paths kept from merged instances are bounded: ended threads whose streams lost their
/// last `Return`s do not pile up.
#[test]
fn open_paths_of_merged_instances_are_bounded() {
    use cabprof_analyses::call_tree::MAX_OPEN_MERGED;
    let mut all = CallingContextTree::new();
    for _ in 0..MAX_OPEN_MERGED + 100 {
        let mut one = CallingContextTree::new();
        one.consume(&[call(0, 1), call(1, 2)]);
        all.merge(one);
    }
    assert_eq!(all.open_stacks().len(), MAX_OPEN_MERGED);
}
