//! The time analysis against durations known by construction: functions that spin on the
//! monotonic clock for fixed times, nested, in every mode. Each body also records the time it
//! really took (by `Instant`, from its first statement to its last), so the comparison does
//! not depend on how long the scheduler kept the thread away inside it. Stated tolerance: 1% + 100 µs per call of the reference (the
//! instrumentation's own first-call work, such as registering a function or growing a
//! histogram, and a preemption between a spin's end and the stamp fall outside the reference).

use cabprof::report::{ReportData, Weight};
use cabprof::{profile, Analysis, RunMode, Session, SessionBuilder};
use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::support::SERIAL;

thread_local! {
    /// Nanoseconds spent in `outer`'s body and in `inner`'s, by `Instant`.
    static OUTER: Cell<f64> = const { Cell::new(0.0) };
    static INNER: Cell<f64> = const { Cell::new(0.0) };
    /// Each `inner` call's nanoseconds, by `Instant`.
    static INNER_CALLS: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn spin(d: Duration) -> f64 {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
    t.elapsed().as_nanos() as f64
}

#[profile]
fn inner() {
    let ns = spin(Duration::from_millis(5));
    INNER.with(|c| c.set(c.get() + ns));
    INNER_CALLS.with_borrow_mut(|v| v.push(ns));
}

#[profile]
fn outer() {
    let t = Instant::now();
    spin(Duration::from_millis(2));
    inner();
    let ns = t.elapsed().as_nanos() as f64;
    OUTER.with(|c| c.set(c.get() + ns));
}

#[profile]
fn tiny(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(3)
}

fn time_of<'a>(data: &'a ReportData, name: &str) -> &'a cabprof::report::FunctionTimeEntry {
    let t = data.time.as_ref().expect("time ran");
    t.functions
        .iter()
        .find(|f| data.name(f.method).ends_with(name))
        .unwrap_or_else(|| panic!("{name} in {:?}", t.functions))
}

fn close(got: f64, want: f64, calls: f64, what: &str) {
    let tol = 0.01 * want + 100_000.0 * calls;
    assert!(
        (got - want).abs() <= tol,
        "{what}: {got} ns measured, {want} ns by Instant (tolerance {tol})"
    );
}

fn run(builder: SessionBuilder, calls: u32) -> (ReportData, f64, f64) {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    OUTER.with(|c| c.set(0.0));
    INNER.with(|c| c.set(0.0));
    INNER_CALLS.with_borrow_mut(Vec::clear);
    let session = builder
        .analyses(&[Analysis::MethodCount, Analysis::Time])
        .pin(false)
        .start()
        .expect("session starts");
    for _ in 0..calls {
        outer();
    }
    let report = session.finish();
    (report.data, OUTER.with(Cell::get), INNER.with(Cell::get))
}

fn check_exact(data: &ReportData, outer_ns: f64, inner_ns: f64, calls: u32) {
    let t = data.time.as_ref().unwrap();
    assert_eq!(t.sample_period, 1);
    assert!(t.ticks_per_ns > 0.0 && t.calibration.contains("monotonic clock"));
    let n = calls as f64;
    let (o, i) = (time_of(data, "outer"), time_of(data, "inner"));
    assert_eq!(
        (o.calls, o.timed, i.calls, i.timed),
        (calls.into(), calls.into(), calls.into(), calls.into())
    );
    close(i.inclusive_ns, inner_ns, n, "inner inclusive");
    close(i.exclusive_ns, inner_ns, n, "inner exclusive");
    close(o.inclusive_ns, outer_ns, n, "outer inclusive");
    close(o.exclusive_ns, outer_ns - inner_ns, n, "outer exclusive");
    let mut each = INNER_CALLS.with_borrow(Vec::clone);
    each.sort_by(f64::total_cmp);
    // hdrhistogram keeps 2 significant digits: within 1%, inside the tolerance.
    close(i.p50_ns, each[each.len() / 2], 1.0, "inner p50");
    close(i.max_ns, each[each.len() - 1], 1.0, "inner max");
    assert!(i.max_ns >= i.p99_ns && i.p99_ns >= i.p95_ns && i.p95_ns >= i.p50_ns);
    // The self times of the tree add up to the root's inclusive time.
    let self_sum: f64 = t.functions.iter().map(|f| f.exclusive_ns).sum();
    assert!(
        (self_sum - o.inclusive_ns).abs() < 1e-6 * o.inclusive_ns,
        "{self_sum} vs {}",
        o.inclusive_ns
    );
    // The edge and the contexts agree with the functions.
    let edge = t
        .edges
        .iter()
        .find(|e| e.caller == o.method && e.callee == i.method)
        .expect("outer → inner");
    assert_eq!(edge.inclusive_ns, i.inclusive_ns);
    let ctx = t
        .contexts
        .iter()
        .find(|c| c.parent == 0 && c.method == o.method)
        .expect("context outer");
    assert_eq!(ctx.inclusive_ns, o.inclusive_ns);
    assert!((ctx.exclusive_ns - o.exclusive_ns).abs() < 1e-6 * o.exclusive_ns);
}

#[test]
fn nested_spins_exhaustive() {
    let (data, o, i) = run(Session::builder().mode(RunMode::Exhaustive), 3);
    check_exact(&data, o, i, 3);
}

#[test]
fn nested_spins_sequential() {
    let (data, o, i) = run(Session::builder().sequential(), 3);
    check_exact(&data, o, i, 3);
}

thread_local! {
    /// Nanoseconds `SlowDrop`'s drops spun, by `Instant`.
    static TAIL_DROP: Cell<f64> = const { Cell::new(0.0) };
}

/// Spins for 3 ms when dropped.
struct SlowDrop;

impl SlowDrop {
    fn value(&self) -> u64 {
        7
    }
}

impl Drop for SlowDrop {
    fn drop(&mut self) {
        let ns = spin(Duration::from_millis(3));
        TAIL_DROP.with(|c| c.set(c.get() + ns));
    }
}

/// Its tail expression's temporary is dropped after its locals (edition 2021): still inside
/// the call, so inside its time.
#[profile]
fn tail_drop() -> u64 {
    SlowDrop.value()
}

#[test]
fn a_tail_temporarys_drop_is_in_the_functions_time() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    TAIL_DROP.with(|c| c.set(0.0));
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::Time])
        .pin(false)
        .start()
        .expect("session starts");
    let sum: u64 = (0..3).map(|_| tail_drop()).sum();
    let data = session.finish().data;
    assert_eq!(sum, 21);
    let t = time_of(&data, "tail_drop");
    assert_eq!((t.calls, t.timed), (3, 3));
    close(
        t.inclusive_ns,
        TAIL_DROP.with(Cell::get),
        3.0,
        "tail_drop inclusive",
    );
}

#[test]
fn nested_spins_sampling_mode_estimates() {
    // Ring sampling analyzes a fraction of the chunks: the calls it saw are timed exactly
    // and the tree's self times still add up; totals are estimates (the text scales them).
    let (data, _, _) = run(Session::builder().sampling(0.5), 4);
    let t = data.time.as_ref().unwrap();
    assert!(t.approximate, "sampled rings give estimates");
    for f in &t.functions {
        assert!(f.timed <= f.calls);
    }
    if let Some(fi) = t
        .functions
        .iter()
        .find(|f| data.name(f.method).ends_with("inner"))
    {
        assert!(fi.p50_ns >= 0.99 * 5e6, "{fi:?}");
    }
    if let Some(fo) = t
        .functions
        .iter()
        .find(|f| data.name(f.method).ends_with("outer"))
    {
        assert!(fo.mean_ns >= 0.99 * 7e6, "{fo:?}");
    }
}

#[test]
fn flame_graph_weights_by_time_or_calls() {
    let (data, o, i) = run(
        Session::builder().analyses(&[]).mode(RunMode::Exhaustive),
        1,
    );
    let folded = data.folded_by(Weight::Time);
    let weight = |suffix: &str| -> f64 {
        folded
            .lines()
            .find(|l| l.split(' ').next().unwrap().ends_with(suffix))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or_else(|| panic!("{suffix} in {folded}"))
            .parse()
            .unwrap()
    };
    close(weight("outer;it::time::inner"), i, 1.0, "inner's self ns");
    close(weight("it::time::outer"), o - i, 1.0, "outer's self ns");
    // The JSON carries the time data back, and a file written before it existed still reads.
    let back = ReportData::from_json(&data.json()).expect("reads back");
    let (b, t) = (back.time.as_ref().unwrap(), data.time.as_ref().unwrap());
    assert_eq!(
        (
            b.clock.as_str(),
            b.sample_period,
            b.functions.len(),
            b.contexts.len()
        ),
        (
            t.clock.as_str(),
            t.sample_period,
            t.functions.len(),
            t.contexts.len()
        )
    );
    for (x, y) in b.functions.iter().zip(&t.functions) {
        // The JSON library's float text round-trips to within an ulp or so.
        assert_eq!((x.method, x.calls, x.timed), (y.method, y.calls, y.timed));
        assert!((x.exclusive_ns - y.exclusive_ns).abs() <= 1e-9 * y.exclusive_ns);
        assert!((x.p99_ns - y.p99_ns).abs() <= 1e-9 * y.p99_ns);
    }
    let mut old: serde_json::Value = serde_json::from_str(&data.json()).unwrap();
    old.as_object_mut().unwrap().remove("time");
    let old = ReportData::from_json(&old.to_string()).expect("an older file reads");
    assert!(old.time.is_none());
    #[cfg(feature = "flamegraph")]
    {
        let svg = data.svg_by(Weight::Time);
        assert!(svg.contains("ns") && svg.contains("inner"));
    }
}

/// An exhaustive session timing one call in `k`.
fn sampled_timing_session(k: u32) -> Session {
    Session::builder()
        .analyses(&[Analysis::Time])
        .time_sample(k)
        .mode(RunMode::Exhaustive)
        .pin(false)
        .start()
        .unwrap()
}

#[test]
fn sampled_timing_times_one_call_in_k_and_estimates_the_rest() {
    const K: u32 = 8;
    const N: u64 = 40_000;
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = sampled_timing_session(K);
    let mut x = 0;
    for i in 0..N {
        x ^= tiny(i);
    }
    std::hint::black_box(x);
    let data = session.finish().data;
    let t = data.time.as_ref().unwrap();
    assert_eq!(t.sample_period, K);
    assert!(t.approximate);
    let f = time_of(&data, "tiny");
    assert_eq!(f.calls, N);
    // One in K, drawn at random: well within 10% of N / K.
    let want = (N / K as u64) as f64;
    assert!(
        (f.timed as f64 - want).abs() < 0.1 * want,
        "{} timed of {N}",
        f.timed
    );
    assert!(f.inclusive_ci_ns > 0.0);
    // The estimate is the timed calls' mean × calls: exactly so for the raw figures; the
    // compensated mean is shown clamped at 0, so the compensated relation is checked only
    // when it is positive (a one-multiply function can compensate below 0 on a loaded host).
    let (raw_incl, raw_mean) = (f.raw_inclusive_ns.unwrap(), f.raw_mean_ns.unwrap());
    assert!(
        (raw_incl - raw_mean * N as f64).abs() < 1e-6 * raw_incl,
        "the raw estimate is the timed calls' raw mean × calls: {raw_incl} vs {raw_mean}"
    );
    if f.mean_ns > 0.0 {
        assert!(
            (f.inclusive_ns - f.mean_ns * N as f64).abs() < 1e-6 * f.inclusive_ns.abs(),
            "the estimate is the timed calls' mean × calls: {} vs {}",
            f.inclusive_ns,
            f.mean_ns
        );
    }
    assert!(data.text(5).contains("one call in 8"));
}

#[test]
fn time_sample_out_of_range_names_the_field() {
    let e = Session::builder()
        .analyses(&[Analysis::Time])
        .time_sample(0)
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("time_sample"), "{e}");
    let e = Session::builder()
        .from_vars(|k| (k == "CABPROF_TIME_SAMPLE").then(|| "x".to_string()))
        .unwrap_err();
    assert!(e.to_string().contains("CABPROF_TIME_SAMPLE"), "{e}");
    // `CABPROF_TIME_RAW` takes 0 or 1 and says so.
    let e = Session::builder()
        .from_vars(|k| (k == "CABPROF_TIME_RAW").then(|| "maybe".to_string()))
        .unwrap_err();
    assert!(
        e.to_string().contains("CABPROF_TIME_RAW") && e.to_string().contains("0 or 1"),
        "{e}"
    );
    // Parsed, but out of range: still the variable's name.
    let e = Session::builder()
        .analyses(&[Analysis::Time])
        .from_vars(|k| (k == "CABPROF_TIME_SAMPLE").then(|| "0".to_string()))
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("CABPROF_TIME_SAMPLE"), "{e}");
}

#[profile]
async fn polled(rounds: u32) {
    for _ in 0..rounds {
        let ns = spin(Duration::from_millis(2));
        INNER.with(|c| c.set(c.get() + ns));
        // Suspended 10 ms: not counted.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn async_fn_counts_time_polled_not_suspended() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    INNER.with(|c| c.set(0.0));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let session = Session::builder()
        .analyses(&[Analysis::Time])
        .mode(RunMode::Exhaustive)
        .pin(false)
        .start()
        .unwrap();
    rt.block_on(polled(3));
    let data = session.finish().data;
    let spun = INNER.with(Cell::get);
    let f = time_of(&data, "polled");
    assert_eq!((f.calls, f.timed), (1, 1));
    // Polled: the spins (6 ms) plus the polls' own overhead (timer setup, 4 polls); not the
    // 30 ms asleep.
    assert!(
        f.inclusive_ns >= spun && f.inclusive_ns < spun + 1_000_000.0,
        "{} ns polled, {spun} ns spun",
        f.inclusive_ns
    );
}

#[profile]
fn sampled_a(i: u64) -> u64 {
    i.wrapping_mul(3)
}

#[profile]
fn sampled_b(i: u64) -> u64 {
    i ^ 5
}

#[profile]
fn sampled_c(i: u64) -> u64 {
    sampled_a(i) + 1
}

/// Calls `sampled_c` from a thread-local's destructor: sampled timing must cope with being
/// asked while (or after) the thread's countdown table is torn down.
struct CallsOnDrop;

impl Drop for CallsOnDrop {
    fn drop(&mut self) {
        std::hint::black_box(sampled_c(7));
    }
}

thread_local! {
    static CALLS_ON_DROP: CallsOnDrop = const { CallsOnDrop };
}

#[test]
fn sampled_timing_keeps_one_in_k_per_function_and_thread() {
    // Three functions (the per-thread countdown table grows as each is first timed), four
    // threads, and a call from a thread-local destructor at each thread's exit.
    const K: u32 = 16;
    const N: u64 = 32_000;
    const THREADS: u64 = 4;
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = sampled_timing_session(K);
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                CALLS_ON_DROP.with(|_| {});
                let mut x = 0;
                for i in 0..N {
                    x ^= sampled_a(i) ^ sampled_b(i) ^ sampled_c(i);
                }
                std::hint::black_box(x);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let data = session.finish().data;
    for (name, calls) in [
        ("sampled_a", 2 * N * THREADS),
        ("sampled_b", N * THREADS),
        ("sampled_c", N * THREADS),
    ] {
        let f = time_of(&data, name);
        // The destructor's calls come after the thread's ring may have closed: they may or
        // may not be counted.
        assert!(
            (calls..=calls + 2 * THREADS).contains(&f.calls),
            "{name}: {} calls",
            f.calls
        );
        let want = f.calls as f64 / K as f64;
        assert!(
            (f.timed as f64 - want).abs() < 0.1 * want,
            "{name}: {} timed of {}",
            f.timed,
            f.calls
        );
    }
}

#[profile]
fn counted_leaf(i: u64) -> u64 {
    i.rotate_left(3)
}

#[profile]
fn counted_outer(i: u64) -> u64 {
    counted_leaf(i) ^ counted_leaf(i + 1)
}

/// Method counts asked for with time or the call graph come from them (they count every call
/// anyway): they must be what method counting reports when it counts. By hand: 4 threads, each calling
/// `counted_outer` 5,000 times (2 leaves each) and `counted_leaf` 1,000 times more.
#[test]
fn method_counts_with_time_equal_method_counts_alone() {
    const THREADS: u64 = 4;
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let counts = |builder: SessionBuilder, analyses: &[Analysis]| {
        let session = builder
            .analyses(analyses)
            .pin(false)
            .start()
            .expect("starts");
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for i in 0..5_000 {
                        std::hint::black_box(counted_outer(i + t));
                    }
                    for i in 0..1_000 {
                        std::hint::black_box(counted_leaf(i));
                    }
                });
            }
        });
        let report = session.finish();
        // The report reads as if both had run.
        assert!(report.method_count.is_some());
        let d = report.data;
        let names = d.method_names();
        let mut mc: Vec<(String, u64)> = d
            .method_count
            .as_ref()
            .expect("method count ran")
            .iter()
            .map(|e| (names.name(e.method), e.count))
            .filter(|(n, _)| n.contains("counted_"))
            .collect();
        mc.sort();
        // With time on, the same numbers as its own calls per function.
        if let Some(t) = &d.time {
            let mut calls: Vec<(String, u64)> = t
                .functions
                .iter()
                .map(|f| (names.name(f.method), f.calls))
                .filter(|(n, _)| n.contains("counted_"))
                .collect();
            calls.sort();
            assert_eq!(calls, mc);
        }
        mc
    };
    let outer = |n: &str| n.ends_with("counted_outer");
    for (mode, builder) in [
        ("exhaustive", Session::builder().mode(RunMode::Exhaustive)),
        ("sequential", Session::builder().sequential()),
    ] {
        let alone = counts(
            builder.clone(),
            &[Analysis::MethodCount, Analysis::CallTree],
        );
        let with_time = counts(builder.clone(), &[Analysis::MethodCount, Analysis::Time]);
        assert_eq!(alone, with_time, "{mode}");
        let with_graph = counts(builder, &[Analysis::MethodCount, Analysis::CallGraph]);
        assert_eq!(alone, with_graph, "{mode}, with the call graph");
        assert_eq!(alone.len(), 2, "{mode}: {alone:?}");
        for (n, c) in &alone {
            let want = if outer(n) { 5_000 } else { 11_000 } * THREADS;
            assert_eq!(*c, want, "{mode}: {n}");
        }
    }
    // Sampling: a sample of the calls (the two tables agree on it, checked in `counts`), each
    // function seen at most as often as it was called.
    let sampled = counts(
        Session::builder().sampling(0.5),
        &[Analysis::MethodCount, Analysis::Time],
    );
    for (n, c) in &sampled {
        let called = if outer(n) { 5_000 } else { 11_000 } * THREADS;
        assert!(*c <= called, "sampling: {n} {c} > {called}");
    }
}

#[test]
fn an_estimate_is_marked_even_when_its_interval_is_unknown() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = sampled_timing_session(1 << 20);
    for i in 0..5 {
        std::hint::black_box(tiny(i));
    }
    let data = session.finish().data;
    let f = time_of(&data, "tiny");
    assert_eq!(f.calls, 5);
    assert!(f.timed < 5, "one in 2^20: {} timed", f.timed);
    let text = data.text(10);
    let row = text
        .lines()
        .find(|l| l.ends_with("::tiny") && !l.contains(" self "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains('~') && row.contains("±?"), "{row}");
}
