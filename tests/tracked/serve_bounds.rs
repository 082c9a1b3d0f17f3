//! The live endpoint's bounds against clients that are slow on purpose: trickling request
//! heads, silent connections, clients that never read their answer. None of them may keep
//! `/metrics` from being answered (issue 43's bound: within 2 s, throughout).

use crate::serve_support::get;
use cabprof::{Analysis, Session};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cabprof::profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(31).rotate_left(7)
}

/// The bound a scrape must meet while the hostile clients are attached.
const SCRAPE_BOUND: Duration = Duration::from_secs(2);

/// `GET /metrics` with [`SCRAPE_BOUND`] for the connection and for each read: the status and
/// how long the whole answer took, or what went wrong.
fn timed_scrape(addr: SocketAddr) -> Result<(u16, Duration), String> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, SCRAPE_BOUND).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(SCRAPE_BOUND))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .map_err(|e| format!("{e} after {:?}", t0.elapsed()))?;
    let head = String::from_utf8_lossy(&all[..all.len().min(64)]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((status, t0.elapsed()))
}

/// A client that sends a request head one byte every 50 ms and never ends it, and goes on
/// sending after any answer (which it never reads), until `stop`.
fn trickler(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(mut s) = TcpStream::connect(addr) else {
            return;
        };
        let head = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let b = head.get(i).copied().unwrap_or(b'a');
            if s.write_all(&[b]).is_err() {
                return;
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

#[test]
fn slow_silent_and_deaf_clients_do_not_starve_metrics() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .serve("127.0.0.1:0")
        .serve_read_timeout(Duration::from_secs(1))
        .start()
        .expect("start a served session");
    let addr = session.serve_addr().expect("an endpoint");
    leaf(1);
    let stop = Arc::new(AtomicBool::new(false));
    let trickling: Vec<_> = (0..8).map(|_| trickler(addr, stop.clone())).collect();
    // More silent connections than the server keeps waiting for a head.
    let silent: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // Clients that ask and never read, nor close.
    let deaf: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
            s
        })
        .collect();

    // Long enough for the head deadline (1 s) to pass and the trickling clients to go on
    // after their 408.
    let t0 = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut scrapes = 0;
    while t0.elapsed() < Duration::from_secs(5) {
        match timed_scrape(addr) {
            Ok((200, took)) => slowest = slowest.max(took),
            Ok((status, took)) => panic!("scrape {scrapes} answered {status} after {took:?}"),
            Err(e) => panic!(
                "scrape {scrapes} failed at {:?} into the test: {e}",
                t0.elapsed()
            ),
        }
        scrapes += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("{scrapes} scrapes, the slowest took {slowest:?}");
    assert!(slowest < SCRAPE_BOUND, "{slowest:?}");
    stop.store(true, Ordering::Relaxed);
    for t in trickling {
        t.join().unwrap();
    }
    drop((silent, deaf));
    assert_eq!(get(addr, "/metrics").status, 200);
    session.finish();
}

/// `cabprof_endpoint_snapshots_total` in a scrape.
fn snapshots(addr: SocketAddr) -> u64 {
    let text = get(addr, "/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix("cabprof_endpoint_snapshots_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no cabprof_endpoint_snapshots_total in\n{text}"))
}

/// A flood of scrapes and page loads shares snapshots: the program meets at most about one a
/// second, however many clients ask.
#[test]
fn a_flood_of_scrapes_takes_one_snapshot_a_second() {
    let _one = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallTree])
        .serve("127.0.0.1:0")
        .start()
        .expect("start a served session");
    let addr = session.serve_addr().expect("an endpoint");
    leaf(1);
    let before = snapshots(addr);
    let t0 = Instant::now();
    let flood: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                let path = if k == 0 { "/" } else { "/metrics" };
                let mut answered = 0;
                // Paced, to leave the host's cores to others: hundreds of requests are
                // enough to tell one snapshot a request from one a second.
                while t0.elapsed() < Duration::from_secs(2) {
                    assert_eq!(get(addr, path).status, 200);
                    answered += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                answered
            })
        })
        .collect();
    let answered: u32 = flood.into_iter().map(|t| t.join().unwrap()).sum();
    let taken = snapshots(addr) - before;
    let seconds = t0.elapsed().as_secs_f64();
    eprintln!("{answered} requests in {seconds:.1} s took {taken} snapshots");
    assert!(answered > 40, "{answered} requests");
    assert!(
        taken as f64 <= seconds.ceil() + 2.0,
        "{taken} snapshots for {answered} requests in {seconds:.1} s"
    );
    session.finish();
}
