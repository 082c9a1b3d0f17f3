//! What one call of a ~2 ns function costs, end to end, under each way cabprof can run and
//! under its peers, side by side.
//!
//! Variants (each run in its own process, so no profiler's global state touches another's;
//! the processes alternate in rounds, so a change in the machine's load hits them alike). Every
//! variant calls the same body through an `#[inline(never)]` function:
//!
//! - `plain`: the function, uninstrumented (always run: every other row is measured over it);
//! - `no-session`: `#[profile]`, no session running;
//! - `mc`, `mc+cg`, `mc+cg+ct`: exhaustive sessions counting calls (method count), with the
//!   call graph, and with the call tree as well;
//! - `sampling`: method count + call graph in sampling mode at the project's default rate
//!   (10 %, one-cache-line bursts);
//! - `sequential`: method count + call graph analyzed inline in the calling thread, no ring;
//! - `timed`: exhaustive method count + time analysis, every call timed (its entry and exit
//!   stamps); `timed-1/K`: one call in K timed (`time_sample(K)`), the
//!   rest counted; `timeline`: `timed` with the timeline too (one more word per call, its exit
//!   stamp).
//! - `two-reads`: not a profiler but the floor under `timed`: the plain function with the same
//!   two clock reads around its body and their difference kept, as a timed call does
//!   (`cabprof_cab::clock::now_before` at entry, `lfence` then `rdtsc` on x86-64, which waits
//!   for the caller's work, and `now_after` at the exit, an `rdtscp`, which waits for the
//!   body). `timed` minus it is what cabprof
//!   itself adds to the clock reads (this row's process is not pinned, as `plain` is not;
//!   `timed`'s is, as every cabprof session here).
//!
//! Every cabprof session pins the application thread to core 0 and its analyzer to the other
//! core (`pin(true).pin_application(true)`), the ring modes' setting; the plain and peer
//! processes are not pinned (pinning the thread that starts a peer would pin its background
//! threads beside it). Each session's report is checked: exact modes must have counted every
//! call, and no event may be dropped.
//!
//! Peers (dev-dependencies of this crate only), each timing every call:
//!
//! - `hotpath`: `#[hotpath::measure]` with its `hotpath` (timing) feature and a guard;
//! - `tracing`: `#[instrument]` (tracing-attributes) into a `Registry` with a minimal timing layer (span
//!   enter/exit times summed per span name, kept in the span's extensions);
//! - `fastrace`: `#[fastrace::trace]` under a root span per 1000 calls (as per request; under
//!   one long-lived root it records only the first 10240 spans), spans reported to a reporter
//!   that drops them;
//! - `puffin`: `puffin::profile_function!()` in the function, scopes on, under a
//!   `profile_scope!` per 1000 calls (puffin hands a thread's scopes to its global profiler,
//!   under a lock, whenever the thread's outermost scope closes), with
//!   `GlobalProfiler::new_frame()` before each 1000 so its frame data stays bounded (no sink is
//!   registered, so each finished frame is dropped);
//! - `tracy`: `tracy_client::span!()` in the function, after `Client::start()`, no Tracy server
//!   connected, built with the `enable`, `ondemand` and `only-localhost` features only.
//!   `ondemand` because without it the client records every zone and queues it for a server
//!   that never comes: measured here, the process's peak RSS reached 1973 MB after 32M calls
//!   (about 62 bytes a call; 16 MB with `ondemand`). The price: with `ondemand` and no server
//!   a zone only checks whether a server is connected and reads no clock, so this row is
//!   tracy's cost when nobody is watching, not the cost of a timed span.
//!
//! Each process prints the median of `REPS` runs of `CALLS` calls. The table gives, per
//! variant, ns/call (median over rounds), the spread over rounds (min–max), the cost over
//! `plain`, that cost as a multiple of cabprof's exhaustive method count (`x mc`), for peers
//! their cost over `plain` as a multiple of cabprof's `timed` (the like-for-like: both time
//! every call), the share of the run the application spent blocked on a full ring, and the
//! process's peak RSS. Then the targets, each with the measured figure and `met` or `missed`.
//!
//! `cargo bench -p cabprof-per-call --bench per_call` (release, LTO). `PER_CALL_ROUNDS` (1 to 100,
//! default 3) sets the rounds; `PER_CALL_ONLY=mc,tracy` runs a subset (names as in the list above;
//! `plain` always runs).

use cabprof_bench_support::stats::{self, min_max};
use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

/// Calls per run.
const CALLS: u64 = 2_000_000;
/// Runs per process; the median is printed.
const REPS: usize = 15;
/// K of the sampled-timing variant.
const K: u32 = 16;
/// Calls per root span (fastrace) or per frame (puffin).
const BATCH: u64 = 1000;

/// (name for `PER_CALL_ONLY` and the child, row label)
const VARIANTS: [(&str, &str); 16] = [
    ("plain", "plain"),
    ("no-session", "cabprof, no session"),
    ("mc", "cabprof mc"),
    ("mc+cg", "cabprof mc+cg"),
    ("mc+cg+ct", "cabprof mc+cg+ct"),
    ("sampling", "cabprof sampling mc+cg"),
    ("sequential", "cabprof sequential mc+cg"),
    ("timed", "cabprof timed"),
    ("timed-1/K", "cabprof timed 1/K"),
    ("timeline", "cabprof timed + timeline"),
    ("two-reads", "two clock reads (floor)"),
    ("hotpath", "hotpath"),
    ("tracing", "tracing"),
    ("fastrace", "fastrace"),
    ("puffin", "puffin"),
    ("tracy", "tracy (ondemand, idle)"),
];

/// The rows that are peers (get the peer/timed column).
const PEERS: [&str; 5] = ["hotpath", "tracing", "fastrace", "puffin", "tracy"];

/// The body every variant times (shared with `clock_cost`).
mod body;
use body::work;

#[inline(never)]
fn plain(x: u64) -> u64 {
    work(x)
}

#[cabprof::profile]
#[inline(never)]
fn with_cabprof(x: u64) -> u64 {
    work(x)
}

/// The plain function between two clock reads, their difference kept: what timing a call costs
/// before any profiler's own work.
#[inline(never)]
fn with_two_reads(x: u64) -> u64 {
    let start = cabprof_cab::clock::now_before();
    let r = work(x);
    black_box(cabprof_cab::clock::now_after().saturating_sub(start));
    r
}

#[hotpath::measure]
#[inline(never)]
fn with_hotpath(x: u64) -> u64 {
    work(x)
}

#[tracing_attributes::instrument(skip_all)]
#[inline(never)]
fn with_tracing(x: u64) -> u64 {
    work(x)
}

#[fastrace::trace]
#[inline(never)]
fn with_fastrace(x: u64) -> u64 {
    work(x)
}

#[inline(never)]
fn with_puffin(x: u64) -> u64 {
    puffin::profile_function!();
    work(x)
}

#[inline(never)]
fn with_tracy(x: u64) -> u64 {
    let _span = tracy_client::span!();
    work(x)
}

/// What one child measured of a function: the first run of the process, and the median of
/// the `REPS` runs after it (the steady state).
#[derive(Clone, Copy)]
struct Timing {
    first: f64,
    steady: f64,
}

/// [`Timing`] of `f`, ns/call.
fn median_ns(f: fn(u64) -> u64) -> Timing {
    median_ns_batched(f, CALLS, |calls| calls())
}

/// [`Timing`] of `f`, ns/call, each batch of `batch` calls run by `around` (which opens a
/// tracer's per-request root span or per-frame scope around them), its cost included.
fn median_ns_batched(f: fn(u64) -> u64, batch: u64, around: impl Fn(&mut dyn FnMut())) -> Timing {
    let run = || {
        let t = Instant::now();
        let mut acc = 0u64;
        for b in 0..CALLS / batch {
            around(&mut || {
                for i in b * batch..(b + 1) * batch {
                    acc = acc.wrapping_add(f(black_box(i)));
                }
            });
        }
        black_box(acc);
        t.elapsed().as_nanos() as f64 / CALLS as f64
    };
    // The process's first run: what a short program or a test suite meets (rings and tables
    // not yet touched, code not yet in the caches).
    let first = run();
    let v: Vec<f64> = (0..REPS).map(|_| run()).collect();
    Timing {
        first,
        steady: stats::median(&v),
    }
}

/// A minimal timing layer: each span's time between enter and exit, summed per span name.
mod timing_layer {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Instant;
    use tracing::span::Id;
    use tracing::Subscriber;
    use tracing_subscriber::layer::Context;
    use tracing_subscriber::registry::LookupSpan;
    use tracing_subscriber::Layer;

    struct Entered(Instant);

    #[derive(Default)]
    pub(crate) struct Timing {
        pub(crate) totals: Mutex<HashMap<&'static str, (u64, u128)>>,
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Timing {
        fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().replace(Entered(Instant::now()));
            }
        }

        fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
            if let Some(span) = ctx.span(id) {
                if let Some(Entered(t)) = span.extensions_mut().remove::<Entered>() {
                    let ns = t.elapsed().as_nanos();
                    let mut m = self.totals.lock().unwrap();
                    let e = m.entry(span.name()).or_default();
                    e.0 += 1;
                    e.1 += ns;
                }
            }
        }
    }
}

struct DropSpans;

impl fastrace::collector::Reporter for DropSpans {
    fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
        black_box(spans.len());
    }
}

/// What one child measured.
struct Measured {
    ns: Timing,
    /// Share of the measuring time the application spent blocked on a full ring (cabprof's
    /// ring modes only).
    blocked: Option<f64>,
}

/// Run a cabprof session built by `b` (pinned as the ring modes are run) around the
/// measurement; check its report.
fn cabprof_session(b: cabprof::SessionBuilder, exact: bool) -> Measured {
    let s = b
        .pin(true)
        .pin_application(true)
        .start()
        .expect("session starts");
    let t = Instant::now();
    let ns = median_ns(with_cabprof);
    let wall = t.elapsed();
    let r = s.finish();
    let totals = &r.totals;
    assert_eq!(totals.dropped, 0, "events dropped");
    let counts = r.data.method_count.as_ref().expect("method count ran");
    let top = counts.iter().map(|e| e.count).max().unwrap_or(0);
    if exact {
        // The warm-up run and REPS measured runs, every call counted.
        assert_eq!(top, CALLS * (REPS as u64 + 1), "calls counted");
    } else {
        assert!(top > 0, "the sample saw no call");
    }
    Measured {
        ns,
        blocked: Some(totals.blocked_s / wall.as_secs_f64()),
    }
}

/// Run one variant in this process.
fn child(variant: &str) -> Measured {
    use cabprof::{Analysis, Session};
    let peer = |ns: Timing| Measured { ns, blocked: None };
    let mc = [Analysis::MethodCount];
    let mc_cg = [Analysis::MethodCount, Analysis::CallGraph];
    let mc_cg_ct = [
        Analysis::MethodCount,
        Analysis::CallGraph,
        Analysis::CallTree,
    ];
    let timed = [Analysis::MethodCount, Analysis::Time];
    let timeline = [Analysis::MethodCount, Analysis::Time, Analysis::Timeline];
    let b = || Session::builder();
    match variant {
        "plain" => peer(median_ns(plain)),
        "no-session" => peer(median_ns(with_cabprof)),
        "mc" => cabprof_session(b().analyses(&mc), true),
        "mc+cg" => cabprof_session(b().analyses(&mc_cg), true),
        "mc+cg+ct" => cabprof_session(b().analyses(&mc_cg_ct), true),
        "sampling" => cabprof_session(b().analyses(&mc_cg).sampling(0.1), false),
        "sequential" => cabprof_session(b().analyses(&mc_cg).sequential(), true),
        "timed" => cabprof_session(b().analyses(&timed).time_sample(1), true),
        "timed-1/K" => cabprof_session(b().analyses(&timed).time_sample(K), true),
        "timeline" => cabprof_session(b().analyses(&timeline).time_sample(1), true),
        "two-reads" => peer(median_ns(with_two_reads)),
        "hotpath" => {
            let _g = hotpath::HotpathGuardBuilder::new("per_call")
                .output_path("/dev/null")
                .build();
            peer(median_ns(with_hotpath))
        }
        "tracing" => {
            use tracing_subscriber::layer::SubscriberExt;
            let layer = timing_layer::Timing::default();
            let subscriber = tracing_subscriber::registry().with(layer);
            peer(tracing::subscriber::with_default(subscriber, || {
                median_ns(with_tracing)
            }))
        }
        "fastrace" => {
            fastrace::set_reporter(DropSpans, fastrace::collector::Config::default());
            // A root span per BATCH calls, as per request: fastrace keeps at most 10240 spans
            // under one local parent and drops the rest unrecorded.
            let ns = median_ns_batched(with_fastrace, BATCH, |calls| {
                let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
                let _guard = root.set_local_parent();
                calls();
            });
            fastrace::flush();
            peer(ns)
        }
        "puffin" => {
            puffin::set_scopes_on(true);
            // A frame per BATCH calls: the previous frame is handed to the (no) sinks and
            // dropped, so the profiler's memory stays bounded.
            peer(median_ns_batched(with_puffin, BATCH, |calls| {
                puffin::GlobalProfiler::lock().new_frame();
                puffin::profile_scope!("batch");
                calls();
            }))
        }
        "tracy" => {
            let _client = tracy_client::Client::start();
            peer(median_ns(with_tracy))
        }
        other => panic!("unknown variant {other:?}"),
    }
}

/// This process's peak resident set, in MB (Linux; `None` elsewhere).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// One variant's figures over the rounds.
#[derive(Clone, Default)]
struct Rounds {
    ns: Vec<f64>,
    first: Vec<f64>,
    blocked: Vec<f64>,
    rss: Vec<f64>,
}

fn median(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| stats::median(v))
}

/// The suffix of a row run from the release-profile build.
const RELEASE: &str = "@release";

/// The variants also run from the release-profile build.
const RELEASE_ROWS: [&str; 7] = [
    "plain",
    "no-session",
    "mc",
    "mc+cg",
    "sampling",
    "timed",
    "two-reads",
];

/// This bench built with the `release` profile, as a crate depending on cabprof builds by
/// default; `None` (with a note) when `PER_CALL_RELEASE=0` or when it cannot be built.
fn release_build() -> Option<std::path::PathBuf> {
    if std::env::var("PER_CALL_RELEASE").is_ok_and(|v| v == "0") {
        return None;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "bench",
            "--profile",
            "release",
            "-p",
            "cabprof-per-call",
            "--bench",
            "per_call",
            "--no-run",
            "--message-format=json",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let exe = text
        .lines()
        .filter(|l| l.contains("\"per_call\""))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(std::path::PathBuf::from(&l[at..at + end]))
        });
    if exe.is_none() {
        eprintln!("per_call: no release build of the bench; the (release) rows are left out");
    }
    exe
}

/// A field of a child's output, `NAME value`.
fn field(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

fn main() {
    if let Ok(v) = std::env::var("PER_CALL_VARIANT") {
        let m = child(&v);
        println!("NS_PER_CALL {}", m.ns.steady);
        println!("FIRST_NS_PER_CALL {}", m.ns.first);
        if let Some(b) = m.blocked {
            println!("BLOCKED {b}");
        }
        if let Some(rss) = peak_rss_mb() {
            println!("RSS_MB {rss}");
        }
        return;
    }
    let rounds = cabprof_bench_support::rounds::rounds("PER_CALL_ROUNDS", 1, 100, 3);
    let only: Option<Vec<String>> = std::env::var("PER_CALL_ONLY")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().to_owned()).collect());
    if let Some(only) = &only {
        for n in only {
            assert!(
                VARIANTS.iter().any(|(k, _)| k == n),
                "PER_CALL_ONLY: unknown variant {n:?}; one of {:?}",
                VARIANTS.map(|(k, _)| k)
            );
        }
    }
    let chosen: Vec<(&str, &str)> = VARIANTS
        .into_iter()
        .filter(|(k, _)| *k == "plain" || only.as_ref().is_none_or(|o| o.iter().any(|n| n == k)))
        .collect();
    let exe = std::env::current_exe().expect("own path");
    // The same bench built as a crate that depends on cabprof builds by default
    // (`cargo build --release`: no LTO, 16 codegen units), for the `(release)` rows.
    let release = if chosen.iter().any(|(k, _)| RELEASE_ROWS.contains(k)) {
        release_build()
    } else {
        None
    };
    let mut chosen: Vec<(String, String)> = chosen
        .iter()
        .map(|(k, l)| (k.to_string(), l.to_string()))
        .collect();
    if release.is_some() {
        for (k, l) in VARIANTS {
            if RELEASE_ROWS.contains(&k) && chosen.iter().any(|(c, _)| c == k) {
                chosen.push((format!("{k}{RELEASE}"), format!("{l} (release)")));
            }
        }
    }
    let mut runs = vec![Rounds::default(); chosen.len()];
    for _ in 0..rounds {
        for (i, (key, _)) in chosen.iter().enumerate() {
            let (bin, variant) = match key.strip_suffix(RELEASE) {
                Some(v) => (release.as_deref().expect("built"), v),
                None => (exe.as_path(), key.as_str()),
            };
            let out = Command::new(bin)
                .env("PER_CALL_VARIANT", variant)
                .output()
                .expect("child runs");
            let text = String::from_utf8_lossy(&out.stdout);
            let ns = field(&text, "NS_PER_CALL").unwrap_or_else(|| {
                panic!("{key}: {text}\n{}", String::from_utf8_lossy(&out.stderr))
            });
            runs[i].ns.push(ns);
            runs[i].first.extend(field(&text, "FIRST_NS_PER_CALL"));
            runs[i].blocked.extend(field(&text, "BLOCKED"));
            runs[i].rss.extend(field(&text, "RSS_MB"));
        }
    }
    // A variant's ns/call (or first-run ns/call), one per round (none if it did not run).
    let pick = |key: &str, first: bool| {
        chosen
            .iter()
            .position(|(k, _)| *k == key)
            .map_or(&[][..], |i| {
                if first {
                    &runs[i].first[..]
                } else {
                    &runs[i].ns[..]
                }
            })
    };
    let samples = |key: &str| pick(key, false);
    let med = |key: &str| median(samples(key));
    // The plain row of a key's build.
    let plain_of = |key: &str| {
        if key.ends_with(RELEASE) {
            format!("plain{RELEASE}")
        } else {
            "plain".to_owned()
        }
    };
    let over = |key: &str| Some(med(key)? - med(&plain_of(key))?);
    // The first run's cost over plain's first run, as a multiple of the steady cost (none for
    // a steady cost under half a nanosecond, whose multiple is noise over noise).
    let first_x = |key: &str| {
        let first = median(pick(key, true))? - median(pick(&plain_of(key), true))?;
        Some(first / over(key).filter(|c| *c >= 0.5)?)
    };
    let mc = over("mc");
    let timed = over("timed");
    let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_owned(), |v| format!("{v:.prec$}"));

    println!(
        "per_call: {CALLS} calls x {REPS} runs per process (median; the first run apart), median \
         of {rounds} rounds, K = {K}, {BATCH} calls per fastrace root / puffin frame; CPU: {}",
        cabprof_bench_support::host::cpu_model()
    );
    println!(
        "{:<34} {:>8} {:>13} {:>7} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8}",
        "",
        "ns/call",
        "spread",
        "over",
        "x mc",
        "peer/",
        "first",
        "first run",
        "blocked",
        "peak RSS"
    );
    println!(
        "{:<34} {:>8} {:>13} {:>7} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8}",
        "", "", "", "plain", "", "timed", "ns/call", "x steady", "", ""
    );
    for ((key, label), r) in chosen.iter().zip(&runs) {
        let ns = median(&r.ns).expect("one round at least");
        let (lo, hi) = min_max(&r.ns);
        let cost = over(key).unwrap_or(0.0);
        let is_plain = key.starts_with("plain");
        let x_mc = mc.filter(|_| !is_plain).map(|m| cost / m);
        let x_timed = timed
            .filter(|_| PEERS.contains(&key.as_str()))
            .map(|t| cost / t);
        let blocked = median(&r.blocked).map(|b| format!("{:.1} %", b * 100.0));
        let rss = median(&r.rss).map(|m| format!("{m:.0} MB"));
        println!(
            "{:<34} {:>8.2} {:>13} {:>7.2} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8}",
            label,
            ns,
            format!("{lo:.2}-{hi:.2}"),
            cost,
            opt(x_mc, 2),
            opt(x_timed, 2),
            opt(median(&r.first), 2),
            opt(first_x(key).filter(|_| !is_plain), 2),
            blocked.unwrap_or("-".to_owned()),
            rss.unwrap_or("-".to_owned()),
        );
    }

    println!();
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    let target_over = |key: &str, what: &str, limit: f64| {
        if let Some(c) = over(key) {
            println!(
                "{what}: {c:.2} ns/call over plain (target <= {limit}): {}",
                verdict(c <= limit)
            );
        }
    };
    target_over("no-session", "no session", 0.5);
    target_over(
        &format!("no-session{RELEASE}"),
        "no session, release build",
        0.5,
    );
    target_over("mc+cg", "exhaustive mc+cg", 5.0);
    target_over("sampling", "sampling mc+cg", 3.0);
    target_over("sequential", "sequential mc+cg", 8.0);
    for suffix in ["", RELEASE] {
        let build = if suffix.is_empty() {
            ""
        } else {
            ", release build"
        };
        if let (Some(sm), Some(ex)) = (
            over(&format!("sampling{suffix}")),
            over(&format!("mc+cg{suffix}")),
        ) {
            println!(
                "sampling / exhaustive mc+cg{build}: {:.2} (target <= 1): {}",
                sm / ex,
                verdict(sm <= ex)
            );
        }
        for key in ["mc+cg", "sampling"] {
            if let Some(x) = first_x(&format!("{key}{suffix}")) {
                println!(
                    "{key}{build}, first run / steady state (cost over plain): {x:.2} \
                     (target <= 1.5): {}",
                    verdict(x <= 1.5)
                );
            }
        }
    }
    // The clock reads sit on the hardware's floor: what timing adds to an untimed call is
    // compared with them, in the bench's build and in the user's default release build.
    for build in ["", RELEASE] {
        let key = |k: &str| format!("{k}{build}");
        if let (Some(t), Some(f), Some(m)) = (
            over(&key("timed")),
            over(&key("two-reads")),
            over(&key("mc")),
        ) {
            let own = t - m;
            let label = if build.is_empty() { "" } else { " (release)" };
            println!(
                "timed every call{label}: {t:.2} ns/call over plain, an untimed exhaustive call \
                 (mc) {m:.2}; timing's own part {own:.2} = {:.2} x the two clock reads \
                 ({f:.2}) (target <= 1.15): {}",
                own / f,
                verdict(own <= 1.15 * f)
            );
        }
    }
    if let (Some(t), Some(h)) = (timed, over("hotpath")) {
        let (p, tr, hr) = (samples("plain"), samples("timed"), samples("hotpath"));
        let per_round: Vec<f64> = (0..rounds)
            .map(|i| (tr[i] - p[i]) / (hr[i] - p[i]))
            .collect();
        let (lo, hi) = min_max(&per_round);
        println!(
            "timed every call / hotpath: {:.3} (per round {lo:.3}-{hi:.3})",
            t / h
        );
    }
    if let (Some(s), Some(m)) = (over("timed-1/K"), mc) {
        let r = s / m;
        println!(
            "timed 1/{K} / mc: {r:.3} (target <= 2): {}",
            verdict(r <= 2.0)
        );
    }
}
