//! The live endpoint (`SessionBuilder::serve`) over plain HTTP: windows and scrapes hold an
//! idle thread's events, bad requests get Go's answers, one window runs at a time, hostile
//! clients do not stop the server, a port in use fails the start.

use crate::serve_support::{get, raw, wait_for_open_window};
use cabprof::{Analysis, ReportData, Session};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
#[cfg(feature = "pprof")]
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

#[cabprof::profile]
fn alloc_some() -> usize {
    std::hint::black_box(vec![1u8; 4096]).len()
}

/// Makes a block of 1,000 bytes that outlives the call.
#[cabprof::profile]
fn keep_some(kept: &mut Vec<Vec<u8>>) {
    kept.push(std::hint::black_box(vec![2u8; 1000]));
}

#[cabprof::profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(31).rotate_left(7)
}

fn start() -> (Session, SocketAddr) {
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallTree])
        .serve("127.0.0.1:0")
        .start()
        .expect("start a served session");
    let addr = session.serve_addr().expect("an endpoint");
    (session, addr)
}

/// Scrape `/metrics` until `done` holds of the text (scrapes share a snapshot up to a second
/// old), for at most a minute; the text.
fn scrape_until(addr: SocketAddr, done: impl Fn(&str) -> bool) -> String {
    let t0 = std::time::Instant::now();
    loop {
        let text = get(addr, "/metrics").text();
        if done(&text) {
            return text;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "not there after a minute:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `cabprof_function_calls_total` of the function named `name` (its last path segment).
fn scraped_calls(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter(|l| l.starts_with("cabprof_function_calls_total{"))
        .find(|l| l.contains(&format!("::{name}\"")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// A worker that makes `n` calls when told and then waits for the next request, never
/// flushing: an idle thread whose last events may sit in a partly filled ring chunk.
fn worker() -> (mpsc::Sender<u64>, mpsc::Receiver<()>) {
    let (work, jobs) = mpsc::channel::<u64>();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        for n in jobs {
            let mut acc = 0;
            for i in 0..n {
                acc ^= leaf(i);
            }
            std::hint::black_box(acc);
            done.send(()).unwrap();
        }
    });
    (work, finished)
}

#[test]
fn an_idle_threads_events_are_in_the_next_scrape_and_window() {
    let _one = crate::serial();
    let (session, addr) = start();
    let (work, finished) = worker();
    work.send(1000).unwrap();
    finished.recv().unwrap();
    let metrics = get(addr, "/metrics");
    assert_eq!(metrics.status, 200);
    assert_eq!(
        scraped_calls(&metrics.text(), "leaf"),
        Some(1000),
        "{}",
        metrics.text()
    );

    // A window opened, then 250 calls, then the worker idles again.
    let window = std::thread::spawn(move || get(addr, "/report.json?seconds=2"));
    wait_for_open_window(addr);
    work.send(250).unwrap();
    finished.recv().unwrap();
    let answer = window.join().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    let data = ReportData::from_json(&answer.text()).expect("the window reads as a report");
    assert_eq!(data.calls("leaf"), 250, "the window's calls");
    assert!(data.session.elapsed_s >= 2.0 && data.session.elapsed_s < 60.0);

    // Counters only grow.
    assert_eq!(
        scraped_calls(&get(addr, "/metrics").text(), "leaf"),
        Some(1250)
    );
    drop(work);
    let report = session.finish();
    assert_eq!(report.data.calls("leaf"), 1250);
}

#[test]
fn bad_requests_get_gos_answers() {
    let _one = crate::serial();
    let (session, addr) = start();
    for bad in ["abc", "0", "-5", "301", "99999999999999999999", "1.5"] {
        let a = get(addr, &format!("/debug/pprof/profile?seconds={bad}"));
        assert_eq!(a.status, 400, "seconds={bad}: {}", a.text());
        assert!(
            a.text().contains("seconds") && a.text().contains("300"),
            "{}",
            a.text()
        );
        assert!(a.head.contains("text/plain"), "{}", a.head);
        let a = get(addr, &format!("/report.json?seconds={bad}"));
        assert_eq!(a.status, 400, "report.json seconds={bad}");
    }
    assert_eq!(get(addr, "/no/such/path").status, 404);
    let post = raw(addr, b"POST /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(post.status, 405);
    // HEAD too: it would open a window (and get a body) for an answer it throws away.
    let head = raw(
        addr,
        b"HEAD /debug/pprof/profile HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(head.status, 405);
    let long = format!("/metrics?{}", "x".repeat(20_000));
    assert_eq!(get(addr, &long).status, 431, "a 20 KB request line");
    assert_eq!(raw(addr, b"NONSENSE\r\n\r\n").status, 400);
    // Still serving.
    assert_eq!(get(addr, "/metrics").status, 200);
    session.finish();
}

#[test]
fn one_window_at_a_time() {
    let _one = crate::serial();
    let (session, addr) = start();
    let first = std::thread::spawn(move || get(addr, "/debug/pprof/profile?seconds=2"));
    wait_for_open_window(addr);
    let second = get(addr, "/debug/pprof/profile?seconds=1");
    assert_eq!(second.status, 429, "{}", second.text());
    assert!(second.head.contains("Retry-After"), "{}", second.head);
    // Scrapes are not windows: answered meanwhile.
    assert_eq!(get(addr, "/metrics").status, 200);
    let first = first.join().unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(&first.body[..2], &[0x1f, 0x8b], "gzip");
    session.finish();
}

#[test]
fn hostile_clients_do_not_stop_the_server() {
    let _one = crate::serial();
    let (session, addr) = start();
    leaf(1);
    // Many at once: each is answered, at worst with 503 when the queue is full.
    let many: Vec<_> = (0..64)
        .map(|_| std::thread::spawn(move || get(addr, "/metrics").status))
        .collect();
    for c in many {
        let status = c.join().unwrap();
        assert!(status == 200 || status == 503, "status {status}");
    }
    // Clients that send nothing, and one that asks and never reads.
    let silent: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut deaf = TcpStream::connect(addr).unwrap();
    deaf.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let a = get(addr, "/metrics");
    assert_eq!(a.status, 200);
    assert_eq!(scraped_calls(&a.text(), "leaf"), Some(1));
    drop((silent, deaf));
    session.finish();
}

/// A client that trickles its request a byte at a time is cut off once the whole head has
/// taken the read timeout (set to 0.5 s here), not kept as long as each byte comes in time.
#[test]
fn a_trickling_client_is_cut_off() {
    let _one = crate::serial();
    // A byte every 100 ms or more (the client's read timeout): answered 408 after about 5
    // bytes. The default of 5 s would take about 50, so the bound below tells them apart
    // however slow the host.
    let timeout = Duration::from_millis(500);
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .serve("127.0.0.1:0")
        .serve_read_timeout(timeout)
        .start()
        .expect("start a served session");
    let addr = session.serve_addr().expect("an endpoint");
    let mut c = TcpStream::connect(addr).unwrap();
    let each = Duration::from_millis(100);
    c.set_read_timeout(Some(each)).unwrap();
    let head = b"GET /metrics HTTP/1.1\r\nHost: a-very-slow-client.example\r\n\r\n";
    let mut answer = Vec::new();
    let mut sent = 0;
    let t0 = std::time::Instant::now();
    for &b in head.iter() {
        if c.write_all(&[b]).is_err() {
            break;
        }
        sent += 1;
        let mut buf = [0u8; 256];
        match std::io::Read::read(&mut c, &mut buf) {
            Ok(n) if n > 0 => {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
            Ok(_) => break,
            Err(_) => {} // nothing yet: 100 ms went by
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "{sent} bytes sent: {answer:?}"
    );
    assert!(
        sent <= 10,
        "cut off after {sent} bytes, 100 ms or more each"
    );
    assert!(t0.elapsed() >= timeout, "cut off after {:?}", t0.elapsed());
    session.finish();
}

#[test]
fn a_read_timeout_out_of_range_fails_the_start_naming_it() {
    let _one = crate::serial();
    for bad in [
        Duration::ZERO,
        Duration::from_millis(9),
        Duration::from_secs(601),
    ] {
        let builder = Session::builder()
            .serve("127.0.0.1:0")
            .serve_read_timeout(bad);
        let checked = builder.validate().unwrap_err().to_string();
        let text = builder.start().unwrap_err().to_string();
        assert_eq!(checked, text);
        assert!(
            text.contains("SessionBuilder::serve_read_timeout") && text.contains("10ms to 600s"),
            "{bad:?}: {text}"
        );
    }
    // The ends of the range are allowed.
    for good in [Duration::from_millis(10), Duration::from_secs(600)] {
        let session = Session::builder()
            .serve("127.0.0.1:0")
            .serve_read_timeout(good)
            .start()
            .unwrap_or_else(|e| panic!("{good:?}: {e}"));
        session.finish();
    }
}

#[test]
fn a_port_in_use_fails_the_start_naming_it() {
    let _one = crate::serial();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let e = Session::builder().serve(&addr).start().unwrap_err();
    assert!(e.to_string().contains(&addr), "{e}");
    let e = Session::builder().serve("0.0.0.0:0").start().unwrap_err();
    assert!(e.to_string().contains("not loopback"), "{e}");
    // Neither left a session running.
    let (session, _) = start();
    session.finish();
}

#[test]
fn the_endpoint_stops_with_the_session() {
    let _one = crate::serial();
    let (session, addr) = start();
    assert_eq!(get(addr, "/metrics").status, 200);
    session.finish();
    // The port is free again: this process can listen there.
    let mut freed = false;
    for _ in 0..500 {
        if TcpListener::bind(addr).is_ok() {
            freed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(freed, "{addr} still taken after the session finished");
}

/// The value of the sample line starting with `prefix`.
fn sample(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .map(str::to_owned)
}

#[test]
fn metrics_hold_durations_and_allocated_bytes() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::Time, Analysis::Allocations])
        .serve("127.0.0.1:0")
        .start()
        .unwrap();
    let addr = session.serve_addr().unwrap();
    for i in 0..500 {
        std::hint::black_box(leaf(i));
    }
    for _ in 0..10 {
        alloc_some();
    }
    let text = get(addr, "/metrics").text();
    let f = "{function=\"tracked::serve_http::leaf\"";
    assert_eq!(
        sample(
            &text,
            &format!("cabprof_function_duration_seconds_count{f}")
        )
        .as_deref(),
        Some("500"),
        "{text}"
    );
    // Cumulative buckets (the label order is the encoder's), the last one all calls.
    let buckets: Vec<u64> = text
        .lines()
        .filter(|l| {
            l.starts_with("cabprof_function_duration_seconds_bucket{")
                && l.contains("function=\"tracked::serve_http::leaf\"")
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        buckets.len() >= 2 && buckets.windows(2).all(|w| w[0] <= w[1]),
        "{buckets:?}"
    );
    assert_eq!(buckets.last(), Some(&500));
    assert!(
        text.lines().any(|l| l.starts_with(
            "cabprof_function_duration_seconds_bucket{le=\"+Inf\",function=\"tracked::serve_http::leaf\",location=\"tests/tracked/serve_http.rs:"
        ) && l.ends_with("} 500")),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "cabprof_function_allocated_bytes_total{function=\"tracked::serve_http::alloc_some\",location=\"tests/tracked/serve_http.rs:"
        )
        .as_deref(),
        Some("40960"),
        "{text}"
    );
    assert!(text.contains("cabprof_events_total "), "{text}");
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    session.finish();
}

/// Sampling mode is different: the analyzer takes only the chunks a producer has published
/// (it cannot trust a slot the producer may be overwriting), so an idle thread's partly
/// filled chunk is held back, and only bounded (`events_in_flight`), until the thread calls
/// `cabprof::flush_thread()`; then the next scrape counts it.
#[test]
fn sampling_holds_an_idle_threads_tail_back_until_it_flushes() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .sampling(0.5)
        .serve("127.0.0.1:0")
        .start()
        .unwrap();
    let addr = session.serve_addr().unwrap();
    let (tell, told) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        for i in 0..1000 {
            std::hint::black_box(leaf(i));
        }
        done.send(()).unwrap();
        told.recv().unwrap(); // idle, as a worker waiting for its next request
        cabprof::flush_thread();
        done.send(()).unwrap();
        let _ = told.recv();
    });
    let events = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("cabprof_events_total "))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no cabprof_events_total in\n{text}"))
    };
    finished.recv().unwrap();
    assert!(
        events(&get(addr, "/metrics").text()) < 2000,
        "the tail is held back"
    );
    assert!(session.snapshot().unwrap().data.events_in_flight > 0);
    tell.send(()).unwrap();
    finished.recv().unwrap();
    // A call and a return each, and the thread's own words (its name registration).
    scrape_until(addr, |text| events(text) >= 2000);
    drop(tell);
    worker.join().unwrap();
    session.finish();
}

/// `GET /metrics` with `host` as the `Host` header (`None`: no header).
fn with_host(addr: SocketAddr, host: Option<&str>) -> crate::serve_support::Answer {
    let host = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
    raw(
        addr,
        format!("GET /metrics HTTP/1.1\r\n{host}Connection: close\r\n\r\n").as_bytes(),
    )
}

/// On a loopback address, a request must name a loopback host: a page whose name rebinds to
/// 127.0.0.1 sends its own. Every answer, refusals too, says `nosniff`.
#[test]
fn a_loopback_endpoint_answers_loopback_hosts_only() {
    let _one = crate::serial();
    let (session, addr) = start();
    let port = addr.port();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        // Through a tunnel, `ssh -L 7000:127.0.0.1:{port}`.
        "localhost:7000".to_string(),
    ] {
        let a = with_host(addr, Some(&host));
        assert_eq!(a.status, 200, "Host: {host}: {}", a.text());
        assert!(
            a.head.contains("X-Content-Type-Options: nosniff"),
            "{}",
            a.head
        );
    }
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("10.1.2.3:{port}"),
    ] {
        let a = with_host(addr, Some(&host));
        assert_eq!(a.status, 421, "Host: {host}: {}", a.text());
        assert!(a.text().contains("loopback"), "{}", a.text());
        assert!(
            a.head.contains("X-Content-Type-Options: nosniff"),
            "{}",
            a.head
        );
    }
    let a = with_host(addr, None);
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(a.text().contains("Host"), "{}", a.text());
    for path in ["/no/such/path", "/debug/pprof/", "/"] {
        let a = get(addr, path);
        assert!(
            a.head.contains("X-Content-Type-Options: nosniff"),
            "{path}: {}",
            a.head
        );
    }
    let a = raw(addr, b"NONSENSE\r\n\r\n");
    assert_eq!(a.status, 400);
    assert!(
        a.head.contains("X-Content-Type-Options: nosniff"),
        "{}",
        a.head
    );
    session.finish();
}

/// A public address (`serve_public`) has no name to check the `Host` against: any is served.
#[test]
fn a_public_endpoint_answers_any_host() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .serve("0.0.0.0:0")
        .serve_public(true)
        .start()
        .expect("start a served session");
    let port = session.serve_addr().unwrap().port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let a = with_host(addr, Some("profiler.internal.example:6060"));
    assert_eq!(a.status, 200, "{}", a.text());
    session.finish();
}

/// `localhost` is both loopback addresses, whatever the resolver lists.
#[test]
fn localhost_listens_on_both_loopback_addresses() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .serve("localhost:0")
        .start()
        .expect("start a served session");
    let port = session.serve_addr().unwrap().port();
    let v4 = SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(get(v4, "/metrics").status, 200);
    if TcpListener::bind("[::1]:0").is_ok() {
        let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
        assert_eq!(get(v6, "/metrics").status, 200);
    } else {
        eprintln!("SKIPPED the ::1 half: this host has no IPv6 loopback");
    }
    session.finish();
}

/// A window ends with its client (the index says no window is open soon after it left, and
/// the next request gets one), and while one runs, `Retry-After` is the time it has left.
#[test]
fn a_window_ends_when_its_client_leaves_and_retry_after_is_the_time_left() {
    let _one = crate::serial();
    let (session, addr) = start();
    let mut long = TcpStream::connect(addr).unwrap();
    write!(
        long,
        "GET /debug/pprof/profile?seconds=300 HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    wait_for_open_window(addr);
    let busy = get(addr, "/debug/pprof/profile?seconds=1");
    assert_eq!(busy.status, 429, "{}", busy.text());
    let retry: u64 = busy
        .head
        .lines()
        .find_map(|l| l.strip_prefix("Retry-After: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After in {}", busy.head));
    // The 300 s window's time left, not the 1 s asked for; generous for a slow host.
    assert!((200..=300).contains(&retry), "Retry-After: {retry}");

    drop(long);
    let t0 = std::time::Instant::now();
    while !get(addr, "/debug/pprof/").text().contains("window: none") {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the window still runs a minute after its client left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let next = get(addr, "/report.json?seconds=1");
    assert_eq!(next.status, 200, "{}", next.text());
    session.finish();
}

/// The endpoint answers from the moment `start` returns, before any instrumented call.
#[test]
fn a_session_serves_from_the_moment_start_returns() {
    let _one = crate::serial();
    let (session, addr) = start();
    let a = get(addr, "/metrics");
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(scraped_calls(&a.text(), "leaf"), None, "{}", a.text());
    leaf(3);
    // Scrapes share a snapshot up to a second old: the call shows in a later one.
    scrape_until(addr, |text| scraped_calls(text, "leaf") == Some(1));
    session.finish();
}

mod first {
    pub(crate) struct Shape;
    impl std::fmt::Display for Shape {
        #[cabprof::profile]
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("first")
        }
    }
}

mod second {
    pub(crate) struct Shape;
    impl std::fmt::Display for Shape {
        #[cabprof::profile]
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("second")
        }
    }
}

/// Two functions whose names read the same are two series, told apart by `location`.
#[test]
fn functions_named_alike_are_distinct_series() {
    let _one = crate::serial();
    let (session, addr) = start();
    for _ in 0..3 {
        std::hint::black_box(first::Shape.to_string());
    }
    for _ in 0..5 {
        std::hint::black_box(second::Shape.to_string());
    }
    let text = get(addr, "/metrics").text();
    let calls: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("cabprof_function_calls_total{"))
        .collect();
    let fmt: Vec<&&str> = calls.iter().filter(|l| l.contains("::fmt\"")).collect();
    assert_eq!(fmt.len(), 2, "{text}");
    let mut counts: Vec<&str> = fmt.iter().filter_map(|l| l.rsplit(' ').next()).collect();
    counts.sort_unstable();
    assert_eq!(counts, ["3", "5"], "{text}");
    // No two series of a metric have the same labels.
    let mut labels: Vec<&str> = calls
        .iter()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, _)| k)
        .collect();
    let all = labels.len();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), all, "{text}");
    session.finish();
}

/// `go tool pprof` with `args`, then `url`; its standard output.
#[cfg(feature = "pprof")]
fn go_pprof(url: &str, args: &[&str]) -> String {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_http_go_pprof");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let out = std::process::Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(url)
        .env("PPROF_TMPDIR", &tmp)
        .env("HOME", &tmp)
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `/debug/pprof/allocs` and `/debug/pprof/heap` as Go serves them, read by `go tool pprof`:
/// the bytes and blocks each function allocated since the session started (`alloc_space` the
/// default of `allocs`), and those still live (`inuse_space` the default of `heap`): a
/// function whose blocks are all freed has none in use, one that keeps 7 blocks of 1,000 bytes
/// has 7,000 bytes in use. The live bytes are also a gauge of `/metrics`.
#[cfg(feature = "pprof")]
#[test]
fn go_tool_pprof_reads_the_allocs_profile() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallTree,
            Analysis::Allocations,
        ])
        .serve("127.0.0.1:0")
        .start()
        .unwrap();
    let addr = session.serve_addr().unwrap();
    for _ in 0..10 {
        alloc_some();
    }
    let mut kept = Vec::with_capacity(16);
    for _ in 0..7 {
        keep_some(&mut kept);
    }
    let heap = get(addr, "/debug/pprof/heap?gc=1");
    assert_eq!(heap.status, 200, "{}", heap.text());
    assert_eq!(&heap.body[..2], &[0x1f, 0x8b], "gzip");
    let allocs = get(addr, "/debug/pprof/allocs");
    assert_eq!(allocs.status, 200, "{}", allocs.text());
    assert_eq!(&allocs.body[..2], &[0x1f, 0x8b], "gzip");
    assert!(get(addr, "/metrics")
        .text()
        .contains("cabprof_heap_live_bytes "));
    if !crate::serve_support::available("go", &["version"], "golang-go") {
        assert_eq!(session.finish().data.calls("alloc_some"), 10);
        return;
    }
    let url = format!("http://{addr}/debug/pprof/allocs");
    for args in [
        &["-top", "-nodefraction=0", "-unit=B"][..],
        &[
            "-top",
            "-nodefraction=0",
            "-unit=B",
            "-sample_index=alloc_space",
        ][..],
    ] {
        let text = go_pprof(&url, args);
        let top = crate::go_pprof::top_rows(&text);
        let row = top
            .iter()
            .find(|(k, _)| k.ends_with("::alloc_some"))
            .unwrap_or_else(|| panic!("no alloc_some in\n{text}"));
        assert_eq!(row.1 .0, 40960, "{args:?}\n{text}");
    }
    // The heap profile: in use by default, and every column by name.
    let heap_url = format!("http://{addr}/debug/pprof/heap");
    let in_use = |args: &[&str], name: &str| {
        let text = go_pprof(&heap_url, args);
        crate::go_pprof::top_rows(&text)
            .iter()
            .find(|(k, _)| k.ends_with(name))
            .map(|r| r.1 .0)
    };
    let default = ["-top", "-nodefraction=0", "-unit=B"];
    assert_eq!(in_use(&default, "::keep_some"), Some(7000));
    // Freed on return: nothing in use (absent from the top, or 0).
    assert_eq!(in_use(&default, "::alloc_some").unwrap_or(0), 0);
    let space = [
        "-top",
        "-nodefraction=0",
        "-unit=B",
        "-sample_index=inuse_space",
    ];
    assert_eq!(in_use(&space, "::keep_some"), Some(7000));
    let objects = ["-top", "-nodefraction=0", "-sample_index=inuse_objects"];
    assert_eq!(in_use(&objects, "::keep_some"), Some(7));
    let made = [
        "-top",
        "-nodefraction=0",
        "-unit=B",
        "-sample_index=alloc_space",
    ];
    assert_eq!(in_use(&made, "::alloc_some"), Some(40960));
    std::hint::black_box(&kept);
    let text = go_pprof(
        &url,
        &["-top", "-nodefraction=0", "-sample_index=alloc_objects"],
    );
    let top = crate::go_pprof::top_rows(&text);
    assert_eq!(
        top.iter()
            .find(|(k, _)| k.ends_with("::alloc_some"))
            .map(|r| r.1 .0),
        Some(10),
        "{text}"
    );
    session.finish();
}

/// Without the allocations analysis, `allocs` says what to turn on.
#[test]
fn allocs_without_the_analysis_says_what_to_enable() {
    let _one = crate::serial();
    let (session, addr) = start();
    let a = get(addr, "/debug/pprof/allocs");
    assert_eq!(a.status, 404);
    assert!(
        a.text().contains("Allocations") && a.text().contains("Tracked"),
        "{}",
        a.text()
    );
    session.finish();
}
