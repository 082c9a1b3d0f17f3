//! The simulator against a slow, obviously correct model, on random geometries and traces.

use crate::common::*;
use cabprof_analyses::{CacheSim, EventAnalysis, LevelConfig, Policy};
use proptest::prelude::*;

const LINE: u64 = 32;

/// One level: each set a list of lines, oldest (FIFO: fill, LRU: use) first.
struct Model {
    ways: usize,
    lru: bool,
    sets: Vec<Vec<u64>>,
    /// load hit, store hit, load miss, store miss
    stats: [u64; 4],
}

impl Model {
    fn set(&mut self, line: u64) -> &mut Vec<u64> {
        let n = self.sets.len() as u64;
        &mut self.sets[(line % n) as usize]
    }
}

fn model_access(levels: &mut [Model], addr: u64, size: u32, store: bool) {
    let s = store as usize;
    for line in addr / LINE..=(addr + size as u64 - 1) / LINE {
        let mut hit_at = levels.len();
        for (k, l) in levels.iter_mut().enumerate() {
            let lru = l.lru;
            let set = l.set(line);
            if let Some(p) = set.iter().position(|&x| x == line) {
                if lru {
                    set.remove(p);
                    set.push(line);
                }
                l.stats[s] += 1;
                hit_at = k;
                break;
            }
            l.stats[2 + s] += 1;
        }
        for k in (0..hit_at).rev() {
            let ways = levels[k].ways;
            let set = levels[k].set(line);
            if set.len() == ways {
                let victim = set.remove(0);
                for inner in &mut levels[..k] {
                    inner.set(victim).retain(|&x| x != victim);
                }
            }
            levels[k].set(line).push(line);
        }
    }
}

fn level() -> impl Strategy<Value = LevelConfig> {
    (
        prop::sample::select(vec![1u64, 2, 3, 4, 5, 8]),
        prop::sample::select(vec![1u32, 2, 3, 4, 5, 8, 12, 16]),
        any::<bool>(),
    )
        .prop_map(|(sets, ways, lru)| {
            let policy = if lru { Policy::Lru } else { Policy::Fifo };
            LevelConfig::new(sets * ways as u64 * LINE, ways, LINE as u32, policy)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_the_reference_model(
        levels in prop::collection::vec(level(), 1..=3),
        trace in prop::collection::vec((0u64..LINE * 48, 0u32..8, any::<bool>()), 0..400),
    ) {
        let mut sim = CacheSim::new(&levels).unwrap();
        let mut model: Vec<Model> = levels
            .iter()
            .map(|c| Model {
                ways: c.ways as usize,
                lru: c.policy == Policy::Lru,
                sets: vec![Vec::new(); c.sets() as usize],
                stats: [0; 4],
            })
            .collect();
        let words: Vec<u64> = trace
            .iter()
            .map(|&(a, log, st)| if st { store(a, 1 << log) } else { load(a, 1 << log) })
            .collect();
        sim.consume(&words);
        for &(a, log, st) in &trace {
            model_access(&mut model, a, 1 << log, st);
        }
        for (k, l) in model.iter().enumerate() {
            let s = sim.stats(k);
            prop_assert_eq!(
                [s.load_hits, s.store_hits, s.load_misses, s.store_misses],
                l.stats,
                "level {}", k
            );
            for line in 0..60u64 {
                let n = l.sets.len() as u64;
                let expected = l.sets[(line % n) as usize].contains(&line);
                prop_assert_eq!(
                    sim.contains(k, line * LINE),
                    expected,
                    "line {} at level {}",
                    line,
                    k
                );
            }
        }
    }
}
