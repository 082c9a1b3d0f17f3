//! The `cabprof` binary, run as a process: `--help` of every subcommand, `simulate` on good,
//! malformed and binary traces (from files and stdin), `trace convert|generate`, `report` on a
//! JSON report written by a real session, and `hw`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use cabprof::Session;
use cabprof_cab::runtime::emit;
use cabprof_cab::{Event, MethodId};

/// A fresh path in this test binary's scratch directory.
fn scratch(name: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cabprof-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{}-{n}-{name}", std::process::id()))
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Run `cabprof args...` with `stdin` (empty if `None`).
fn cabprof(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cabprof"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cabprof runs");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// `(loads, load misses, stores, store misses)` of cache level `level` (1-based) in a
/// `simulate` output.
fn level(out: &str, level: u32) -> (u64, u64, u64, u64) {
    let row = out
        .lines()
        .find(|l| l.starts_with(&format!("L{level} ")))
        .unwrap_or_else(|| panic!("no L{level} row in:\n{out}"));
    // L1  32 KiB  4  64 B  loads  misses  rate  stores  misses  rate  miss
    let f: Vec<&str> = row.split_whitespace().collect();
    let n = |i: usize| f[i].parse::<u64>().unwrap();
    (n(6), n(7), n(9), n(10))
}

/// A Lackey trace as valgrind writes it, with known results on the default hierarchy.
const LACKEY: &str = "\
==4242== Lackey, an example Valgrind tool
==4242== Command: ./app
I  0400d7d4,8
 L 00001000,8
 L 00001008,8
I  0400d7dc,4
 S 00002000,4
 M 00001000,4
 L 00003000,16
 S 00001038,16
==4242== 
";

#[test]
fn every_subcommand_has_help_with_examples() {
    for args in [
        &[][..],
        &["report"],
        &["simulate"],
        &["trace"],
        &["trace", "convert"],
        &["trace", "generate"],
        &["hw"],
    ] {
        let mut full = args.to_vec();
        full.push("--help");
        let out = cabprof(&full, None);
        assert!(out.status.success(), "{full:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("Usage: cabprof"), "{full:?}:\n{text}");
        assert!(text.contains("Examples:"), "{full:?}:\n{text}");
    }
    let simulate = stdout(&cabprof(&["simulate", "--help"], None));
    for needle in ["CABTRACE", "Lackey", "--l1", "--policy", "Exit status"] {
        assert!(simulate.contains(needle), "simulate --help lacks {needle}");
    }
}

#[test]
fn simulate_counts_a_lackey_trace() {
    let trace = write("good.lackey", LACKEY.as_bytes());
    let out = cabprof(
        &["simulate", trace.to_str().unwrap(), "--no-progress"],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Loads: 1000 (miss), 1008 (hit), M's load of 1000 (hit), 3000 (miss).
    // Stores: 2000 (miss), M's store of 1000 (hit), 1038,16 crosses into 1040 (hit + miss).
    assert_eq!(level(&text, 1), (4, 2, 4, 2), "{text}");
    assert_eq!(level(&text, 2), (2, 2, 2, 2), "{text}");
    assert!(
        text.contains("11 lines: 3 loads, 2 stores, 1 modifies, 2 instruction fetches (not simulated), 3 valgrind lines"),
        "{text}"
    );
    assert!(text.contains("reuse distance (64 B lines): 8 accesses, 4 cold, 4 distinct lines"));
    assert!(text.contains("accesses/s"));
    assert!(!text.contains("PARTIAL"));

    // The same trace from stdin, with instruction fetches, LRU and a 3-level hierarchy.
    let out = cabprof(
        &[
            "simulate",
            "-",
            "--instructions",
            "--policy",
            "lru",
            "--l3",
            "8M:16:64",
        ],
        Some(LACKEY.as_bytes()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(level(&text, 1), (6, 3, 4, 2), "{text}");
    assert_eq!(level(&text, 3).1, 3, "{text}");
    assert!(text.contains("standard input (Lackey text)"));
    assert!(text.contains("LRU"));
}

#[test]
fn simulate_rejects_a_malformed_line_keeping_what_it_counted() {
    let bad = format!("{LACKEY} L 00004000,8\n S 0000zz00,8\n L 00005000,8\n");
    let trace = write("bad.lackey", bad.as_bytes());
    let out = cabprof(&["simulate", trace.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("malformed Lackey line 13: expected ',' after the address: \" S 0000zz00,8\""),
        "{err}"
    );
    let text = stdout(&out);
    assert!(text.contains("PARTIAL"), "{text}");
    // Everything before line 13 was simulated, including line 12's load.
    assert_eq!(level(&text, 1), (5, 3, 4, 2), "{text}");
    assert!(text.contains("12 lines: 4 loads"), "{text}");
}

#[test]
fn binary_traces_give_the_same_results_as_lackey() {
    let lackey = write("conv.lackey", LACKEY.as_bytes());
    let binary = scratch("conv.cabtrace");
    let out = cabprof(
        &[
            "trace",
            "convert",
            lackey.to_str().unwrap(),
            binary.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("7 accesses written"),
        "{}",
        stdout(&out)
    );
    let bytes = std::fs::read(&binary).unwrap();
    assert_eq!(&bytes[..8], b"CABTRACE");
    assert_eq!(bytes.len(), 16 + 7 * 8);

    let from_text = stdout(&cabprof(&["simulate", lackey.to_str().unwrap()], None));
    for args in [
        vec!["simulate", binary.to_str().unwrap()],
        vec!["simulate", binary.to_str().unwrap(), "--format", "binary"],
        vec!["simulate", "-", "--analyzers", "2"],
    ] {
        let out = cabprof(&args, Some(&bytes));
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("(cabprof binary)"), "{text}");
        for l in 1..=2 {
            assert_eq!(level(&text, l), level(&from_text, l), "{args:?}\n{text}");
        }
        assert!(
            text.contains("8 accesses, 4 cold, 4 distinct lines"),
            "{text}"
        );
    }

    // And back to Lackey text.
    let back = scratch("back.lackey");
    let out = cabprof(
        &[
            "trace",
            "convert",
            binary.to_str().unwrap(),
            back.to_str().unwrap(),
            "--to",
            "lackey",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&back).unwrap();
    assert!(
        text.starts_with(" L 00001000,8\n L 00001008,8\n S 00002000,4\n"),
        "{text}"
    );
    let again = stdout(&cabprof(&["simulate", back.to_str().unwrap()], None));
    assert_eq!(level(&again, 1), level(&from_text, 1));
}

#[test]
fn malformed_binary_traces_are_rejected() {
    let lackey = write("m.lackey", LACKEY.as_bytes());
    let binary = scratch("m.cabtrace");
    let conv = cabprof(
        &[
            "trace",
            "convert",
            lackey.to_str().unwrap(),
            binary.to_str().unwrap(),
        ],
        None,
    );
    assert!(conv.status.success());
    let good = std::fs::read(&binary).unwrap();

    // Text forced to be binary: no magic.
    let out = cabprof(
        &["simulate", lackey.to_str().unwrap(), "--format", "binary"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("expected magic \"CABTRACE\""),
        "{}",
        stderr(&out)
    );

    // A stray half record at the end: the 8 whole records are still simulated.
    let mut truncated = good.clone();
    truncated.extend_from_slice(&[0x40, 0x10, 0]);
    let out = cabprof(&["simulate", "-"], Some(&truncated));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("3 byte(s) at offset 72"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("7 words"), "{}", stdout(&out));

    // A word that is not a Mem event.
    let mut bad = good.clone();
    bad[16 + 8 * 3..16 + 8 * 4].copy_from_slice(&0u64.to_le_bytes());
    let out = cabprof(&["simulate", "-"], Some(&bad));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("binary record 3 (byte offset 40) is 0x0000000000000000"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("3 words"), "{}", stdout(&out));
}

#[test]
fn generated_traces_have_the_expected_misses() {
    let trace = scratch("gen.cabtrace");
    let out = cabprof(
        &[
            "trace",
            "generate",
            trace.to_str().unwrap(),
            "--accesses",
            "100K",
            "--working-set",
            "16K",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = cabprof(&["simulate", trace.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // 16 KiB = 256 lines, all cold misses, then all hits; every 4th access a store.
    let (loads, load_misses, stores, store_misses) = level(&text, 1);
    assert_eq!((loads, stores), (75_000, 25_000));
    assert_eq!(load_misses + store_misses, 256);
    assert!(
        text.contains("100000 accesses, 256 cold, 256 distinct lines"),
        "{text}"
    );

    // Lackey output with instruction fetches parses back to the same data accesses.
    let lackey = scratch("gen.lackey");
    let out = cabprof(
        &[
            "trace",
            "generate",
            lackey.to_str().unwrap(),
            "--to",
            "lackey",
            "--accesses",
            "100K",
            "--fetches",
            "2",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&cabprof(&["simulate", lackey.to_str().unwrap()], None));
    assert_eq!(level(&text, 1).0, 75_000, "{text}");
    assert!(text.contains("200000 instruction fetches"), "{text}");
}

#[test]
fn bad_arguments_are_usage_errors() {
    let trace = write("args.lackey", LACKEY.as_bytes());
    let t = trace.to_str().unwrap();
    for (args, needle) in [
        (vec!["simulate", t, "--l1", "1000:4:64"], "multiple of ways"),
        (vec!["simulate", t, "--l1", "32K:4"], "SIZE:WAYS:LINE"),
        (vec!["simulate", t, "--l1", "none"], "--l1 cannot be 'none'"),
        (vec!["simulate", t, "--line", "48"], "power of two"),
        (vec!["simulate", t, "--chunk", "100"], "chunk_bytes"),
        (vec!["simulate", t, "--policy", "random"], "invalid value"),
        (vec!["simulate", t, "--analyzers", "3"], "3"),
    ] {
        let out = cabprof(&args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let out = cabprof(&["simulate", "/nonexistent/trace"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot open /nonexistent/trace"));
}

/// A JSON report from a real (tiny) session: main calls work twice, work calls leaf.
fn report_json() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let m = |id| MethodId::new(id).unwrap();
        let _g = crate::serial();
        let session = Session::builder().all_analyses().start().unwrap();
        emit(Event::call(MethodId::ROOT, m(1)));
        for _ in 0..2 {
            emit(Event::call(m(1), m(2)));
            emit(Event::call(m(2), m(3)));
            emit(Event::mem(0x1000, 8, false).unwrap());
            emit(Event::ret(m(3)));
            emit(Event::ret(m(2)));
        }
        emit(Event::ret(m(1)));
        let report = session.finish();
        write("report.json", report.json().as_bytes())
    })
}

#[test]
fn report_renders_a_saved_json_in_every_format() {
    let json = report_json().to_str().unwrap();
    let table = cabprof(&["report", json], None);
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    assert!(text.contains("cabprof report"), "{text}");
    assert!(text.contains("function#2"), "{text}");

    let out = cabprof(&["report", json, "--format", "json"], None);
    let again = cabprof::ReportData::from_json(&stdout(&out)).unwrap();
    let original = cabprof::ReportData::from_json(&std::fs::read_to_string(json).unwrap());
    assert_eq!(again.json(), original.unwrap().json());

    let folded = stdout(&cabprof(&["report", json, "--format", "folded"], None));
    assert!(
        folded.contains("root;function#1;function#2;function#3 2"),
        "{folded}"
    );
    let dot = stdout(&cabprof(&["report", json, "--format", "dot"], None));
    assert!(dot.starts_with("digraph"), "{dot}");

    let svg = scratch("flame.svg");
    let out = cabprof(
        &[
            "report",
            json,
            "--format",
            "svg",
            "-o",
            svg.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    let from_stdin = cabprof(
        &["report", "-", "--top", "1"],
        Some(&std::fs::read(json).unwrap()),
    );
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
}

#[test]
fn report_rejects_what_is_not_a_report() {
    let not_json = write("bad.json", b"{ \"schema\": ");
    let out = cabprof(&["report", not_json.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a cabprof report"),
        "{}",
        stderr(&out)
    );
    let out = cabprof(&["report", "/nonexistent.json"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot read /nonexistent.json"));
    let out = cabprof(&["report", "x.json", "--format", "pdf"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hw_shows_sysfs_and_the_recommended_ring() {
    let out = cabprof(&["hw", "--no-probe"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("caches of cpu0"), "{text}");
    assert!(text.contains("X-Ray probe  not run"), "{text}");
    assert!(text.contains("recommended CAB ring"), "{text}");
    assert!(text.contains("chunk") && text.contains("buffer"), "{text}");
}
