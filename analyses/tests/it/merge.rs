//! Merging per-instance results equals analysing the independent streams in one instance.

use crate::common::*;
use cabprof_analyses::{
    CacheSim, CallGraph, CallTreeProfile, CallingContextTree, EventAnalysis, MethodCount,
    PathProfile, ReuseDistance,
};
use cabprof_cab::event::MethodId;
use proptest::prelude::*;

fn run<A: EventAnalysis + Default>(words: &[u64]) -> A {
    let mut a = A::default();
    a.consume(words);
    a
}

fn merged<A: EventAnalysis + Default>(streams: &[Vec<u64>]) -> A {
    let mut all = A::default();
    for s in streams {
        all.merge(run::<A>(s));
    }
    all
}

/// The streams cut into pieces and interleaved on one ring, each piece announced by its
/// thread's `Thread` word (how a multiplexed ring carries several threads).
fn multiplexed(streams: &[Vec<u64>], piece: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut pos = vec![0; streams.len()];
    while pos.iter().zip(streams).any(|(&p, s)| p < s.len()) {
        for (t, s) in streams.iter().enumerate() {
            let end = (pos[t] + piece).min(s.len());
            if pos[t] < end {
                out.push(thread(t as u64));
                out.extend_from_slice(&s[pos[t]..end]);
                pos[t] = end;
            }
        }
    }
    out
}

fn streams() -> impl Strategy<Value = Vec<Vec<u64>>> {
    prop::collection::vec(
        prop::collection::vec(any::<u8>(), 0..300).prop_map(|a| balanced_trace(&a, 6)),
        1..5,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn merged_profiles_equal_one_instance(streams in streams(), piece in 1usize..40) {
        let concatenated: Vec<u64> = streams.concat();
        let interleaved = multiplexed(&streams, piece);

        let one = run::<MethodCount>(&concatenated);
        prop_assert_eq!(&merged::<MethodCount>(&streams), &one);
        prop_assert_eq!(&run::<MethodCount>(&interleaved), &one);

        let one = run::<CallGraph>(&concatenated);
        prop_assert_eq!(&merged::<CallGraph>(&streams), &one);

        let one = run::<PathProfile>(&concatenated);
        prop_assert_eq!(&merged::<PathProfile>(&streams), &one);

        let one = run::<CallTreeProfile>(&concatenated);
        prop_assert_eq!(merged::<CallTreeProfile>(&streams).sorted(), one.sorted());
        let mux = run::<CallTreeProfile>(&interleaved);
        prop_assert_eq!(mux.sorted(), one.sorted());
        prop_assert!(!mux.is_approximate());

        let one = run::<CallingContextTree>(&concatenated);
        let m = merged::<CallingContextTree>(&streams);
        prop_assert_eq!(m.contexts(), one.contexts());
        let name = |id: MethodId| format!("m{id}");
        prop_assert_eq!(m.folded(&name), one.folded(&name));
        let mux = run::<CallingContextTree>(&interleaved);
        prop_assert_eq!(mux.contexts(), one.contexts());
        prop_assert!(!mux.is_approximate());
    }

    /// Caches and reuse stacks are per instance, so merging adds counts.
    #[test]
    fn merged_simulations_add_counts(streams in streams()) {
        let parts: Vec<CacheSim> = streams.iter().map(|s| run::<CacheSim>(s)).collect();
        let all = merged::<CacheSim>(&streams);
        for level in 0..2 {
            let s = all.stats(level);
            let sum = |f: fn(&cabprof_analyses::LevelStats) -> u64| {
                parts.iter().map(|p| f(&p.stats(level))).sum::<u64>()
            };
            prop_assert_eq!(s.load_hits, sum(|s| s.load_hits));
            prop_assert_eq!(s.load_misses, sum(|s| s.load_misses));
            prop_assert_eq!(s.store_hits, sum(|s| s.store_hits));
            prop_assert_eq!(s.store_misses, sum(|s| s.store_misses));
            for id in 0..=6 {
                let got = all.method_misses(m(id), level);
                let loads: u64 = parts.iter().map(|p| p.method_misses(m(id), level).loads).sum();
                let stores: u64 = parts.iter().map(|p| p.method_misses(m(id), level).stores).sum();
                prop_assert_eq!((got.loads, got.stores), (loads, stores));
            }
        }

        let parts: Vec<ReuseDistance> = streams.iter().map(|s| run::<ReuseDistance>(s)).collect();
        let all = merged::<ReuseDistance>(&streams);
        prop_assert_eq!(all.cold(), parts.iter().map(|p| p.cold()).sum::<u64>());
        prop_assert_eq!(all.accesses(), parts.iter().map(|p| p.accesses()).sum::<u64>());
        for c in [0u64, 1, 2, 5, 10, 50] {
            prop_assert_eq!(
                all.misses_for_capacity(c),
                parts.iter().map(|p| p.misses_for_capacity(c)).sum::<u64>()
            );
        }
    }
}

#[test]
#[should_panic(expected = "different hierarchies")]
fn merging_different_caches_is_refused() {
    let mut a = CacheSim::default();
    let b = CacheSim::new(&[cabprof_analyses::LevelConfig::PAPER_L1]).unwrap();
    a.merge(b);
}
