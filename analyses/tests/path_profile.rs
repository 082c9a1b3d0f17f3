//! Path profiling on hand-built streams, and the decoder hook.

mod common;

use analyses::{Analysis, HotPath, PathDecoder, PathProfile};
use cab::event::MethodId;
use common::*;

fn profile() -> PathProfile {
    let mut words = Vec::new();
    for _ in 0..5 {
        words.push(path(1, 0));
    }
    for _ in 0..3 {
        words.push(path(1, 7));
        words.push(call(1, 2)); // skipped
    }
    for _ in 0..3 {
        words.push(path(2, 1));
    }
    words.push(path(3, 2));
    let mut p = PathProfile::new();
    p.consume(&words);
    p
}

#[test]
fn counts_per_method_and_path() {
    let p = profile();
    assert_eq!(p.count(m(1), 0), 5);
    assert_eq!(p.count(m(1), 7), 3);
    assert_eq!(p.count(m(2), 1), 3);
    assert_eq!(p.count(m(3), 2), 1);
    assert_eq!(p.count(m(3), 0), 0);
    assert_eq!(p.total(), 12);
    assert_eq!(p.paths().len(), 4);
}

#[test]
fn hottest_orders_by_count_then_method_then_path() {
    let p = profile();
    let key = |h: &HotPath| (h.method.get(), h.path, h.count);
    let hot: Vec<_> = p.hottest(3).iter().map(key).collect();
    assert_eq!(hot, vec![(1, 0, 5), (1, 7, 3), (2, 1, 3)]);
    assert_eq!(p.hottest(10).len(), 4);
    assert!(p.hottest(0).is_empty());
    assert!(p.hottest(3).iter().all(|h| h.steps.is_none()));
}

struct Numbering;

impl PathDecoder for Numbering {
    fn decode(&self, method: MethodId, path: u32) -> Option<Vec<String>> {
        (method.get() == 1).then(|| {
            (0..3)
                .map(|bit| format!("branch {bit}: {}", path >> bit & 1 == 1))
                .collect()
        })
    }
}

#[test]
fn hottest_decoded_asks_the_decoder() {
    let p = profile();
    let hot = p.hottest_decoded(3, &Numbering);
    assert_eq!(
        hot[1].steps.as_deref(),
        Some(
            &[
                "branch 0: true".to_string(),
                "branch 1: true".into(),
                "branch 2: true".into()
            ][..]
        )
    );
    assert_eq!(hot[2].method, m(2));
    assert_eq!(hot[2].steps, None);
}
