//! `CABPROF=1 CABPROF_SERVE=...`: the process-wide session serves its profiles with no code,
//! from the program's start, and SIGTERM (as SIGINT) writes its report; a port in use costs
//! the endpoint, not the profile. This binary is also the child: its `child_*` tests do the
//! work when the driver runs it again (`#[ignore]`d child roles, which fail when run without
//! the driver's variable).
//!
//! Its own test binary, not a module of `tests/it/`: its child run installs the process-wide
//! `CABPROF=1` session and is stopped by SIGTERM, whose handler is process-wide.

mod serve_support;
mod support;

use serve_support::get;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Set in the child, where a `child_*` role runs.
const CHILD: &str = "SERVE_PROCESS_CHILD";

#[cabprof::profile]
fn request(i: u64) -> u64 {
    i.rotate_left(3) ^ 0x55
}

#[test]
#[ignore = "a child role: run by the_process_wide_session_serves_and_sigterm_writes_its_report"]
fn child_serves() {
    support::child_role(
        CHILD,
        "the_process_wide_session_serves_and_sigterm_writes_its_report",
    );
    for i in 0..77 {
        std::hint::black_box(request(i));
    }
    println!("ready");
    // A service: it runs until it is told to stop.
    loop {
        std::thread::park();
    }
}

#[test]
fn the_process_wide_session_serves_and_sigterm_writes_its_report() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_process.json");
    let _ = std::fs::remove_file(&out);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_serves",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("CABPROF", "1")
        .env("CABPROF_SERVE", "127.0.0.1:0")
        .env("CABPROF_SERVICE", "child-service")
        .env("CABPROF_OUTPUT", &out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The endpoint's address is on standard error; "ready" on standard output.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr: SocketAddr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the child ended without serving"
        );
        if let Some(rest) = line.split("serving live profiles on http://").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "no ready");
        if line.contains("ready") {
            break;
        }
    }
    let metrics = get(addr, "/metrics").text();
    let count = metrics
        .lines()
        .find(|l| l.contains("serve_process::request\""))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no request in\n{metrics}"));
    assert_eq!(count, "77", "{metrics}");
    assert!(get(addr, "/debug/pprof/").text().contains("child-service"));

    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "exit status after SIGTERM");
    let text = std::fs::read_to_string(&out).expect("SIGTERM wrote the report");
    let data = cabprof::ReportData::from_json(&text).unwrap();
    assert_eq!(data.calls("request"), 77);
}

/// A service that is idle at first: it makes its first instrumented call only when told (a
/// line on standard input), and ends at the end of its input.
#[test]
#[ignore = "a child role: run by the_endpoint_answers_before_the_first_instrumented_call and a_port_in_use_costs_the_endpoint_not_the_profile"]
fn child_idles_then_serves() {
    support::child_role(
        CHILD,
        "the_endpoint_answers_before_the_first_instrumented_call",
    );
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    for i in 0..77 {
        std::hint::black_box(request(i));
    }
    println!("ready");
    while std::io::stdin().read_line(&mut line).unwrap() > 0 {}
}

/// Run `child_idles_then_serves` with `CABPROF=1`, `CABPROF_SERVE=serve` and the report going
/// to `out`; its standard error comes line by line through the receiver.
fn idle_child(serve: &str, out: &PathBuf) -> (Child, mpsc::Receiver<String>) {
    let _ = std::fs::remove_file(out);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_idles_then_serves",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("CABPROF", "1")
        .env("CABPROF_SERVE", serve)
        .env("CABPROF_OUTPUT", out)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    (child, received)
}

/// The first line of `stderr` that contains `what`, within a minute (a bound for a loaded
/// host: the child says it at its start).
fn line_with(stderr: &mpsc::Receiver<String>, what: &str) -> String {
    let mut seen = Vec::new();
    loop {
        match stderr.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains(what) => return line,
            Ok(line) => seen.push(line),
            Err(e) => panic!("no {what:?} on the child's standard error ({e}): {seen:#?}"),
        }
    }
}

/// The `cabprof_function_calls_total` sample of `request` in `metrics`, if there is one.
fn request_calls(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.contains("serve_process::request\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Tell the idle child to work, wait for its "ready", end its input and wait for its exit.
fn work_and_exit(child: &mut Child) -> std::process::ExitStatus {
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "no ready");
    }
    drop(stdin);
    let _ = stdout.read_to_string(&mut line);
    child.wait().unwrap()
}

#[test]
fn the_endpoint_answers_before_the_first_instrumented_call() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_process_idle.json");
    let (mut child, stderr) = idle_child("127.0.0.1:0", &out);
    let line = line_with(&stderr, "serving live profiles on http://");
    let addr: SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line}"));
    // An idle service, scraped for a few seconds before its first call: zero counts.
    for _ in 0..3 {
        let metrics = get(addr, "/metrics");
        assert_eq!(metrics.status, 200, "{}", metrics.text());
        let text = metrics.text();
        assert_eq!(request_calls(&text).unwrap_or(0), 0, "{text}");
        assert!(text.contains("cabprof_events_total 0"), "{text}");
        std::thread::sleep(Duration::from_secs(1));
    }
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    while !ready.contains("ready") {
        ready.clear();
        assert!(stdout.read_line(&mut ready).unwrap() > 0, "no ready");
    }
    let text = get(addr, "/metrics").text();
    assert_eq!(request_calls(&text), Some(77), "{text}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let data = cabprof::ReportData::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(data.calls("request"), 77);
}

/// A port in use: a clear error naming it, and the program is profiled all the same.
#[test]
fn a_port_in_use_costs_the_endpoint_not_the_profile() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_process_busy.json");
    let (mut child, stderr) = idle_child(&addr, &out);
    let error = line_with(&stderr, "live endpoint is not served");
    assert!(
        error.contains("CABPROF_SERVE") && error.contains(&addr) && error.contains("error"),
        "{error}"
    );
    let status = work_and_exit(&mut child);
    assert!(status.success(), "{status}");
    let written = line_with(&stderr, "report written to");
    assert!(
        written.contains("77") || written.contains("events"),
        "{written}"
    );
    let data = cabprof::ReportData::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(data.calls("request"), 77);
    drop(taken);
}

/// A program that starts its own session, from the same variables: it keeps it (and its
/// endpoint), as it did when the process-wide session waited for the first event.
#[test]
#[ignore = "a child role: run by a_program_with_its_own_session_keeps_it"]
fn child_starts_its_own_session() {
    support::child_role(CHILD, "a_program_with_its_own_session_keeps_it");
    let session = cabprof::Session::builder()
        .from_env()
        .unwrap()
        .start()
        .expect("the program's own session starts");
    let addr = session.serve_addr().expect("its own endpoint");
    for i in 0..5 {
        std::hint::black_box(request(i));
    }
    let text = get(addr, "/metrics").text();
    assert_eq!(request_calls(&text), Some(5), "{text}");
    let report = session.finish();
    assert_eq!(report.data.calls("request"), 5);
    println!("own session: done");
}

#[test]
fn a_program_with_its_own_session_keeps_it() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_process_own.json");
    let _ = std::fs::remove_file(&out);
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_starts_its_own_session",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("CABPROF", "1")
        .env("CABPROF_SERVE", "127.0.0.1:0")
        .env("CABPROF_OUTPUT", &out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(
        child.status.success() && stdout.contains("own session: done"),
        "{}\n{stdout}\n{stderr}",
        child.status
    );
    // Two endpoints served in turn: the one started at load, then the program's.
    assert_eq!(
        stderr.matches("serving live profiles on").count(),
        2,
        "{stderr}"
    );
}
