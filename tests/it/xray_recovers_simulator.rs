//! The X-Ray probe of `cabprof_cab::hw` run against the analyses' cache simulator, with a latency
//! model on top (L1 hit 4, L2 hit 14, memory 60): it must recover the simulated L1's size,
//! associativity and line size — the two halves of the project checking each other.

use cabprof_analyses::{CacheSim, LevelConfig, Policy};
use cabprof_cab::hw::{probe_l1d, ProbeTarget};

struct Simulated {
    sim: CacheSim,
}

impl ProbeTarget for Simulated {
    fn chase(&mut self, addresses: &[usize], rounds: usize) -> f64 {
        // One untimed warm-up round, as the ProbeTarget contract asks.
        for &a in addresses {
            self.sim.access(0x4000_0000 + a as u64, 8, false);
        }
        let mut cost = 0u64;
        let mut n = 0u64;
        for _ in 0..rounds {
            for &a in addresses {
                let before: Vec<u64> = (0..2).map(|l| self.sim.stats(l).misses()).collect();
                self.sim.access(0x4000_0000 + a as u64, 8, false);
                let l1_miss = self.sim.stats(0).misses() > before[0];
                let l2_miss = self.sim.stats(1).misses() > before[1];
                cost += match (l1_miss, l2_miss) {
                    (false, _) => 4,
                    (true, false) => 14,
                    (true, true) => 60,
                };
                n += 1;
            }
        }
        cost as f64 / n.max(1) as f64
    }
}

fn recover(l1: LevelConfig) {
    let l2 = LevelConfig::new(1 << 20, 16, l1.line_bytes, Policy::Lru);
    let mut target = Simulated {
        sim: CacheSim::new(&[l1, l2]).unwrap(),
    };
    let g = probe_l1d(&mut target).unwrap_or_else(|e| panic!("{l1:?}: {e}"));
    assert_eq!(
        (g.size_bytes as u64, g.ways as u32, g.line_bytes as u32),
        (l1.size_bytes, l1.ways, l1.line_bytes),
        "probe of {l1:?}"
    );
}

#[test]
fn xray_recovers_the_paper_l1_from_the_simulator() {
    recover(LevelConfig::new(32 << 10, 4, 64, Policy::Lru));
}

#[test]
fn xray_recovers_odd_geometries_from_the_simulator() {
    recover(LevelConfig::new(48 << 10, 12, 64, Policy::Lru));
    recover(LevelConfig::new(6 << 10, 3, 32, Policy::Lru));
}
