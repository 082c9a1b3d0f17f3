//! The live endpoint read by the real clients: `go tool pprof` fetching a window over HTTP,
//! a Prometheus server scraping `/metrics`, headless Chromium rendering the page. Each test
//! fails, rather than skips, when its client is missing and `CI` is set.

use crate::go_pprof;
use crate::serve_support::{available, get, wait_for_open_window};
use crate::support::serial;

use cabprof::{Analysis, Session};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[cabprof::profile]
fn handle_request(n: u64) -> u64 {
    (0..n).map(parse_field).sum()
}

#[cabprof::profile]
fn parse_field(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9).rotate_left(11) & 0xff
}

/// 40 requests of 3 fields: 40 + 120 calls.
fn workload() {
    for _ in 0..40 {
        std::hint::black_box(handle_request(3));
    }
}

fn start(analyses: &[Analysis]) -> (Session, SocketAddr) {
    start_on(analyses, "127.0.0.1:0")
}

fn start_on(analyses: &[Analysis], addr: &str) -> (Session, SocketAddr) {
    let session = Session::builder()
        .analyses(analyses)
        .serve(addr)
        .service_name("serve-clients-test")
        .start()
        .expect("start a served session");
    let addr = session.serve_addr().expect("an endpoint");
    (session, addr)
}

/// A child process stopped when this is dropped, on a failed assertion too.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("serve_clients")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn go_tool_pprof_fetches_a_window_with_exact_counts() {
    if !available("go", &["version"], "golang-go") {
        return;
    }
    let _one = serial();
    let (session, addr) = start(&[Analysis::MethodCount, Analysis::CallTree, Analysis::Time]);
    workload(); // before the window: not in it
    let tmp = scratch("pprof");
    let url = format!("http://{addr}/debug/pprof/profile?seconds=2");
    let go = {
        let tmp = tmp.clone();
        std::thread::spawn(move || {
            Command::new("go")
                .args([
                    "tool",
                    "pprof",
                    "-top",
                    "-nodecount=1000",
                    "-nodefraction=0",
                    "-sample_index=calls",
                ])
                .arg(&url)
                .env("PPROF_TMPDIR", &tmp)
                .env("HOME", &tmp)
                .output()
                .expect("run go tool pprof")
        })
    };
    wait_for_open_window(addr);
    workload();
    let out = go.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let top = go_pprof::top_rows(&text);
    let row = |name: &str| {
        top.iter()
            .find(|(k, _)| k.ends_with(name))
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(row("::parse_field"), (120, 120), "\n{text}");
    assert_eq!(row("::handle_request"), (40, 160), "\n{text}");

    // The saved copy holds the window's sample types and the service label.
    let saved = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "gz"))
        .expect("go tool pprof saves what it fetched");
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&saved)
        .env("HOME", &tmp)
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert!(raw.contains("calls/count[dflt] wall/nanoseconds"), "{raw}");
    assert!(raw.contains("service_name:[serve-clients-test]"), "{raw}");
    assert!(raw.contains("Duration: 2"), "{raw}");
    session.finish();
}

#[test]
fn prometheus_scrapes_exact_counts() {
    if !available("prometheus", &["--version"], "prometheus") {
        return;
    }
    // Prometheus scrapes a target first about 5 s after it starts (its service discovery
    // passes targets on every 5 s, static ones too). So the session's address is fixed in its
    // configuration, and the session lock, which the other session tests wait for, is taken
    // only once Prometheus is scraping that address (failing, every 200 ms, until the
    // session serves there).
    let free_port = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (port, target) = (free_port(), free_port());
    let dir = scratch("prometheus");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\nscrape_configs:\n  \
             - job_name: cabprof\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let server = Stopped(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .expect("start prometheus"),
    );
    let api: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // The results of a query, once Prometheus answers it.
    let query = |q: &str| -> Option<(Vec<serde_json::Value>, String)> {
        drop(std::net::TcpStream::connect(api).ok()?);
        let text = get(api, &format!("/api/v1/query?query={q}")).text();
        let json = serde_json::from_str::<serde_json::Value>(&text).ok()?;
        Some((json["data"]["result"].as_array()?.clone(), text))
    };
    // Scraping has begun (failing: nothing serves there yet) once `up` has a sample.
    let mut last = String::new();
    for _ in 0..600 {
        std::thread::sleep(Duration::from_millis(100));
        // up{job="cabprof"}, percent-encoded.
        if let Some((results, text)) = query("up%7Bjob%3D%22cabprof%22%7D") {
            last = text;
            if !results.is_empty() {
                break;
            }
        }
    }
    let _one = serial();
    let (session, _) = start_on(
        &[Analysis::MethodCount, Analysis::CallGraph, Analysis::Waits],
        &format!("127.0.0.1:{target}"),
    );
    workload();
    crate::waits::lock_waits(3, |m| *m.lock() += 1);
    // Four messages that each sit about 20 ms in a channel.
    let (tx, rx) = cabprof::sync::mpsc::channel();
    for i in 0..4u8 {
        tx.send(i).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(rx.try_iter().count(), 4);
    cabprof::flush_thread();
    let mut found = None;
    for _ in 0..600 {
        std::thread::sleep(Duration::from_millis(100));
        let Some((results, text)) = query("cabprof_function_calls_total") else {
            continue;
        };
        last = text;
        // Counters only grow: wait for the whole workload's count, not the first seen.
        found = results.iter().find_map(|r| {
            let f = r["metric"]["function"].as_str()?;
            f.ends_with("::parse_field")
                .then(|| r["value"][1].as_str().map(str::to_owned))?
        });
        if found.as_deref() == Some("120") {
            break;
        }
    }
    // The lock waits' histogram: three waits, each of about 20 ms (at most 100 ms: the
    // `le="0.1"` bucket holds all three).
    let mut waits = None;
    for _ in 0..600 {
        let Some((results, text)) = query("cabprof_lock_wait_seconds_bucket") else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        last = text;
        let bucket = |le: &str| {
            results.iter().find_map(|r| {
                (r["metric"]["le"].as_str() == Some(le) && r["metric"]["kind"] == "Mutex")
                    .then(|| r["value"][1].as_str().map(str::to_owned))?
            })
        };
        waits = bucket("+Inf").zip(bucket("0.1"));
        if waits.as_ref().is_some_and(|(all, _)| all == "3") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The channel's latency histogram: four messages, each in the `le="0.1"` bucket and
    // none in the `le="0.01"` one.
    let mut latency = None;
    for _ in 0..600 {
        let Some((results, text)) = query("cabprof_channel_latency_seconds_bucket") else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        last = text;
        let bucket = |le: &str| {
            results.iter().find_map(|r| {
                (r["metric"]["le"].as_str() == Some(le) && r["metric"]["kind"] == "channel")
                    .then(|| r["value"][1].as_str().map(str::to_owned))?
            })
        };
        latency = bucket("+Inf").zip(bucket("0.1")).zip(bucket("0.01"));
        if latency.as_ref().is_some_and(|((all, _), _)| all == "4") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(server);
    assert_eq!(
        waits,
        Some(("3".to_string(), "3".to_string())),
        "Prometheus' answer: {last}"
    );
    assert_eq!(
        latency,
        Some((("4".to_string(), "4".to_string()), "0".to_string())),
        "Prometheus' answer: {last}"
    );
    assert_eq!(
        found.as_deref(),
        Some("120"),
        "Prometheus' answer: {last}\nits log: {}",
        std::fs::read_to_string(dir.join("log")).unwrap_or_default()
    );
    session.finish();
}

#[test]
fn chromium_renders_the_page() {
    if !available("chromium", &["--version"], "chromium") {
        return;
    }
    let _one = serial();
    let (session, addr) = start(&[Analysis::MethodCount, Analysis::CallTree]);
    workload();
    let dir = scratch("chromium");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", dir.display()))
        .arg("--dump-dom")
        .arg(format!("http://{addr}/"))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<table id=\"top\">"),
        "no table in the DOM; stderr: {}\n{dom}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in [
        "it::serve_clients::handle_request",
        "it::serve_clients::parse_field",
    ] {
        assert!(dom.contains(name), "{name} not in the DOM:\n{dom}");
    }
    assert!(dom.contains("<svg"), "the flame graph is in the DOM");
    session.finish();
}

/// DNS rebinding, as a browser meets it: a page's own name resolving to 127.0.0.1 (Chromium's
/// resolver rules stand in for the attacker's DNS) gets 421 and no profile data; the same
/// browser at `localhost` gets the page.
#[test]
fn chromium_at_a_name_rebound_to_loopback_reads_nothing() {
    if !available("chromium", &["--version"], "chromium") {
        return;
    }
    let _one = serial();
    let (session, addr) = start(&[Analysis::MethodCount, Analysis::CallTree]);
    workload();
    let dom = |host: &str, name: &str| {
        let dir = scratch(name);
        let out = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--host-resolver-rules=MAP rebound.example 127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", dir.display()))
            .arg("--dump-dom")
            .arg(format!("http://{host}:{}/", addr.port()))
            .output()
            .expect("run chromium");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rebound = dom("rebound.example", "rebound");
    assert!(
        rebound.contains("not a loopback name") && !rebound.contains("parse_field"),
        "{rebound}"
    );
    let local = dom("localhost", "localhost");
    assert!(local.contains("it::serve_clients::parse_field"), "{local}");
    session.finish();
}
