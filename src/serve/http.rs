//! A small HTTP/1.1 server on `std::net` and `poll(2)`: one I/O thread, a fixed number of
//! handler threads, one request per connection (`Connection: close`).
//!
//! It must never hurt the program it runs in, nor let one client keep another out, so every
//! client is bounded by total deadlines, as Go's `ReadHeaderTimeout` and `WriteTimeout` bound
//! them:
//!
//! - The I/O thread alone reads request heads, writes answers and lingers before closing, all
//!   non-blocking: a client that trickles its head, sends nothing, or never reads its answer
//!   holds one of [`MAX_CONNECTIONS`] slots, never a thread. At that many, a new connection
//!   takes the slot of the oldest one still sending its head; when none is, it is answered
//!   503 at once.
//! - The whole request head has one deadline (the read timeout, [`super::READ_TIMEOUT`] unless
//!   set; then 408) and one size ([`MAX_HEAD`] bytes; then 431); the whole answer has
//!   [`WRITE_TIMEOUT`]; the linger after it [`LINGER`].
//! - A handler is handed a connection only once its whole head is in: [`HANDLERS`] of them,
//!   with [`QUEUE`] requests waiting at most (more are answered 503). One that panics answers
//!   500 and goes on.
//! - On a loopback address the `Host` header must name a loopback host (else 421): a web page
//!   whose name rebinds to 127.0.0.1 sends its own name, so it cannot read the endpoint.
//!
//! The program's threads never wait for a connection: the server reads the session through
//! snapshots. A snapshot is what they may meet: in exhaustive and sampling mode the analyzers
//! pause reading rings while they copy their results (a producer on a full ring then waits
//! that long), and in sequential mode a thread's next buffer of events waits while the
//! snapshot copies that thread's results (not the others'). Scrapes share one snapshot a
//! second (`super::SHARED_MAX_AGE`), so a flood of them meets the program no more often.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requests read whole but not yet taken by a handler.
pub(crate) const QUEUE: usize = 16;
/// Handler threads: one may spend a whole window waiting while the others answer scrapes.
pub(crate) const HANDLERS: usize = 4;
/// Connections the I/O thread keeps at once, in any phase: few enough that a flood of them
/// takes a small share of the process's file descriptors.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// The largest request line plus headers accepted.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to read a whole answer (a client that never reads).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long closing a connection waits, in all, for what the client still sends.
pub(crate) const LINGER: Duration = Duration::from_millis(500);
/// What lingering reads and drops at most.
const LINGER_BYTES: usize = 64 * 1024;

/// A parsed request: the method and the target, split into path and query.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    /// The connection, to tell whether the client is still there.
    client: Option<TcpStream>,
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

    /// Whether the client has closed its side of the connection (or it broke): nobody reads
    /// the answer any more. A client that only waits reads as present.
    pub(crate) fn client_gone(&self) -> bool {
        let Some(client) = &self.client else {
            return false;
        };
        // The I/O thread made the socket non-blocking: nothing to read is `WouldBlock`.
        match client.peek(&mut [0u8; 1]) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ),
        }
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

    /// The answer as sent: every one says `nosniff`, so that a browser never reads a text or
    /// a profile as a script or a page.
    fn into_bytes(self) -> Vec<u8> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
             X-Content-Type-Options: nosniff\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        // nginx's, for an answer nobody waits for any more.
        499 => "Client Closed Request",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// What answers requests.
pub(crate) type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// The bounds and checks a server applies to its clients.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// How long a client may take to send its whole request head.
    pub(crate) read_timeout: Duration,
    /// Whether the `Host` header must name a loopback host (the server listens on loopback).
    pub(crate) loopback_host: bool,
    /// How long a client may take to read a whole answer ([`WRITE_TIMEOUT`]).
    pub(crate) write_timeout: Duration,
}

/// The running server; dropping it stops accepting and frees the port.
#[derive(Debug)]
pub(crate) struct Server {
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    wake: Arc<UnixStream>,
    io: Option<JoinHandle<()>>,
}

impl Server {
    /// The addresses it listens on (the port chosen when 0 was asked for), the first as asked.
    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Start serving `listeners` with `handler` on threads of their own.
    pub(crate) fn start(
        listeners: Vec<TcpListener>,
        handler: Handler,
        limits: Limits,
    ) -> std::io::Result<Server> {
        let mut addrs = Vec::with_capacity(listeners.len());
        for l in &listeners {
            addrs.push(l.local_addr()?);
            l.set_nonblocking(true)?;
        }
        let (wake_rx, wake) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake.set_nonblocking(true)?;
        let wake = Arc::new(wake);
        let stop = Arc::new(AtomicBool::new(false));
        let (jobs_tx, jobs_rx) = sync_channel::<Job>(QUEUE);
        let (done_tx, done_rx) = channel::<(u64, Response)>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        for k in 0..HANDLERS {
            let (jobs, handler, done, wake) = (
                jobs_rx.clone(),
                handler.clone(),
                done_tx.clone(),
                wake.clone(),
            );
            std::thread::Builder::new()
                .name(format!("cabprof-serve-{k}"))
                .spawn(move || handle_loop(&jobs, &handler, &done, &wake))?;
        }
        let io = IoLoop {
            listeners,
            wake: wake_rx,
            stop: stop.clone(),
            jobs: jobs_tx,
            done: done_rx,
            limits,
            conns: Vec::new(),
            next_token: 0,
            accept_paused_until: None,
        };
        let io = std::thread::Builder::new()
            .name("cabprof-serve".into())
            .spawn(move || io.run())?;
        Ok(Server {
            addrs,
            stop,
            wake,
            io: Some(io),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = (&*self.wake).write(&[1]);
        // The I/O thread owns the listeners: once it has returned, the port is free.
        if let Some(io) = self.io.take() {
            let _ = io.join();
        }
    }
}

/// A request for a handler, and where its answer goes.
struct Job {
    token: u64,
    request: Request,
}

fn handle_loop(
    jobs: &Mutex<Receiver<Job>>,
    handler: &Handler,
    done: &Sender<(u64, Response)>,
    wake: &UnixStream,
) {
    // The server's own allocations are cabprof's, not the program's.
    let _work = cabprof_cab::runtime::runtime_work();
    loop {
        let next = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(job) = next else { return };
        let response =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&job.request)))
                .unwrap_or_else(|_| Response::text(500, "the handler panicked"));
        drop(job.request);
        if done.send((job.token, response)).is_err() {
            return;
        }
        // A full socket already holds a wake-up for the I/O thread.
        let _ = { wake }.write(&[1]);
    }
}

/// Where a connection is.
enum Phase {
    /// Reading the request head, so far.
    Head(Vec<u8>),
    /// With a handler (not polled, no deadline of the I/O thread's).
    Handling,
    /// Writing the answer, from `at`.
    Writing { out: Vec<u8>, at: usize },
    /// Written and shut for writing: reading and dropping what the client still sends.
    Linger { left: usize },
}

struct Conn {
    token: u64,
    stream: TcpStream,
    phase: Phase,
    accepted: Instant,
    /// When the current phase ends, whatever the client does.
    deadline: Option<Instant>,
}

impl Conn {
    /// Answer `response`: from now on the whole answer has `write_timeout`.
    fn answer(&mut self, response: Response, write_timeout: Duration) {
        self.phase = Phase::Writing {
            out: response.into_bytes(),
            at: 0,
        };
        self.deadline = Some(Instant::now() + write_timeout);
    }
}

/// What became of a connection after some I/O.
enum Next {
    Keep,
    Close,
    /// Its head is in: give it to a handler.
    Handle(Request),
}

struct IoLoop {
    listeners: Vec<TcpListener>,
    wake: UnixStream,
    stop: Arc<AtomicBool>,
    jobs: SyncSender<Job>,
    done: Receiver<(u64, Response)>,
    limits: Limits,
    conns: Vec<Conn>,
    next_token: u64,
    /// Accepting failed (out of file descriptors, say): wait rather than spin.
    accept_paused_until: Option<Instant>,
}

impl IoLoop {
    fn run(mut self) {
        let _work = cabprof_cab::runtime::runtime_work();
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut polled: Vec<usize> = Vec::new();
        loop {
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let now = Instant::now();
            fds.clear();
            polled.clear();
            let pollfd = |fd, events| libc::pollfd {
                fd,
                events,
                revents: 0,
            };
            fds.push(pollfd(self.wake.as_raw_fd(), libc::POLLIN));
            let accepting = self.accept_paused_until.is_none_or(|t| t <= now);
            for l in &self.listeners {
                // A negative descriptor is skipped by `poll`.
                let fd = if accepting { l.as_raw_fd() } else { -1 };
                fds.push(pollfd(fd, libc::POLLIN));
            }
            for (i, c) in self.conns.iter().enumerate() {
                let events = match c.phase {
                    Phase::Head(_) | Phase::Linger { .. } => libc::POLLIN,
                    Phase::Writing { .. } => libc::POLLOUT,
                    Phase::Handling => continue,
                };
                fds.push(pollfd(c.stream.as_raw_fd(), events));
                polled.push(i);
            }
            let next = self
                .conns
                .iter()
                .filter_map(|c| c.deadline)
                .chain(self.accept_paused_until.filter(|_| !accepting))
                .min();
            let timeout_ms = match next {
                None => -1,
                // Rounded up, so that the deadline has passed when `poll` returns.
                Some(t) => t
                    .saturating_duration_since(now)
                    .as_millis()
                    .saturating_add(1)
                    .min(60_000) as libc::c_int,
            };
            // SAFETY: `fds` is a live, initialized array of `fds.len()` pollfd records, which
            // `poll` only reads and writes within.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
            if n < 0 {
                // EINTR (a signal): look again. Anything else cannot be mended by waiting.
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if fds[0].revents != 0 {
                let mut sink = [0u8; 64];
                while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
            }
            self.take_answers();
            // Connections first, by index, before accepting adds or evicts any.
            let first_conn = 1 + self.listeners.len();
            let mut closed = Vec::new();
            for (k, &i) in polled.iter().enumerate() {
                if fds[first_conn + k].revents != 0 && self.progress(i) {
                    closed.push(i);
                }
            }
            self.expire(&mut closed);
            closed.sort_unstable();
            closed.dedup();
            for i in closed.into_iter().rev() {
                self.conns.swap_remove(i);
            }
            if (1..first_conn).any(|k| fds[k].revents != 0) {
                self.accept();
            }
        }
    }

    /// Move the handlers' answers to their connections.
    fn take_answers(&mut self) {
        while let Ok((token, response)) = self.done.try_recv() {
            if let Some(c) = self.conns.iter_mut().find(|c| c.token == token) {
                c.answer(response, self.limits.write_timeout);
            }
        }
    }

    /// Read or write what connection `i` is ready for; whether it is to be closed.
    fn progress(&mut self, i: usize) -> bool {
        let limits = self.limits;
        let next = step(&mut self.conns[i], &limits);
        match next {
            Next::Keep => false,
            Next::Close => true,
            Next::Handle(mut request) => {
                let c = &mut self.conns[i];
                request.client = c.stream.try_clone().ok();
                let job = Job {
                    token: c.token,
                    request,
                };
                match self.jobs.try_send(job) {
                    Ok(()) => {
                        c.phase = Phase::Handling;
                        c.deadline = None;
                    }
                    Err(TrySendError::Full(_)) => c.answer(
                        Response::text(503, "too many requests waiting; retry later"),
                        limits.write_timeout,
                    ),
                    Err(TrySendError::Disconnected(_)) => return true,
                }
                // A small answer is usually written at once.
                matches!(self.conns[i].phase, Phase::Writing { .. }) && self.progress(i)
            }
        }
    }

    /// Connections whose phase has run out of time: a late head is answered 408, anything
    /// else is closed. Their indices go to `closed`.
    fn expire(&mut self, closed: &mut Vec<usize>) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.deadline.is_none_or(|d| d > now) {
                continue;
            }
            if matches!(c.phase, Phase::Head(_)) {
                c.answer(
                    Response::text(408, "the request took too long"),
                    self.limits.write_timeout,
                );
                if self.progress(i) {
                    closed.push(i);
                }
            } else {
                closed.push(i);
            }
        }
    }

    /// Take every waiting connection, never waiting on one.
    fn accept(&mut self) {
        for k in 0..self.listeners.len() {
            loop {
                let stream = match self.listeners[k].accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        self.accept_paused_until = Some(Instant::now() + PAUSE);
                        return;
                    }
                };
                self.accept_paused_until = None;
                self.admit(stream);
            }
        }
    }

    /// Keep `stream`, making room if needed: the oldest connection still sending its head
    /// goes; when none is (all are being answered), `stream` is answered 503 at once.
    fn admit(&mut self, mut stream: TcpStream) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        if self.conns.len() >= MAX_CONNECTIONS {
            let oldest = (self.conns.iter().enumerate())
                .filter(|(_, c)| matches!(c.phase, Phase::Head(_)))
                .min_by_key(|(_, c)| c.accepted)
                .map(|(i, _)| i);
            match oldest {
                Some(i) => {
                    self.conns.swap_remove(i);
                }
                None => {
                    // Best effort and non-blocking: a small answer fits the socket's buffer.
                    let busy = Response::text(503, "too many connections; retry later");
                    let _ = stream.write(&busy.into_bytes());
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                    return;
                }
            }
        }
        let now = Instant::now();
        self.next_token += 1;
        self.conns.push(Conn {
            token: self.next_token,
            stream,
            phase: Phase::Head(Vec::new()),
            accepted: now,
            deadline: Some(now + self.limits.read_timeout),
        });
    }
}

/// How long accepting pauses after it failed.
const PAUSE: Duration = Duration::from_millis(10);

/// Read or write what `c` is ready for, never blocking.
fn step(c: &mut Conn, limits: &Limits) -> Next {
    let mut buf = [0u8; 4096];
    match &mut c.phase {
        Phase::Head(head) => loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(n) => head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
            match parse_head(head, limits) {
                Ok(None) => {}
                Ok(Some(request)) => return Next::Handle(request),
                Err(response) => {
                    c.answer(response, limits.write_timeout);
                    return step(c, limits);
                }
            }
        },
        Phase::Handling => Next::Keep,
        Phase::Writing { out, at } => {
            while *at < out.len() {
                match c.stream.write(&out[*at..]) {
                    Ok(0) => return Next::Close,
                    Ok(n) => *at += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Next::Keep,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
            }
            // What the client sent and was not read (the rest of an oversized request) is read
            // and dropped first: closing a socket with unread data resets the connection, and
            // the client would lose the answer.
            let _ = c.stream.shutdown(std::net::Shutdown::Write);
            c.phase = Phase::Linger { left: LINGER_BYTES };
            c.deadline = Some(Instant::now() + LINGER);
            step(c, limits)
        }
        Phase::Linger { left } => loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(n) if n >= *left => return Next::Close,
                Ok(n) => *left -= n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        },
    }
}

/// The request in `head` once it holds a whole head: `Ok(None)` while it does not yet,
/// `Err(answer)` for a bad one.
fn parse_head(head: &[u8], limits: &Limits) -> Result<Option<Request>, Response> {
    let Some(end) = find(head, b"\r\n\r\n") else {
        if head.len() > MAX_HEAD {
            return Err(Response::text(
                431,
                format!("the request line and headers exceed {MAX_HEAD} bytes"),
            ));
        }
        return Ok(None);
    };
    if end > MAX_HEAD {
        return Err(Response::text(
            431,
            format!("the request line and headers exceed {MAX_HEAD} bytes"),
        ));
    }
    let head = String::from_utf8_lossy(&head[..end]);
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Response::text(400, "malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Response::text(400, "HTTP/1.0 or HTTP/1.1 only"));
    }
    let mut hosts = lines.filter_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("host")
            .then(|| value.trim())
    });
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(Response::text(400, "more than one Host header"));
    }
    if limits.loopback_host {
        match host {
            Some(h) if is_loopback_host(h) => {}
            Some(h) => {
                return Err(Response::text(
                    421,
                    format!(
                        "Host {h:?} is not a loopback name: this endpoint listens on loopback \
                         and answers requests to 127.0.0.1, [::1] or localhost only (a web page \
                         whose name resolves here must not read it)"
                    ),
                ))
            }
            // HTTP/1.0 may leave it out; no browser does.
            None if version == "HTTP/1.0" => {}
            None => return Err(Response::text(400, "HTTP/1.1 requires a Host header")),
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Some(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        client: None,
    }))
}

/// Whether `host` (a `Host` header: a name or an address, and maybe a port) names this host's
/// loopback: `localhost` or a loopback address, on any port (a tunnel, `ssh -L 7000:...`,
/// arrives with its own).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || is_port(port) => v6,
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `:PORT`'s digits.
fn is_port(p: &str) -> bool {
    let p = p.strip_prefix(':').unwrap_or(p);
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
