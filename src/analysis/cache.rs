//! `cache`: set-associative cache simulation of `Mem` events ([`cabprof_analyses::CacheSim`]), with
//! misses attributed to the function that made the access.

use super::{AnalysisDescriptor, AnalysisPlan, MethodIds};
use crate::model::{CacheData, LevelEntry, MethodMissEntry, ReportData};
use cabprof_analyses::{CacheSim, Policy};
use cabprof_cab::ConfigError;
use std::fmt::Write as _;

/// The cache-simulation analysis.
pub(crate) struct Descriptor;

/// What the cache sections say when no access was recorded.
pub(crate) const NO_ACCESSES: &str = "no memory accesses recorded (only functions marked \
    `#[profile(memory)]` and `cabprof::mem` events have them)";

impl AnalysisDescriptor for Descriptor {
    type State = CacheSim;
    const NAMES: &'static [&'static str] = &["cache"];
    const ON_BY_DEFAULT: bool = false;

    fn validate(plan: &AnalysisPlan) -> Result<(), ConfigError> {
        CacheSim::new(&plan.cache_levels)
            .map(drop)
            .map_err(|e| ConfigError::new("cache levels", format!("{e:?}"), e.to_string()))
    }

    fn build(plan: &AnalysisPlan) -> CacheSim {
        CacheSim::new(&plan.cache_levels).expect("cache levels validated by the plan")
    }

    fn report(c: &CacheSim, data: &mut ReportData, methods: &mut MethodIds) {
        let levels: Vec<_> = c
            .config()
            .iter()
            .enumerate()
            .map(|(i, cfg)| {
                let s = c.stats(i);
                LevelEntry {
                    size_bytes: cfg.size_bytes,
                    ways: cfg.ways,
                    line_bytes: cfg.line_bytes,
                    policy: match cfg.policy {
                        Policy::Fifo => "fifo".into(),
                        Policy::Lru => "lru".into(),
                    },
                    load_hits: s.load_hits,
                    load_misses: s.load_misses,
                    store_hits: s.store_hits,
                    store_misses: s.store_misses,
                }
            })
            .collect();
        let mut by_method = Vec::new();
        for level in 0..levels.len() {
            for (m, mc) in c.misses_by_method(level) {
                by_method.push(MethodMissEntry {
                    method: m.get(),
                    level: level as u32,
                    load_misses: mc.loads,
                    store_misses: mc.stores,
                });
            }
        }
        methods.extend(by_method.iter().map(|e| e.method));
        data.cache = Some(CacheData { levels, by_method });
    }

    fn text(data: &ReportData, top: usize, o: &mut String) {
        let Some(c) = &data.cache else {
            return;
        };
        if c.levels.iter().all(|l| l.accesses() == 0) {
            let _ = writeln!(o, "\ncache simulation: {NO_ACCESSES}");
            return;
        }
        let _ = writeln!(o, "\ncache simulation:");
        for (i, l) in c.levels.iter().enumerate() {
            let _ = writeln!(
                o,
                "  L{} {} {}-way {} B {}: {} accesses, miss rate {:.2}% (loads {}/{} miss, stores {}/{} miss)",
                i + 1,
                cabprof_cab::show_bytes(l.size_bytes),
                l.ways,
                l.line_bytes,
                l.policy,
                l.accesses(),
                100.0 * l.miss_rate(),
                l.load_misses,
                l.load_hits as u128 + l.load_misses as u128,
                l.store_misses,
                l.store_hits as u128 + l.store_misses as u128
            );
        }
        let mut l1: Vec<_> = c.by_method.iter().filter(|e| e.level == 0).collect();
        l1.sort_by_key(|e| std::cmp::Reverse(e.load_misses as u128 + e.store_misses as u128));
        if !l1.is_empty() {
            let _ = writeln!(o, "  L1 misses by function:");
            for e in l1.iter().take(top) {
                let _ = writeln!(
                    o,
                    "  {:>14}  {} (loads {}, stores {})",
                    e.load_misses as u128 + e.store_misses as u128,
                    data.name(e.method),
                    e.load_misses,
                    e.store_misses
                );
            }
        }
    }
}
