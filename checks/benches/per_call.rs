//! What one call of a ~2 ns function costs under each way of timing it, cabprof's and its
//! peers', side by side.
//!
//! Variants (each run in its own process, so no profiler's global state touches another's;
//! the processes alternate in rounds, so a change in the machine's load hits them alike):
//!
//! - `plain`: the function, uninstrumented;
//! - `cabprof untimed`: `#[profile]`, a session counting calls (exhaustive, method count);
//! - `cabprof timed`: the same session with the time analysis, every call timed (two `Time`
//!   words per call, one plain `rdtsc` each);
//! - `cabprof timed 1/K`: time one call in K (`time_sample(K)`), the rest counted;
//! - `hotpath`: `#[hotpath::measure]` with its `hotpath` (timing) feature and a guard;
//! - `tracing`: `#[tracing::instrument]` into a `Registry` with a minimal timing layer (span
//!   enter/exit times summed per span name, kept in the span's extensions);
//! - `fastrace`: `#[fastrace::trace]` under a root span per 1000 calls (as per request; under
//!   one long-lived root it records only the first 10240 spans), spans reported to a reporter
//!   that drops them.
//!
//! Each process prints the median of `REPS` runs of `CALLS` calls; this prints one table of
//! ns/call, the cost over `plain`, and the ratios the time analysis targets: timing every
//! call costs at most a third of hotpath's per-call cost, sampled timing at most twice the
//! untimed cost.
//!
//! `cargo bench -p cabprof-checks --bench per_call` (release, LTO). `PER_CALL_ROUNDS` (default 3) sets the
//! rounds.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

/// Calls per run.
const CALLS: u64 = 2_000_000;
/// Runs per process; the median is printed.
const REPS: usize = 15;
/// K of the sampled variant.
const K: u32 = 16;

const VARIANTS: [&str; 7] = [
    "plain",
    "cabprof untimed",
    "cabprof timed",
    "cabprof timed 1/K",
    "hotpath",
    "tracing",
    "fastrace",
];

/// The body every variant times: a short dependent chain of multiplies, about 2 ns with the
/// call.
#[inline(always)]
fn work(x: u64) -> u64 {
    let mut h = x;
    for _ in 0..3 {
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (h >> 29);
    }
    h
}

#[inline(never)]
fn plain(x: u64) -> u64 {
    work(x)
}

#[cabprof::profile]
#[inline(never)]
fn with_cabprof(x: u64) -> u64 {
    work(x)
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

/// Median ns/call of `f` over `REPS` runs.
fn median_ns(f: fn(u64) -> u64) -> f64 {
    median_ns_batched(f, CALLS, || ())
}

/// Median ns/call of `f` over `REPS` runs, calling `scope` around every `batch` calls (a
/// tracer's per-request root span), its cost included.
fn median_ns_batched<G>(f: fn(u64) -> u64, batch: u64, scope: impl Fn() -> G) -> f64 {
    let run = || {
        let t = Instant::now();
        let mut acc = 0u64;
        for b in 0..CALLS / batch {
            let _g = scope();
            for i in b * batch..(b + 1) * batch {
                acc = acc.wrapping_add(f(black_box(i)));
            }
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

/// Run one variant in this process; returns ns/call.
fn child(variant: &str) -> f64 {
    use cabprof::{Analysis, Session};
    let cabprof_session = |time: Option<u32>| {
        let mut b = Session::builder()
            .analyses(&[Analysis::MethodCount])
            .pin(true)
            .pin_application(true);
        if let Some(k) = time {
            b = b
                .analyses(&[Analysis::MethodCount, Analysis::Time])
                .time_sample(k);
        }
        b.start().expect("session starts")
    };
    match variant {
        "plain" => median_ns(plain),
        "cabprof untimed" | "cabprof timed" | "cabprof timed 1/K" => {
            let k = match variant {
                "cabprof untimed" => None,
                "cabprof timed" => Some(1),
                _ => Some(K),
            };
            let s = cabprof_session(k);
            let ns = median_ns(with_cabprof);
            let r = s.finish();
            assert_eq!(r.runtime.totals.dropped, 0);
            ns
        }
        "hotpath" => {
            let _g = hotpath::HotpathGuardBuilder::new("per_call")
                .output_path("/dev/null")
                .build();
            median_ns(with_hotpath)
        }
        "tracing" => {
            use tracing_subscriber::layer::SubscriberExt;
            let layer = timing_layer::Timing::default();
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(subscriber, || median_ns(with_tracing))
        }
        "fastrace" => {
            fastrace::set_reporter(DropSpans, fastrace::collector::Config::default());
            // A root span per 1000 calls, as per request: fastrace keeps at most 10240 spans
            // under one local parent and drops the rest unrecorded.
            let ns = median_ns_batched(with_fastrace, 1000, || {
                let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
                let guard = root.set_local_parent();
                (guard, root)
            });
            fastrace::flush();
            ns
        }
        other => panic!("unknown variant {other:?}"),
    }
}

fn main() {
    if let Ok(v) = std::env::var("PER_CALL_VARIANT") {
        println!("NS_PER_CALL {}", child(&v));
        return;
    }
    let rounds: usize = std::env::var("PER_CALL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let exe = std::env::current_exe().expect("own path");
    let mut runs = vec![Vec::new(); VARIANTS.len()];
    for _ in 0..rounds {
        for (i, v) in VARIANTS.iter().enumerate() {
            let out = Command::new(&exe)
                .env("PER_CALL_VARIANT", v)
                .output()
                .expect("child runs");
            let text = String::from_utf8_lossy(&out.stdout);
            let ns: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("NS_PER_CALL "))
                .unwrap_or_else(|| panic!("{v}: {text}\n{}", String::from_utf8_lossy(&out.stderr)))
                .trim()
                .parse()
                .expect("a number");
            runs[i].push(ns);
        }
    }
    let med: Vec<f64> = runs
        .into_iter()
        .map(|mut r| {
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        })
        .collect();
    println!(
        "per_call: {CALLS} calls x {REPS} runs per process (median), median of {rounds} rounds, K = {K}"
    );
    println!(
        "{:<20} {:>10} {:>12} {:>14}",
        "", "ns/call", "over plain", "x untimed"
    );
    let plain = med[0];
    let untimed = med[1] - plain;
    for (v, ns) in VARIANTS.iter().zip(&med) {
        println!(
            "{:<20} {:>10.2} {:>12.2} {:>14.2}",
            v,
            ns,
            ns - plain,
            (ns - plain) / untimed
        );
    }
    let (timed, sampled, hotpath) = (med[2] - plain, med[3] - plain, med[4] - plain);
    println!();
    println!(
        "timed every call / hotpath: {:.3} (target <= 0.333)",
        timed / hotpath
    );
    println!(
        "timed 1/{K} / untimed: {:.3} (target <= 2)",
        sampled / untimed
    );
}
