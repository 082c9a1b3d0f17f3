//! The deep recursion the report-memory tests profile, and the session they profile it in.

use cabprof::{profile, Analysis, Session};

/// `n` levels deep, each holding one 4-byte heap block across the call below.
#[profile]
pub(crate) fn recurse(n: u32) -> u64 {
    let level = std::hint::black_box(Box::new(n));
    if *level <= 1 {
        1
    } else {
        1 + recurse(*level - 1)
    }
}

/// A session running every analysis that keeps a node per calling context (call tree, time,
/// allocations) and the call graph.
pub(crate) fn session() -> Session {
    Session::builder()
        .analyses(&[
            Analysis::CallTree,
            Analysis::CallGraph,
            Analysis::Time,
            Analysis::Allocations,
        ])
        .pin(false)
        .start()
        .unwrap()
}
