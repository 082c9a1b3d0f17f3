//! The page's figure tables (Figures 7, 8, 10 and 11, perturbation, the cost model, pinning
//! and the workloads), each generated from its CSV file.

use super::csv_file::{Csv, Rec};
use super::format::{buffer_label, fixed, ms, pct, rate_label};
use super::{Res, Table};
use cabprof_bench_support::stats::mean;
use std::path::Path;

/// Figure 7: CAB, FastForward and N-way times and ratios per workload and stream.
pub(crate) fn fig7(dir: &Path) -> Res<Table> {
    let csv = Csv::read(dir, "fig7.csv")?;
    csv.require(&["workload", "analysis", "design", "median_s", "ratio_to_cab"])?;
    let mut t = Table::new([
        "workload",
        "stream",
        "CAB (ms)",
        "FastForward (ms)",
        "N-way (ms)",
        "FF / CAB",
        "N-way / CAB",
    ]);
    for (w, a) in csv.pairs("workload", "analysis")? {
        let key = |d: &'static str| {
            [
                ("workload", w.as_str()),
                ("analysis", a.as_str()),
                ("design", d),
            ]
        };
        let cab = csv.get(&key("cab"))?;
        let ff = csv.get(&key("fastforward"))?;
        let nw = csv.get(&key("nway"))?;
        t.push(vec![
            w.clone(),
            a.clone(),
            ms(cab.num("median_s")?),
            ms(ff.num("median_s")?),
            ms(nw.num("median_s")?),
            fixed(ff.num("ratio_to_cab")?, 3),
            fixed(nw.num("ratio_to_cab")?, 3),
        ]);
    }
    Ok(t)
}

const FIG8_BARS: [&str; 5] = [
    "instrument",
    "enqueue",
    "communication",
    "concurrent",
    "sequential",
];

fn read_fig8(dir: &Path) -> Res<Csv> {
    let csv = Csv::read(dir, "fig8.csv")?;
    csv.require(&[
        "workload",
        "analysis",
        "bar",
        "median_s",
        "overhead_vs_A",
        "A_s",
    ])?;
    Ok(csv)
}

/// Figure 8: the suite's mean overhead per analysis and bar.
pub(crate) fn fig8_means(dir: &Path) -> Res<Table> {
    let csv = read_fig8(dir)?;
    let mut header = vec!["analysis".to_string(), "workloads".to_string()];
    header.extend(FIG8_BARS.iter().map(|b| format!("mean {b}")));
    let mut t = Table::new(header);
    let cells = csv.pairs("workload", "analysis")?;
    for a in csv.distinct("analysis")? {
        let ws: Vec<&str> = cells
            .iter()
            .filter(|(_, x)| *x == a)
            .map(|(w, _)| w.as_str())
            .collect();
        let mut row = vec![a.clone(), ws.len().to_string()];
        for b in FIG8_BARS {
            let mut v = Vec::new();
            for w in &ws {
                v.push(
                    csv.get(&[("workload", w), ("analysis", &a), ("bar", b)])?
                        .num("overhead_vs_A")?,
                );
            }
            row.push(pct(mean(&v)));
        }
        t.push(row);
    }
    Ok(t)
}

/// Figure 8: per workload and analysis, each bar's overhead and concurrent/sequential time.
pub(crate) fn fig8(dir: &Path) -> Res<Table> {
    let csv = read_fig8(dir)?;
    let mut header = vec!["workload", "analysis", "A (ms)"];
    header.extend(FIG8_BARS);
    header.push("conc / seq time");
    let mut t = Table::new(header);
    for (w, a) in csv.pairs("workload", "analysis")? {
        let bar = |b: &str| csv.get(&[("workload", &w), ("analysis", &a), ("bar", b)]);
        let first = bar(FIG8_BARS[0])?;
        let mut row = vec![w.clone(), a.clone(), ms(first.num("A_s")?)];
        for b in FIG8_BARS {
            row.push(pct(bar(b)?.num("overhead_vs_A")?));
        }
        let conc = bar("concurrent")?.num("median_s")?;
        let seq = bar("sequential")?.num("median_s")?;
        row.push(fixed(conc / seq, 2));
        t.push(row);
    }
    Ok(t)
}

/// A table with one row per buffer size and one column per workload (Figure 10 and the
/// perturbation study), `cell` formatting one CSV row.
fn by_buffer(
    csv: &Csv,
    header: impl Fn(&str, Rec) -> Res<String>,
    cell: impl Fn(Rec) -> Res<String>,
) -> Res<Table> {
    let workloads = csv.distinct("workload")?;
    let mut buffers: Vec<f64> = Vec::new();
    for r in csv.recs() {
        let b = r.num("buffer_bytes")?;
        if !buffers.contains(&b) {
            buffers.push(b);
        }
    }
    buffers.sort_by(f64::total_cmp);
    let mut head = vec!["buffer".to_string()];
    for w in &workloads {
        head.push(header(w, csv.get(&[("workload", w)])?)?);
    }
    let mut t = Table::new(head);
    for b in buffers {
        let mut row = vec![buffer_label(b)];
        for w in &workloads {
            let r = csv.recs().find(|r| {
                r.str("workload").ok() == Some(w.as_str()) && r.num("buffer_bytes").ok() == Some(b)
            });
            row.push(match r {
                Some(r) => cell(r)?,
                None => "–".to_string(),
            });
        }
        t.push(row);
    }
    Ok(t)
}

/// Figure 10: median time and producer blocks per buffer size and workload.
pub(crate) fn fig10(dir: &Path) -> Res<Table> {
    let csv = Csv::read(dir, "fig10.csv")?;
    csv.require(&[
        "workload",
        "buffer_bytes",
        "median_s",
        "producer_blocks",
        "analysis",
    ])?;
    by_buffer(
        &csv,
        |w, r| Ok(format!("{w} ({})", r.str("analysis")?)),
        |r| {
            Ok(format!(
                "{} ms / {}",
                ms(r.num("median_s")?),
                r.str("producer_blocks")?
            ))
        },
    )
}

/// Perturbation: blocks per second, slowdown against the largest buffer, identical results.
pub(crate) fn perturbation(dir: &Path) -> Res<Table> {
    let csv = Csv::read(dir, "perturbation.csv")?;
    csv.require(&[
        "workload",
        "buffer_bytes",
        "blocks_per_s",
        "slowdown_vs_largest",
        "results_identical",
    ])?;
    by_buffer(
        &csv,
        |w, _| Ok(w.to_string()),
        |r| {
            let same = match r.str("results_identical")? {
                "true" => "same",
                "false" => "**differ**",
                other => {
                    return Err(format!(
                        "{} line {}: column `results_identical`: `{other}` is not true/false",
                        r.csv.name, r.line
                    ))
                }
            };
            Ok(format!(
                "{}/s, ×{}, {same}",
                fixed(r.num("blocks_per_s")?, 0),
                fixed(r.num("slowdown_vs_largest")?, 2)
            ))
        },
    )
}

fn read_fig11(dir: &Path) -> Res<(Csv, Vec<f64>)> {
    let csv = Csv::read(dir, "fig11.csv")?;
    csv.require(&[
        "workload",
        "analysis",
        "rate",
        "overhead_vs_A",
        "error_rate",
        "exhaustive_overhead_vs_A",
        "events_lapped",
        "weighted_error",
    ])?;
    let mut rates: Vec<f64> = Vec::new();
    for r in csv.recs() {
        let x = r.num("rate")?;
        if !rates.contains(&x) {
            rates.push(x);
        }
    }
    rates.sort_by(f64::total_cmp);
    Ok((csv, rates))
}

/// The fig11.csv row of `(w, a)` at `rate`, if measured.
fn at_rate<'a>(csv: &'a Csv, w: &str, a: &str, rate: f64) -> Res<Option<Rec<'a>>> {
    for r in csv.recs() {
        if r.str("workload")? == w && r.str("analysis")? == a && r.num("rate")? == rate {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

/// Figure 11: overhead of the exhaustive run and at each sampling rate.
pub(crate) fn fig11_overhead(dir: &Path) -> Res<Table> {
    let (csv, rates) = read_fig11(dir)?;
    let mut header = vec![
        "workload".to_string(),
        "analysis".into(),
        "exhaustive".into(),
    ];
    header.extend(rates.iter().map(|&r| rate_label(r)));
    let mut t = Table::new(header);
    for (w, a) in csv.pairs("workload", "analysis")? {
        let first = csv.get(&[("workload", &w), ("analysis", &a)])?;
        let mut row = vec![
            w.clone(),
            a.clone(),
            pct(first.num("exhaustive_overhead_vs_A")?),
        ];
        for &rate in &rates {
            row.push(match at_rate(&csv, &w, &a, rate)? {
                Some(r) => pct(r.num("overhead_vs_A")?),
                None => "–".into(),
            });
        }
        t.push(row);
    }
    Ok(t)
}

/// Figure 11: the paper's error rate (count-weighted in parentheses) at each rate above 0,
/// and the events lapped at 5 %.
pub(crate) fn fig11_error(dir: &Path) -> Res<Table> {
    let (csv, rates) = read_fig11(dir)?;
    let rates: Vec<f64> = rates.into_iter().filter(|&r| r > 0.0).collect();
    let mut header = vec!["workload".to_string(), "analysis".into()];
    header.extend(rates.iter().map(|&r| rate_label(r)));
    header.push("lapped at 5%".into());
    let mut t = Table::new(header);
    for (w, a) in csv.pairs("workload", "analysis")? {
        let mut row = vec![w.clone(), a.clone()];
        for &rate in &rates {
            let cell = match at_rate(&csv, &w, &a, rate)? {
                Some(r) => {
                    let e = r.opt_num("error_rate")?.map_or("–".into(), pct);
                    match r.opt_num("weighted_error")? {
                        Some(x) => format!("{e} ({})", pct(x)),
                        None => e,
                    }
                }
                None => "–".into(),
            };
            row.push(cell);
        }
        row.push(match at_rate(&csv, &w, &a, 0.05)? {
            Some(r) => r.str("events_lapped")?.to_string(),
            None => "–".into(),
        });
        t.push(row);
    }
    Ok(t)
}

/// The cost model's terms, prediction and measurement per workload and analysis (ms).
pub(crate) fn costmodel(dir: &Path) -> Res<Table> {
    let csv = Csv::read(dir, "costmodel.csv")?;
    let terms = ["A", "A_i", "A_q", "P", "P_c", "E_s"];
    let mut cols = vec!["workload", "analysis"];
    cols.extend(terms);
    cols.extend([
        "measured",
        "predicted",
        "predicted_over_measured",
        "dominant",
        "I_ap",
        "P_extrapolated",
    ]);
    csv.require(&cols)?;
    let mut header = vec!["workload", "analysis"];
    header.extend(terms);
    header.extend([
        "E_c (measured)",
        "predicted",
        "pred/meas",
        "dominant",
        "I_ap",
    ]);
    let mut t = Table::new(header);
    for r in csv.recs() {
        let mut row = vec![
            r.str("workload")?.to_string(),
            r.str("analysis")?.to_string(),
        ];
        for term in terms {
            let mut v = ms(r.num(term)?);
            if term == "P" && r.str("P_extrapolated")? == "true" {
                v.push_str(" (extrapolated)");
            }
            row.push(v);
        }
        row.push(ms(r.num("measured")?));
        row.push(ms(r.num("predicted")?));
        row.push(fixed(r.num("predicted_over_measured")?, 2));
        row.push(r.str("dominant")?.to_string());
        row.push(ms(r.num("I_ap")?));
        t.push(row);
    }
    Ok(t)
}

/// Pinned against unpinned times and overheads.
pub(crate) fn pinning(dir: &Path) -> Res<Table> {
    let csv = Csv::read(dir, "pinning.csv")?;
    csv.require(&[
        "workload",
        "analysis",
        "pinned_s",
        "unpinned_s",
        "pinned_overhead_vs_A",
        "unpinned_overhead_vs_A",
    ])?;
    let mut t = Table::new([
        "workload",
        "analysis",
        "pinned (ms)",
        "unpinned (ms)",
        "pinned overhead",
        "unpinned overhead",
    ]);
    for r in csv.recs() {
        t.push(vec![
            r.str("workload")?.to_string(),
            r.str("analysis")?.to_string(),
            ms(r.num("pinned_s")?),
            ms(r.num("unpinned_s")?),
            pct(r.num("pinned_overhead_vs_A")?),
            pct(r.num("unpinned_overhead_vs_A")?),
        ]);
    }
    Ok(t)
}

/// The workloads: size, threads, `A`, events per variant, wall time of their cells.
pub(crate) fn workloads(dir: &Path) -> Res<Table> {
    let csv = Csv::read(dir, "workloads.csv")?;
    let events = [
        "events_calls_variant",
        "events_paths_variant",
        "events_memory_variant",
    ];
    let mut cols = vec!["workload", "size", "threads", "A_s", "wall_s"];
    cols.extend(events);
    csv.require(&cols)?;
    let mut t = Table::new([
        "workload",
        "size",
        "threads",
        "A (ms)",
        "events, calls variant",
        "events, paths variant",
        "events, memory variant",
        "cells wall (s)",
    ]);
    for r in csv.recs() {
        let mut row = vec![
            r.str("workload")?.to_string(),
            r.str("size")?.to_string(),
            r.str("threads")?.to_string(),
            ms(r.num("A_s")?),
        ];
        for e in events {
            // Checked as a number, shown as written.
            row.push(match r.opt_num(e)? {
                Some(_) => r.str(e)?.to_string(),
                None => "–".into(),
            });
        }
        row.push(fixed(r.num("wall_s")?, 1));
        t.push(row);
    }
    Ok(t)
}
