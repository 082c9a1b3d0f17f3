//! The time analysis' text: how the times were taken and compensated, the functions' table and
//! the calling contexts'.

use super::super::contexts::stack_rows;
use super::super::top_of;
use crate::model::{FunctionTimeEntry, ReportData, TimeData};
use std::fmt::Write as _;

/// Timed calls below which a sampled estimate's interval is not shown: the normal
/// approximation behind it needs a sample of some size. (A rare long call the sample missed
/// is not the interval's business: it is measured in full, see `private::ticker`.)
const MIN_TIMED_FOR_INTERVAL: u64 = 30;

/// The time section of the text report, its tables cut at `top` rows.
pub(super) fn render(data: &ReportData, t: &TimeData, top: usize, o: &mut String) {
    header(t, top, o);
    compensation(t, o);
    functions(data, t, top, o);
    futures(data, t, top, o);
    contexts(data, t, top, o);
}

/// The section's first line: how calls were timed and the clock calibrated.
fn header(t: &TimeData, top: usize, o: &mut String) {
    let how = if t.sample_period > 1 {
        let long = match t.tick_ns {
            Some(tick) => format!(
                ", long calls apart: those during which a {} clock ticked {} times are measured in full, timed or not ({} calls)",
                dur(tick),
                crate::__private::LONG_TICKS,
                t.functions.iter().filter_map(|f| f.long).sum::<u64>()
            ),
            None => String::new(),
        };
        format!(
            "sampled: one call in {} per function and thread timed, totals are estimates (~) ± the 95% interval shown (? under 30 timed calls), which assumes the untimed calls are like the timed ones, plus the calibration's error{long}",
            t.sample_period
        )
    } else {
        "every call timed".to_string()
    };
    let _ = writeln!(
        o,
        "\ntime ({how}; {:.4} ticks/ns, {}; async fns count time polled, not suspended) ({}):",
        t.ticks_per_ns,
        t.calibration,
        top_of(top, t.functions.len())
    );
}

/// What was taken out of the times, and the time spent inside cabprof.
fn compensation(t: &TimeData, o: &mut String) {
    match &t.compensation {
        Some(c) => {
            let drift = match (c.timed_ns_at_finish, c.inside_ns_at_finish) {
                (Some(t), Some(i)) => format!("; at finish {} and {}", dur1(t), dur1(i)),
                _ => String::new(),
            };
            let polls = c
                .poll_ns
                .map(|p| format!(" (and {} per poll of an async fn)", dur1(p)))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  compensated: each timed call's own time less {} inside it, each frame's less {} per timed and {} per untimed call in it{polls}{drift}; resolution {}, a clock read {}",
                dur1(c.inside_ns),
                dur1(c.timed_ns),
                dur1(c.untimed_ns),
                dur1(c.resolution_ns),
                dur1(c.clock_ns),
            );
            if let Some(d) = &c.during {
                let _ = writeln!(
                    o,
                    "  measured again on the program's threads as their rings lapped ({} probes; a timed call {} [{}, {}], inside it {}): each thread's calls lose the median of its latest probes; a function's time may be off by its instrumented calls times half the range of the middle 80 % of the probes, at least 5 % of a timed call (calibration_error_ns in the JSON)",
                    d.probes,
                    dur1(d.timed_ns.median),
                    dur1(d.timed_ns.min),
                    dur1(d.timed_ns.max),
                    dur1(d.inside_ns.median),
                );
            }
        }
        None => {
            let _ = writeln!(o, "  raw: no overhead compensation");
        }
    }
    if let Some(s) = t.inside_cabprof_ns.filter(|&s| s > 0.0) {
        let _ = writeln!(
            o,
            "  inside cabprof (waiting for an analyzer, attaching, registering, snapshots): {} in {} entries, taken out of the frames open meanwhile",
            dur(s),
            t.inside_cabprof_entries.unwrap_or(0)
        );
    }
}

/// The functions' table, the most inclusive first.
fn functions(data: &ReportData, t: &TimeData, top: usize, o: &mut String) {
    let raw = t.show_raw == Some(true);
    let cells: Vec<Cells> = t.functions.iter().take(top).map(|f| cells(t, f)).collect();
    // The inclusive column widens for a figure with its calibration's error.
    let w = cells
        .iter()
        .map(|c| c.incl.chars().count())
        .fold(14, usize::max);
    let _ = write!(
        o,
        "  {:>12} {:>w$} {:>14} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "calls", "inclusive", "exclusive", "mean", "p50", "p95", "p99", "max"
    );
    if raw {
        let _ = write!(
            o,
            " {:>14} {:>14} {:>11}",
            "raw incl", "raw excl", "raw mean"
        );
    }
    let _ = writeln!(o, "  function");
    for (f, c) in t.functions.iter().zip(&cells) {
        let _ = write!(
            o,
            "  {:>12} {:>w$} {:>14} {:>11} {:>11} {:>11} {:>11} {:>11}",
            f.calls,
            c.incl,
            c.excl,
            c.mean,
            dur(f.p50_ns),
            dur(f.p95_ns),
            dur(f.p99_ns),
            dur(f.max_ns),
        );
        if raw {
            let _ = write!(
                o,
                " {:>14} {:>14} {:>11}",
                dur(f.raw_inclusive_ns.unwrap_or(f.inclusive_ns)),
                dur(f.raw_exclusive_ns.unwrap_or(f.exclusive_ns)),
                dur(f.raw_mean_ns.unwrap_or(f.mean_ns)),
            );
        }
        let _ = writeln!(o, "  {}", data.name(f.method));
    }
    let clipped = t
        .functions
        .iter()
        .take(top)
        .any(|f| f.exclusive_clipped == Some(true));
    if clipped {
        let _ = writeln!(
            o,
            "  ~0: a self time that came out below zero (the function's time less its callees', each compensated or estimated): below what the calibration or the sample resolves"
        );
    }
    if cells.iter().any(|c| c.error_shown) {
        let _ = writeln!(
            o,
            "  ±, every call timed: how far an inclusive time may be off because the calibration is (its instrumented calls times half the range of the middle 80 % of the probes, or half the start-to-finish drift, and at least 5 % of a timed call), shown where that is {:.0} % of it or more",
            SHOWN_ERROR * 100.0
        );
    }
    leaning_on_bounds(data, t, top, o);
}

/// A figure every call of which was timed shows its calibration's error from this fraction
/// of it: below, the error is within what a reader takes a timing to be.
const SHOWN_ERROR: f64 = 0.05;

/// The calibration's error of `f`'s inclusive time, where it is [`SHOWN_ERROR`] of it or more.
fn off_by(f: &crate::model::FunctionTimeEntry) -> Option<f64> {
    f.calibration_error_ns
        .filter(|&e| e > 0.0 && e >= SHOWN_ERROR * f.inclusive_ns)
}

/// A function's row: its inclusive, exclusive and mean cells.
struct Cells {
    incl: String,
    excl: String,
    mean: String,
    /// `incl` shows the calibration's error of a figure every call of which was timed.
    error_shown: bool,
}

/// A function's cells.
fn cells(t: &TimeData, f: &crate::model::FunctionTimeEntry) -> Cells {
    // An estimate (some calls untimed) is marked `~` whatever its interval; an interval from
    // fewer than `MIN_TIMED_FOR_INTERVAL` timed calls is not given, unless every call was long
    // (then it is only where their entries were placed). Every call timed: the figure, with
    // the calibration's error where that is large.
    let every = f.timed >= f.calls;
    let incl = if every {
        match off_by(f) {
            Some(e) => format!("{}±{}", dur(f.inclusive_ns), dur(e)),
            None => dur(f.inclusive_ns),
        }
    } else if f.timed < MIN_TIMED_FOR_INTERVAL && f.long.unwrap_or(0) < f.calls {
        format!("~{}±?", dur(f.inclusive_ns))
    } else {
        // The sample's interval widened by the calibration's error (systematic, so added,
        // not combined as independent).
        let half = f.inclusive_ci_ns + f.calibration_error_ns.unwrap_or(0.0);
        format!("~{}±{}", dur(f.inclusive_ns), dur(half))
    };
    // Below the resolution: bounds, not figures (the sums are of calls each cheaper than the
    // calibration resolves).
    match (f.below_resolution, &t.compensation) {
        (Some(true), Some(c)) => {
            let bound = format!("<{}", dur(c.resolution_ns * f.calls as f64));
            Cells {
                incl: bound.clone(),
                excl: bound,
                mean: format!("<{}", dur1(c.resolution_ns)),
                error_shown: false,
            }
        }
        _ => Cells {
            incl,
            excl: excl_text(f.exclusive_ns, f.exclusive_clipped),
            mean: dur(f.mean_ns),
            error_shown: every && off_by(f).is_some(),
        },
    }
}

/// Callers whose own time leans on callees below resolution. A caller's own time is its time
/// less its callees'; a callee shown as a bound took out of it a figure made of calls too short
/// to time (their latency, alone between two clock reads, which the plain program may overlap
/// with the caller's work), so the caller's own time is uncertain by as much. Listed where
/// that is at least a tenth of it, most first, at most [`LEANING`].
fn leaning_on_bounds(data: &ReportData, t: &TimeData, top: usize, o: &mut String) {
    let bounded: std::collections::HashSet<u32> = t
        .functions
        .iter()
        .filter(|f| f.below_resolution == Some(true))
        .map(|f| f.method)
        .collect();
    if bounded.is_empty() {
        return;
    }
    // One pass over the edges: what bounded callees took out of each caller.
    let mut taken_from: std::collections::HashMap<u32, f64> = std::collections::HashMap::new();
    for e in &t.edges {
        if e.callee != e.caller && bounded.contains(&e.callee) {
            *taken_from.entry(e.caller).or_default() += e.inclusive_ns.max(0.0);
        }
    }
    let mut leaning: Vec<(f64, &FunctionTimeEntry)> = t
        .functions
        .iter()
        .take(top)
        .filter(|f| f.below_resolution != Some(true))
        .filter_map(|f| {
            let taken = taken_from.get(&f.method).copied().unwrap_or(0.0);
            (taken > 0.0 && taken >= 0.1 * f.exclusive_ns.max(0.0)).then_some((taken, f))
        })
        .collect();
    if leaning.is_empty() {
        return;
    }
    leaning.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.method.cmp(&b.1.method)));
    let list: Vec<String> = leaning
        .iter()
        .take(LEANING)
        .map(|(taken, f)| format!("{} ({} taken out)", data.name(f.method), dur(*taken)))
        .collect();
    let _ = writeln!(
        o,
        "  own times less callees below resolution, uncertain by what those took out: {} (calls too short to time count their latency alone between two clock reads, which the plain program may overlap with the caller's work)",
        list.join(", ")
    );
}

/// Callers listed by [`leaning_on_bounds`].
const LEANING: usize = 3;

/// `async fn`s: their futures' wall time, polled and suspended, the longest wall first.
fn futures(data: &ReportData, t: &TimeData, top: usize, o: &mut String) {
    let mut rows: Vec<_> = t
        .functions
        .iter()
        .filter_map(|f| Some((f, f.wall_ns?, f.suspended_ns?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.method.cmp(&b.0.method)));
    let _ = writeln!(
        o,
        "\nasync functions, wall time from first poll to completion; woken to polled: the executor's delay after wakes ({}):\n  {:>14} {:>14} {:>14} {:>18}",
        top_of(top, rows.len()),
        "wall",
        "polled",
        "suspended",
        "woken to polled"
    );
    for (f, wall, suspended) in rows.into_iter().take(top) {
        let delay = match (f.woken_polls, f.wake_delay_ns) {
            (Some(n), Some(ns)) => format!("{} ({n})", dur(ns)),
            _ => "-".into(),
        };
        let _ = writeln!(
            o,
            "  {:>14} {:>14} {:>14} {:>18}  {}",
            dur(wall),
            dur((wall - suspended).max(0.0)),
            dur(suspended),
            delay,
            data.name(f.method)
        );
    }
}

/// The calling contexts' table, the most inclusive first.
fn contexts(data: &ReportData, t: &TimeData, top: usize, o: &mut String) {
    let _ = writeln!(
        o,
        "\ntime by calling context ({}):",
        top_of(top, t.contexts.len())
    );
    // The most inclusive time first, each row bounded whatever the depth.
    let mut order: Vec<usize> = (0..t.contexts.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&t.contexts[a], &t.contexts[b]);
        y.inclusive_ns.total_cmp(&x.inclusive_ns).then(a.cmp(&b))
    });
    order.truncate(top);
    let rows = stack_rows(&t.contexts, &order, &data.method_names());
    for (&i, row) in order.iter().zip(&rows) {
        let c = &t.contexts[i];
        // Below the resolution: bounds, as in the functions' table.
        let (incl, excl) = match (c.below_resolution, &t.compensation) {
            (Some(true), Some(comp)) => {
                let bound = format!("<{}", dur(comp.resolution_ns * c.calls as f64));
                (bound.clone(), bound)
            }
            // Some calls untimed (sampled timing): an estimate, as in the functions' table.
            _ if c.timed < c.calls => (
                format!("~{}", dur(c.inclusive_ns)),
                excl_text(c.exclusive_ns, c.exclusive_clipped),
            ),
            _ => (
                dur(c.inclusive_ns),
                excl_text(c.exclusive_ns, c.exclusive_clipped),
            ),
        };
        let _ = writeln!(
            o,
            "  {:>12} {incl:>14} incl {excl:>14} self  {row}",
            c.calls,
        );
    }
}

/// A self time, or `~0` where it came out below zero and was clipped.
fn excl_text(ns: f64, clipped: Option<bool>) -> String {
    if clipped == Some(true) {
        "~0".to_string()
    } else {
        dur(ns)
    }
}

/// [`dur`] with a decimal below 100 ns: the calibration's figures are a few ns.
fn dur1(ns: f64) -> String {
    if ns < 100.0 {
        format!("{ns:.1} ns")
    } else {
        dur(ns)
    }
}

/// A duration for people: ns, µs, ms or s with 3 significant digits or so.
fn dur(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}
