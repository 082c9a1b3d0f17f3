//! Whether the time analysis' figures are the program's: the same functions built plain and
//! instrumented (`cabprof_checks::fidelity`), each function's plain cost measured with plain
//! loops, against what a session timing the instrumented build reports, raw and compensated
//! (its calibrated costs taken out; see the README's *Time*).
//!
//! Each round measures the plain costs, profiles `run(N)` timing every call and timing one
//! call in 16 (in an order that alternates between rounds), and measures the plain costs
//! again; the reference is the two plain measurements' mean. A user profiles once, so every
//! round is printed and every target is judged on the worst one: per function the plain
//! figure (median over rounds), and the compensated error against plain in each round. `run`'s
//! row is the whole run's inclusive time, `spin`'s its whole self time (one call), the others
//! self time per call.
//!
//! Targets (each in every round): the whole run within 10 % of plain; self time within 20 %
//! for functions of 100 ns or more and for `kernel` (pure register arithmetic, about 50-70 ns:
//! its body must stay between its stamps), which is never marked below resolution; `spin`'s
//! self time within its plain loop's plus 10 % of its whole; a function below the calibration's
//! resolution within 3 ns or marked; the self-time ranking the plain program's for functions
//! 2x apart.
//!
//! `cargo bench -p cabprof-checks --bench time_fidelity` (`TIME_FIDELITY_ROUNDS`: 3 to 100,
//! default 7).

use cabprof_bench_support::stats::{median, min_max};
use cabprof_checks::fidelity::{plain_costs, profiled_costs, Costs, FUNCTIONS, KERNEL, SPIN};

/// `mid` calls per profiled run.
const N: u64 = 60_000;

/// One function's figures over the rounds.
#[derive(Default)]
struct Series {
    plain: Vec<f64>,
    raw: Vec<f64>,
    comp: Vec<f64>,
    /// Its inclusive time (compensated) per round: `spin`'s bound is relative to it.
    whole: Vec<f64>,
    marked: Vec<bool>,
}

/// The mean of two plain measurements, figure by figure.
fn mean_costs(a: &Costs, b: &Costs) -> Costs {
    let mut c = *a;
    for k in 0..c.self_ns.len() {
        c.self_ns[k] = (a.self_ns[k] + b.self_ns[k]) / 2.0;
        c.mean_ns[k] = (a.mean_ns[k] + b.mean_ns[k]) / 2.0;
    }
    c
}

fn error(x: f64, plain: f64) -> f64 {
    (x - plain) / plain * 100.0
}

/// The figure compared: the whole run's inclusive time for `run`, else self time per call.
fn figure(c: &Costs, k: usize) -> f64 {
    if k == 0 {
        c.mean_ns[0]
    } else {
        c.self_ns[k]
    }
}

/// Functions called many times (self time per call is their figure): `mid`, `leaf`, `tiny`,
/// `kernel`.
const PER_CALL: [usize; 4] = [1, 2, 3, KERNEL];

fn main() {
    let rounds = cabprof_bench_support::rounds::rounds("TIME_FIDELITY_ROUNDS", 3, 100, 7);
    let modes = [("every call timed", 1u32), ("one call in 16 timed", 16)];
    let mut series: Vec<Vec<Series>> = modes
        .iter()
        .map(|_| FUNCTIONS.iter().map(|_| Series::default()).collect())
        .collect();
    let mut calibrations = Vec::new();
    let mut rankings: Vec<Vec<bool>> = vec![Vec::new(); modes.len()];
    let mut plain_drift = Vec::new();
    // A timed and an untimed call's cost as each session took them out: its probes' median
    // during the session, else the start's.
    let mut session_timed: Vec<Vec<(f64, f64)>> = vec![Vec::new(); modes.len()];
    // The whole run's stated error (± in % of its figure) and whether plain fell inside it.
    let mut stated: Vec<Vec<(f64, bool)>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        // Plain before and after the profiled runs (the modes' order alternating between
        // rounds): the reference is their mean, which a steady drift of the host's speed over
        // the round does not bias, and their difference is the plain program's own change
        // within the round, the noise floor any error of the round is read against.
        let before = plain_costs(N);
        let mut profiled = Vec::new();
        let order: Vec<usize> = if round % 2 == 0 {
            vec![0, 1]
        } else {
            vec![1, 0]
        };
        let mut by_mode = vec![None; modes.len()];
        for &m in &order {
            let (raw, comp, data) = profiled_costs(N, modes[m].1);
            if let Some(c) = data.time.and_then(|t| t.compensation) {
                session_timed[m].push(c.during.as_ref().map_or((c.timed_ns, c.untimed_ns), |d| {
                    (d.timed_ns.median, d.untimed_ns.median)
                }));
                calibrations.push(c);
            }
            by_mode[m] = Some((raw, comp));
        }
        profiled.extend(by_mode.into_iter().flatten());
        let after = plain_costs(N);
        plain_drift.push(error(after.mean_ns[0], before.mean_ns[0]));
        let plain = &mean_costs(&before, &after);
        for (m, (_, comp)) in profiled.iter().enumerate() {
            let (whole, plain_whole) = (comp.mean_ns[0], plain.mean_ns[0]);
            stated[m].push((
                comp.whole_error_ns / whole * 100.0,
                (whole - plain_whole).abs() <= comp.whole_error_ns,
            ));
        }
        for (m, (raw, comp)) in profiled.iter().enumerate() {
            for (k, s) in series[m].iter_mut().enumerate() {
                s.plain.push(figure(plain, k));
                s.raw.push(figure(raw, k));
                s.comp.push(figure(comp, k));
                s.whole.push(comp.mean_ns[k]);
                s.marked.push(comp.below_resolution[k]);
            }
            // The ranking of self times, for functions 2x apart in plain.
            let ok = PER_CALL.iter().all(|&a| {
                PER_CALL.iter().all(|&b| {
                    plain.self_ns[a] < 2.0 * plain.self_ns[b]
                        || comp.self_ns[a] > comp.self_ns[b]
                        || comp.below_resolution[a]
                        || comp.below_resolution[b]
                })
            });
            rankings[m].push(ok);
        }
    }

    println!(
        "time_fidelity on {}: run({N}) of the program in cabprof_checks::fidelity, {rounds} rounds \
         alternated; ns; compensated error in % of plain, every round",
        cabprof_bench_support::host::cpu_model()
    );
    if !calibrations.is_empty() {
        let col = |f: fn(&cabprof::report::CompensationEntry) -> Option<f64>| {
            let v: Vec<f64> = calibrations.iter().filter_map(f).collect();
            if v.is_empty() {
                return "-".to_string();
            }
            let (lo, hi) = min_max(&v);
            format!("{:.1} [{lo:.1}, {hi:.1}]", median(&v))
        };
        println!(
            "calibration at start (ns, median [min, max] over sessions): inside {}, timed {}, untimed {}, resolution {}",
            col(|c| Some(c.inside_ns)),
            col(|c| Some(c.timed_ns)),
            col(|c| Some(c.untimed_ns)),
            col(|c| Some(c.resolution_ns)),
        );
        println!(
            "probes during the sessions (medians of each session's): timed {}, inside {}; probes per session {}",
            col(|c| c.during.as_ref().map(|d| d.timed_ns.median)),
            col(|c| c.during.as_ref().map(|d| d.inside_ns.median)),
            col(|c| c.during.as_ref().map(|d| d.probes as f64)),
        );
    }
    let drift: Vec<String> = plain_drift.iter().map(|d| format!("{d:+.0}")).collect();
    println!(
        "the plain run's own change within each round (after vs before, %): [{}]",
        drift.join(" ")
    );
    let mut verdicts = Vec::new();
    for (m, (mode, _)) in modes.iter().enumerate() {
        println!("\n{mode}:");
        for (what, pick) in [
            ("a timed", (|t: &(f64, f64)| t.0) as fn(&(f64, f64)) -> f64),
            ("an untimed", |t| t.1),
        ] {
            let cal: Vec<String> = session_timed[m]
                .iter()
                .map(|t| format!("{:.1}", pick(t)))
                .collect();
            println!(
                "  {what} call's cost as each round's session measured it (ns): [{}]",
                cal.join(" ")
            );
        }
        let errors: Vec<String> = stated[m]
            .iter()
            .map(|(e, inside)| format!("{e:.0}{}", if *inside { "" } else { "!" }))
            .collect();
        println!(
            "  the whole run's stated error (±, % of its figure; ! where plain fell outside): [{}], plain inside in {}/{} rounds",
            errors.join(" "),
            stated[m].iter().filter(|s| s.1).count(),
            stated[m].len()
        );
        println!(
            "  {:<22} {:>10} {:>10}  compensated error % per round (raw error % of the worst)",
            "function", "plain", "comp"
        );
        for (k, name) in FUNCTIONS.iter().enumerate() {
            let s = &series[m][k];
            let comp_err: Vec<f64> = s
                .comp
                .iter()
                .zip(&s.plain)
                .map(|(x, p)| error(*x, *p))
                .collect();
            let worst = (0..rounds)
                .max_by(|&a, &b| comp_err[a].abs().total_cmp(&comp_err[b].abs()))
                .unwrap_or(0);
            let label = match k {
                0 => "run (whole, inclusive)".to_string(),
                SPIN => "spin (self, whole)".to_string(),
                _ => format!("{name} (self/call)"),
            };
            let per_round: Vec<String> = comp_err
                .iter()
                .zip(&s.marked)
                .map(|(e, &marked)| {
                    if marked {
                        format!("{e:+.0}<")
                    } else {
                        format!("{e:+.0}")
                    }
                })
                .collect();
            println!(
                "  {:<22} {:>10.1} {:>10.1}  [{}] ({:+.0})",
                label,
                median(&s.plain),
                median(&s.comp),
                per_round.join(" "),
                error(s.raw[worst], s.plain[worst]),
            );
            let plain = median(&s.plain);
            let all = |ok: &dyn Fn(usize) -> bool| (0..rounds).filter(|&r| ok(r)).count();
            let target: Option<(&str, usize)> = if k == 0 {
                Some(("whole run within 10 %", all(&|r| comp_err[r].abs() <= 10.0)))
            } else if k == SPIN {
                // Its own time is a loop's few cycles: within that plus a tenth of its whole.
                Some((
                    "self time within its plain loop's + 10 % of its whole",
                    all(&|r| s.marked[r] || s.comp[r] <= s.plain[r].max(0.0) + 0.1 * s.whole[r]),
                ))
            } else if k == KERNEL {
                Some((
                    "self time within 20 %, never below resolution",
                    all(&|r| comp_err[r].abs() <= 20.0 && !s.marked[r]),
                ))
            } else if plain >= 100.0 {
                Some(("self time within 20 %", all(&|r| comp_err[r].abs() <= 20.0)))
            } else if plain < 20.0 {
                Some((
                    "below resolution: within 3 ns or marked",
                    all(&|r| (s.comp[r] - s.plain[r]).abs() <= 3.0 || s.marked[r]),
                ))
            } else {
                None
            };
            if let Some((what, met)) = target {
                verdicts.push(format!(
                    "{mode}, {name}: {what}: {} ({met}/{rounds} rounds)",
                    if met == rounds { "met" } else { "missed" }
                ));
            }
        }
        let kept = rankings[m].iter().filter(|&&ok| ok).count();
        verdicts.push(format!(
            "{mode}: self-time ranking of functions 2x apart kept in {kept}/{rounds} rounds"
        ));
    }
    println!();
    for v in verdicts {
        println!("{v}");
    }
}
