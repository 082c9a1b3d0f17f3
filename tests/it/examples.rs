//! Every example runs in its short mode and its output is checked; the service example is
//! driven end to end: started, loaded with requests, interrupted with SIGINT, and its final
//! report read back.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Build the examples once (debug profile, same as the tests) and return their directory.
fn examples_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        // Built with every feature, this test most likely runs under the README's test
        // command (`--workspace --all-features`), which has built these examples already: the
        // same packages and features find them up to date, where another selection would
        // resolve the dependencies' features anew and build it all again.
        if cfg!(all(
            feature = "flamegraph",
            feature = "pprof",
            feature = "serve"
        )) {
            build.args(["build", "-q", "--workspace", "--all-features", "--examples"]);
        } else {
            build.args(["build", "-q", "-p", "cabprof", "--examples"]);
            // With the flame graph when this test has it, so the example writes its SVG.
            if cfg!(feature = "flamegraph") {
                build.args(["--features", "flamegraph"]);
            }
        }
        let status = build.status().expect("run cargo build --examples");
        assert!(status.success(), "examples build");
        let exe = std::env::current_exe().unwrap();
        exe.parent().unwrap().parent().unwrap().join("examples")
    })
}

fn run(example: &str, args: &[&str]) -> String {
    let out = Command::new(examples_dir().join(example))
        .args(args)
        .env("CABPROF_PIN", "0")
        .output()
        .expect("run example");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{example} failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn hot_functions_prints_every_analysis_and_writes_reports() {
    let out = run("hot_functions", &[]);
    for section in [
        "evaluated 2000 expressions",
        "calls per function",
        "call graph edges",
        "call-tree patterns",
        "calling contexts",
        "hottest paths",
        "cache simulation",
        "reuse distance",
        "hot_functions::eval",
        "Parser<'_>::factor",
    ] {
        assert!(out.contains(section), "missing {section:?} in:\n{out}");
    }
    // Paths are decoded to source lines.
    assert!(out.contains("line "), "{out}");
    // The example installs the allocator wrapper: the allocations it makes are counted.
    assert!(out.contains("\nallocations: "), "{out}");
    assert!(!out.contains("no allocation was reported"), "{out}");
    assert!(!out.contains("allocations: 0 allocs"), "{out}");
    // Exhaustive: every event analyzed, none dropped.
    assert!(out.contains("dropped 0"), "{out}");
    let json = std::fs::read_to_string("target/cabprof/hot_functions.json").unwrap();
    let data = cabprof::ReportData::from_json(&json).unwrap();
    assert_eq!(data.totals.events, data.totals.analyzed);
    #[cfg(feature = "flamegraph")]
    {
        let svg = std::fs::read_to_string("target/cabprof/hot_functions.svg").unwrap();
        assert!(svg.contains("<svg"));
    }
}

#[test]
fn waits_shows_who_waited_and_where() {
    let out = run("waits", &[]);
    for part in [
        "\nwaits: ",
        "by calling context",
        "waits::worker > waits::handle > waits::lookup",
        "waits::produce",
        "by creation site",
        "Mutex examples/waits.rs:",
        "sync_channel examples/waits.rs:",
        "channel latency, send to receive",
    ] {
        assert!(out.contains(part), "missing {part:?} in:\n{out}");
    }
}

#[test]
fn compare_buffers_prints_every_design_relative_to_cab() {
    let out = run("compare_buffers", &["--short"]);
    for row in [
        "no session",
        "CAB",
        "FastForward",
        "N-way",
        "vs CAB",
        "1.00x",
    ] {
        assert!(out.contains(row), "missing {row:?} in:\n{out}");
    }
}

#[test]
fn cache_sim_compares_naive_and_blocked() {
    let out = run("cache_sim", &["--short"]);
    for row in [
        "naive",
        "blocked",
        "L1 32 KB 4-way miss rate",
        "L2 512 KB",
        "lines (",
    ] {
        assert!(out.contains(row), "missing {row:?} in:\n{out}");
    }
}

/// A child that takes Ctrl-C as it would from a terminal: SIGINT at its default action,
/// whatever this process inherited. A shell starts a background job (`cmd &` in a script,
/// `nohup`) with SIGINT ignored, the child inherits that, and cabprof leaves a signal the
/// program ignores ignored, so `kill -INT` would not end it.
#[cfg(unix)]
fn default_sigint(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only calls `signal`, which is
    // async-signal-safe, and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

#[test]
#[cfg(unix)]
fn service_survives_load_and_reports_completely_on_sigint() {
    let dir = std::env::temp_dir().join(format!("cabprof-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let requests = 20_000u64;
    let mut child = default_sigint(&mut Command::new(examples_dir().join("service")))
        .args([
            "--requests",
            &requests.to_string(),
            "--snapshot-every",
            "0.2",
            "--out",
        ])
        .arg(&dir)
        .env("CABPROF_PIN", "0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the service");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on 127.0.0.1:"), "{line}");
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(
        line.starts_with(&format!("load done: {requests} requests")),
        "{line}"
    );
    // Every request is one handle_request call and one command call (Call + Return each),
    // plus a serve_connection frame per connection (4). The workers hand their rings over when
    // a connection ends; wait (bounded) until a snapshot shows all of it, then interrupt.
    let expected = requests * 4 + 4 * 2;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let seen = std::fs::read_to_string(dir.join("snapshot.json"))
            .ok()
            .and_then(|t| cabprof::ReportData::from_json(&t).ok())
            .map_or(0, |d| d.totals.events);
        if seen == expected || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(
        child.wait().unwrap().code(),
        Some(130),
        "exit status after Ctrl-C"
    );
    assert!(line.starts_with("final report: events="), "{line}");

    let final_json = std::fs::read_to_string(dir.join("final.json")).unwrap();
    let data = cabprof::ReportData::from_json(&final_json).unwrap();
    assert_eq!(data.session.mode, "sampling");
    // The final report's event count is exact.
    assert_eq!(data.totals.events, expected);
    let id = data
        .methods
        .iter()
        .find(|m| m.name.ends_with("handle_request"))
        .expect("handle_request in the report")
        .id;
    let sampled = data
        .method_count
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.method == id)
        .map_or(0, |e| e.count);
    let estimate = sampled as f64 / data.estimate_rate();
    assert!(
        (estimate - requests as f64).abs() < 0.5 * requests as f64,
        "estimated {estimate} handle_request calls for {requests} requests"
    );
    let snapshot = std::fs::read_to_string(dir.join("snapshot.json")).unwrap();
    cabprof::ReportData::from_json(&snapshot).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `CABPROF=1` on a program that only has the attribute: the main thread's calls are all in
/// the report written at exit (fib(25) makes 242785 calls: 2 fib(26) - 1).
#[test]
fn minimal_under_cabprof_writes_its_report_at_exit() {
    let dir = std::env::temp_dir().join(format!("cabprof-minimal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("minimal.json");
    let out = Command::new(examples_dir().join("minimal"))
        .env("CABPROF", "1")
        .env("CABPROF_PIN", "0")
        .env("CABPROF_OUTPUT", &json)
        .output()
        .expect("run example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("fib(25) = 75025"));
    assert!(stderr.contains("report written to"), "{stderr}");
    let data = cabprof::ReportData::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let calls: u64 = data
        .method_count
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.count)
        .sum();
    assert_eq!(calls, 242_785);
    assert_eq!(data.totals.events, 2 * 242_785);
    assert!(std::fs::read_to_string(dir.join("minimal.txt"))
        .unwrap()
        .contains("minimal::fib"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn service_compares_sampling_with_plain_over_rotated_rounds() {
    let dir = std::env::temp_dir().join(format!("cabprof-compare-{}", std::process::id()));
    let out = run(
        "service",
        &[
            "--compare",
            "9",
            "--requests",
            "2000",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    // 9 rounds of three runs: `round R NAME: X requests/s`.
    let mut rounds: Vec<Vec<(String, f64)>> = vec![Vec::new(); 9];
    for l in out.lines().filter_map(|l| l.strip_prefix("round ")) {
        let (r, rest) = l.split_once(' ').unwrap();
        let (name, x) = rest.split_once(": ").unwrap();
        let x: f64 = x.strip_suffix(" requests/s").unwrap().parse().unwrap();
        rounds[r.parse::<usize>().unwrap() - 1].push((name.to_owned(), x));
    }
    let order = |r: &Vec<(String, f64)>| r.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        order(&rounds[0]),
        ["plain A", "sampling", "plain B"],
        "{out}"
    );
    for r in 1..9 {
        // Each kind once per round, the order rotated by one from the round before.
        let (prev, this) = (order(&rounds[r - 1]), order(&rounds[r]));
        assert_eq!(
            this,
            [prev[1].clone(), prev[2].clone(), prev[0].clone()],
            "round {}: {out}",
            r + 1
        );
    }
    // The summaries are the medians of the per-round ratios the runs give.
    let of = |r: &Vec<(String, f64)>, n: &str| r.iter().find(|(k, _)| k == n).unwrap().1;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let sampling = median(
        rounds
            .iter()
            .map(|r| 2.0 * of(r, "sampling") / (of(r, "plain A") + of(r, "plain B")))
            .collect(),
    );
    let control = median(
        rounds
            .iter()
            .map(|r| of(r, "plain B") / of(r, "plain A"))
            .collect(),
    );
    for (what, want) in [
        ("sampling over plain", sampling),
        ("plain B over plain A (A/A control)", control),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("{what}: {out}"));
        let got: f64 = line
            .split("median ")
            .nth(1)
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!((got - want).abs() < 2e-3, "{line}: recomputed {want}");
    }
    // Bad values: refused, naming the option and the range.
    for (args, msg) in [
        (
            &["--compare", "3", "--requests", "10"][..],
            "--compare must be at least 9 rounds (got 3)",
        ),
        (
            &["--compare", "9", "--requests", "3"][..],
            "--requests N with N >= 4 (got 3)",
        ),
        // `--compare` runs plain and sampling itself: `--plain` beside it is a mistake.
        (
            &["--compare", "9", "--plain", "--requests", "10"][..],
            "cannot be used with '--plain'",
        ),
    ] {
        let bad = Command::new(examples_dir().join("service"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2));
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(err.contains(msg), "{err}");
    }
}
