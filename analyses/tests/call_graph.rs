//! Call-graph profiling on hand-built streams.

mod common;

use cabprof_analyses::{CallGraph, EventAnalysis};
use cabprof_cab::event::MethodId;
use common::*;

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
    assert_eq!(cg.edges().len(), 5);
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
