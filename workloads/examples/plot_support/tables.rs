//! Regenerate the data tables of `docs/EVALUATION.md` from the evaluation's CSV files and
//! `summary.txt` (included by `plot.rs`; not an example of its own).
//!
//! Each generated table sits between two marker lines in the page:
//!
//! ```text
//! <!-- table:fig7 -->
//!
//! | workload | stream | ... |
//! |---|---|...|
//!
//! <!-- /table -->
//! ```
//!
//! Everything between the markers is replaced by a freshly generated table (`TABLES` lists
//! the names); the rest of the page is left as it is. The new page is written to a temporary
//! file next to it and renamed over it only when every table was generated, so an error
//! (missing CSV or column, malformed row, marker without its end) leaves the page untouched.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub type Res<T> = Result<T, String>;

const OPEN_PREFIX: &str = "<!-- table:";
const OPEN_SUFFIX: &str = "-->";
const CLOSE: &str = "<!-- /table -->";

/// A table generator: reads what it needs from the eval directory.
type Generator = fn(&Path) -> Res<Table>;

/// Every table the page may mark, by marker name.
const TABLES: [(&str, Generator); 11] = [
    ("targets", targets),
    ("fig7", fig7),
    ("fig8-means", fig8_means),
    ("fig8", fig8),
    ("fig10", fig10),
    ("perturbation", perturbation),
    ("fig11-overhead", fig11_overhead),
    ("fig11-error", fig11_error),
    ("costmodel", costmodel),
    ("pinning", pinning),
    ("workloads", workloads),
];

/// What `rewrite_page` did.
pub struct Outcome {
    /// Marker names, in page order.
    pub tables: Vec<String>,
    /// Whether the page's text changed (and was written).
    pub changed: bool,
}

/// Regenerate every marked table of `page` from the files in `dir`.
pub fn rewrite_page(page: &Path, dir: &Path) -> Res<Outcome> {
    let text = std::fs::read_to_string(page)
        .map_err(|e| format!("cannot read {}: {e}", page.display()))?;
    let (new, tables) = replace_tables(&text, |name| {
        let (_, generate) = TABLES.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            let known: Vec<&str> = TABLES.iter().map(|(n, _)| *n).collect();
            format!("unknown table `{name}` (known: {})", known.join(", "))
        })?;
        generate(dir).map(|t| t.render())
    })
    .map_err(|e| format!("{}: {e}", page.display()))?;
    let changed = new != text;
    if changed {
        write_atomically(page, &new)?;
    }
    Ok(Outcome { tables, changed })
}

/// Write `text` to a temporary file beside `path`, then rename it over `path`.
fn write_atomically(path: &Path, text: &str) -> Res<()> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} is not a file path", path.display()))?;
    let tmp: PathBuf = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot rename {} to {}: {e}", tmp.display(), path.display())
    })
}

/// The marker name if `line` is an opening marker `<!-- table:NAME -->`.
fn open_marker(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix(OPEN_PREFIX)?
        .strip_suffix(OPEN_SUFFIX)
        .map(str::trim)
}

fn is_close(line: &str) -> bool {
    line.trim() == CLOSE
}

/// Replace the body of every marked table with `generate(name)`, framed by blank lines (so
/// that the HTML comments never run into the table). Returns the new text and the names.
fn replace_tables(
    text: &str,
    mut generate: impl FnMut(&str) -> Res<String>,
) -> Res<(String, Vec<String>)> {
    let mut out = String::with_capacity(text.len());
    let mut names = Vec::new();
    // The open marker being replaced: (name, line number).
    let mut open: Option<(String, usize)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        match (&open, open_marker(line), is_close(line)) {
            (None, Some(name), _) => {
                if name.is_empty() {
                    return Err(format!("line {n}: table marker without a name"));
                }
                out.push_str(line);
                let body = generate(name).map_err(|e| format!("table `{name}` (line {n}): {e}"))?;
                out.push('\n');
                out.push_str(&body);
                out.push('\n');
                names.push(name.to_string());
                open = Some((name.to_string(), n));
            }
            (None, None, true) => {
                return Err(format!(
                    "line {n}: `{CLOSE}` without an opening `{OPEN_PREFIX}NAME {OPEN_SUFFIX}`"
                ))
            }
            (None, None, false) => out.push_str(line),
            (Some((name, at)), Some(other), _) => {
                return Err(format!(
                    "marker `{OPEN_PREFIX}{name} {OPEN_SUFFIX}` (line {at}) has no `{CLOSE}` \
                     before `{OPEN_PREFIX}{other} {OPEN_SUFFIX}` (line {n})"
                ))
            }
            (Some(_), None, true) => {
                out.push_str(line);
                open = None;
            }
            // The old table body: dropped.
            (Some(_), None, false) => {}
        }
    }
    if let Some((name, at)) = open {
        return Err(format!(
            "marker `{OPEN_PREFIX}{name} {OPEN_SUFFIX}` (line {at}) has no `{CLOSE}` \
             before the end of the page"
        ));
    }
    Ok((out, names))
}

/// A markdown table.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.header.len());
        self.rows.push(row);
    }

    fn render(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut s = line(&self.header);
        let _ = writeln!(s, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

/// One CSV file, strictly parsed: every row has the header's number of fields.
struct Csv {
    name: String,
    header: Vec<String>,
    /// (line number in the file, fields).
    rows: Vec<(usize, Vec<String>)>,
}

/// One row of a `Csv`, with typed access that names the file, line and column on error.
#[derive(Clone, Copy)]
struct Rec<'a> {
    csv: &'a Csv,
    line: usize,
    fields: &'a [String],
}

impl Csv {
    fn read(dir: &Path, name: &str) -> Res<Csv> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Csv::parse(&path.display().to_string(), &text)
    }

    fn parse(name: &str, text: &str) -> Res<Csv> {
        let mut lines = text.lines().enumerate();
        let header: Vec<String> = lines
            .next()
            .filter(|(_, l)| !l.trim().is_empty())
            .ok_or_else(|| format!("{name} is empty (no header line)"))?
            .1
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        let mut rows = Vec::new();
        for (i, l) in lines {
            if l.trim().is_empty() {
                continue;
            }
            let fields: Vec<String> = l.split(',').map(|s| s.trim().to_string()).collect();
            if fields.len() != header.len() {
                return Err(format!(
                    "{name} line {}: {} fields, the header has {}",
                    i + 1,
                    fields.len(),
                    header.len()
                ));
            }
            rows.push((i + 1, fields));
        }
        if rows.is_empty() {
            return Err(format!("{name} has no data rows"));
        }
        Ok(Csv {
            name: name.to_string(),
            header,
            rows,
        })
    }

    /// Fail unless every column of `cols` is present.
    fn require(&self, cols: &[&str]) -> Res<()> {
        for c in cols {
            if !self.header.iter().any(|h| h == c) {
                return Err(format!(
                    "{}: no column `{c}` (columns: {})",
                    self.name,
                    self.header.join(", ")
                ));
            }
        }
        Ok(())
    }

    fn recs(&self) -> impl Iterator<Item = Rec<'_>> {
        self.rows.iter().map(move |(line, fields)| Rec {
            csv: self,
            line: *line,
            fields,
        })
    }

    /// Distinct values of `col`, in order of first appearance.
    fn distinct(&self, col: &str) -> Res<Vec<String>> {
        let mut v: Vec<String> = Vec::new();
        for r in self.recs() {
            let x = r.str(col)?;
            if !v.iter().any(|y| y == x) {
                v.push(x.to_string());
            }
        }
        Ok(v)
    }

    /// Distinct `(c1, c2)` pairs, in order of first appearance.
    fn pairs(&self, c1: &str, c2: &str) -> Res<Vec<(String, String)>> {
        let mut v: Vec<(String, String)> = Vec::new();
        for r in self.recs() {
            let p = (r.str(c1)?.to_string(), r.str(c2)?.to_string());
            if !v.contains(&p) {
                v.push(p);
            }
        }
        Ok(v)
    }

    /// The first row where every `(column, value)` matches.
    fn find(&self, want: &[(&str, &str)]) -> Res<Option<Rec<'_>>> {
        for r in self.recs() {
            let mut all = true;
            for (c, v) in want {
                all &= r.str(c)? == *v;
            }
            if all {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// Like `find`, but a missing row is an error.
    fn get(&self, want: &[(&str, &str)]) -> Res<Rec<'_>> {
        self.find(want)?.ok_or_else(|| {
            let w: Vec<String> = want.iter().map(|(c, v)| format!("{c}={v}")).collect();
            format!("{}: no row with {}", self.name, w.join(", "))
        })
    }
}

impl<'a> Rec<'a> {
    fn str(&self, col: &str) -> Res<&'a str> {
        let i = self
            .csv
            .header
            .iter()
            .position(|h| h == col)
            .ok_or_else(|| {
                format!(
                    "{}: no column `{col}` (columns: {})",
                    self.csv.name,
                    self.csv.header.join(", ")
                )
            })?;
        Ok(&self.fields[i])
    }

    /// A number, `None` when the field is empty.
    fn opt_num(&self, col: &str) -> Res<Option<f64>> {
        let s = self.str(col)?;
        if s.is_empty() {
            return Ok(None);
        }
        s.parse::<f64>().map(Some).map_err(|_| {
            format!(
                "{} line {}: column `{col}`: `{s}` is not a number",
                self.csv.name, self.line
            )
        })
    }

    fn num(&self, col: &str) -> Res<f64> {
        self.opt_num(col)?.ok_or_else(|| {
            format!(
                "{} line {}: column `{col}` is empty",
                self.csv.name, self.line
            )
        })
    }
}

/// `x` with `d` decimals (correctly rounded, ties to even), never `-0`.
fn fixed(x: f64, d: usize) -> String {
    let s = format!("{x:.d$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// Seconds as milliseconds with one decimal.
fn ms(s: f64) -> String {
    fixed(s * 1000.0, 1)
}

/// A fraction as a whole percentage.
fn pct(x: f64) -> String {
    format!("{}%", fixed(x * 100.0, 0))
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// A buffer size as the page writes it: `16 KB`, `2 MB` (binary units).
fn buffer_label(bytes: f64) -> String {
    let kib = bytes / 1024.0;
    if kib >= 1024.0 && kib % 1024.0 == 0.0 {
        format!("{} MB", kib / 1024.0)
    } else if kib.fract() == 0.0 {
        format!("{kib} KB")
    } else {
        format!("{bytes} B")
    }
}

/// A sampling rate as a percentage label: `0%`, `5%`, `100%`.
fn rate_label(rate: f64) -> String {
    let p = rate * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}%", fixed(p, 0))
    } else {
        format!("{}%", p)
    }
}

/// Figure 7: CAB, FastForward and N-way times and ratios per workload and stream.
fn fig7(dir: &Path) -> Res<Table> {
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
fn fig8_means(dir: &Path) -> Res<Table> {
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
fn fig8(dir: &Path) -> Res<Table> {
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
fn fig10(dir: &Path) -> Res<Table> {
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
fn perturbation(dir: &Path) -> Res<Table> {
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
fn fig11_overhead(dir: &Path) -> Res<Table> {
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
fn fig11_error(dir: &Path) -> Res<Table> {
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
fn costmodel(dir: &Path) -> Res<Table> {
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
fn pinning(dir: &Path) -> Res<Table> {
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
fn workloads(dir: &Path) -> Res<Table> {
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

/// `summary.txt`, split into sections: a line at column 0 starts one (its title), the
/// indented lines below belong to it.
struct Summary {
    name: String,
    sections: Vec<(String, Vec<String>)>,
}

impl Summary {
    fn read(dir: &Path) -> Res<Summary> {
        let path = dir.join("summary.txt");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(Summary::parse(&path.display().to_string(), &text))
    }

    fn parse(name: &str, text: &str) -> Summary {
        let mut sections: Vec<(String, Vec<String>)> = Vec::new();
        for l in text.lines() {
            if l.trim().is_empty() {
                continue;
            }
            if !l.starts_with(' ') {
                sections.push((l.to_string(), Vec::new()));
            } else if let Some((_, body)) = sections.last_mut() {
                body.push(l.trim().to_string());
            }
        }
        Summary {
            name: name.to_string(),
            sections,
        }
    }

    /// The lines of the section whose title starts with `title`.
    fn section(&self, title: &str) -> Res<&[String]> {
        self.sections
            .iter()
            .find(|(t, _)| t.starts_with(title))
            .map(|(_, b)| b.as_slice())
            .ok_or_else(|| format!("{}: no section `{title}`", self.name))
    }

    /// The section's `overall...: PASS|FAIL` line, as a verdict.
    fn overall(&self, title: &str) -> Res<bool> {
        let line = self
            .section(title)?
            .iter()
            .find(|l| l.starts_with("overall"))
            .ok_or_else(|| format!("{}: section `{title}` has no `overall` line", self.name))?;
        self.pass(line.split_whitespace().last().unwrap_or(""), line)
    }

    fn pass(&self, word: &str, line: &str) -> Res<bool> {
        match word {
            "PASS" => Ok(true),
            "FAIL" => Ok(false),
            _ => Err(format!(
                "{}: expected PASS or FAIL, found `{word}` in `{line}`",
                self.name
            )),
        }
    }

    fn bad(&self, line: &str) -> String {
        format!("{}: cannot read the line `{line}`", self.name)
    }
}

/// The word after `key` among `words`.
fn after<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    let i = words.iter().position(|w| *w == key)?;
    words.get(i + 1).copied()
}

/// `call-graph` → `call graph`, as the page names analyses in prose.
fn spoken(analysis: &str) -> String {
    analysis.replace('-', " ")
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// One verdict for several named results: `met`, `**not met**`, or per name.
fn verdicts(results: &[(String, bool)]) -> String {
    if results.iter().all(|r| r.1) {
        "met".into()
    } else if results.iter().all(|r| !r.1) {
        "**not met**".into()
    } else {
        let v: Vec<String> = results
            .iter()
            .map(|(n, ok)| format!("{n} {}", verdict(*ok)))
            .collect();
        v.join("; ")
    }
}

/// The issue's targets, from `summary.txt`.
fn targets(dir: &Path) -> Res<Table> {
    let s = Summary::read(dir)?;
    let mut t = Table::new(["target", "measured", "verdict"]);

    // Target 1: ratio of mean overheads per analysis.
    let mut goals = Vec::new();
    let mut others = Vec::new();
    for l in s.section("Target 1:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        let Some(ratio) = after(&w, "means") else {
            continue;
        };
        let name = spoken(w[0]);
        if l.ends_with("(not a target)") {
            others.push(format!("{name} {ratio}"));
        } else {
            let ok = s.pass(w.last().copied().unwrap_or(""), l)?;
            goals.push((name, ratio.to_string(), ok));
        }
    }
    if goals.is_empty() {
        return Err(format!("{}: Target 1 lists no analysis", s.name));
    }
    let mut measured = goals
        .iter()
        .map(|(n, r, _)| format!("{n} {r}"))
        .collect::<Vec<_>>()
        .join(", ");
    if !others.is_empty() {
        let _ = write!(measured, " ({}, not targets)", others.join(", "));
    }
    let v: Vec<String> = goals
        .iter()
        .map(|(n, _, ok)| format!("{n} {}", verdict(*ok)))
        .collect();
    t.push(vec![
        "Concurrent exhaustive overhead ≤ ½ of sequential, averaged over the suite \
         (ratio of the mean overheads)"
            .into(),
        measured,
        v.join("; "),
    ]);

    // Target 2: concurrent against sequential cache simulation, per workload.
    let mut cells = Vec::new();
    for l in s.section("Target 2:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"overall:") {
            continue;
        }
        let time = |key: &str| -> Res<String> {
            let x: f64 = after(&w, key)
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| s.bad(l))?;
            Ok(fixed(x * 1000.0, 0))
        };
        cells.push(format!(
            "{}: {} ms vs {} ms",
            w[0],
            time("concurrent")?,
            time("sequential")?
        ));
    }
    t.push(vec![
        "Concurrent cache simulation faster than sequential on every workload".into(),
        cells.join("; "),
        verdict(s.overall("Target 2:")?).into(),
    ]);

    // Target 3: sampling at 5 %, error and overhead ratio per analysis.
    let mut errors = Vec::new();
    let mut ratios = Vec::new();
    for l in s.section("Target 3:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.get(1..3) != Some(&["mean", "error"][..]) {
            continue;
        }
        let name = spoken(w[0]);
        let err = after(&w, "error").ok_or_else(|| s.bad(l))?;
        let err_ok = s.pass(after(&w, err).ok_or_else(|| s.bad(l))?, l)?;
        let ratio = after(&w, "ratio").ok_or_else(|| s.bad(l))?;
        let ratio_ok = s.pass(after(&w, ratio).ok_or_else(|| s.bad(l))?, l)?;
        errors.push((name.clone(), err.to_string(), err_ok));
        ratios.push((name, ratio.to_string(), ratio_ok));
    }
    let list = |v: &[(String, String, bool)]| -> String {
        let x: Vec<String> = v.iter().map(|(n, x, _)| format!("{n} {x}")).collect();
        x.join(", ")
    };
    let oks = |v: &[(String, String, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|(n, _, ok)| (n.clone(), *ok)).collect()
    };
    let (err_measured, err_verdict, ratio_measured, ratio_verdict) = if errors.is_empty() {
        let none = "5 % not among the measured rates".to_string();
        (none.clone(), "–".into(), none, "–".into())
    } else {
        (
            format!("mean error (paper's metric) {}", list(&errors)),
            verdicts(&oks(&errors)),
            format!("ratio of mean overheads {}", list(&ratios)),
            verdicts(&oks(&ratios)),
        )
    };
    t.push(vec![
        "Sampling at 5 %: error under 3 %".into(),
        err_measured,
        err_verdict,
    ]);
    t.push(vec![
        "Sampling at 5 %: overhead ≤ ½ of exhaustive, on average".into(),
        ratio_measured,
        ratio_verdict,
    ]);

    // Target 4: FastForward and N-way against CAB on the path stream.
    let mut ff = Vec::new();
    let mut nw = Vec::new();
    let mut ff_ahead = Vec::new();
    let mut nw_ahead = Vec::new();
    for l in s.section("Target 4:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.get(1) != Some(&"paths") {
            continue;
        }
        for (design, list, ahead) in [
            ("FastForward", &mut ff, &mut ff_ahead),
            ("N-way", &mut nw, &mut nw_ahead),
        ] {
            let x = after(&w, design).ok_or_else(|| s.bad(l))?;
            let v: f64 = x.parse().map_err(|_| s.bad(l))?;
            list.push(format!("{} {x}", w[0]));
            if v <= 1.0 {
                ahead.push(w[0].to_string());
            }
        }
    }
    let ok = s.overall("Target 4:")?;
    let mut v = verdict(ok).to_string();
    let ahead: Vec<String> = [("FastForward", &ff_ahead), ("N-way", &nw_ahead)]
        .iter()
        .filter(|(_, w)| !w.is_empty())
        .map(|(d, w)| format!("{d} ahead or level on {}", w.join(", ")))
        .collect();
    if !ahead.is_empty() {
        let _ = write!(v, " ({})", ahead.join("; "));
    }
    t.push(vec![
        "CAB ahead of FastForward and N-way on the path stream of every workload".into(),
        format!(
            "FastForward/CAB {}; N-way/CAB {}",
            ff.join(", "),
            nw.join(", ")
        ),
        v,
    ]);

    // Correctness.
    let checks = s.section("Correctness")?;
    let count = |prefix: &str| -> Res<(&String, u64, u64, String)> {
        let l = checks
            .iter()
            .find(|l| l.starts_with(prefix))
            .ok_or_else(|| format!("{}: no correctness line `{prefix}...`", s.name))?;
        let rest = l.split_once(": ").ok_or_else(|| s.bad(l))?.1;
        let (frac, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let (a, b) = frac.split_once('/').ok_or_else(|| s.bad(l))?;
        let a = a.parse().map_err(|_| s.bad(l))?;
        let b = b.parse().map_err(|_| s.bad(l))?;
        Ok((l, a, b, tail.to_string()))
    };
    let (_, same, total, _) = count("perturbation runs")?;
    t.push(vec![
        "Correctness: exhaustive results independent of the ring".into(),
        format!("{same}/{total} runs identical to the largest-buffer run"),
        verdict(same == total).into(),
    ]);
    let (l, same, total, tail) = count("exhaustive concurrent and sequential")?;
    let v = if same == total {
        "met".to_string()
    } else {
        // `(differ: pool/method-count, pool/call-graph)` → the workloads.
        let list = tail
            .trim()
            .strip_prefix("(differ:")
            .and_then(|x| x.strip_suffix(')'))
            .ok_or_else(|| s.bad(l))?;
        let mut ws: Vec<String> = Vec::new();
        for cell in list.split(',') {
            let w = format!("`{}`", cell.trim().split('/').next().unwrap_or(""));
            if !ws.contains(&w) {
                ws.push(w);
            }
        }
        format!("met except {} (see Discussion)", ws.join(", "))
    };
    t.push(vec![
        "Correctness: concurrent and sequential see the same events".into(),
        format!("{same}/{total} exhaustive concurrent and sequential runs identical"),
        v,
    ]);
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str) -> Res<String> {
        Ok(format!("| {name} |\n|---|\n"))
    }

    #[test]
    fn replaces_only_between_markers() {
        let page = "# Title\n\nprose\n<!-- table:a -->\n| old |\n|---|\n| 1 |\n<!-- /table -->\n\
                    more prose\n<!-- table:b -->\n\n<!-- /table -->\nend\n";
        let (out, names) = replace_tables(page, table).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            out,
            "# Title\n\nprose\n<!-- table:a -->\n\n| a |\n|---|\n\n<!-- /table -->\nmore prose\n\
             <!-- table:b -->\n\n| b |\n|---|\n\n<!-- /table -->\nend\n"
        );
        // Idempotent.
        assert_eq!(replace_tables(&out, table).unwrap().0, out);
    }

    #[test]
    fn marker_errors_name_the_marker_and_line() {
        let e = replace_tables("x\n<!-- table:fig7 -->\n| t |\n", table).unwrap_err();
        assert!(e.contains("table:fig7") && e.contains("line 2"), "{e}");
        assert!(e.contains("end of the page"), "{e}");
        let e = replace_tables(
            "<!-- table:a -->\n<!-- table:b -->\n<!-- /table -->\n",
            table,
        )
        .unwrap_err();
        assert!(
            e.contains("table:a") && e.contains("table:b") && e.contains("line 2"),
            "{e}"
        );
        let e = replace_tables("x\n<!-- /table -->\n", table).unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let e = replace_tables("<!-- table:c -->\n<!-- /table -->\n", |_| {
            Err("boom".to_string())
        })
        .unwrap_err();
        assert!(e.contains("`c`") && e.contains("boom"), "{e}");
    }

    #[test]
    fn malformed_csv_row_names_file_and_line() {
        let e = Csv::parse("fig7.csv", "a,b,c\n1,2,3\n\n4,5\n")
            .err()
            .unwrap();
        assert!(e.contains("fig7.csv line 4"), "{e}");
        let csv = Csv::parse("x.csv", "a,b\n1,zz\n").unwrap();
        let r = csv.recs().next().unwrap();
        let e = r.num("b").unwrap_err();
        assert!(e.contains("x.csv line 2") && e.contains("`b`"), "{e}");
        let e = csv.require(&["a", "missing"]).unwrap_err();
        assert!(e.contains("x.csv") && e.contains("`missing`"), "{e}");
    }

    #[test]
    fn missing_csv_leaves_page_untouched() {
        let dir = std::env::temp_dir().join(format!("plot-tables-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let page = dir.join("page.md");
        let text = "a\n<!-- table:pinning -->\n| old |\n<!-- /table -->\n";
        std::fs::write(&page, text).unwrap();
        let e = rewrite_page(&page, &dir).err().unwrap();
        assert!(e.contains("pinning.csv"), "{e}");
        assert_eq!(std::fs::read_to_string(&page).unwrap(), text);
        std::fs::write(
            dir.join("pinning.csv"),
            "workload,analysis,pinned_s,unpinned_s,pinned_overhead_vs_A,unpinned_overhead_vs_A\n\
             sort,paths,0.017976,0.019420,0.0804,0.1672\n",
        )
        .unwrap();
        let o = rewrite_page(&page, &dir).unwrap();
        assert!(o.changed);
        assert!(std::fs::read_to_string(&page)
            .unwrap()
            .contains("| sort | paths | 18.0 | 19.4 | 8% | 17% |\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn formats() {
        assert_eq!(fixed(-0.0004, 1), "0.0");
        assert_eq!(pct(-0.004), "0%");
        assert_eq!(pct(-0.1084), "-11%");
        assert_eq!(fixed(23063.5, 0), "23064");
        assert_eq!(buffer_label(16384.0), "16 KB");
        assert_eq!(buffer_label(33554432.0), "32 MB");
        assert_eq!(rate_label(0.05), "5%");
    }
}
