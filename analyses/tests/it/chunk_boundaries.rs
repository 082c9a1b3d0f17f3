//! Consuming a stream in chunks of any size gives exactly the state of consuming it whole.

use crate::common::*;
use cabprof_analyses::{
    CacheSim, CallGraph, CallTreeProfile, CallingContextTree, EventAnalysis, LevelConfig,
    MethodCount, PathProfile, Policy, ReuseDistance,
};
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

/// Both call-tree analyses, alone and run together as the facade runs them, fed `words` whole
/// and one word at a time: the same state.
fn call_trees_same_word_by_word(words: &[u64]) -> Result<(), TestCaseError> {
    same_word_by_word(&CallTreeProfile::new(), words)?;
    same_word_by_word(&CallingContextTree::new(), words)?;
    let (mut p, mut t) = (CallTreeProfile::new(), CallingContextTree::new());
    cabprof_analyses::call_tree::consume_both(&mut p, &mut t, words);
    let (mut p1, mut t1) = (CallTreeProfile::new(), CallingContextTree::new());
    for w in words {
        p1.consume(std::slice::from_ref(w));
        t1.consume(std::slice::from_ref(w));
    }
    prop_assert_eq!(p, p1);
    prop_assert_eq!(t, t1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn leaf_pairs_whole_or_word_by_word(words in leafy_words()) {
        call_trees_same_word_by_word(&words)?;
    }
}

/// A well-formed async run driven by `actions`, over a few threads: leaf invocations (returned
/// plainly or timed), open calls and returns, `async fn` calls whose first poll follows their
/// `Call`, suspensions (`PollEnd`, not done, after closing the poll's own frames), resumptions
/// of a suspended future on any thread (`Poll`, not first), futures that finish (their
/// `Return`, then a leaf of the root while the poll is still open, then `PollEnd` done), polls
/// nested inside polls, and thread switches. Ids collide on purpose (sync and async methods
/// share `0..6`, `0` being the root) so recursion and callers equal to callees occur.
fn async_run(actions: &[u8]) -> Vec<u64> {
    use cabprof_cab::event::Event;
    /// A context: the thread's own (`task` None) or a poll in progress.
    struct Ctx {
        task: Option<(u32, u32, u32)>,
        stack: Vec<u32>,
    }
    let mut words = Vec::new();
    let mut threads: Vec<Vec<Ctx>> = (0..3)
        .map(|_| {
            vec![Ctx {
                task: None,
                stack: Vec::new(),
            }]
        })
        .collect();
    let mut cur = 0usize;
    let mut suspended: Vec<(u32, u32, u32)> = Vec::new();
    let mut next_task = 0u32;
    for &a in actions {
        let id = u32::from(a >> 4) % 6;
        let ctxs = &mut threads[cur];
        let ctx = ctxs
            .last_mut()
            .expect("a thread always has its own context");
        let top = ctx.stack.last().copied().unwrap_or(0);
        match a % 11 {
            0..=2 => {
                words.push(call(top, id));
                words.push(if a & 0x80 != 0 {
                    Event::timed_return(m(id), u64::from(a)).word()
                } else {
                    ret(id)
                });
            }
            3 | 4 => {
                words.push(call(top, id));
                ctx.stack.push(id);
            }
            5 => match (ctx.task, ctx.stack.len()) {
                (Some((f, t, poll)), 1) => {
                    // The future returns; the root runs a leaf before the poll ends.
                    words.push(ret(f));
                    words.push(call(0, id));
                    words.push(ret(id));
                    words.push(Event::poll_end(t, poll, true).word());
                    ctxs.pop();
                }
                (_, 0) => {}
                _ => words.push(ret(ctx.stack.pop().expect("non-empty"))),
            },
            6 | 7 => {
                let t = next_task;
                next_task += 1;
                words.push(call(top, id));
                words.push(Event::poll(m(id), t, true).word());
                ctxs.push(Ctx {
                    task: Some((id, t, 0)),
                    stack: vec![id],
                });
            }
            8 => {
                if let Some((f, t, poll)) = ctx.task {
                    while ctx.stack.len() > 1 {
                        words.push(ret(ctx.stack.pop().expect("non-empty")));
                    }
                    words.push(Event::poll_end(t, poll, false).word());
                    suspended.push((f, t, poll + 1));
                    ctxs.pop();
                }
            }
            9 => {
                if !suspended.is_empty() {
                    let (f, t, poll) = suspended.swap_remove(usize::from(a >> 4) % suspended.len());
                    words.push(Event::poll(m(f), t, false).word());
                    ctxs.push(Ctx {
                        task: Some((f, t, poll)),
                        stack: vec![f],
                    });
                }
            }
            _ => {
                cur = usize::from(a >> 4) % 3;
                words.push(thread(cur as u64));
            }
        }
    }
    words
}

/// Whole runs from [`async_run`], and the same runs with words lost (as sampling loses them),
/// which resynchronise inside polls, end polls whose `Poll` was lost and so on.
fn async_words() -> impl Strategy<Value = Vec<u64>> {
    (
        prop::collection::vec(any::<u8>(), 0..300),
        prop::collection::vec(any::<usize>(), 0..4),
    )
        .prop_map(|(actions, lost)| {
            let mut words = async_run(&actions);
            for l in lost {
                if !words.is_empty() {
                    words.remove(l % words.len());
                }
            }
            words
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// As `leaf_pairs_whole_or_word_by_word`, on well-formed async runs: leaves inside polls
    /// (under the future's own frame and under calls it made), after the future returned,
    /// across first and later polls of futures recorded whole, with and without lost words.
    #[test]
    fn leaf_pairs_in_async_runs_whole_or_word_by_word(words in async_words()) {
        call_trees_same_word_by_word(&words)?;
    }
}
