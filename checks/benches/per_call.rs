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
//! - `timed`: exhaustive method count + time analysis, every call timed (two `Time` words per
//!   call, one plain `rdtsc` each); `timed-1/K`: one call in K timed (`time_sample(K)`), the
//!   rest counted.
//! - `two-reads`: not a profiler but the floor under `timed`: the plain function with the same
//!   two clock reads (`cabprof_cab::clock::now`, one plain `rdtsc` each on x86-64) around its
//!   body and their difference kept, as a timed call does. `timed` minus it is what cabprof
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
//! - `tracing`: `#[tracing::instrument]` into a `Registry` with a minimal timing layer (span
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
//! `cargo bench -p cabprof-checks --bench per_call` (release, LTO). `PER_CALL_ROUNDS` (default 3)
//! sets the rounds; `PER_CALL_ONLY=mc,tracy` runs a subset (names as in the list above;
//! `plain` always runs).

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
const VARIANTS: [(&str, &str); 15] = [
    ("plain", "plain"),
    ("no-session", "cabprof, no session"),
    ("mc", "cabprof mc"),
    ("mc+cg", "cabprof mc+cg"),
    ("mc+cg+ct", "cabprof mc+cg+ct"),
    ("sampling", "cabprof sampling mc+cg"),
    ("sequential", "cabprof sequential mc+cg"),
    ("timed", "cabprof timed"),
    ("timed-1/K", "cabprof timed 1/K"),
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
    let start = cabprof_cab::clock::now();
    let r = work(x);
    black_box(cabprof_cab::clock::now().saturating_sub(start));
    r
}

#[hotpath::measure]
#[inline(never)]
fn with_hotpath(x: u64) -> u64 {
    work(x)
}

#[tracing::instrument(skip_all)]
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

/// Median ns/call of `f` over `REPS` runs.
fn median_ns(f: fn(u64) -> u64) -> f64 {
    median_ns_batched(f, CALLS, |calls| calls())
}

/// Median ns/call of `f` over `REPS` runs, each batch of `batch` calls run by `around` (which
/// opens a tracer's per-request root span or per-frame scope around them), its cost included.
fn median_ns_batched(f: fn(u64) -> u64, batch: u64, around: impl Fn(&mut dyn FnMut())) -> f64 {
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
    run(); // warm up
    let mut v: Vec<f64> = (0..REPS).map(|_| run()).collect();
    v.sort_by(f64::total_cmp);
    v[REPS / 2]
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
    ns: f64,
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
    let totals = &r.runtime.totals;
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
        blocked: Some(totals.blocked.as_secs_f64() / wall.as_secs_f64()),
    }
}

/// Run one variant in this process.
fn child(variant: &str) -> Measured {
    use cabprof::{Analysis, Session};
    let peer = |ns| Measured { ns, blocked: None };
    let mc = [Analysis::MethodCount];
    let mc_cg = [Analysis::MethodCount, Analysis::CallGraph];
    let mc_cg_ct = [
        Analysis::MethodCount,
        Analysis::CallGraph,
        Analysis::CallTree,
    ];
    let timed = [Analysis::MethodCount, Analysis::Time];
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
    blocked: Vec<f64>,
    rss: Vec<f64>,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
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
        println!("NS_PER_CALL {}", m.ns);
        if let Some(b) = m.blocked {
            println!("BLOCKED {b}");
        }
        if let Some(rss) = peak_rss_mb() {
            println!("RSS_MB {rss}");
        }
        return;
    }
    let rounds: usize = std::env::var("PER_CALL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
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
    let mut runs = vec![Rounds::default(); chosen.len()];
    for _ in 0..rounds {
        for (i, (key, _)) in chosen.iter().enumerate() {
            let out = Command::new(&exe)
                .env("PER_CALL_VARIANT", key)
                .output()
                .expect("child runs");
            let text = String::from_utf8_lossy(&out.stdout);
            let ns = field(&text, "NS_PER_CALL").unwrap_or_else(|| {
                panic!("{key}: {text}\n{}", String::from_utf8_lossy(&out.stderr))
            });
            runs[i].ns.push(ns);
            runs[i].blocked.extend(field(&text, "BLOCKED"));
            runs[i].rss.extend(field(&text, "RSS_MB"));
        }
    }
    // A variant's ns/call, one per round (none if it did not run).
    let samples = |key: &str| {
        chosen
            .iter()
            .position(|(k, _)| *k == key)
            .map_or(&[][..], |i| &runs[i].ns[..])
    };
    let med = |key: &str| median(samples(key));
    let plain = med("plain").expect("plain always runs");
    let over = |key: &str| med(key).map(|ns| ns - plain);
    let mc = over("mc");
    let timed = over("timed");
    let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_owned(), |v| format!("{v:.prec$}"));

    println!(
        "per_call: {CALLS} calls x {REPS} runs per process (median), median of {rounds} rounds, \
         K = {K}, {BATCH} calls per fastrace root / puffin frame"
    );
    println!(
        "{:<26} {:>9} {:>17} {:>10} {:>8} {:>11} {:>9} {:>10}",
        "", "ns/call", "spread", "over plain", "x mc", "peer/timed", "blocked", "peak RSS"
    );
    for ((key, label), r) in chosen.iter().zip(&runs) {
        let ns = median(&r.ns).expect("one round at least");
        let lo = r.ns.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.ns.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cost = ns - plain;
        let x_mc = mc.filter(|_| *key != "plain").map(|m| cost / m);
        let x_timed = timed.filter(|_| PEERS.contains(key)).map(|t| cost / t);
        let blocked = median(&r.blocked).map(|b| format!("{:.1} %", b * 100.0));
        let rss = median(&r.rss).map(|m| format!("{m:.0} MB"));
        println!(
            "{:<26} {:>9.2} {:>17} {:>10.2} {:>8} {:>11} {:>9} {:>10}",
            label,
            ns,
            format!("{lo:.2}-{hi:.2}"),
            cost,
            opt(x_mc, 2),
            opt(x_timed, 2),
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
    target_over("mc+cg", "exhaustive mc+cg", 5.0);
    target_over("sampling", "sampling mc+cg", 3.0);
    target_over("sequential", "sequential mc+cg", 8.0);
    if let (Some(t), Some(h)) = (timed, over("hotpath")) {
        let r = t / h;
        // The same ratio within each round (each over that round's plain), for its spread: the
        // verdict is on the medians, and a spread across the target says it is not settled.
        let (p, tr, hr) = (samples("plain"), samples("timed"), samples("hotpath"));
        let per_round: Vec<f64> = (0..rounds)
            .map(|i| (tr[i] - p[i]) / (hr[i] - p[i]))
            .collect();
        let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "timed every call / hotpath: {r:.3} (per round {lo:.3}-{hi:.3}; target <= 0.333): {}",
            verdict(r <= 1.0 / 3.0)
        );
    }
    if let (Some(t), Some(f), Some(h)) = (timed, over("two-reads"), over("hotpath")) {
        println!(
            "timed every call: {t:.2} ns/call over plain, {f:.2} of them the two clock reads \
             ({:.2} cabprof's own); the clock reads alone are {:.3} of hotpath",
            t - f,
            f / h
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
