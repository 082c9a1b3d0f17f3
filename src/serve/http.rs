//! A small HTTP/1.1 server on `std::net`: one accepting thread, a fixed number of handler
//! threads, one request per connection (`Connection: close`).
//!
//! It must never hurt the program it runs in, so everything is bounded: the connections
//! waiting for a handler ([`QUEUE`]; more are answered 503 at once), the request head
//! ([`MAX_HEAD`] bytes, then 431), how long a client may take to send it or to read the
//! answer (the read timeout, [`super::READ_TIMEOUT`] unless set, for the whole request head,
//! however slowly it trickles in; [`WRITE_TIMEOUT`]); a handler that panics answers 500 and
//! goes on. The program's threads never wait for a connection: the server reads the session
//! through snapshots. A snapshot is what they may meet: in exhaustive and sampling mode the
//! analyzers pause reading rings while they copy their results (a producer on a full ring
//! then waits that long), and in sequential mode a thread's first event, its exit and each
//! buffer it flushes wait for the snapshot's lock.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections accepted but not yet taken by a handler.
pub(crate) const QUEUE: usize = 16;
/// Handler threads: one may spend a whole window waiting and another wait for a slow client
/// while the others answer scrapes.
pub(crate) const HANDLERS: usize = 4;
/// The largest request line plus headers accepted.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// How long one write to a client may block (a client that never reads).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed request: the method and the target, split into path and query.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
}

impl Request {
    /// The value of `name` in the query string (`a=1&b=2`), undecoded.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// An answer: status, content type, body.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A plain-text answer, as Go's net/http/pprof gives its errors.
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Self {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Response::new(status, "text/plain; charset=utf-8", body)
    }

    fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        out.write_all(head.as_bytes())?;
        out.write_all(&self.body)?;
        out.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// What answers requests.
pub(crate) type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// The running server; dropping it stops accepting and frees the port.
#[derive(Debug)]
pub(crate) struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// The address it listens on (the port chosen when 0 was asked for).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Start serving `listener` with `handler` on threads of their own.
    /// A client that has not sent its whole request head within `read_timeout` is answered
    /// 408 and dropped.
    pub(crate) fn start(
        listener: TcpListener,
        handler: Handler,
        read_timeout: Duration,
    ) -> std::io::Result<Server> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel::<TcpStream>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for k in 0..HANDLERS {
            let (rx, handler) = (rx.clone(), handler.clone());
            std::thread::Builder::new()
                .name(format!("cabprof-serve-{k}"))
                .spawn(move || handle_loop(&rx, &handler, read_timeout))?;
        }
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("cabprof-serve".into())
            .spawn(move || accept_loop(listener, tx, &flag, read_timeout))?;
        Ok(Server { addr, stop })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accepting thread, blocked in `accept`, so that it sees the flag.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    }
}

fn accept_loop(
    listener: TcpListener,
    tx: SyncSender<TcpStream>,
    stop: &AtomicBool,
    read_timeout: Duration,
) {
    // The server's own allocations are cabprof's, not the program's.
    let _work = cabprof_cab::runtime::runtime_work();
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else {
            // Out of file descriptors, say: wait rather than spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_read_timeout(Some(read_timeout));
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        match tx.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(mut stream)) => {
                let _ = stream.set_read_timeout(Some(LINGER));
                let _ = stream.set_write_timeout(Some(LINGER));
                let _ = read_request(&mut stream, LINGER);
                let busy = Response::text(503, "too many connections waiting; retry later");
                close(stream, &busy);
            }
            Err(TrySendError::Disconnected(_)) => return,
        }
    }
}

fn handle_loop(rx: &Mutex<Receiver<TcpStream>>, handler: &Handler, read_timeout: Duration) {
    let _work = cabprof_cab::runtime::runtime_work();
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(mut stream) = next else { return };
        let response = match read_request(&mut stream, read_timeout) {
            Ok(request) => {
                let handler = handler.clone();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&request)))
                    .unwrap_or_else(|_| Response::text(500, "the handler panicked"))
            }
            Err(Some(response)) => response,
            Err(None) => continue,
        };
        close(stream, &response);
    }
}

/// How long closing a connection waits for what the client still sends.
const LINGER: Duration = Duration::from_millis(100);

/// Answer and close. What the client sent and was not read (the rest of an oversized
/// request) is read and dropped first, briefly: closing a socket with unread data resets the
/// connection, and the client would lose the answer.
fn close(mut stream: TcpStream, response: &Response) {
    if response.write_to(&mut stream).is_err() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(LINGER));
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// Read the request head; `Err(Some(answer))` for a bad one, `Err(None)` when the client is
/// gone or too slow to deserve an answer.
/// Read a request head within `budget`, all of it.
fn read_request(stream: &mut TcpStream, budget: Duration) -> Result<Request, Option<Response>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    // One deadline for the whole head: a client sending a byte now and then must not hold a
    // handler for longer than one that sends nothing.
    let deadline = std::time::Instant::now() + budget;
    let end = loop {
        if let Some(end) = find(&head, b"\r\n\r\n") {
            break end;
        }
        if head.len() > MAX_HEAD {
            return Err(Some(Response::text(
                431,
                format!("the request line and headers exceed {MAX_HEAD} bytes"),
            )));
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(Some(Response::text(408, "the request took too long")));
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(None),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Some(Response::text(408, "the request took too long")))
            }
            Err(_) => return Err(None),
        }
    };
    let head = String::from_utf8_lossy(&head[..end]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Some(Response::text(400, "malformed request line")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Some(Response::text(400, "HTTP/1.0 or HTTP/1.1 only")));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters() {
        let r = Request {
            method: "GET".into(),
            path: "/".into(),
            query: "a=1&seconds=5&flag".into(),
        };
        assert_eq!(r.param("seconds"), Some("5"));
        assert_eq!(r.param("flag"), Some(""));
        assert_eq!(r.param("b"), None);
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
        let server = Server::start(listener, handler, super::super::READ_TIMEOUT).unwrap();
        let ask = |path: &str| {
            let mut s = TcpStream::connect(server.addr()).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\n\r\n").unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).unwrap();
            answer
        };
        for _ in 0..2 * HANDLERS {
            assert!(ask("/boom").starts_with("HTTP/1.1 500"));
        }
        assert!(ask("/").starts_with("HTTP/1.1 200"));
    }
}
