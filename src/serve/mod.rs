//! Live profiles from a running program over HTTP (cargo feature `serve`): set
//! `CABPROF_SERVE=127.0.0.1:6060` (with `CABPROF=1`, or for a session built
//! [`from_env`](crate::SessionBuilder::from_env)) or call
//! [`SessionBuilder::serve`](crate::SessionBuilder::serve).
//!
//! | path | answer |
//! | --- | --- |
//! | `/debug/pprof/profile?seconds=N` | what happened in the next N seconds (default 30, at most [`MAX_SECONDS`]) as gzipped `profile.proto`, as Go's net/http/pprof serves it: `go tool pprof http://HOST/debug/pprof/profile?seconds=5` |
//! | `/metrics` | Prometheus text exposition: calls, durations, allocated bytes per function since the session started, and the runtime's counters |
//! | `/report.json?seconds=N` | the next N seconds as a cabprof JSON report (`cabprof report` reads it) |
//! | `/debug/pprof/` | an index of the profiles, and whether a window is open and since when |
//! | `/debug/pprof/inflight` | each thread's innermost open instrumented call with its calling context, and the futures pending, with how long this view has seen them open; `?format=json` |
//! | `/debug/pprof/allocs`, `/debug/pprof/heap` | Go's `allocs` and `heap` profiles since the session started, with the allocations analysis: `alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space` (blocks not freed, matched by address), `alloc_space` or `inuse_space` the default; `?gc=1` is accepted and changes nothing (a block is freed when dropped) |
//! | `/debug/pprof/mutex`, `/debug/pprof/block` | Go's `mutex` and `block` profiles with the waits analysis (`cabprof::sync`): `contentions`, `delay`; since the session started, or with `?seconds=N` the next N seconds |
//! | `/` | a page with the flame graph and the top functions of the time since the page was last loaded, reloading itself |
//!
//! A window is the difference of two snapshots ([`ReportData::since`]), so it holds every
//! event the analyzers saw between them: in exhaustive mode an idle thread's last events
//! too; in sampling mode those wait until the thread calls [`crate::flush_thread`] or fills
//! its chunk (see `tests/tracked/serve_http.rs`). One window is computed at a time: a request
//! for another while one runs gets 429. Bad `seconds` get 400 with the reason, unknown paths
//! 404. A window also ends when its client leaves (closes the connection), checked every
//! 100 ms as Go checks its request's context, and a request that finds one running gets 429
//! with `Retry-After` the seconds it has left.
//!
//! `/metrics`, `/`, `allocs` and `inflight` are served from one snapshot that every client
//! shares, taken again once it is [`SHARED_MAX_AGE`] old: a flood of them costs the program
//! one snapshot a second.
//!
//! Every client has total deadlines: [`READ_TIMEOUT`] for its whole request head
//! ([`serve_read_timeout`](crate::SessionBuilder::serve_read_timeout) sets it; then 408), 10 s
//! to read the whole answer, 0.5 s of linger; slow, silent or never-reading clients hold a
//! connection slot, not a handler thread, so scrapes are answered meanwhile (`http.rs`).
//!
//! The endpoint has no authentication: it binds the address given, and an address that is
//! not loopback must be asked for explicitly (`CABPROF_SERVE_PUBLIC=1`,
//! [`SessionBuilder::serve_public`](crate::SessionBuilder::serve_public)). On loopback, a
//! request whose `Host` is not `localhost` or a loopback address (any port) gets 421, so that
//! a web page cannot read the endpoint by rebinding its own name to 127.0.0.1; a public
//! address has no name to check against, and answers any `Host`. `localhost` binds both
//! 127.0.0.1 and ::1; another name, every address it resolves to. Every answer says
//! `X-Content-Type-Options: nosniff`.
//!
//! - `http.rs`: the HTTP server and its bounds.
//! - `inflight.rs`: the in-flight view.
//! - `metrics.rs`: the Prometheus exposition.
//! - `page.rs`: the HTML page.

mod http;
mod inflight;
mod metrics;
mod page;

use crate::model::{ReportData, WaitProfile};
use crate::report::Report;
use cabprof_cab::ConfigError;
use http::{Handler, Limits, Request, Response, Server};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The longest window `seconds` may ask for.
pub const MAX_SECONDS: u64 = 300;
/// The window when `seconds` is not given (as Go's net/http/pprof).
pub const DEFAULT_SECONDS: u64 = 30;
/// How old the snapshot `/metrics` and `/` are served from may be: however many clients ask,
/// the program meets at most one of their snapshots a second.
pub const SHARED_MAX_AGE: Duration = Duration::from_secs(1);
/// How often a window looks whether its client is still there.
const WINDOW_SLICE: Duration = Duration::from_millis(100);

/// Where and how to serve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ServeSettings {
    /// `HOST:PORT`; `None`: no endpoint.
    pub(crate) addr: Option<String>,
    /// A non-loopback address was asked for explicitly.
    pub(crate) public: bool,
    /// The `service_name` label; `None`: the executable's name.
    pub(crate) service: Option<String>,
    /// The setting's name in errors: the variable or the builder method.
    pub(crate) field: &'static str,
    /// How long a client may take to send its request head; `None`: [`READ_TIMEOUT`].
    pub(crate) read_timeout: Option<Duration>,
}

/// How long a client may take to send its whole request head, unless
/// `SessionBuilder::serve_read_timeout` says otherwise.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The read timeouts `SessionBuilder::serve_read_timeout` accepts: from what a client on the
/// same host needs to what a request over a very slow link may take. A slow client holds one
/// of the server's connection slots (not a handler) that long: a long timeout lets a flood of
/// them take the slots sooner, and the oldest is let go for each new connection.
pub const READ_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(600);

impl ServeSettings {
    /// Read `CABPROF_SERVE`, `CABPROF_SERVE_PUBLIC` and `CABPROF_SERVICE` through `get`
    /// (see [`crate::SETTINGS`]).
    pub(crate) fn apply_env(
        &mut self,
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(v) = get("CABPROF_SERVE") {
            let v = v.trim();
            if !v.is_empty() {
                self.addr = Some(v.to_string());
                self.field = "CABPROF_SERVE";
            }
        }
        if let Some(v) = get("CABPROF_SERVE_PUBLIC") {
            self.public = match v.trim() {
                "1" | "true" => true,
                "0" | "false" | "" => false,
                other => return Err(ConfigError::new("CABPROF_SERVE_PUBLIC", other, "0 or 1")),
            };
        }
        if let Some(v) = get("CABPROF_SERVICE") {
            if !v.trim().is_empty() {
                self.service = Some(v.trim().to_string());
            }
        }
        Ok(())
    }

    /// The settings that need no socket: the read timeout's range (checked whether or not an
    /// address is set, since a value out of range is a mistake either way). Part of
    /// `SessionBuilder::validate`, which `start` runs before it binds.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self.read_timeout {
            Some(t) if !READ_TIMEOUT_RANGE.contains(&t) => Err(ConfigError::new(
                "SessionBuilder::serve_read_timeout",
                format!("{t:?}"),
                format!(
                    "{:?} to {:?}",
                    READ_TIMEOUT_RANGE.start(),
                    READ_TIMEOUT_RANGE.end()
                ),
            )),
            _ => Ok(()),
        }
    }

    fn field(&self) -> &'static str {
        if self.field.is_empty() {
            "SessionBuilder::serve"
        } else {
            self.field
        }
    }

    /// Bind the address, if one is set: before the session starts, so that a port in use is
    /// an error at start and no session runs without its endpoint. A name binds every address
    /// it resolves to (`localhost`: 127.0.0.1 and ::1), on one port (the one chosen for the
    /// first when 0 was asked for); an address family the host lacks is left out.
    pub(crate) fn bind(&self) -> Result<Option<Vec<TcpListener>>, ConfigError> {
        let Some(addr) = &self.addr else {
            return Ok(None);
        };
        let field = self.field();
        let mut addrs: Vec<SocketAddr> = Vec::new();
        let resolved = match localhost_port(addr) {
            // RFC 6761: `localhost` is the loopback, both families, whatever the resolver
            // lists first (a browser or curl may try ::1 first).
            Some(port) => Ok(vec![
                SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
            ]),
            None => addr.to_socket_addrs().map(Iterator::collect),
        };
        for a in resolved.map_err(|e| {
            ConfigError::new(
                field,
                format!("{addr} ({e})"),
                "HOST:PORT, e.g. 127.0.0.1:6060",
            )
        })? {
            if !addrs.contains(&a) {
                addrs.push(a);
            }
        }
        if addrs.is_empty() {
            return Err(ConfigError::new(field, addr, "HOST:PORT naming an address"));
        }
        if !self.public {
            if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
                return Err(ConfigError::new(
                    field,
                    format!("{addr} ({} is not loopback)", a.ip()),
                    "a loopback address such as 127.0.0.1:6060, or any with \
                     CABPROF_SERVE_PUBLIC=1 / SessionBuilder::serve_public(true): the endpoint \
                     has no authentication",
                ));
            }
        }
        let cannot = |a: SocketAddr, e: std::io::Error| {
            ConfigError::new(
                field,
                format!("{addr} (cannot listen on {a}: {e})"),
                "an address and port this process can listen on (a port in use is taken)",
            )
        };
        let mut listeners: Vec<TcpListener> = Vec::with_capacity(addrs.len());
        let mut last_error = None;
        for mut a in addrs {
            if let Some(first) = listeners.first() {
                a.set_port(first.local_addr().map_err(|e| cannot(a, e))?.port());
            }
            match TcpListener::bind(a) {
                Ok(l) => listeners.push(l),
                // No IPv6 (or IPv4) on this host: serve the family it has.
                Err(e) if is_family_missing(&e) => last_error = Some((a, e)),
                Err(e) => return Err(cannot(a, e)),
            }
        }
        match (listeners.is_empty(), last_error) {
            (true, Some((a, e))) => Err(cannot(a, e)),
            _ => Ok(Some(listeners)),
        }
    }
}

/// The port of `localhost:PORT` (any case, with or without the root's dot).
fn localhost_port(addr: &str) -> Option<u16> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.strip_suffix('.').unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        .then(|| port.parse().ok())
        .flatten()
}

/// Whether binding failed because the host has no such address family or address.
fn is_family_missing(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::AddrNotAvailable || e.raw_os_error() == Some(libc::EAFNOSUPPORT)
}

/// Takes a snapshot of the session served; `None` once it has finished.
pub(crate) type SnapshotFn = Arc<dyn Fn() -> Option<Report> + Send + Sync>;

/// A running endpoint; dropping it stops the server and frees the port.
#[derive(Debug)]
pub(crate) struct Endpoint {
    server: Server,
}

impl Endpoint {
    /// The address served (the first, when a name gave several).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.server.addrs()[0]
    }
}

/// Serve `listeners` with snapshots from `snapshot`, and say where on standard error.
pub(crate) fn start(
    listeners: Vec<TcpListener>,
    settings: &ServeSettings,
    snapshot: SnapshotFn,
) -> std::io::Result<Endpoint> {
    let state = Arc::new(State {
        snapshot,
        service: settings
            .service
            .clone()
            .unwrap_or_else(crate::names::binary_name),
        window_busy: AtomicBool::new(false),
        window_open_ms: AtomicU64::new(0),
        window_ends_ms: AtomicU64::new(0),
        page_since: Mutex::new(None),
        shown: Mutex::default(),
        latest: Mutex::new(None),
        snapshots: AtomicU64::new(0),
        inflight: Mutex::default(),
    });
    let handler: Handler = Arc::new(move |r| state.handle(r));
    let mut loopback = true;
    for l in &listeners {
        loopback &= l.local_addr()?.ip().is_loopback();
    }
    let limits = Limits {
        read_timeout: settings.read_timeout.unwrap_or(READ_TIMEOUT),
        loopback_host: loopback,
        write_timeout: http::WRITE_TIMEOUT,
    };
    let server = Server::start(listeners, handler, limits)?;
    let urls: Vec<String> = server
        .addrs()
        .iter()
        .map(|a| format!("http://{a}/"))
        .collect();
    eprintln!(
        "cabprof: serving live profiles on {} (no authentication)",
        urls.join(" and ")
    );
    Ok(Endpoint { server })
}

/// What the handlers share.
struct State {
    snapshot: SnapshotFn,
    service: String,
    /// A window is being computed.
    window_busy: AtomicBool,
    /// When the window being computed took its first snapshot (ms since the Unix epoch; 0:
    /// none open).
    window_open_ms: AtomicU64,
    /// When the window being computed is to end (ms since the Unix epoch), for `Retry-After`.
    window_ends_ms: AtomicU64,
    /// The snapshot the page's next window starts from.
    page_since: Mutex<Option<ReportData>>,
    /// What the counters of `/metrics` have shown.
    shown: Mutex<metrics::Shown>,
    /// The snapshot `/metrics` and `/` are served from, shared by every client.
    latest: Mutex<Option<Shared>>,
    /// Snapshots taken so far, windows' included.
    snapshots: AtomicU64,
    /// When the in-flight view first saw each open call and pending future.
    inflight: Mutex<inflight::Seen>,
}

/// A snapshot that requests share, and what `/metrics` made of it.
struct Shared {
    /// When it was asked for.
    taken: Instant,
    report: Arc<Report>,
    metrics: Option<Vec<u8>>,
}

/// Closes the window and releases [`State::window_busy`].
struct Busy<'a>(&'a State);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.window_open_ms.store(0, Ordering::Release);
        self.0.window_ends_ms.store(0, Ordering::Release);
        self.0.window_busy.store(false, Ordering::Release);
    }
}

/// A window's two snapshots and when it began.
struct Window {
    earlier: ReportData,
    later: ReportData,
    began: SystemTime,
}

impl State {
    fn handle(&self, r: &Request) -> Response {
        if r.method != "GET" {
            return Response::text(405, "only GET is served");
        }
        match r.path.as_str() {
            "/debug/pprof/profile" => self.profile(r),
            "/metrics" => self.metrics(),
            "/report.json" => self.report_json(r),
            "/" => self.page(),
            "/debug/pprof/" | "/debug/pprof" => self.index(),
            "/debug/pprof/allocs" => self.allocs("allocs", "alloc_space"),
            "/debug/pprof/heap" => self.allocs("heap", "inuse_space"),
            "/debug/pprof/mutex" => self.waits(r, WaitProfile::Mutex),
            "/debug/pprof/block" => self.waits(r, WaitProfile::Block),
            "/debug/pprof/inflight" => self.inflight(r),
            "/debug/cabprof/trace" => self.trace(r),
            _ => Response::text(404, format!("404 page not found: {}", r.path)),
        }
    }

    fn gone() -> Response {
        Response::text(503, "the profiling session has finished")
    }

    /// Wait out a window of `seconds`, one at a time, while its client waits for it.
    fn window(&self, r: &Request) -> Result<Window, Response> {
        let seconds = parse_seconds(r.param("seconds")).map_err(|e| Response::text(400, e))?;
        if self.window_busy.swap(true, Ordering::AcqRel) {
            let mut busy = Response::text(
                429,
                "another window is being computed; retry when it is done",
            );
            let ends = self.window_ends_ms.load(Ordering::Acquire);
            let left_ms = ends.saturating_sub(unix_ms(SystemTime::now()));
            busy.headers
                .push(("Retry-After", left_ms.div_ceil(1000).max(1).to_string()));
            return Err(busy);
        }
        let _busy = Busy(self);
        let began = SystemTime::now();
        let length = Duration::from_secs(seconds);
        self.window_ends_ms
            .store(unix_ms(began + length), Ordering::Release);
        let earlier = self.take_snapshot().ok_or_else(State::gone)?.data;
        self.window_open_ms
            .store(unix_ms(began).max(1), Ordering::Release);
        // In slices, as Go's net/http/pprof watches its request's context: a client that has
        // gone frees the window for the next.
        let end = Instant::now() + length;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if r.client_gone() {
                return Err(Response::text(499, "the client closed the connection"));
            }
            std::thread::sleep(left.min(WINDOW_SLICE));
        }
        let later = self.take_snapshot().ok_or_else(State::gone)?.data;
        Ok(Window {
            earlier,
            later,
            began,
        })
    }

    fn profile(&self, r: &Request) -> Response {
        let w = match self.window(r) {
            Ok(w) => w,
            Err(e) => return e,
        };
        let nanos = w
            .began
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let labels = [("service_name", self.service.as_str())];
        let body = w.later.pprof_at(Some(&w.earlier), &labels, nanos);
        let mut ok = Response::new(200, "application/octet-stream", body);
        ok.headers.push((
            "Content-Disposition",
            "attachment; filename=\"profile\"".into(),
        ));
        ok
    }

    /// The timeline of a window, as a Chrome trace: the slices that started while it was open
    /// (the same window rules as `/debug/pprof/profile`).
    fn trace(&self, r: &Request) -> Response {
        let began = cabprof_cab::clock::now();
        let w = match self.window(r) {
            Ok(w) => w,
            Err(e) => return e,
        };
        let Some(t) = &w.later.timeline else {
            return Response::text(
                404,
                "404 trace not served: the timeline analysis does not run; add it \
                 (CABPROF_ANALYSES=...,timeline, or SessionBuilder::analyses with \
                 Analysis::Timeline)",
            );
        };
        let window = ReportData {
            timeline: Some(t.started_since(began)),
            ..w.later
        };
        let body = window.chrome_trace().unwrap_or_default();
        let mut ok = Response::new(200, "application/json", body.into_bytes());
        ok.headers.push((
            "Content-Disposition",
            "attachment; filename=\"trace.json\"".into(),
        ));
        ok
    }

    fn report_json(&self, r: &Request) -> Response {
        match self.window(r) {
            Ok(w) => Response::new(200, "application/json", w.later.since(&w.earlier).json()),
            Err(e) => e,
        }
    }

    /// What is served, as Go's index at the same path lists its profiles, and the window in
    /// progress: `window: open since <ms since the Unix epoch>` once its first snapshot is
    /// taken, else `window: none`.
    fn index(&self) -> Response {
        let window = match self.window_open_ms.load(Ordering::Acquire) {
            0 => "window: none".to_string(),
            ms => format!("window: open since {ms}"),
        };
        Response::text(
            200,
            format!(
                "cabprof live profiles of {}\n\
                 profile: /debug/pprof/profile?seconds=N (1 to {MAX_SECONDS}, default \
                 {DEFAULT_SECONDS})\n\
                 allocs: /debug/pprof/allocs, heap: /debug/pprof/heap (with the allocations \
                 analysis)\n\
                 mutex: /debug/pprof/mutex, block: /debug/pprof/block (?seconds=N; with the \
                 waits analysis)\n\
                 trace: /debug/cabprof/trace?seconds=N (with the timeline analysis)\n\
                 inflight: /debug/pprof/inflight (?format=json)\n\
                 metrics: /metrics\nreport: /report.json?seconds=N\npage: /\n{window}",
                self.service
            ),
        )
    }

    /// A snapshot of the session, counted.
    fn take_snapshot(&self) -> Option<Report> {
        self.snapshots.fetch_add(1, Ordering::Relaxed);
        (self.snapshot)()
    }

    /// Run `f` on the shared snapshot, taking a new one if it is [`SHARED_MAX_AGE`] old.
    /// Requests that come while one is taken wait for it, and use it.
    fn with_shared<T>(&self, f: impl FnOnce(&mut Shared, &State) -> T) -> Option<T> {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        if latest
            .as_ref()
            .is_none_or(|s| s.taken.elapsed() >= SHARED_MAX_AGE)
        {
            let taken = Instant::now();
            *latest = None;
            let report = Arc::new(self.take_snapshot()?);
            *latest = Some(Shared {
                taken,
                report,
                metrics: None,
            });
        }
        latest.as_mut().map(|s| f(s, self))
    }

    fn metrics(&self) -> Response {
        let body = self.with_shared(|shared, state| {
            shared
                .metrics
                .get_or_insert_with(|| {
                    let mut shown = state.shown.lock().unwrap_or_else(|e| e.into_inner());
                    let snapshots = state.snapshots.load(Ordering::Relaxed);
                    metrics::encode(&shared.report, &mut shown, snapshots).into_bytes()
                })
                .clone()
        });
        match body {
            Some(body) => Response::new(
                200,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                body,
            ),
            None => State::gone(),
        }
    }

    /// What each thread is inside now, and the futures pending (`inflight.rs`).
    fn inflight(&self, r: &Request) -> Response {
        let json = match r.param("format") {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => {
                return Response::text(
                    400,
                    format!("invalid format = {other:?}; allowed: text (the default) or json"),
                )
            }
        };
        let Some((report, taken)) = self.with_shared(|s, _| (s.report.clone(), s.taken)) else {
            return State::gone();
        };
        let mut seen = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        inflight::render(&report, taken, &mut seen, &self.service, json).unwrap_or_else(|| {
            Response::text(
                404,
                "404 in-flight view not served: it reads the call-tree analysis' stacks; add \
                 call-tree to CABPROF_ANALYSES (it is on by default) or Analysis::CallTree",
            )
        })
    }

    /// Go's `allocs` profile: the blocks and bytes allocated in each calling context since the
    /// session started, from the shared snapshot.
    /// Go's `allocs` or `heap` profile (`name`), the same columns with `default` the default
    /// sample type. `?gc=1`, which asks Go to collect garbage first, is accepted and changes
    /// nothing: a Rust block is freed when it is dropped, so what is live is already live.
    fn allocs(&self, name: &str, default: &str) -> Response {
        let Some(report) = self.with_shared(|shared, _| shared.report.clone()) else {
            return State::gone();
        };
        let Some(a) = &report.data.allocations else {
            return Response::text(
                404,
                "404 allocs and heap profiles not served: the allocations analysis does not run; \
                 add it (CABPROF_ANALYSES=call-tree,allocations, or \
                 SessionBuilder::analyses with Analysis::Allocations) and install \
                 cabprof::alloc::Tracked as the global allocator",
            );
        };
        if !a.tracked {
            return Response::text(
                404,
                "404 allocs and heap profiles not served: no allocation was reported; install \
                 cabprof::alloc::Tracked as the program's #[global_allocator]",
            );
        }
        let nanos = i64::try_from(unix_ms(SystemTime::now()))
            .unwrap_or(0)
            .saturating_mul(1_000_000);
        let labels = [("service_name", self.service.as_str())];
        let body = report.data.pprof_allocations(&labels, nanos, default);
        let mut ok = Response::new(200, "application/octet-stream", body.unwrap_or_default());
        ok.headers.push((
            "Content-Disposition",
            format!("attachment; filename=\"{name}\""),
        ));
        ok
    }

    /// Go's `mutex` or `block` profile of the waits analysis: since the session started from
    /// the shared snapshot, or with `?seconds=N` the window of the next N seconds (as
    /// `/debug/pprof/profile`), as Go serves its delta profiles.
    fn waits(&self, r: &Request, profile: WaitProfile) -> Response {
        let (later, earlier, began) = if r.param("seconds").is_some() {
            match self.window(r) {
                Ok(w) => (w.later, Some(w.earlier), w.began),
                Err(e) => return e,
            }
        } else {
            match self.with_shared(|shared, _| shared.report.data.clone()) {
                Some(data) => (data, None, SystemTime::now()),
                None => return State::gone(),
            }
        };
        let nanos = began
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let labels = [("service_name", self.service.as_str())];
        let Some(body) = later.pprof_waits_at(profile, earlier.as_ref(), &labels, nanos) else {
            return Response::text(
                404,
                "404 mutex and block profiles not served: the waits analysis does not run; add \
                 it (CABPROF_ANALYSES=call-tree,waits, or SessionBuilder::analyses with \
                 Analysis::Waits) and use cabprof::sync's Mutex, RwLock and mpsc channels",
            );
        };
        let mut ok = Response::new(200, "application/octet-stream", body);
        ok.headers.push((
            "Content-Disposition",
            format!("attachment; filename=\"{}\"", profile.name()),
        ));
        ok
    }

    fn page(&self) -> Response {
        let Some(now) = self.with_shared(|shared, _| shared.report.clone()) else {
            return State::gone();
        };
        let mut since = self.page_since.lock().unwrap_or_else(|e| e.into_inner());
        let window = match since.as_ref() {
            Some(earlier) => now.data.since(earlier),
            None => now.data.clone(),
        };
        let first = since.is_none();
        *since = Some(now.data.clone());
        drop(since);
        Response::new(
            200,
            "text/html; charset=utf-8",
            page::render(&window, &self.service, first),
        )
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `seconds` as Go's net/http/pprof takes it: absent is [`DEFAULT_SECONDS`]; otherwise a
/// whole number from 1 to [`MAX_SECONDS`].
pub(crate) fn parse_seconds(v: Option<&str>) -> Result<u64, String> {
    let Some(v) = v else {
        return Ok(DEFAULT_SECONDS);
    };
    let allowed = format!("allowed: a whole number of seconds from 1 to {MAX_SECONDS}");
    match v.parse::<i64>() {
        Ok(n) if (1..=MAX_SECONDS as i64).contains(&n) => Ok(n as u64),
        Ok(n) if n > MAX_SECONDS as i64 => Err(format!(
            "invalid seconds = {n}: longer than the longest window; {allowed}"
        )),
        Ok(n) => Err(format!("invalid seconds = {n}: {allowed}")),
        Err(_) => Err(format!("invalid seconds = {v:?}: not a number; {allowed}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_checked_like_gos() {
        assert_eq!(parse_seconds(None), Ok(DEFAULT_SECONDS));
        assert_eq!(parse_seconds(Some("7")), Ok(7));
        for bad in ["0", "-3", "abc", "", "1.5", "99999999999999999999", "301"] {
            let e = parse_seconds(Some(bad)).unwrap_err();
            assert!(e.contains("seconds") && e.contains("300"), "{bad}: {e}");
        }
    }

    #[test]
    fn non_loopback_needs_asking() {
        let s = ServeSettings {
            addr: Some("0.0.0.0:0".into()),
            field: "CABPROF_SERVE",
            ..Default::default()
        };
        let e = s.bind().unwrap_err();
        assert_eq!(e.field, "CABPROF_SERVE");
        assert!(e.allowed.contains("CABPROF_SERVE_PUBLIC"), "{e}");
        let public = ServeSettings { public: true, ..s };
        assert!(public.bind().unwrap().is_some());
    }

    #[test]
    fn a_port_in_use_is_named() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let s = ServeSettings {
            addr: Some(addr.clone()),
            field: "CABPROF_SERVE",
            ..Default::default()
        };
        let e = s.bind().unwrap_err();
        assert!(e.to_string().contains(&addr), "{e}");
        assert!(e.to_string().contains("CABPROF_SERVE"), "{e}");
    }
}
