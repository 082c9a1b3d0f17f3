//! Whether the time analysis' figures are the program's: the same functions built plain and
//! instrumented (`cabprof_checks::fidelity`), each function's plain cost measured with plain
//! loops, against what a session timing the instrumented build reports, raw and compensated
//! (its calibrated probe cost taken out; see the README's *Time*).
//!
//! Each round measures the plain costs, then profiles `run(N)` timing every call, then timing
//! one call in 16, in an order that alternates between rounds. Per function the table gives
//! the plain figure and the raw and compensated ones (medians over rounds), and each one's
//! error against plain (median [min, max] over rounds). `run`'s row is the whole run's
//! inclusive time; the others are self time per call.
//!
//! Targets: the whole run within 10 % of plain; self time within 20 % for functions of 100 ns
//! or more; a function below the calibration's resolution within 3 ns or marked; the
//! self-time ranking the plain program's for functions 2x apart.
//!
//! `cargo bench -p cabprof-checks --bench time_fidelity` (`TIME_FIDELITY_ROUNDS`: 3 to 100,
//! default 7).

use cabprof_bench_support::stats::{median, min_max};
use cabprof_checks::fidelity::{plain_costs, profiled_costs, Costs, FUNCTIONS};

/// `mid` calls per profiled run.
const N: u64 = 20_000;

/// One function's figures over the rounds.
#[derive(Default)]
struct Series {
    plain: Vec<f64>,
    raw: Vec<f64>,
    comp: Vec<f64>,
    marked: usize,
}

fn error(x: f64, plain: f64) -> f64 {
    (x - plain) / plain * 100.0
}

fn spread(errors: &[f64]) -> String {
    let (lo, hi) = min_max(errors);
    format!("{:+.0} [{:+.0}, {:+.0}]", median(errors), lo, hi)
}

/// The figure compared: the whole run's inclusive time for `run`, else self time per call.
fn figure(c: &Costs, k: usize) -> f64 {
    if k == 0 {
        c.mean_ns[0]
    } else {
        c.self_ns[k]
    }
}

fn main() {
    let rounds = cabprof_bench_support::rounds::rounds("TIME_FIDELITY_ROUNDS", 3, 100, 7);
    let modes = [("every call timed", 1u32), ("one call in 16 timed", 16)];
    let mut series: Vec<Vec<Series>> = modes
        .iter()
        .map(|_| FUNCTIONS.iter().map(|_| Series::default()).collect())
        .collect();
    let mut calibrations = Vec::new();
    let mut rankings_kept = vec![0usize; modes.len()];
    for round in 0..rounds {
        // Alternate: plain first in even rounds, last in odd ones.
        let mut profiled = Vec::new();
        let plain_first = round % 2 == 0;
        let mut plain = if plain_first {
            Some(plain_costs(N))
        } else {
            None
        };
        for &(_, sample) in &modes {
            let (raw, comp, data) = profiled_costs(N, sample);
            if let Some(c) = data.time.and_then(|t| t.compensation) {
                calibrations.push(c);
            }
            profiled.push((raw, comp));
        }
        let plain = plain.get_or_insert_with(|| plain_costs(N));
        for (m, (raw, comp)) in profiled.iter().enumerate() {
            for (k, s) in series[m].iter_mut().enumerate() {
                s.plain.push(figure(plain, k));
                s.raw.push(figure(raw, k));
                s.comp.push(figure(comp, k));
                s.marked += usize::from(comp.below_resolution[k]);
            }
            // The ranking of self times, for functions (not the whole run) 2x apart in plain.
            let ok = (1..4).all(|a| {
                (1..4).all(|b| {
                    plain.self_ns[a] < 2.0 * plain.self_ns[b]
                        || comp.self_ns[a] > comp.self_ns[b]
                        || comp.below_resolution[a]
                        || comp.below_resolution[b]
                })
            });
            rankings_kept[m] += usize::from(ok);
        }
    }

    println!(
        "time_fidelity on {}: run({N}) of the program in cabprof_checks::fidelity, {rounds} rounds \
         alternated; ns, medians over rounds; errors in % of plain, median [min, max]",
        cabprof_bench_support::host::cpu_model()
    );
    if !calibrations.is_empty() {
        let col = |f: fn(&cabprof::report::CompensationEntry) -> f64| {
            let v: Vec<f64> = calibrations.iter().map(f).collect();
            let (lo, hi) = min_max(&v);
            format!("{:.1} [{lo:.1}, {hi:.1}]", median(&v))
        };
        println!(
            "calibration (ns, median [min, max] over sessions): inside {}, timed {}, untimed {}, resolution {}",
            col(|c| c.inside_ns),
            col(|c| c.timed_ns),
            col(|c| c.untimed_ns),
            col(|c| c.resolution_ns),
        );
    }
    let mut verdicts = Vec::new();
    for (m, (mode, _)) in modes.iter().enumerate() {
        println!("\n{mode}:");
        println!(
            "  {:<22} {:>11} {:>11} {:>12} {:>20} {:>20}",
            "function", "plain", "raw", "compensated", "raw error %", "compensated error %"
        );
        for (k, name) in FUNCTIONS.iter().enumerate() {
            let s = &series[m][k];
            let raw_err: Vec<f64> = s
                .raw
                .iter()
                .zip(&s.plain)
                .map(|(x, p)| error(*x, *p))
                .collect();
            let comp_err: Vec<f64> = s
                .comp
                .iter()
                .zip(&s.plain)
                .map(|(x, p)| error(*x, *p))
                .collect();
            let label = if k == 0 {
                "run (whole, inclusive)".to_string()
            } else {
                format!("{name} (self/call)")
            };
            let marked = if s.marked > 0 {
                format!("  below resolution in {}/{rounds}", s.marked)
            } else {
                String::new()
            };
            println!(
                "  {:<22} {:>11.1} {:>11.1} {:>12.1} {:>20} {:>20}{marked}",
                label,
                median(&s.plain),
                median(&s.raw),
                median(&s.comp),
                spread(&raw_err),
                spread(&comp_err),
            );
            let plain = median(&s.plain);
            let comp_err = median(&comp_err).abs();
            let target = if k == 0 {
                Some(("whole run within 10 %", comp_err <= 10.0))
            } else if plain >= 100.0 {
                Some(("self time within 20 %", comp_err <= 20.0))
            } else if plain < 20.0 {
                let off = (median(&s.comp) - plain).abs();
                Some((
                    "below resolution: within 3 ns or marked",
                    off <= 3.0 || s.marked == rounds,
                ))
            } else {
                None
            };
            if let Some((what, met)) = target {
                verdicts.push(format!(
                    "{mode}, {name}: {what}: {}",
                    if met { "met" } else { "missed" }
                ));
            }
        }
        verdicts.push(format!(
            "{mode}: self-time ranking of functions 2x apart kept in {}/{rounds} rounds",
            rankings_kept[m]
        ));
    }
    println!();
    for v in verdicts {
        println!("{v}");
    }
}
