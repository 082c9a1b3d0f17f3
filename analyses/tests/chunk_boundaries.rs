//! Consuming a stream in chunks of any size gives exactly the state of consuming it whole.

mod common;

use cabprof_analyses::{
    CacheSim, CallGraph, CallTreeProfile, CallingContextTree, EventAnalysis, LevelConfig,
    MethodCount, PathProfile, Policy, ReuseDistance,
};
use common::*;
use proptest::prelude::*;

fn same_when_split<A: EventAnalysis + Clone + PartialEq + std::fmt::Debug>(
    fresh: &A,
    words: &[u64],
    cuts: &[usize],
) -> Result<(), TestCaseError> {
    let mut whole = fresh.clone();
    whole.consume(words);
    let mut split = fresh.clone();
    consume_in_chunks(&mut split, words, cuts);
    prop_assert_eq!(whole, split);
    Ok(())
}

fn small_cache() -> CacheSim {
    // Small enough that random traces evict and back-invalidate; odd set counts.
    CacheSim::new(&[
        LevelConfig::new(3 * 2 * 64, 2, 64, Policy::Lru),
        LevelConfig::new(5 * 4 * 64, 4, 64, Policy::Fifo),
    ])
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_stream(
        words in arbitrary_words(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        same_when_split(&MethodCount::new(), &words, &cuts)?;
        same_when_split(&CallGraph::new(), &words, &cuts)?;
        same_when_split(&CallTreeProfile::new(), &words, &cuts)?;
        same_when_split(&CallingContextTree::new(), &words, &cuts)?;
        same_when_split(&PathProfile::new(), &words, &cuts)?;
        same_when_split(&CacheSim::default(), &words, &cuts)?;
        same_when_split(&small_cache(), &words, &cuts)?;
        same_when_split(&ReuseDistance::default(), &words, &cuts)?;
        same_when_split(&ReuseDistance::default().with_min_timestamps(64), &words, &cuts)?;
    }

    #[test]
    fn balanced_streams(
        actions in prop::collection::vec(any::<u8>(), 0..600),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let words = balanced_trace(&actions, 5);
        same_when_split(&CallTreeProfile::new(), &words, &cuts)?;
        same_when_split(&CallingContextTree::new(), &words, &cuts)?;
        same_when_split(&small_cache(), &words, &cuts)?;
    }
}

#[test]
fn every_single_cut_of_a_long_stream() {
    let actions: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let words = balanced_trace(&actions, 7);
    let mut whole = CallingContextTree::new();
    whole.consume(&words);
    for cut in (0..=words.len()).step_by(7) {
        let mut split = CallingContextTree::new();
        split.consume(&words[..cut]);
        split.consume(&words[cut..]);
        assert_eq!(whole, split, "cut at {cut}");
    }
    // One word at a time.
    let mut cache = small_cache();
    let mut reuse = ReuseDistance::default().with_min_timestamps(64);
    for w in &words {
        cache.consume(std::slice::from_ref(w));
        reuse.consume(std::slice::from_ref(w));
    }
    let mut whole_cache = small_cache();
    whole_cache.consume(&words);
    let mut whole_reuse = ReuseDistance::default().with_min_timestamps(64);
    whole_reuse.consume(&words);
    assert_eq!(cache, whole_cache);
    assert_eq!(reuse, whole_reuse);
}

/// Streams rich in leaf invocations (a `Call` and its `Return` or `TimedReturn` side by side),
/// mixed with open calls, returns, polls and thread switches over few ids, so that callers are
/// often not on top. Fed whole, the call-tree analyses take each such pair as one leaf;
/// fed one word at a time they never can: both must end in the same state.
fn leafy_words() -> impl Strategy<Value = Vec<u64>> {
    use cabprof_cab::event::Event;
    let piece = prop_oneof![
        6 => (0u32..5, 1u32..5).prop_map(|(a, b)| vec![call(a, b), ret(b)]),
        2 => (0u32..5, 1u32..5, 0u64..1000)
            .prop_map(|(a, b, t)| vec![call(a, b), Event::timed_return(m(b), t).word()]),
        3 => (0u32..5, 1u32..5).prop_map(|(a, b)| vec![call(a, b)]),
        3 => (1u32..5).prop_map(|b| vec![ret(b)]),
        1 => (1u32..5, 0u32..3, any::<bool>())
            .prop_map(|(f, t, first)| vec![Event::poll(m(f), t, first).word()]),
        1 => (0u32..3, 0u32..3, any::<bool>())
            .prop_map(|(t, p, done)| vec![Event::poll_end(t, p, done).word()]),
        1 => (0u64..3).prop_map(|id| vec![thread(id)]),
    ];
    prop::collection::vec(piece, 0..200).prop_map(|v| v.concat())
}

fn same_word_by_word<A: EventAnalysis + Clone + PartialEq + std::fmt::Debug>(
    fresh: &A,
    words: &[u64],
) -> Result<(), TestCaseError> {
    let mut whole = fresh.clone();
    whole.consume(words);
    let mut single = fresh.clone();
    for w in words {
        single.consume(std::slice::from_ref(w));
    }
    prop_assert_eq!(whole, single);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn leaf_pairs_whole_or_word_by_word(words in leafy_words()) {
        same_word_by_word(&CallTreeProfile::new(), &words)?;
        same_word_by_word(&CallingContextTree::new(), &words)?;
        // Both at once, as the facade's call-tree analysis runs them.
        let (mut p, mut t) = (CallTreeProfile::new(), CallingContextTree::new());
        cabprof_analyses::call_tree::consume_both(&mut p, &mut t, &words);
        let (mut p1, mut t1) = (CallTreeProfile::new(), CallingContextTree::new());
        for w in &words {
            p1.consume(std::slice::from_ref(w));
            t1.consume(std::slice::from_ref(w));
        }
        prop_assert_eq!(p, p1);
        prop_assert_eq!(t, t1);
    }
}
