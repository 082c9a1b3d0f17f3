//! The pprof and callgrind renderings, read back by the real readers: `go tool pprof` (Debian's
//! `golang-go`) and `callgrind_annotate` (Debian's `valgrind`). Their per-function totals must
//! equal the report's own: calls (flat and cumulative) and misses per cache level.
//!
//! When a reader is missing the test says so on stderr and passes, unless the `CI` variable is
//! set: then a missing reader fails the test (`.ci/run` installs both).

#[cfg(feature = "pprof")]
use crate::go_pprof;

use cabprof::{profile, Analysis, LevelConfig, Policy, ReportData, Session};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// One session at a time per process.
use crate::support::SERIAL;

#[profile(memory)]
fn sum_strided(v: &[u64], stride: usize) -> u64 {
    let mut s = 0;
    let mut i = 0;
    while i < v.len() {
        s += v[i];
        i += stride;
    }
    s
}

#[profile(memory)]
fn bump(v: &mut [u64], i: usize) {
    v[i] += 1;
}

#[profile]
fn countdown(v: &mut [u64], n: usize) {
    bump(v, n * 8);
    if n > 0 {
        countdown(v, n - 1);
    }
}

#[profile]
fn phase(v: &mut [u64], rounds: usize) -> u64 {
    let mut s = 0;
    for r in 0..rounds {
        s += sum_strided(v, 8);
        bump(v, r);
    }
    countdown(v, 3);
    s
}

#[profile]
fn program() -> u64 {
    let mut v = vec![1u64; 16 * 1024];
    let a = phase(&mut v, 3);
    let b = phase(&mut v, 5);
    a + b + sum_strided(&v, 64)
}

/// One sequential session of `program` with every analysis, and small caches so it misses.
fn report() -> &'static ReportData {
    static REPORT: OnceLock<ReportData> = OnceLock::new();
    REPORT.get_or_init(|| {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let session = Session::builder()
            .sequential()
            .analyses(&[
                Analysis::MethodCount,
                Analysis::CallGraph,
                Analysis::CallTree,
                Analysis::Cache,
            ])
            .cache_levels(&[
                LevelConfig::new(4096, 4, 64, Policy::Lru),
                LevelConfig::new(32 * 1024, 8, 64, Policy::Lru),
            ])
            .start()
            .unwrap();
        std::hint::black_box(program());
        session.finish().data
    })
}

/// Calls per function name: flat (its own) and cumulative (its subtree, recursion once).
fn expected_calls(data: &ReportData) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for m in data.method_count.as_ref().unwrap() {
        out.entry(data.name(m.method)).or_default().0 += m.count;
    }
    for (stack, count) in data.call_tree.as_ref().unwrap().stacks() {
        let distinct: BTreeSet<u32> = stack.iter().copied().collect();
        for m in distinct {
            out.entry(data.name(m)).or_default().1 += count;
        }
    }
    out
}

/// Misses per function name at `level`.
fn expected_misses(data: &ReportData, level: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in &data.cache.as_ref().unwrap().by_method {
        if e.level == level && e.load_misses + e.store_misses > 0 {
            *out.entry(data.name(e.method)).or_default() += e.load_misses + e.store_misses;
        }
    }
    out
}

/// Whether `program` runs; if not, say so, and fail under CI.
fn available(program: &str, args: &[&str], package: &str) -> bool {
    // Found and started is enough: `callgrind_annotate --version` exits with status 255.
    let ok = Command::new(program).args(args).output().is_ok();
    if !ok {
        let message = format!(
            "`{program}` is not installed (Debian package `{package}`): this test cannot check \
             the file with the real reader"
        );
        assert!(std::env::var_os("CI").is_none(), "{message}, and CI is set");
        eprintln!("SKIPPED: {message}");
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profile_formats");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `go tool pprof -top` rows: function name → (flat, cum).
#[cfg(feature = "pprof")]
fn pprof_top(file: &Path, sample_index: &str) -> BTreeMap<String, (u64, u64)> {
    let text = run(Command::new("go")
        .args([
            "tool",
            "pprof",
            "-top",
            "-nodecount=100000",
            "-nodefraction=0",
            "-edgefraction=0",
            &format!("-sample_index={sample_index}"),
        ])
        .arg(file));
    go_pprof::top_rows(&text)
}

#[cfg(feature = "pprof")]
#[test]
fn go_tool_pprof_reads_the_reports_totals_per_function() {
    if !available("go", &["version"], "golang-go") {
        return;
    }
    let data = report();
    let file = scratch("profile.pb.gz");
    std::fs::write(&file, data.pprof_labeled(&[("service", "test")])).unwrap();

    let top = pprof_top(&file, "calls");
    let expected = expected_calls(data);
    assert_eq!(top, expected, "flat and cum calls per function");
    assert_eq!(expected["it::profile_formats::bump"].0, 3 + 4 + 5 + 4);
    assert_eq!(expected["it::profile_formats::countdown"], (8, 8 + 8));

    for (level, index) in [(0, "l1_misses"), (1, "l2_misses")] {
        let misses = expected_misses(data, level);
        assert!(!misses.is_empty(), "the workload misses at L{}", level + 1);
        let flat: BTreeMap<String, u64> = pprof_top(&file, index)
            .into_iter()
            .filter(|(_, (flat, _))| *flat > 0)
            .map(|(name, (flat, _))| (name, flat))
            .collect();
        assert_eq!(flat, misses, "{index} per function");
    }

    // The functions carry their source file and line; the comments carry the mode.
    let raw = run(Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&file));
    let method = data
        .methods
        .iter()
        .find(|m| m.name == "it::profile_formats::phase")
        .unwrap();
    let location = format!(
        "it::profile_formats::phase {}:{} s={}",
        method.file, method.line, method.line
    );
    assert!(raw.contains(&location), "{location} not in:\n{raw}");
    let comments = run(Command::new("go")
        .args(["tool", "pprof", "-comments"])
        .arg(&file));
    assert!(comments.contains("mode=sequential"), "{comments}");
    assert!(raw.contains("service:[test]"), "{raw}");
}

/// `callgrind_annotate` rows: function name → costs, one per event.
fn annotate(file: &Path, inclusive: bool) -> (Vec<String>, BTreeMap<String, Vec<u64>>) {
    let text = run(Command::new("callgrind_annotate")
        .arg(format!(
            "--inclusive={}",
            if inclusive { "yes" } else { "no" }
        ))
        .arg("--threshold=100")
        .arg(file));
    let mut events = Vec::new();
    let mut rows = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        // The table of functions: a header `EV1 EV2 ...  file:function`, dashes, then rows.
        if line.trim_end().ends_with("file:function") {
            events = line
                .split_whitespace()
                .take_while(|w| *w != "file:function")
                .map(str::to_string)
                .collect();
            lines.next();
            for row in lines.by_ref() {
                // Drop the percentages: `16 (44.44%)     14 ( 0.08%)  file:function`.
                let mut depth = 0;
                let row: String = row
                    .chars()
                    .filter(|&c| {
                        depth += (c == '(') as i32;
                        let keep = depth == 0;
                        depth -= (c == ')') as i32;
                        keep
                    })
                    .collect();
                let fields: Vec<&str> = row.split_whitespace().collect();
                if fields.len() <= events.len() {
                    break;
                }
                let costs = fields[..events.len()]
                    .iter()
                    .map(|f| {
                        let f = f.replace(',', "");
                        if f == "." {
                            0
                        } else {
                            f.parse().expect("a count")
                        }
                    })
                    .collect();
                let place = fields[events.len()..].join(" ");
                let name = place.split_once(':').map_or(place.as_str(), |(_, n)| n);
                let name = name.split(" [").next().unwrap().to_string();
                rows.insert(name, costs);
            }
            break;
        }
    }
    assert!(!events.is_empty(), "no function table in:\n{text}");
    (events, rows)
}

#[test]
fn callgrind_annotate_reads_the_reports_totals_per_function() {
    if !available("callgrind_annotate", &["--version"], "valgrind") {
        return;
    }
    let data = report();
    let file = scratch("callgrind.out.profile_formats");
    std::fs::write(&file, data.callgrind()).unwrap();

    let calls = expected_calls(data);
    let l1 = expected_misses(data, 0);
    let l2 = expected_misses(data, 1);
    let (events, own) = annotate(&file, false);
    assert_eq!(events, ["Calls", "L1m", "L2m"]);
    let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (name, &(flat, _)) in &calls {
        expected.insert(
            name.clone(),
            vec![
                flat,
                l1.get(name).copied().unwrap_or(0),
                l2.get(name).copied().unwrap_or(0),
            ],
        );
    }
    for (name, m) in &l1 {
        expected
            .entry(name.clone())
            .or_insert_with(|| vec![0, *m, l2.get(name).copied().unwrap_or(0)]);
    }
    let own: BTreeMap<String, Vec<u64>> = own
        .into_iter()
        .filter(|(_, c)| c.iter().any(|&v| v > 0))
        .collect();
    assert_eq!(own, expected, "self costs per function");

    // Inclusive calls: the calls made in the function's subtree. callgrind_annotate adds a
    // function's outgoing call costs to its own, so a recursive function's recursive calls are
    // counted again (as for Callgrind's own files): compare the others.
    let (_, inclusive) = annotate(&file, true);
    let recursive: BTreeSet<String> = data
        .call_tree
        .as_ref()
        .unwrap()
        .stacks()
        .into_iter()
        .flat_map(|(stack, _)| {
            let mut seen = BTreeSet::new();
            stack
                .into_iter()
                .filter(move |m| !seen.insert(*m))
                .map(|m| data.name(m))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        recursive,
        BTreeSet::from(["it::profile_formats::countdown".to_string()])
    );
    for (name, &(_, cum)) in calls.iter().filter(|(n, _)| !recursive.contains(*n)) {
        assert_eq!(inclusive[name][0], cum, "inclusive calls of {name}");
    }
}

/// A running service's interval profile: a later snapshot minus an earlier one, read by pprof.
#[cfg(feature = "pprof")]
#[test]
fn pprof_since_holds_what_happened_between_two_snapshots() {
    if !available("go", &["version"], "golang-go") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallTree])
        .pin(false)
        .start()
        .unwrap();
    let mut v = vec![1u64; 4096];
    std::hint::black_box(phase(&mut v, 2));
    let earlier = session.snapshot().unwrap().data;
    std::hint::black_box(phase(&mut v, 5));
    let later = session.snapshot().unwrap().data;
    drop(session.finish());

    let count = |d: &ReportData, name: &str| {
        d.method_count
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| d.name(m.method) == name)
            .map_or(0, |m| m.count)
    };
    let file = scratch("interval.pb.gz");
    std::fs::write(&file, later.pprof_since(&earlier, &[("host", "h1")])).unwrap();
    let top = pprof_top(&file, "calls");
    for name in [
        "it::profile_formats::bump",
        "it::profile_formats::sum_strided",
        "it::profile_formats::phase",
    ] {
        let expected = count(&later, name) - count(&earlier, name);
        assert_eq!(top[name].0, expected, "{name}");
    }
    // The second phase alone: 5 rounds, so 5 strided sums, 5 + 4 bumps, one phase.
    assert_eq!(top["it::profile_formats::sum_strided"].0, 5);
    assert_eq!(top["it::profile_formats::bump"].0, 9);
    assert_eq!(top["it::profile_formats::phase"].0, 1);
}
