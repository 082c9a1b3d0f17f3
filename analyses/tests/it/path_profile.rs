//! Path profiling on hand-built streams, and the decoder hook.

use crate::common::*;
use cabprof_analyses::{EventAnalysis, HotPath, PathDecoder, PathProfile};
use cabprof_cab::event::MethodId;

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

/// Small method ids and path numbers are counted in a dense table, the rest in a hash table;
/// whatever the mix, counts, totals, the listing and merges agree with a plain map.
mod dense_and_sparse {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn ids() -> impl Strategy<Value = (u32, u32)> {
        prop_oneof![
            (0u32..40, 0u32..64),               // dense
            (0u32..40, 4_000u32..5_000),        // paths past the dense rows
            (4_090u32..4_200, 0u32..8),         // methods past the dense table
            (0u32..(1 << 30), 0u32..(1 << 30)), // anything an event can carry
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_a_map(events in proptest::collection::vec(ids(), 0..400), cut in 0usize..400) {
            let words: Vec<u64> = events.iter().map(|&(m, p)| path(m, p)).collect();
            let mut expect: HashMap<(MethodId, u32), u64> = HashMap::new();
            for &(m_, p) in &events {
                *expect.entry((m(m_), p)).or_insert(0) += 1;
            }
            let mut whole = PathProfile::new();
            whole.consume(&words);
            prop_assert_eq!(whole.len(), expect.len());
            prop_assert_eq!(whole.total(), events.len() as u64);
            for (&(method, p), &n) in &expect {
                prop_assert_eq!(whole.count(method, p), n);
            }
            let listed: HashMap<(MethodId, u32), u64> = whole.paths().into_iter().collect();
            prop_assert_eq!(&listed, &expect);
            let cut = cut.min(words.len());
            let (mut a, mut b) = (PathProfile::new(), PathProfile::new());
            a.consume(&words[..cut]);
            b.consume(&words[cut..]);
            a.merge(b);
            prop_assert_eq!(a, whole);
        }
    }
}
