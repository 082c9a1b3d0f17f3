//! `CABPROF=1 CABPROF_SERVE=...`: the process-wide session serves its profiles with no code,
//! and SIGTERM (as SIGINT) writes its report. This binary is also the child: its
//! `child_serves` test does the work when the driver runs it again.
//!
//! Its own test binary, not a module of `tests/it/`: its child run installs the process-wide
//! `CABPROF=1` session and is stopped by SIGTERM, whose handler is process-wide.

mod serve_support;

use serve_support::get;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Set in the child, where the driver does nothing.
const CHILD: &str = "SERVE_PROCESS_CHILD";

#[cabprof::profile]
fn request(i: u64) -> u64 {
    i.rotate_left(3) ^ 0x55
}

#[test]
fn child_serves() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
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
        .args(["--exact", "child_serves", "--nocapture", "--test-threads=1"])
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
