//! cabprof's time analysis against a sampling profiler on a real crate (miniz_oxide 0.9.1).
//!
//! `perf record -e cpu-clock` samples the `plain` binary (the crate from crates.io) with DWARF
//! call chains; each sample goes to the innermost function of the copied crate that cabprof
//! instruments, found by walking the sample's call chain, each frame expanded into its inline
//! chain (llvm-symbolizer), so code inlined into a caller, a small method cabprof leaves alone,
//! a closure, or a library routine called from the crate counts where cabprof counts it: under
//! the innermost instrumented function on the stack. perf then samples `profiled` (the
//! annotated copy, same workload) counting calls only (`CABPROF_ANALYSES=method-count`: no
//! clock read), attributed the same way, an instrumented function's body (a closure that
//! cabprof's recorded copy runs) counting as the function and samples in cabprof's own code
//! left out: what the program cabprof times does with its time. Then `profiled` runs in five
//! processes under `CABPROF=1 CABPROF_ANALYSES=time`, each after a run of `plain` without perf
//! for the wall times. Printed: (a) self-time shares of the functions above 5 % (in perf or
//! in any process), over the whole run and per phase, against each of perf's two profiles;
//! (b) cabprof's compensated inclusive time of `compress_to_vec` and `decompress_to_vec`
//! against the plain build's wall time of those phases; (c) verdicts: shares within 5 points
//! of each profile in every process, top-level inclusive within 10 % in every process; (d)
//! perf's shares on the profiled build against the plain build's: what instrumenting the
//! functions does to the program itself, which no measurement inside it can take back.
//!
//! `CARGO_PROFILE_BENCH_DEBUG=limited cargo bench -p cabprof-crate-shares --bench self_shares`:
//! both binaries need debug info with function names (line tables alone name inlined
//! functions without their path). Needs `perf`, `nm` and `llvm-symbolizer` (or the program in
//! `LLVM_SYMBOLIZER`); without one of them, or without debug info, it says so and exits 0,
//! or 1 when `CI` is set.

mod names;
mod perf;

use cabprof_bench_support::stats::median;
use names::{key, untrait};
use perf::{attribute, perf_profile, Sampled};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Processes of `profiled` (and of `plain` without perf, one before each).
const PROCESSES: usize = 5;
/// A function is in the share tables when it holds at least this much (percent) of self time
/// in perf's profile or in any process's report.
const SHARE_FLOOR: f64 = 5.0;
/// Shares agree within this many points.
const SHARE_POINTS: f64 = 5.0;
/// Top-level inclusive time agrees with the plain wall time within this fraction.
const INCLUSIVE_TOLERANCE: f64 = 0.10;
/// The two top-level functions, each one phase of the workload, as keys (see [`key`]).
const PHASES: [(&str, &str); 2] = [
    ("compression", "deflate::compress_to_vec"),
    ("decompression", "inflate::decompress_to_vec"),
];
/// The half of the crate each phase runs: a sample whose stack was unwound short of the
/// top-level function goes to the phase of its innermost instrumented function's module. In
/// the profiled build that is every sample: perf copies 8 KiB of each sample's stack, and a
/// recorded copy's frame can be larger (the compressor's state is 64 KiB on the stack, in a
/// frame of its own there). No function of one half runs in the other phase; one at the
/// crate's root (`shared::update_adler32`) is then in no phase, and counted apart.
const PHASE_MODULES: [&str; 2] = ["deflate::", "inflate::"];

fn main() {
    let plain = PathBuf::from(env!("CARGO_BIN_EXE_plain"));
    let profiled = PathBuf::from(env!("CARGO_BIN_EXE_profiled"));
    match run(&plain, &profiled) {
        Ok(()) => {}
        Err(Failure::Unavailable(why)) => {
            if std::env::var_os("CI").is_some() {
                eprintln!(
                    "self_shares: cannot run: {why} (CI is set: failing rather than skipping)"
                );
                std::process::exit(1);
            }
            println!("self_shares: skipped: {why}");
        }
        Err(Failure::Error(e)) => {
            eprintln!("self_shares: {e}");
            std::process::exit(1);
        }
    }
}

enum Failure {
    /// A tool or the debug info the comparison needs is missing: skipped outside CI.
    Unavailable(String),
    /// Anything else: always a failure.
    Error(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Error(e)
    }
}

type Res<T> = Result<T, Failure>;

fn run(plain: &Path, profiled: &Path) -> Res<()> {
    let symbolizer = std::env::var("LLVM_SYMBOLIZER").unwrap_or_else(|_| "llvm-symbolizer".into());
    for (tool, arg) in [
        ("perf", "--version"),
        ("nm", "--version"),
        (symbolizer.as_str(), "--version"),
    ] {
        if Command::new(tool).arg(arg).output().is_err() {
            return Err(Failure::Unavailable(format!(
                "`{tool}` is not installed or not on PATH"
            )));
        }
    }
    let dir = std::env::temp_dir().join(format!("cabprof-crate-shares-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;

    let result = measure(plain, profiled, &symbolizer, &dir);
    // Kept after an error: the reports are there to look at.
    if !matches!(result, Err(Failure::Error(_))) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn measure(plain: &Path, profiled: &Path, symbolizer: &str, dir: &Path) -> Res<()> {
    println!("self_shares: miniz_oxide 0.9.1, 6 MiB of generated text compressed (level 6) and decompressed, 3 rounds per process");
    // perf's runs on their own first; then plain and profiled processes alternate, so that a
    // change in the host's load meets both builds. perf also samples the profiled build
    // counting calls only (no clock read): what the program that cabprof measures does with
    // its time, apart from what the instrumentation does to it.
    let stacks = perf_profile(plain, &[], symbolizer, dir)?;
    let counting_report = dir.join("counting.json");
    let counting_env = [
        ("CABPROF", "1"),
        ("CABPROF_ANALYSES", "method-count"),
        ("CABPROF_OUTPUT", path_str(&counting_report)?),
    ];
    let counting_stacks = perf_profile(profiled, &counting_env, symbolizer, dir)?;
    let counting_events = recorded_events(&counting_report)?;

    let mut plain_runs = Vec::new();
    let mut reports = Vec::new();
    for i in 1..=PROCESSES {
        plain_runs.push(wall_times(&run_plain(plain)?, plain)?);
        let path = dir.join(format!("profiled-{i}.json"));
        run_profiled(profiled, &path)?;
        reports.push(Report::read(&path)?);
    }
    let instrumented = reports
        .iter()
        .flat_map(|r| r.methods.iter().cloned())
        .collect();
    let sampled = attribute(&stacks, &instrumented, plain)?;
    let counting = attribute(&counting_stacks, &instrumented, profiled)?;
    print!(
        "{}",
        compare(&sampled, &counting, counting_events, &reports, &plain_runs)
    );
    Ok(())
}

/// The events the counting run's report says it recorded: none, or any dropped, and that run
/// profiled something else than the program the five processes time.
fn recorded_events(report: &Path) -> Res<u64> {
    let text = std::fs::read_to_string(report).map_err(|e| {
        format!(
            "reading the counting run's report {}: {e}",
            report.display()
        )
    })?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", report.display()))?;
    let totals = &json["totals"];
    match (totals["events"].as_u64(), totals["dropped"].as_u64()) {
        (Some(events), Some(0)) if events > 0 => Ok(events),
        _ => Err(Failure::Error(format!(
            "{}: the counting run recorded no events or dropped some: {totals}",
            report.display()
        ))),
    }
}

fn path_str(p: &Path) -> Res<&str> {
    p.to_str()
        .ok_or_else(|| Failure::Error(format!("{} is not UTF-8", p.display())))
}

// ---------------------------------------------------------------------------------------
// The two binaries

trait ClearCabprof {
    /// The runs must not inherit the caller's `CABPROF_*` settings (a sampling period, a
    /// mode, an output path): each sets what it needs.
    fn env_clear_cabprof(&mut self) -> &mut Self;
}

impl ClearCabprof for Command {
    fn env_clear_cabprof(&mut self) -> &mut Self {
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CABPROF") {
                self.env_remove(k);
            }
        }
        self
    }
}

fn run_plain(plain: &Path) -> Res<Output> {
    let out = Command::new(plain)
        .env_clear_cabprof()
        .output()
        .map_err(|e| format!("running {}: {e}", plain.display()))?;
    if !out.status.success() {
        return Err(Failure::Error(format!(
            "{} failed ({}): {}",
            plain.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(out)
}

fn run_profiled(profiled: &Path, report: &Path) -> Res<()> {
    let out = Command::new(profiled)
        .env_clear_cabprof()
        .env("CABPROF", "1")
        .env("CABPROF_ANALYSES", "time")
        .env("CABPROF_OUTPUT", report)
        .output()
        .map_err(|e| format!("running {}: {e}", profiled.display()))?;
    if !out.status.success() {
        return Err(Failure::Error(format!(
            "{} failed ({}): {}",
            profiled.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// Wall time (ns) of each phase summed over the rounds, from the workload's printed lines
/// (`compress round 1: <ns> ns ...`).
fn wall_times(out: &Output, bin: &Path) -> Res<[f64; 2]> {
    let mut sums = [0.0; 2];
    let mut seen = [0; 2];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        for (p, word) in ["compress round", "decompress round"].iter().enumerate() {
            if let Some(rest) = line.strip_prefix(word) {
                let ns = rest
                    .split(": ")
                    .nth(1)
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse::<f64>().ok())
                    .ok_or_else(|| format!("{}: cannot read `{line}`", bin.display()))?;
                sums[p] += ns;
                seen[p] += 1;
            }
        }
    }
    if seen[0] == 0 || seen[0] != seen[1] {
        return Err(Failure::Error(format!(
            "{}: expected as many compress as decompress rounds, found {} and {}",
            bin.display(),
            seen[0],
            seen[1]
        )));
    }
    Ok(sums)
}

// ---------------------------------------------------------------------------------------
// cabprof's reports

/// What the comparison reads from one report: per function key its self time, whole run and
/// per phase, and the top-level functions' inclusive times.
struct Report {
    /// The keys of every function in the method table: the instrumented ones that ran.
    methods: BTreeSet<String>,
    exclusive: BTreeMap<String, f64>,
    phases: [BTreeMap<String, f64>; 2],
    /// Compensated and raw inclusive ns of each phase's top-level function.
    inclusive: [(f64, f64); 2],
    /// How far the report says each of those may be off, in ns: its sample's interval plus
    /// its calibration's error (the `±` the text shows).
    stated: [f64; 2],
    /// The report's own account of what it took out per timed call, for the record.
    timed_ns: f64,
}

impl Report {
    fn read(path: &Path) -> Res<Report> {
        let bad =
            |what: &str| Failure::Error(format!("{}: malformed report: {what}", path.display()));
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the report {}: {e}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        let mut keys: HashMap<u64, String> = HashMap::new();
        for m in json["methods"]
            .as_array()
            .ok_or_else(|| bad("no `methods` array"))?
        {
            let id = m["id"]
                .as_u64()
                .ok_or_else(|| bad("a method without a numeric `id`"))?;
            let name = m["name"]
                .as_str()
                .ok_or_else(|| bad("a method without a `name`"))?;
            let module = m["module"].as_str().unwrap_or("");
            // A trait method is named `<Type as Trait>::f` without its module.
            let full = if name.starts_with('<') {
                format!("{module}::{}", untrait(name))
            } else {
                name.to_string()
            };
            if let Some(k) = key(&full) {
                keys.insert(id, k);
            }
        }
        let time = json.get("time").filter(|t| !t.is_null()).ok_or_else(|| {
            bad("no `time` section (was the time analysis on: CABPROF_ANALYSES=time?)")
        })?;
        let num = |v: &Value, field: &str| -> Res<f64> {
            v[field]
                .as_f64()
                .ok_or_else(|| bad(&format!("`{field}` missing or not a number")))
        };
        let mut exclusive = BTreeMap::new();
        let mut inclusive = [(f64::NAN, f64::NAN); 2];
        let mut stated = [0.0; 2];
        for f in time["functions"]
            .as_array()
            .ok_or_else(|| bad("no `time.functions`"))?
        {
            let id = f["method"]
                .as_u64()
                .ok_or_else(|| bad("a function without `method`"))?;
            let k = keys
                .get(&id)
                .ok_or_else(|| bad(&format!("method {id} is not in the method table")))?;
            *exclusive.entry(k.clone()).or_insert(0.0) += num(f, "exclusive_ns")?;
            if let Some(p) = PHASES.iter().position(|p| p.1 == k) {
                inclusive[p] = (num(f, "inclusive_ns")?, num(f, "raw_inclusive_ns")?);
                stated[p] = f["inclusive_ci_ns"].as_f64().unwrap_or(0.0)
                    + f["calibration_error_ns"].as_f64().unwrap_or(0.0);
            }
        }
        if let Some(p) = inclusive.iter().position(|i| i.0.is_nan()) {
            return Err(bad(&format!("no time entry for `{}`", PHASES[p].1)));
        }
        // Per phase: each calling context belongs to the top-level function at its root;
        // contexts are listed after their parents.
        let mut phases = [BTreeMap::new(), BTreeMap::new()];
        let mut root_of: HashMap<u64, Option<usize>> = HashMap::new();
        for c in time["contexts"]
            .as_array()
            .ok_or_else(|| bad("no `time.contexts`"))?
        {
            let id = c["id"]
                .as_u64()
                .ok_or_else(|| bad("a context without `id`"))?;
            let parent = c["parent"]
                .as_u64()
                .ok_or_else(|| bad("a context without `parent`"))?;
            let method = c["method"]
                .as_u64()
                .ok_or_else(|| bad("a context without `method`"))?;
            let k = keys.get(&method).ok_or_else(|| {
                bad(&format!(
                    "context method {method} is not in the method table"
                ))
            })?;
            let phase = if parent == 0 {
                PHASES.iter().position(|p| p.1 == k)
            } else {
                *root_of.get(&parent).ok_or_else(|| {
                    bad(&format!("context {id} listed before its parent {parent}"))
                })?
            };
            root_of.insert(id, phase);
            if let Some(p) = phase {
                *phases[p].entry(k.clone()).or_insert(0.0) += num(c, "exclusive_ns")?;
            }
        }
        let timed_ns = time["compensation"]["timed_ns"]
            .as_f64()
            .unwrap_or(f64::NAN);
        Ok(Report {
            methods: keys.into_values().collect(),
            exclusive,
            phases,
            inclusive,
            stated,
            timed_ns,
        })
    }
}

// ---------------------------------------------------------------------------------------
// The comparison

fn shares(m: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let total: f64 = m.values().sum();
    m.iter()
        .map(|(k, &v)| (k.clone(), 100.0 * v / total))
        .collect()
}

fn counts(m: &BTreeMap<String, u64>) -> BTreeMap<String, f64> {
    m.iter().map(|(k, &v)| (k.clone(), v as f64)).collect()
}

/// One share table: its text and the worst difference `(points, function, process)`.
fn share_table(
    title: &str,
    perf: &BTreeMap<String, f64>,
    cab: &[BTreeMap<String, f64>],
    labels: &[&str],
) -> (String, Option<(f64, String, usize)>) {
    let mut rows: Vec<&String> = perf
        .keys()
        .chain(cab.iter().flat_map(|m| m.keys()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| {
            perf.get(*k).copied().unwrap_or(0.0) >= SHARE_FLOOR
                || cab
                    .iter()
                    .any(|m| m.get(*k).copied().unwrap_or(0.0) >= SHARE_FLOOR)
        })
        .collect();
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    rows.sort_by(|a, b| get(perf, b).total_cmp(&get(perf, a)));
    let width = rows.iter().map(|k| k.len()).max().unwrap_or(8).max(8);
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let _ = write!(s, "  {:<width$}  {:>6}", "function", labels[0]);
    for i in 1..=cab.len() {
        let head = labels
            .get(i)
            .map_or_else(|| format!("p{i}"), |l| l.to_string());
        let _ = write!(s, "  {:>16}", format!("{head} (diff)"));
    }
    let _ = writeln!(s, "  {:>8}", "max|diff|");
    let mut worst: Option<(f64, String, usize)> = None;
    for k in rows {
        let p = get(perf, k);
        let _ = write!(s, "  {k:<width$}  {p:>6.1}");
        let mut max = 0.0f64;
        for (i, m) in cab.iter().enumerate() {
            let c = get(m, k);
            let d = c - p;
            let _ = write!(s, "  {:>16}", format!("{c:.1} ({d:+.1})"));
            max = max.max(d.abs());
            if worst.as_ref().is_none_or(|w| d.abs() > w.0.abs()) {
                worst = Some((d, k.clone(), i + 1));
            }
        }
        let _ = writeln!(s, "  {max:>8.1}");
    }
    (s, worst)
}

fn compare(
    sampled: &Sampled,
    counting: &Sampled,
    counting_events: u64,
    reports: &[Report],
    plain_runs: &[[f64; 2]],
) -> String {
    let mut s = String::new();
    for (build, p) in [
        ("plain build".to_string(), sampled),
        (
            format!(
                "profiled build counting calls, no clock read: {counting_events} events recorded"
            ),
            counting,
        ),
    ] {
        let attributed: u64 = p.whole.values().sum();
        let _ =
            writeln!(
            s,
            "perf ({build}; cpu-clock at 9999 Hz, DWARF call chains, inline frames): {} samples, \
             {attributed} in instrumented functions of the crate, {} in cabprof's own code \
             (left out), {} outside the crate's functions (input generation, round-trip check, \
             start-up, cabprof's analyzers; left out), {} unwound short of the top-level function \
             (phase by module), {} of them in no phase (the crate's root; whole run only)",
            p.total, p.in_cabprof, p.outside, p.by_module + p.no_phase, p.no_phase
        );
    }
    let _ = writeln!(
        s,
        "cabprof (profiled build, CABPROF=1 CABPROF_ANALYSES=time, every call timed): {} processes, \
         calibrated cost of a timed call: {}",
        reports.len(),
        reports
            .iter()
            .map(|r| format!("{:.1} ns", r.timed_ns))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "(a) self-time share (%) of the functions at {SHARE_FLOOR} % or more in perf or in any process; \
         diff = cabprof - perf, in points; against perf on the plain build, then on the profiled \
         build counting calls (the program cabprof times, less cabprof's own code)"
    );
    let mut verdicts = Vec::new();
    let mut effect = String::new();
    let whole = |p: &Sampled| shares(&counts(&p.whole));
    let phase = |p: &Sampled, i: usize| shares(&counts(&p.phases[i]));
    let mut tables = vec![(
        "whole run".to_string(),
        "whole run",
        whole(sampled),
        whole(counting),
        reports
            .iter()
            .map(|r| shares(&r.exclusive))
            .collect::<Vec<_>>(),
    )];
    for (p, (name, top)) in PHASES.iter().enumerate() {
        tables.push((
            format!("{name} only (under {top})"),
            name,
            phase(sampled, p),
            phase(counting, p),
            reports.iter().map(|r| shares(&r.phases[p])).collect(),
        ));
    }
    for (title, what, perf_plain, perf_counting, cab) in &tables {
        for (reference, perf) in [("plain", perf_plain), ("counting", perf_counting)] {
            let (t, w) = share_table(
                &format!("{title}, against perf on the {reference} build"),
                perf,
                cab,
                &["perf"],
            );
            s.push_str(&t);
            verdicts.push((*what, reference, w));
        }
        let (t, _) = share_table(
            title,
            perf_plain,
            std::slice::from_ref(perf_counting),
            &["plain", "counting"],
        );
        effect.push_str(&t);
    }

    let _ = writeln!(s);
    let refs: Vec<f64> = (0..2)
        .map(|p| median(&plain_runs.iter().map(|r| r[p]).collect::<Vec<_>>()))
        .collect();
    let _ = writeln!(
        s,
        "(b) top-level inclusive time (3 rounds), compensated ± its stated error (raw), against the plain build's wall \
         time of the same phases: the median of {} plain processes without perf, and the plain \
         process run just before (paired; the host's load drifts between processes)",
        plain_runs.len()
    );
    for (p, (_, top)) in PHASES.iter().enumerate() {
        let runs: Vec<String> = plain_runs
            .iter()
            .map(|r| format!("{:.1}", r[p] / 1e6))
            .collect();
        let _ = writeln!(
            s,
            "  plain {top}: median {:.1} ms (runs: {} ms)",
            refs[p] / 1e6,
            runs.join(", ")
        );
    }
    let _ = write!(s, "  {:<8}", "process");
    for (_, top) in PHASES {
        let name = top.rsplit("::").next().unwrap_or(top);
        let _ = write!(
            s,
            " {:>27} {:>7} {:>7} {:>5}",
            format!("{name} ± (raw)"),
            "/median",
            "/paired",
            "plain"
        );
    }
    let _ = writeln!(s);
    // The ratio furthest from 1, against each reference: (ratio, function, process).
    let mut worst: [Option<(f64, &str, usize)>; 2] = [None, None];
    // Per phase: the processes whose paired plain run lay within the report's `±`.
    let mut inside = [0usize; 2];
    for (i, (r, paired)) in reports.iter().zip(plain_runs).enumerate() {
        let _ = write!(s, "  {:<8}", format!("p{}", i + 1));
        for (p, (_, top)) in PHASES.iter().enumerate() {
            let (comp, raw) = r.inclusive[p];
            let ratios = [comp / refs[p], comp / paired[p]];
            let within = (comp - paired[p]).abs() <= r.stated[p];
            inside[p] += usize::from(within && r.stated[p] > 0.0);
            let _ = write!(
                s,
                " {:>27} {:>6.2}x {:>6.2}x {:>5}",
                format!(
                    "{:.1}±{:.1} ms ({:.1})",
                    comp / 1e6,
                    r.stated[p] / 1e6,
                    raw / 1e6
                ),
                ratios[0],
                ratios[1],
                match (r.stated[p] > 0.0, within) {
                    (false, _) => "n/a",
                    (true, true) => "in",
                    (true, false) => "OUT",
                }
            );
            for (w, ratio) in worst.iter_mut().zip(ratios) {
                if w.is_none_or(|w| (ratio - 1.0).abs() > (w.0 - 1.0).abs()) {
                    *w = Some((ratio, top, i + 1));
                }
            }
        }
        let _ = writeln!(s);
    }
    if !sampled.unseen.is_empty() {
        let _ = writeln!(s);
        let _ =
            writeln!(
            s,
            "instrumented functions in no perf sample (too rarely run to be sampled, or a name \
             that did not map): {}",
            sampled.unseen.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(s, "(c) verdict");
    for (what, reference, w) in verdicts {
        match w {
            Some((d, f, p)) => {
                let ok = d.abs() <= SHARE_POINTS;
                let _ = writeln!(
                    s,
                    "  shares within {SHARE_POINTS} points of perf on the {reference} build in every process ({what}): {} (largest: {f} in p{p}, {d:+.1} points)",
                    if ok { "yes" } else { "NO" }
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  shares ({what}, against perf on the {reference} build): no function at {SHARE_FLOOR} % or more"
                );
            }
        }
    }
    for (p, (_, top)) in PHASES.iter().enumerate() {
        let _ = writeln!(
            s,
            "  the paired plain run within {top}'s stated ± (sample interval + calibration error): {}/{} processes",
            inside[p],
            reports.len()
        );
    }
    for (reference, w) in ["the median plain run", "the paired plain run"]
        .iter()
        .zip(worst)
    {
        if let Some((ratio, top, p)) = w {
            let ok = (ratio - 1.0).abs() <= INCLUSIVE_TOLERANCE;
            let _ = writeln!(
                s,
                "  top-level inclusive within {:.0} % of {reference} in every process: {} (furthest: {top} in p{p}, {ratio:.2}x)",
                INCLUSIVE_TOLERANCE * 100.0,
                if ok { "yes" } else { "NO" }
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "(d) what instrumenting does to the program: perf's shares on the profiled build counting \
         calls (cabprof's own code left out) against the plain build's; diff in points"
    );
    s.push_str(&effect);
    s
}
