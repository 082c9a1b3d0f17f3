//! `cabprof simulate --count-as cachegrind` against Valgrind's Cachegrind itself: a small C
//! program (line-crossing accesses, read-modify-writes, copies wider than 16 bytes) is traced
//! with Lackey and simulated by cachegrind; on that trace cabprof's I refs, I1 and LLi misses,
//! D refs, D1 and LLd misses (reads and writes apart) must equal cachegrind's summary for
//! each geometry, and its reuse-distance curve at a fully-associative D1's capacity must equal
//! that D1's misses. Per-line counting, the default, must differ (the trace has M records).
//!
//! Needs `valgrind` and a C compiler (Debian's `valgrind` and `gcc`): when either is missing
//! the test says so and passes, unless the `CI` variable is set, when it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAM: &str = r#"
#include <stdlib.h>
#include <string.h>
struct rec { char name[12]; double w; short k; };
int main(void) {
    int n = 20000;
    struct rec *r = malloc(sizeof(struct rec) * n);
    long *a = malloc(sizeof(long) * n);
    for (int i = 0; i < n; i++) {
        a[i] = (i * 7919L) % n;
        r[i].w = i * 0.5;
        r[i].k = (short)i;
        memcpy(r[i].name, "abcdefghijk", 12);
    }
    long s = 0;
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < n; i++) { s += a[a[i]]; r[a[i]].w += 1.0; r[i].k++; }
    char buf[8192];
    memset(buf, 1, sizeof buf);
    for (int i = 1; i < 8000; i += 61) s += *(volatile long *)(buf + i);
    char *copy = malloc(sizeof buf);
    memcpy(copy, buf + 3, sizeof buf - 3);
    s += copy[100];
    free(copy); free(r); free(a);
    volatile long sink = s;
    (void)sink;
    return 0;
}
"#;

/// `(I1, D1, LL)` as cachegrind's `SIZE,WAYS,LINE`.
const GEOMETRIES: [(&str, &str, &str); 3] = [
    ("32768,8,64", "32768,8,64", "1048576,16,64"),
    ("4096,2,32", "8192,4,32", "65536,8,32"),
    // Fully associative D1 of 256 lines: its misses are the reuse curve at 256 lines.
    ("32768,8,64", "16384,256,64", "262144,16,64"),
];

fn available(program: &str, package: &str) -> bool {
    let ok = Command::new(program).arg("--version").output().is_ok();
    if !ok {
        let message = format!(
            "`{program}` is not installed (Debian package `{package}`): cabprof's cachegrind \
             counting cannot be checked against cachegrind"
        );
        assert!(std::env::var_os("CI").is_none(), "{message}, and CI is set");
        eprintln!("SKIPPED: {message}");
    }
    ok
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

/// The nine counts of a cachegrind out file's `summary:` line, by event name.
fn cachegrind_summary(out: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(out).unwrap();
    let events = text
        .lines()
        .find_map(|l| l.strip_prefix("events: "))
        .expect("an events: line");
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .expect("a summary: line");
    events
        .split_whitespace()
        .zip(summary.split_whitespace())
        .map(|(e, v)| (e.to_string(), v.parse().unwrap()))
        .collect()
}

/// The same counts from cabprof's cachegrind lines (`D1  misses:  N  (R rd + W wr)`).
fn cabprof_summary(text: &str) -> Vec<(String, u64)> {
    let line = |name: &str| -> Vec<u64> {
        let rest = text
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name:?} line in:\n{text}"));
        rest.split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .map(|w| w.parse().unwrap())
            .collect()
    };
    let ir = line("I refs:");
    let i1 = line("I1  misses:");
    let il = line("LLi misses:");
    let d = line("D refs:");
    let d1 = line("D1  misses:");
    let dl = line("LLd misses:");
    [
        ("Ir", ir[0]),
        ("I1mr", i1[0]),
        ("ILmr", il[0]),
        ("Dr", d[1]),
        ("D1mr", d1[1]),
        ("DLmr", dl[1]),
        ("Dw", d[2]),
        ("D1mw", d1[2]),
        ("DLmw", dl[2]),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect()
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cachegrind_counts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn counting_as_cachegrind_gives_cachegrinds_figures() {
    if !available("valgrind", "valgrind") || !available("cc", "gcc") {
        return;
    }
    let dir = scratch();
    let source = dir.join("prog.c");
    let program = dir.join("prog");
    std::fs::write(&source, PROGRAM).unwrap();
    run(Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&program)
        .arg(&source));
    let trace = dir.join("prog.lackey");
    run(Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", trace.display()))
        .arg(&program));
    let cabprof = env!("CARGO_BIN_EXE_cabprof");

    // Each geometry is a cachegrind run and a simulation of the trace, independent of the
    // others: run side by side (a debug build's simulation takes most of the time).
    let check = |i: usize, (i1, d1, ll): (&str, &str, &str)| {
        let out = dir.join(format!("cachegrind.out.{i}"));
        run(Command::new("valgrind")
            .args(["--tool=cachegrind", "--cache-sim=yes"])
            .arg(format!("--I1={i1}"))
            .arg(format!("--D1={d1}"))
            .arg(format!("--LL={ll}"))
            .arg(format!("--cachegrind-out-file={}", out.display()))
            .arg(&program));
        let reference = cachegrind_summary(&out);
        let text = run(Command::new(cabprof)
            .arg("simulate")
            .arg(&trace)
            .args(["--count-as", "cachegrind", "--no-progress"])
            .args(["--I1", i1, "--D1", d1, "--LL", ll]));
        assert_eq!(
            cabprof_summary(&text),
            reference,
            "I1 {i1}, D1 {d1}, LL {ll}:\n{text}"
        );

        if i == 2 {
            // The reuse-distance curve follows the counting: at the fully-associative D1's
            // 256 lines it misses exactly as often as that D1.
            let d1_misses = reference[4].1 + reference[7].1;
            let row = text
                .lines()
                .find(|l| l.split_whitespace().nth(2) == Some("256"))
                .unwrap_or_else(|| panic!("no 256-line row in:\n{text}"));
            let misses: u64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
            assert_eq!(misses, d1_misses, "{row}");
        }
    };
    std::thread::scope(|s| {
        for (i, g) in GEOMETRIES.into_iter().enumerate() {
            s.spawn(move || check(i, g));
        }
    });

    // Per-line counting counts M records twice and crossing accesses per line: more data
    // accesses than cachegrind's D refs on this trace.
    let (_, d1, ll) = GEOMETRIES[0];
    let text = run(Command::new(cabprof).arg("simulate").arg(&trace).args([
        "--no-progress",
        "--policy",
        "lru",
        "--D1",
        d1,
        "--LL",
        ll,
    ]));
    let reference = cachegrind_summary(&dir.join("cachegrind.out.0"));
    let d_refs = reference[3].1 + reference[6].1;
    let l1 = text.lines().find(|l| l.starts_with("L1 ")).unwrap();
    let f: Vec<u64> = l1
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // The row's numbers: size, ways, line, loads, load misses, stores, store misses.
    let per_line_accesses = f[3] + f[5];
    assert!(per_line_accesses > d_refs, "{l1} vs D refs {d_refs}");
}

/// The pipe example of `cabprof simulate --help` works as printed: the program's own output
/// stays out of the trace (it used to be `2>&1 |`, which stopped at the program's first line).
#[test]
fn the_help_pipe_example_reads_the_whole_trace() {
    if !available("valgrind", "valgrind") || !available("cc", "gcc") {
        return;
    }
    let dir = scratch();
    let source = dir.join("hello.c");
    let program = dir.join("hello");
    std::fs::write(
        &source,
        "#include <stdio.h>\nint main(void) { for (int i = 0; i < 3; i++) printf(\"hello %d\\n\", i);\n  fprintf(stderr, \"an error line\\n\"); return 0; }\n",
    )
    .unwrap();
    run(Command::new("cc").arg("-o").arg(&program).arg(&source));
    let cabprof = env!("CARGO_BIN_EXE_cabprof");
    let help = run(Command::new(cabprof).args(["simulate", "--help"]));
    let example = help
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("valgrind") && l.ends_with("| cabprof simulate -"))
        .expect("a pipe example in simulate --help");
    let command = example
        .replace("./app", &program.display().to_string())
        .replace("| cabprof ", &format!("| {cabprof} "));
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(format!("{command} --no-progress")));
    assert!(
        out.contains("records ") && !out.contains("PARTIAL"),
        "{out}"
    );
}
