//! The HTTP server's request parsing, limits and answers.

use super::*;

#[test]
fn query_parameters() {
    let r = Request {
        method: "GET".into(),
        path: "/".into(),
        query: "a=1&seconds=5&flag".into(),
        client: None,
    };
    assert_eq!(r.param("seconds"), Some("5"));
    assert_eq!(r.param("flag"), Some(""));
    assert_eq!(r.param("b"), None);
}

#[test]
fn loopback_hosts() {
    for ok in [
        "127.0.0.1:6060",
        "127.0.0.1",
        "127.1.2.3:80",
        "[::1]:6060",
        "[::1]",
        "localhost:6060",
        "LocalHost",
        "localhost.:6060",
    ] {
        assert!(is_loopback_host(ok), "{ok}");
    }
    for bad in [
        "evil.example:6060",
        "localhost.evil.example:6060",
        "127.0.0.1.evil.example",
        "10.0.0.1:6060",
        "[::2]:6060",
        "[::1]x",
        "localhost:port",
        "",
        "[::1",
    ] {
        assert!(!is_loopback_host(bad), "{bad}");
    }
}

/// A server on loopback with `handler`, a read timeout of 5 s and `write_timeout`.
fn serve(handler: Handler, write_timeout: Duration) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let limits = Limits {
        read_timeout: Duration::from_secs(5),
        loopback_host: true,
        write_timeout,
    };
    Server::start(vec![listener], handler, limits).unwrap()
}

/// `GET path`, the whole answer.
fn ask(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// A client that asks for a large answer and never reads it holds neither a handler nor
/// the I/O thread, and is cut off once the whole answer has taken the write deadline.
#[test]
fn a_client_that_never_reads_is_cut_off_at_the_write_deadline() {
    const LARGE: usize = 64 << 20;
    let handler: Handler = Arc::new(|r: &Request| match r.path.as_str() {
        "/large" => Response::new(200, "application/octet-stream", vec![7u8; LARGE]),
        _ => Response::text(200, "small"),
    });
    let server = serve(handler, Duration::from_millis(300));
    let addr = server.addrs()[0];
    let mut deaf = TcpStream::connect(addr).unwrap();
    write!(deaf, "GET /large HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    // Answered meanwhile, before and after its deadline.
    for _ in 0..5 {
        assert!(ask(addr, "/").starts_with("HTTP/1.1 200"));
        std::thread::sleep(Duration::from_millis(100));
    }
    // Cut off: what it reads now ends (closed or reset) well short of the answer.
    deaf.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match deaf.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < LARGE, "read all {got} bytes: not cut off");
}

/// With every handler busy and the queue full, the next request is answered 503 at once,
/// without a handler.
#[test]
fn a_request_beyond_the_queue_is_answered_503_at_once() {
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let held = gate.clone();
    let handler: Handler = Arc::new(move |_: &Request| {
        let (open, opened) = &*held;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
        Response::text(200, "released")
    });
    let server = serve(handler, WRITE_TIMEOUT);
    let addr = server.addrs()[0];
    let waiting: Vec<_> = (0..HANDLERS + QUEUE)
        .map(|_| std::thread::spawn(move || ask(addr, "/")))
        .collect();
    // Until every handler holds one and the queue the rest, a new request may still be
    // taken: ask until one is refused.
    let t0 = Instant::now();
    let mut extra = Vec::new();
    let refused = loop {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        write!(s, "GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut answer = String::new();
        match s.read_to_string(&mut answer) {
            Ok(_) if answer.starts_with("HTTP/1.1 503") => break answer,
            _ => extra.push(s),
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "never refused");
    };
    assert!(refused.contains("retry later"), "{refused}");
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    // The requests held meanwhile, in the handlers and the queue, are all answered.
    let mut answers: Vec<String> = waiting.into_iter().map(|w| w.join().unwrap()).collect();
    for mut s in extra {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answers.push(answer);
    }
    // At most the handlers' and the queue's worth were held (fewer when requests came
    // faster than the handlers took them from the queue, which a loaded host does), and
    // every one held was answered.
    let ok = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 200"))
        .count();
    assert!(
        (QUEUE..=HANDLERS + QUEUE).contains(&ok),
        "{ok} answered 200: {answers:?}"
    );
    assert!(answers
        .iter()
        .all(|a| a.starts_with("HTTP/1.1 200") || a.starts_with("HTTP/1.1 503")));
}

/// A handler that panics answers 500, and the next request is served.
#[test]
fn a_panicking_handler_answers_500_and_the_server_goes_on() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let handler: Handler = Arc::new(|r: &Request| {
        if r.path == "/boom" {
            panic!("boom");
        }
        Response::text(200, "fine")
    });
    let limits = Limits {
        read_timeout: super::super::READ_TIMEOUT,
        loopback_host: true,
        write_timeout: WRITE_TIMEOUT,
    };
    let server = Server::start(vec![listener], handler, limits).unwrap();
    let addr = server.addrs()[0];
    let ask = |path: &str| {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    };
    for _ in 0..2 * HANDLERS {
        assert!(ask("/boom").starts_with("HTTP/1.1 500"));
    }
    assert!(ask("/").starts_with("HTTP/1.1 200"));
}
