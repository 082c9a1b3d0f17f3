//! The timeline: a program of known timing (a thread whose `outer` takes about 20 ms and calls
//! `inner` four times for about 4 ms each, another thread calling `side` meanwhile) gives
//! slices of those durations, nested, on the right threads, as many as the calls counted; the
//! Chrome trace of it, read by the DevTools trace engine (npm `@paulirish/trace_engine`, run
//! with Node), says the same; the flight recorder keeps the last slices and counts the rest.
//! One session at a time.

use cabprof::report::{TimelineData, TimelineSlice};
use cabprof::{profile, Analysis, ReportData, Session};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::serial;

const INNER_MS: f64 = 4.0;
const OUTER_MS: f64 = 20.0;
const SIDE_MS: f64 = 5.0;
const SIDE_CALLS: usize = 3;

/// Wait `ms`: asleep but for the last millisecond, then spinning to the deadline, so that a
/// late wake-up on a busy machine does not stretch the call.
fn wait(ms: f64) {
    let until = Instant::now() + Duration::from_micros((ms * 1e3) as u64);
    std::thread::sleep(Duration::from_micros(((ms - 1.0) * 1e3) as u64));
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Each call of the program, as it timed itself (function, ms), in the order they ended. On a
/// loaded machine a call can take longer than it asked for (its thread preempted): the slices
/// are compared with what the calls took.
static MEASURED: std::sync::Mutex<Vec<(&str, f64)>> = std::sync::Mutex::new(Vec::new());

fn timed(name: &'static str, f: impl FnOnce()) {
    let t = Instant::now();
    f();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    MEASURED.lock().unwrap().push((name, ms));
}

#[profile]
fn inner() {
    timed("inner", || wait(INNER_MS));
}

/// Four `inner` calls, then as long again as one, alone: 20 ms.
#[profile]
fn outer() {
    OUTER_BEGUN.store(true, std::sync::atomic::Ordering::Release);
    timed("outer", || {
        for _ in 0..4 {
            inner();
        }
        wait(OUTER_MS - 4.0 * INNER_MS);
        until(&SIDE_BEGUN);
    });
}

/// Set when a `side` call, and `outer`, have begun: neither ends before the other has begun,
/// so that the two threads' calls overlap however late a loaded machine runs one of them.
static SIDE_BEGUN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static OUTER_BEGUN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Wait until `flag` is set.
fn until(flag: &std::sync::atomic::AtomicBool) {
    while !flag.load(std::sync::atomic::Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[profile]
fn side() {
    SIDE_BEGUN.store(true, std::sync::atomic::Ordering::Release);
    timed("side", || {
        wait(SIDE_MS);
        until(&OUTER_BEGUN);
    });
}

/// Pending once (waking itself), then ready.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// Polled three times: once on one thread, twice on another.
#[profile]
async fn hop() -> u64 {
    YieldOnce(false).await;
    YieldOnce(false).await;
    7
}

/// `hop`'s first poll on thread `timeline-hop-a`, the rest on `timeline-hop-b`.
fn hop_across_threads() {
    let poll = |f: &mut std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>>| {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        f.as_mut().poll(&mut cx)
    };
    let mut f: std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>> = Box::pin(hop());
    let f = std::thread::Builder::new()
        .name("timeline-hop-a".into())
        .spawn(move || {
            assert!(poll(&mut f).is_pending());
            f
        })
        .unwrap()
        .join()
        .unwrap();
    let mut f = f;
    std::thread::Builder::new()
        .name("timeline-hop-b".into())
        .spawn(move || {
            assert!(poll(&mut f).is_pending());
            assert_eq!(poll(&mut f), std::task::Poll::Ready(7));
        })
        .unwrap()
        .join()
        .unwrap();
}

/// The durations the program measured for `name`'s calls, in ms, in call order.
fn measured(name: &str) -> Vec<f64> {
    MEASURED
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| *n == name)
        .map(|(_, ms)| *ms)
        .collect()
}

#[profile]
fn tiny(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_add(1)
}

/// Runs the program of known timing under a session of `analyses`.
fn known_timing(analyses: &[Analysis]) -> ReportData {
    known_timing_with(analyses, false)
}

/// [`known_timing`], with raw times (`time_raw`) or not.
fn known_timing_with(analyses: &[Analysis], raw: bool) -> ReportData {
    MEASURED.lock().unwrap().clear();
    SIDE_BEGUN.store(false, std::sync::atomic::Ordering::Relaxed);
    OUTER_BEGUN.store(false, std::sync::atomic::Ordering::Relaxed);
    let s = Session::builder()
        .analyses(analyses)
        .time_raw(raw)
        .start()
        .unwrap();
    // Both threads start their calls together, so that they run at the same time however
    // late a loaded machine starts one of them.
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let go = start.clone();
    let a = std::thread::Builder::new()
        .name("timeline-outer".into())
        .spawn(move || {
            go.wait();
            outer()
        })
        .unwrap();
    let b = std::thread::Builder::new()
        .name("timeline-side".into())
        .spawn(move || {
            start.wait();
            (0..SIDE_CALLS).for_each(|_| side())
        })
        .unwrap();
    a.join().unwrap();
    b.join().unwrap();
    hop_across_threads();
    s.finish().data.clone()
}

/// One slice as a reader saw it: its function, thread, interval (ms) and parent's index.
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    thread: String,
    start_ms: f64,
    dur_ms: f64,
    parent: Option<usize>,
}

/// The timeline's slices as [`Seen`] ones, parents found from depth and interval.
fn from_report(d: &ReportData, t: &TimelineData) -> Vec<Seen> {
    let mut out = Vec::new();
    for th in &t.threads {
        let base = out.len();
        let mut open: Vec<(usize, &TimelineSlice)> = Vec::new();
        for (i, s) in th.slices.iter().enumerate() {
            open.truncate(s.depth as usize);
            let parent = open.last().map(|(j, _)| base + j);
            out.push(Seen {
                name: d.name(s.method),
                thread: th.thread.clone(),
                start_ms: s.start_ns / 1e6,
                dur_ms: s.duration_ns / 1e6,
                parent,
            });
            open.push((i, s));
        }
    }
    out
}

/// Every check on the slices of [`known_timing`], whoever read them; `counts`: each function's
/// calls as the method-count analysis has them.
fn check(seen: &[Seen], counts: &BTreeMap<String, u64>, reader: &str) {
    let named = |suffix: &str| -> Vec<(usize, &Seen)> {
        seen.iter()
            .enumerate()
            .filter(|(_, s)| s.name.ends_with(suffix))
            .collect()
    };
    // Within 10 % of what the call took (by the program's own clock), and of what it was
    // meant to take unless the machine held the program up.
    let near = |got: f64, took: f64, nominal: f64, what: &str| {
        assert!(
            (got - took).abs() <= 0.1 * took,
            "{reader}: {what} took {got:.3} ms, not within 10 % of the {took:.3} ms it measured"
        );
        if (took - nominal).abs() > 0.1 * nominal {
            eprintln!("{reader}: {what} took {took:.3} ms by its own clock, not {nominal} ms: a busy machine");
        }
    };
    let outers = named("::outer");
    let inners = named("::inner");
    let sides = named("::side");
    for (name, list) in [("outer", &outers), ("inner", &inners), ("side", &sides)] {
        let counted = counts
            .iter()
            .find(|(n, _)| n.ends_with(&format!("::{name}")))
            .map(|(_, c)| *c);
        assert_eq!(
            Some(list.len() as u64),
            counted,
            "{reader}: {name}'s slices against its counted calls"
        );
    }
    assert_eq!(
        (outers.len(), inners.len(), sides.len()),
        (1, 4, SIDE_CALLS)
    );
    let (oi, o) = outers[0];
    assert_eq!(o.thread, "timeline-outer", "{reader}");
    assert_eq!(o.parent, None, "{reader}: outer is called from the root");
    near(o.dur_ms, measured("outer")[0], OUTER_MS, "outer");
    let mut last_end = o.start_ms;
    let mut inner_took = measured("inner").into_iter();
    for (_, i) in &inners {
        assert_eq!(i.thread, "timeline-outer", "{reader}");
        assert_eq!(i.parent, Some(oi), "{reader}: inner nested in outer");
        assert!(
            i.start_ms >= o.start_ms && i.start_ms + i.dur_ms <= o.start_ms + o.dur_ms,
            "{reader}: inner {i:?} inside outer {o:?}"
        );
        assert!(i.start_ms >= last_end, "{reader}: inner calls overlap");
        last_end = i.start_ms + i.dur_ms;
        near(i.dur_ms, inner_took.next().unwrap(), INNER_MS, "inner");
    }
    let mut side_took = measured("side").into_iter();
    for (_, s) in &sides {
        assert_eq!(s.thread, "timeline-side", "{reader}");
        assert_eq!(s.parent, None, "{reader}");
        near(s.dur_ms, side_took.next().unwrap(), SIDE_MS, "side");
    }
    // In parallel: the side thread's calls ran while outer did.
    let (_, first_side) = sides[0];
    assert!(
        first_side.start_ms < o.start_ms + o.dur_ms
            && o.start_ms < first_side.start_ms + first_side.dur_ms,
        "{reader}: the two threads ran at the same time"
    );
}

fn counts(d: &ReportData) -> BTreeMap<String, u64> {
    d.method_count
        .as_ref()
        .expect("method counts")
        .iter()
        .map(|e| (d.name(e.method), e.count))
        .collect()
}

/// Each slice's self time: its width less those of the slices directly inside it (its
/// callees' and cabprof's), summed per name.
fn self_times(d: &ReportData, t: &TimelineData) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for th in &t.threads {
        let mut own: Vec<f64> = th.slices.iter().map(|s| s.duration_ns).collect();
        let mut open: Vec<usize> = Vec::new();
        for (i, s) in th.slices.iter().enumerate() {
            open.truncate(s.depth as usize);
            if let Some(&p) = open.last() {
                own[p] -= s.duration_ns;
            }
            open.push(i);
        }
        for (s, o) in th.slices.iter().zip(own) {
            *out.entry(d.name(s.method)).or_insert(0.0) += o;
        }
    }
    out
}

#[test]
fn slices_have_the_known_durations_nesting_and_threads_and_match_the_time_analysis() {
    let _g = serial();
    let d = known_timing(&[Analysis::MethodCount, Analysis::Time, Analysis::Timeline]);
    let t = d.timeline.as_ref().expect("the timeline ran");
    assert!(t.compensated);
    assert_eq!(t.sample_period, 1);
    check(&from_report(&d, t), &counts(&d), "the report");
    // cabprof's own time is in slices of its own, none overlapping a call at its depth.
    let cabprof: Vec<_> = t
        .threads
        .iter()
        .flat_map(|th| &th.slices)
        .filter(|s| s.method == 0)
        .collect();
    assert!(cabprof.len() >= 2, "{cabprof:?}");
    for th in &t.threads {
        for (i, a) in th.slices.iter().enumerate() {
            for b in &th.slices[i + 1..] {
                if a.depth == b.depth {
                    assert!(
                        a.start_ns + a.duration_ns <= b.start_ns + 1e-6,
                        "{a:?} overlaps {b:?}"
                    );
                }
            }
        }
    }
    // `hop`'s three polls on two threads, tied by one flow: it starts on the first thread
    // and steps and finishes on the second.
    let trace: serde_json::Value = serde_json::from_str(&d.chrome_trace().unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let tid_of = |name: &str| {
        events
            .iter()
            .find(|e| e["ph"] == "M" && e["args"]["name"] == name)
            .map(|e| e["tid"].clone())
            .unwrap_or_else(|| panic!("no thread {name}"))
    };
    let hops = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().unwrap().ends_with("::hop"))
        .count();
    assert_eq!(hops, 3, "hop's polls");
    let flow: Vec<(String, serde_json::Value)> = events
        .iter()
        .filter(|e| e["cat"] == "poll" && e["name"] == "future")
        .map(|e| (e["ph"].as_str().unwrap().to_string(), e["tid"].clone()))
        .collect();
    let (a, b) = (tid_of("timeline-hop-a"), tid_of("timeline-hop-b"));
    assert_eq!(
        flow,
        [("s".into(), a), ("t".into(), b.clone()), ("f".into(), b)],
        "{flow:?}"
    );
    // Each function's self time is the time analysis' compensated self time, to 2 % or 0.2 ms: the
    // analysis also takes out time inside cabprof the stream tells of (a thread's first mark,
    // tens of microseconds on a loaded host), which the timeline leaves in the calls around it.
    let time = d.time.as_ref().unwrap();
    let selves = self_times(&d, t);
    for name in ["::inner", "::outer", "::side"] {
        let f = time
            .functions
            .iter()
            .find(|f| d.name(f.method).ends_with(name))
            .unwrap();
        let (_, got) = selves.iter().find(|(n, _)| n.ends_with(name)).unwrap();
        assert!(
            (got - f.exclusive_ns).abs() <= (2e-2 * f.exclusive_ns).max(200e3),
            "{name}: slices' self time {got} ns, the time analysis' {} ns",
            f.exclusive_ns
        );
    }
    // The timeline reads back from the JSON report as it was written.
    // (Floats to the last bit or so: miniserde's parser is not correctly rounded.)
    let back = ReportData::from_json(&d.json()).unwrap();
    let back = back.timeline.as_ref().unwrap();
    assert_eq!(back.threads.len(), t.threads.len());
    for (b, a) in back.threads.iter().zip(&t.threads) {
        assert_eq!((&b.thread, b.overwritten), (&a.thread, a.overwritten));
        assert_eq!(b.slices.len(), a.slices.len());
        for (x, y) in b.slices.iter().zip(&a.slices) {
            assert_eq!((x.method, x.depth, x.poll), (y.method, y.depth, y.poll));
            assert!((x.start_ns - y.start_ns).abs() <= 1e-6);
            assert!((x.duration_ns - y.duration_ns).abs() <= 1e-6);
        }
    }
}

/// With raw times asked for, the slices are the time analysis' raw figures, call by call.
#[test]
fn with_raw_times_the_slices_sum_to_the_raw_inclusive_time() {
    let _g = serial();
    let d = known_timing_with(
        &[Analysis::MethodCount, Analysis::Time, Analysis::Timeline],
        true,
    );
    let t = d.timeline.as_ref().expect("the timeline ran");
    assert!(!t.compensated);
    assert!(t
        .threads
        .iter()
        .flat_map(|th| &th.slices)
        .all(|s| s.method != 0));
    check(&from_report(&d, t), &counts(&d), "the raw report");
    let time = d.time.as_ref().unwrap();
    for name in ["::inner", "::outer", "::side"] {
        let f = time
            .functions
            .iter()
            .find(|f| d.name(f.method).ends_with(name))
            .unwrap();
        let sum: f64 = t
            .threads
            .iter()
            .flat_map(|th| &th.slices)
            .filter(|s| d.name(s.method).ends_with(name))
            .map(|s| s.duration_ns)
            .sum();
        let raw = f.raw_inclusive_ns.unwrap();
        assert!(
            (sum - raw).abs() <= 1e-6 * raw,
            "{name}: slices sum to {sum} ns, the time analysis says {raw} ns"
        );
    }
}

#[test]
fn the_report_has_no_timeline_unless_it_ran() {
    let _g = serial();
    let d = known_timing(&[Analysis::MethodCount, Analysis::Time]);
    assert!(d.timeline.is_none());
    assert!(d.json().contains("\"timeline\": null"));
    assert_eq!(d.chrome_trace(), None);
}

#[test]
fn the_flight_recorder_keeps_the_last_slices_of_each_thread() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Timeline])
        .timeline_slices(8)
        .start()
        .unwrap();
    let calls = 1000;
    std::thread::Builder::new()
        .name("timeline-tiny".into())
        .spawn(move || (0..calls).fold(0, |a, _| tiny(a)))
        .unwrap()
        .join()
        .unwrap();
    let d = s.finish().data.clone();
    let t = d.timeline.as_ref().unwrap();
    assert_eq!(t.slices_per_thread, 8);
    let th = t
        .threads
        .iter()
        .find(|th| th.thread == "timeline-tiny")
        .expect("the thread's timeline");
    // The last 8 calls, and cabprof's time around them (method 0).
    let kept: Vec<_> = th.slices.iter().filter(|s| s.method != 0).collect();
    assert_eq!(kept.len(), 8);
    assert_eq!(th.overwritten, calls - 8);
    // Ordered, and not overlapping.
    for w in th.slices.windows(2) {
        assert!(w[0].start_ns + w[0].duration_ns <= w[1].start_ns + 1.0);
    }
}

#[test]
fn a_bad_slice_count_is_refused_naming_the_setting() {
    let _g = serial();
    for n in [0, (1 << 24) + 1] {
        let Err(e) = Session::builder()
            .analyses(&[Analysis::Timeline])
            .timeline_slices(n)
            .start()
        else {
            panic!("{n} slices accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("timeline_slices") && e.contains("1..=16777216"),
            "{e}"
        );
    }
    // The variable is checked as it is read, whatever the analyses.
    for bad in ["many", "0", "16777217"] {
        let Err(e) = Session::builder()
            .from_vars(|k| (k == "CABPROF_TIMELINE_SLICES").then(|| bad.to_string()))
        else {
            panic!("CABPROF_TIMELINE_SLICES={bad} accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("CABPROF_TIMELINE_SLICES") && e.contains("1..=16777216"),
            "{e}"
        );
    }
}

/// The readers' npm packages, installed into the tests' scratch directory on first use
/// (`npm install`); the `node_modules` directory, or `None` (and a failure under `CI`) if Node
/// or npm is missing or the install fails.
fn npm_packages() -> Option<PathBuf> {
    const PACKAGES: [&str; 2] = ["@paulirish/trace_engine@0.0.65", "speedscope@1.25.0"];
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timeline_readers");
    let modules = dir.join("node_modules");
    if Command::new("node").arg("--version").output().is_err() {
        return skip("`node` is not installed: the trace engine cannot read the trace");
    }
    let installed = ["@paulirish/trace_engine", "speedscope"]
        .iter()
        .all(|p| modules.join(p).join("package.json").exists());
    if !installed {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args(PACKAGES)
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return skip(&format!(
                    "`npm install {}` failed: {}",
                    PACKAGES.join(" "),
                    String::from_utf8_lossy(&o.stderr)
                ))
            }
            Err(e) => return skip(&format!("`npm` is not installed ({e})")),
        }
    }
    Some(modules)
}

/// A reader is missing: say so, and fail under `CI`.
fn skip<T>(message: &str) -> Option<T> {
    assert!(std::env::var_os("CI").is_none(), "{message}, and CI is set");
    eprintln!("SKIPPED: {message}");
    None
}

#[test]
fn the_devtools_trace_engine_reads_the_chrome_trace_as_the_report_says() {
    let _g = serial();
    let d = known_timing(&[Analysis::MethodCount, Analysis::Timeline]);
    let trace = d.chrome_trace().expect("a timeline");
    let Some(out) = trace_engine(&trace, "timeline.trace.json") else {
        return;
    };
    judge(&out, &d, "the trace engine");
}

/// The DevTools trace engine's reading of `trace` (written to `file` in the tests' scratch
/// directory); `None` if the engine is missing (a failure under `CI`).
fn trace_engine(trace: &str, file: &str) -> Option<std::process::Output> {
    let modules = npm_packages()?;
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(file);
    std::fs::write(&path, trace).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/readers/trace_engine.mjs");
    Some(
        Command::new("node")
            .arg(&script)
            .arg(&path)
            .arg(&modules)
            .output()
            .unwrap(),
    )
}

/// Serve the files of `dir` over HTTP on loopback, from a thread that lives as long as the
/// test binary; the address.
fn serve_dir(dir: PathBuf) -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // The head's other lines, up to the empty one.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split(' ').nth(1).unwrap_or("/");
            let path = path.split(['?', '#']).next().unwrap_or("/");
            let file = dir.join(path.trim_start_matches('/'));
            let mut stream = &stream;
            match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => {
                    let kind = match file.extension().and_then(|e| e.to_str()) {
                        Some("html") => "text/html",
                        Some("js") => "text/javascript",
                        Some("json") => "application/json",
                        Some("wasm") => "application/wasm",
                        Some("css") => "text/css",
                        _ => "application/octet-stream",
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(&body);
                }
                _ => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        }
    });
    addr
}

/// The total weight speedscope shows for thread `name`, in ms, from its profile list.
fn speedscope_weight(dom: &str, name: &str) -> Option<f64> {
    let row = dom.find(&format!("{name} (tid "))?;
    let rest = &dom[row..];
    let end = rest.find("ms</td>")?;
    let start = rest[..end].rfind('>')? + 1;
    rest[start..end].parse().ok()
}

#[test]
fn speedscope_loads_the_chrome_trace_with_no_warnings() {
    let _g = serial();
    let d = known_timing(&[Analysis::MethodCount, Analysis::Timeline]);
    let trace = d.chrome_trace().expect("a timeline");
    if Command::new("chromium").arg("--version").output().is_err() {
        skip::<()>("`chromium` is not installed (Debian package `chromium`)");
        return;
    }
    let Some(modules) = npm_packages() else {
        return;
    };
    // Its app and the trace, served from one place: the app fetches the trace by URL.
    let site = Path::new(env!("CARGO_TARGET_TMPDIR")).join("speedscope_site");
    let _ = std::fs::remove_dir_all(&site);
    std::fs::create_dir_all(&site).unwrap();
    let release = modules.join("speedscope/dist/release");
    for entry in std::fs::read_dir(&release).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), site.join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(site.join("timeline.trace.json"), &trace).unwrap();
    let addr = serve_dir(site.clone());
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--use-angle=swiftshader",
            "--enable-unsafe-swiftshader",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            site.join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!(
            "http://{addr}/index.html#profileURL=http://{addr}/timeline.trace.json"
        ))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console
            .iter()
            .any(|l| l.contains("Importing as Trace Event Format")),
        "speedscope did not import the trace: {console:#?}"
    );
    for l in &console {
        assert!(
            !l.contains("Tried to end")
                && !l.contains("still open")
                && !l.contains("WARNING:CONSOLE")
                && !l.contains("ERROR:CONSOLE"),
            "speedscope: {l}"
        );
    }
    assert!(
        dom.contains("<title>timeline.trace.json - speedscope</title>"),
        "the profile is open: {dom}"
    );
    // Each thread's total: its outermost calls.
    let outer = speedscope_weight(&dom, "timeline-outer").expect("the outer thread");
    let side = speedscope_weight(&dom, "timeline-side").expect("the side thread");
    let outer_took = measured("outer")[0];
    assert!(
        (outer - outer_took).abs() <= 0.1 * outer_took,
        "outer thread {outer} ms, its call took {outer_took} ms"
    );
    let sides: f64 = measured("side").iter().sum();
    assert!(
        (side - sides).abs() <= 0.1 * sides,
        "side thread {side} ms, its calls took {sides} ms"
    );
}

/// A reader's JSON (`[{ "name", "slices": [{ "name", "ts", "dur", "parent" }] }]`, times in
/// µs, `parent` an index into its thread's slices) as [`Seen`] slices.
fn read_seen(json: &[u8]) -> Vec<Seen> {
    let read: serde_json::Value = serde_json::from_slice(json).unwrap();
    let mut seen = Vec::new();
    for th in read.as_array().expect("an array of threads") {
        let name = th["name"].as_str().expect("a thread name").to_owned();
        let base = seen.len();
        for s in th["slices"].as_array().expect("slices") {
            if let Some(ph) = s.get("ph") {
                assert_eq!(ph, "X");
            }
            seen.push(Seen {
                name: s["name"].as_str().unwrap().to_owned(),
                thread: name.clone(),
                start_ms: s["ts"].as_f64().unwrap() / 1e3,
                dur_ms: s["dur"].as_f64().unwrap() / 1e3,
                parent: s["parent"].as_u64().map(|p| base + p as usize),
            });
        }
    }
    seen
}

/// A Python with Perfetto's schema (PyPI `perfetto`), in a virtual environment made in the
/// tests' scratch directory on first use; `None` (and a failure under `CI`) if that fails.
fn perfetto_python() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perfetto_venv");
    let python = dir.join("bin/python");
    let ready = |py: &Path| {
        Command::new(py)
            .args([
                "-c",
                "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ready(&python) {
        return Some(python);
    }
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output();
    if !venv.as_ref().is_ok_and(|o| o.status.success()) {
        return skip(&format!(
            "`python3 -m venv` failed (Debian package `python3-venv`): {venv:?}"
        ));
    }
    let pip = Command::new(dir.join("bin/pip"))
        .args(["install", "-q", "perfetto==0.16.0", "protobuf"])
        .output();
    if !pip.as_ref().is_ok_and(|o| o.status.success()) || !ready(&python) {
        return skip(&format!("`pip install perfetto protobuf` failed: {pip:?}"));
    }
    Some(python)
}

#[test]
fn perfettos_schema_decodes_the_perfetto_trace_as_the_report_says() {
    let _g = serial();
    let d = known_timing(&[Analysis::MethodCount, Analysis::Timeline]);
    let trace = d.perfetto_trace().expect("a timeline");
    let Some(python) = perfetto_python() else {
        return;
    };
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timeline.pftrace");
    std::fs::write(&path, &trace).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/readers/perfetto_check.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(&path)
        .output()
        .unwrap();
    judge(&out, &d, "Perfetto's schema");
    // `hop`'s three polls, on two threads, share one flow.
    let tracks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flows: Vec<serde_json::Value> = tracks
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["slices"].as_array().unwrap())
        .filter(|s| s["name"].as_str().unwrap().ends_with("::hop"))
        .map(|s| s["flows"].clone())
        .collect();
    assert_eq!(flows.len(), 3, "{flows:?}");
    assert!(
        flows
            .iter()
            .all(|f| f.as_array().unwrap().len() == 1 && *f == flows[0]),
        "{flows:?}"
    );
}

/// A reader's run: it succeeded, read every slice of the report, and what it read passes
/// [`check`].
fn judge(out: &std::process::Output, d: &ReportData, reader: &str) {
    assert!(
        out.status.success(),
        "{reader} refused the trace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = read_seen(&out.stdout);
    let slices: usize = d
        .timeline
        .as_ref()
        .unwrap()
        .threads
        .iter()
        .map(|t| t.slices.len())
        .sum();
    assert_eq!(seen.len(), slices, "every slice read by {reader}");
    check(&seen, &counts(d), reader);
}

/// The live endpoint's window: `/debug/cabprof/trace?seconds=1` serves, as a Chrome trace, the
/// slices that started while it was open: `side`'s calls made during it, none of those made
/// before it; without the timeline analysis, a 404 that says what to add.
#[cfg(feature = "serve")]
#[test]
fn the_live_endpoint_serves_the_window_of_the_timeline() {
    use crate::serve_support::get;
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Timeline])
        .serve("127.0.0.1:0")
        .start()
        .unwrap();
    let addr = s.serve_addr().unwrap();
    // `side` alone: it waits for no `outer`.
    OUTER_BEGUN.store(true, std::sync::atomic::Ordering::Release);
    // Before the window: three calls.
    (0..3).for_each(|_| side());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let during = std::thread::Builder::new()
        .name("timeline-window".into())
        .spawn(move || {
            let mut n = 0u32;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                side();
                n += 1;
            }
            n
        })
        .unwrap();
    let a = get(addr, "/debug/cabprof/trace?seconds=1");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let made = during.join().unwrap();
    assert_eq!(a.status, 200, "{}", a.text());
    let trace: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let calls: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().is_some_and(|n| n.ends_with("::side")))
        .collect();
    let threads: std::collections::BTreeSet<String> =
        calls.iter().map(|e| e["tid"].to_string()).collect();
    // The window's calls (about 1 s of 5 ms calls), on one thread: not the three before it.
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert!(
        calls.len() >= 50 && calls.len() as u32 <= made,
        "{} calls in the window, {made} made meanwhile",
        calls.len()
    );
    s.finish();

    let s = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .serve("127.0.0.1:0")
        .start()
        .unwrap();
    let a = get(s.serve_addr().unwrap(), "/debug/cabprof/trace?seconds=1");
    assert_eq!(a.status, 404);
    assert!(a.text().contains("timeline"), "{}", a.text());
    s.finish();
}

#[profile]
fn take_lock(m: &cabprof::sync::Mutex<u64>) {
    *m.lock() += 1;
}

/// With the waits analysis, a lock wait is a slice of its own on the waiter's timeline, one
/// deeper than the call that waited and inside it, named by its kind and site; the DevTools
/// trace engine reads it as that call's child.
#[test]
fn a_lock_wait_is_a_slice_inside_the_call_that_waited() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Timeline, Analysis::Waits])
        .start()
        .unwrap();
    crate::waits::lock_waits(3, take_lock);
    let d = s.finish().data;
    let t = d.timeline.as_ref().expect("the timeline ran");
    let names = d.method_names();
    let mut found = 0;
    for th in &t.threads {
        for w in th.slices.iter().filter(|s| s.wait.is_some()) {
            let wait = w.wait.as_ref().unwrap();
            assert_eq!(wait.kind, "lock");
            assert!(
                wait.site.starts_with("Mutex tests/it/waits.rs:"),
                "{wait:?}"
            );
            assert!(
                (15e6..500e6).contains(&w.duration_ns),
                "a wait of about 20 ms: {w:?}"
            );
            let caller = th
                .slices
                .iter()
                .find(|c| {
                    c.wait.is_none()
                        && c.depth + 1 == w.depth
                        && c.start_ns <= w.start_ns
                        && w.start_ns + w.duration_ns <= c.start_ns + c.duration_ns
                })
                .unwrap_or_else(|| panic!("no call holds {w:?}: {:?}", th.slices));
            assert!(names.name(caller.method).ends_with("::take_lock"));
            found += 1;
        }
    }
    assert_eq!(found, 3, "one slice per wait");
    let trace = d.chrome_trace().unwrap();
    assert_eq!(trace.matches("\"cat\":\"wait\"").count(), 3, "{trace}");
    let Some(out) = trace_engine(&trace, "waits.trace.json") else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = read_seen(&out.stdout);
    let waits: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.name.starts_with("lock wait: Mutex"))
        .collect();
    assert_eq!(waits.len(), 3, "{seen:?}");
    for w in waits {
        let parent = &seen[w.parent.expect("a wait has a parent")];
        assert!(parent.name.ends_with("::take_lock"), "{w:?} in {parent:?}");
        assert!((15.0..500.0).contains(&w.dur_ms), "{w:?}");
    }
}
