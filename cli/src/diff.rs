//! `cabprof diff BASE NEW`: what changed between two saved reports, per function, per
//! call-graph edge and per Ball-Larus path, as a table, as JSON, or as Bencher Metric Format
//! JSON; with `--fail-above PCT` a gate for CI.
//!
//! Calls, paths and simulated misses are counts of what the program did, not measurements of
//! how fast: on the same input they come out the same on every run and every machine, so a
//! change is a change of the program (for exhaustive and sequential reports; sampled ones are
//! estimates and are marked). The session's elapsed time is shown too, marked noisy, and never
//! gates unless asked.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cabprof::ReportData;
use clap::{Args, ValueEnum};
use serde_json::{json, Map, Value};

use crate::CliError;

/// Exit status when a change exceeds `--fail-above`.
pub(crate) const EXIT_THRESHOLD: u8 = 3;

const EXAMPLES: &str = "\
Examples:
  cabprof diff base.json new.json                      changes, largest effect first
  cabprof diff base.json new.json --fail-above 5       exit 3 if a count grew by more than 5 %
  cabprof diff base.json new.json --format bmf > bmf.json
  bencher run --adapter json --file bmf.json ...       (Bencher Metric Format: NEW's values)

Rows: a function's calls (`calls`), the executions of its Ball-Larus paths (`paths`), the
misses attributed to it at each simulated level (`l1-misses`, ...), and each call-graph edge's
calls (`edge-calls`). Effect = the change as a share of the metric's total in BASE; rows are
sorted by it. Counts are deterministic for a given input; `elapsed` (seconds) is marked noisy
and gates only with --gate-noisy.

Exit status: 0; 3 when --fail-above is given and some count grew by more than that percentage
(a count that was 0 grew by infinitely much); 1 on errors, 2 on usage errors.";

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum DiffFormat {
    /// A table for people.
    Table,
    /// Every row as JSON (base, new, change, relative change, effect, noisy).
    Json,
    /// Bencher Metric Format JSON of NEW's values (Bencher computes the changes itself).
    Bmf,
}

/// Arguments of `cabprof diff`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct DiffArgs {
    /// The report to compare against (JSON).
    #[arg(value_name = "BASE.json")]
    pub base: PathBuf,
    /// The report to compare (JSON).
    #[arg(value_name = "NEW.json")]
    pub new: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = DiffFormat::Table)]
    pub format: DiffFormat,
    /// Exit with status 3 if any count grew by more than PCT percent of its BASE value.
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Let noisy rows (elapsed time) trip --fail-above too.
    #[arg(long)]
    pub gate_noisy: bool,
    /// Rows shown in the table (0: all); JSON and BMF always hold every row.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub top: usize,
    /// Show unchanged rows too.
    #[arg(long)]
    pub all: bool,
}

/// One compared number.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    /// `function`, `edge`, or `session`.
    pub kind: &'static str,
    /// The function (`a -> b` for an edge).
    pub name: String,
    /// `calls`, `paths`, `l1-misses`, `edge-calls`, `elapsed`.
    pub metric: String,
    pub base: f64,
    pub new: f64,
    /// Time, not a count: varies from run to run.
    pub noisy: bool,
    /// Estimated from a sampled report.
    pub estimated: bool,
    /// The change as a share of the metric's BASE total.
    pub effect: f64,
}

impl Row {
    fn change(&self) -> f64 {
        self.new - self.base
    }

    /// Relative change; infinite when BASE is 0 and NEW is not.
    fn relative(&self) -> f64 {
        if self.base == 0.0 {
            if self.new == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            self.change() / self.base
        }
    }
}

/// Every number of a report worth comparing: (kind, name, metric) → value.
fn metrics(data: &ReportData) -> BTreeMap<(&'static str, String, String), f64> {
    let rate = data.estimate_rate();
    let est = |count: u64| count as f64 / rate;
    let mut out = BTreeMap::new();
    let mut add = |kind, name: String, metric: String, value: f64| {
        *out.entry((kind, name, metric)).or_insert(0.0) += value;
    };
    if let Some(counts) = &data.method_count {
        for m in counts {
            add(
                "function",
                data.name(m.method),
                "calls".into(),
                est(m.count),
            );
        }
    }
    if let Some(paths) = &data.paths {
        for p in paths {
            add(
                "function",
                data.name(p.method),
                "paths".into(),
                est(p.count),
            );
        }
    }
    if let Some(cache) = &data.cache {
        for e in &cache.by_method {
            let metric = format!("l{}-misses", e.level + 1);
            add(
                "function",
                data.name(e.method),
                metric,
                est(e.load_misses + e.store_misses),
            );
        }
    }
    if let Some(graph) = &data.call_graph {
        for e in graph {
            let name = format!("{} -> {}", data.name(e.caller), data.name(e.callee));
            add("edge", name, "edge-calls".into(), est(e.count));
        }
    }
    add(
        "session",
        "(session)".into(),
        "elapsed".into(),
        data.session.elapsed_s,
    );
    out
}

/// The rows of `base` against `new`, largest effect first.
pub(crate) fn compare(base: &ReportData, new: &ReportData) -> Vec<Row> {
    let (b, n) = (metrics(base), metrics(new));
    let mut totals: BTreeMap<&str, f64> = BTreeMap::new();
    for ((_, _, metric), v) in &b {
        *totals.entry(metric.as_str()).or_default() += v;
    }
    let estimated = base.estimate_rate() != 1.0 || new.estimate_rate() != 1.0;
    let mut keys: Vec<_> = b.keys().chain(n.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut rows: Vec<Row> = keys
        .into_iter()
        .map(|key| {
            let base_v = b.get(&key).copied().unwrap_or(0.0);
            let new_v = n.get(&key).copied().unwrap_or(0.0);
            let total = totals.get(key.2.as_str()).copied().unwrap_or(0.0);
            let (kind, name, metric) = key;
            let noisy = metric == "elapsed";
            Row {
                kind,
                effect: (new_v - base_v) / total.max(1.0),
                name,
                metric,
                base: base_v,
                new: new_v,
                noisy,
                estimated: estimated && !noisy,
            }
        })
        .collect();
    rows.sort_by(|x, y| {
        y.effect
            .abs()
            .total_cmp(&x.effect.abs())
            .then_with(|| x.name.cmp(&y.name))
            .then_with(|| x.metric.cmp(&y.metric))
    });
    rows
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn table(rows: &[Row], args: &DiffArgs) -> String {
    let mut o = String::new();
    let shown: Vec<&Row> = rows
        .iter()
        .filter(|r| args.all || r.change() != 0.0)
        .collect();
    let _ = writeln!(
        o,
        "{:>9} {:>14} {:>14} {:>12} {:>9}  {:<11} name",
        "effect", "base", "new", "change", "relative", "metric"
    );
    let limit = if args.top == 0 { usize::MAX } else { args.top };
    for r in shown.iter().take(limit) {
        let rel = r.relative();
        let rel = if rel.is_infinite() {
            "new".to_string()
        } else {
            format!("{:+.1}%", rel * 100.0)
        };
        let mark = match (r.noisy, r.estimated) {
            (true, _) => "  (noisy: time)",
            (false, true) => "  (~ sampled estimate)",
            _ => "",
        };
        let _ = writeln!(
            o,
            "{:>8.2}% {:>14} {:>14} {:>12} {:>9}  {:<11} {}{mark}",
            r.effect * 100.0,
            number(r.base),
            number(r.new),
            if r.change() > 0.0 {
                format!("+{}", number(r.change()))
            } else {
                number(r.change())
            },
            rel,
            r.metric,
            r.name
        );
    }
    if shown.len() > limit {
        let _ = writeln!(
            o,
            "... {} more rows (--top 0 shows all)",
            shown.len() - limit
        );
    }
    if shown.is_empty() {
        let _ = writeln!(o, "no change");
    }
    o
}

fn rows_json(rows: &[Row]) -> String {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let rel = r.relative();
            json!({
                "kind": r.kind,
                "name": r.name,
                "metric": r.metric,
                "base": r.base,
                "new": r.new,
                "change": r.change(),
                "relative": if rel.is_finite() { json!(rel) } else { Value::Null },
                "effect": r.effect,
                "noisy": r.noisy,
                "estimated": r.estimated,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&json!({ "rows": rows })).expect("JSON");
    text.push('\n');
    text
}

/// Bencher Metric Format: `{ "benchmark": { "measure": { "value": v } } }`, NEW's values.
fn bmf(rows: &[Row]) -> String {
    let mut benchmarks = Map::new();
    for r in rows {
        let benchmark = match r.kind {
            "edge" => format!("edge {}", r.name),
            _ => r.name.clone(),
        };
        let entry = benchmarks
            .entry(benchmark)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(measures) = entry {
            measures.insert(r.metric.clone(), json!({ "value": r.new }));
        }
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(benchmarks)).expect("JSON");
    text.push('\n');
    text
}

/// Run `cabprof diff`.
pub(crate) fn run(args: &DiffArgs) -> Result<ExitCode, CliError> {
    if let Some(pct) = args.fail_above {
        if !pct.is_finite() || pct < 0.0 {
            return Err(CliError::InvalidArguments(format!(
                "--fail-above {pct}: must be a percentage, 0 or more"
            )));
        }
    }
    let (base, new) = (
        crate::report::read(&args.base)?,
        crate::report::read(&args.new)?,
    );
    let rows = compare(&base, &new);
    let text = match args.format {
        DiffFormat::Table => table(&rows, args),
        DiffFormat::Json => rows_json(&rows),
        DiffFormat::Bmf => bmf(&rows),
    };
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != io::ErrorKind::BrokenPipe {
            return Err(CliError::Write {
                what: "the comparison".into(),
                source: e,
            });
        }
    }
    if let Some(pct) = args.fail_above {
        let over: Vec<&Row> = rows
            .iter()
            .filter(|r| (args.gate_noisy || !r.noisy) && r.relative() * 100.0 > pct)
            .collect();
        if !over.is_empty() {
            eprintln!(
                "cabprof diff: {} count(s) grew by more than {pct}%, the largest: {} {} ({} -> {})",
                over.len(),
                over[0].metric,
                over[0].name,
                number(over[0].base),
                number(over[0].new)
            );
            return Ok(ExitCode::from(EXIT_THRESHOLD));
        }
    }
    Ok(ExitCode::SUCCESS)
}
