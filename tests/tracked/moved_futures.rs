//! A future polled first on one thread and to the end on another (each thread with its own
//! ring, so its own analysis instance): the time and allocation analyses charge what its later
//! polls did, on the second thread, under the context of its first poll, and its callers'
//! inclusive counts include it.
//!
//! The move is forced, not left to a scheduler: thread A polls the future once (it yields),
//! then hands it to thread B, which polls it to completion.

use cabprof::report::{context_stack, AllocCountsEntry, ContextTimeEntry, ReportData};
use cabprof::{profile, Analysis, RunMode, Session};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Spin for `d` (a busy wait, so the time is polled time).
#[profile]
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One block of `n` bytes, made here.
#[profile]
fn fill(n: usize) -> Vec<u8> {
    vec![1u8; n]
}

/// Pending the first time it is polled, ready the second.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

const FIRST: Duration = Duration::from_millis(2);
const LATER: Duration = Duration::from_millis(10);

/// First poll: a 100-byte box and a 2 ms spin. Second poll: a 300-byte block, a 500-byte one
/// made by `fill`, and a 10 ms spin. The three blocks are freed when it returns.
#[profile]
async fn mover() -> usize {
    let a = Box::new([7u8; 100]);
    spin(FIRST);
    YieldOnce(false).await;
    let b = vec![1u8; 300];
    let c = fill(500);
    spin(LATER);
    std::hint::black_box(&a).len() + std::hint::black_box(&b).len() + c.len()
}

#[profile]
async fn caller() -> usize {
    mover().await + 1
}

type Task = Pin<Box<dyn Future<Output = usize> + Send>>;

/// Polls `fut` once on this thread (inside an instrumented function, which becomes the
/// future's calling context); returns the time the poll took.
#[profile]
fn first_poll(fut: &mut Task) -> Duration {
    let t = Instant::now();
    let r = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(r.is_pending(), "the first poll yields");
    t.elapsed()
}

/// Runs the scenario in a session of `mode`: returns the report and the polls' wall time.
fn run(mode: RunMode) -> (ReportData, Duration) {
    let _g = crate::serial();
    let session = Session::builder()
        .analyses(&[Analysis::Time, Analysis::Allocations])
        .mode(mode)
        .pin(false)
        .start()
        .expect("session starts");
    let (fut, first) = std::thread::spawn(|| {
        let mut fut: Task = Box::pin(caller());
        let d = first_poll(&mut fut);
        (fut, d)
    })
    .join()
    .expect("thread A");
    let later = std::thread::spawn(move || {
        let mut fut = fut;
        let t = Instant::now();
        let n = loop {
            if let Poll::Ready(n) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                break n;
            }
        };
        assert_eq!(n, 901);
        t.elapsed()
    })
    .join()
    .expect("thread B");
    (session.finish().data, first + later)
}

fn short(data: &ReportData, m: u32) -> String {
    let name = data.name(m);
    name.rsplit("::").next().unwrap_or(&name).to_string()
}

fn stacks<N: cabprof::report::ContextNode>(
    data: &ReportData,
    nodes: &[N],
    parents: &[Option<usize>],
) -> Vec<Vec<String>> {
    (0..nodes.len())
        .map(|i| {
            context_stack(nodes, parents, i)
                .into_iter()
                .map(|m| short(data, m))
                .collect()
        })
        .collect()
}

fn find<'a, T>(stacks: &[Vec<String>], nodes: &'a [T], names: &[&str]) -> &'a T {
    stacks
        .iter()
        .position(|s| s == names)
        .map(|i| &nodes[i])
        .unwrap_or_else(|| panic!("no context {names:?} in {stacks:?}"))
}

const CTX: [&str; 3] = ["first_poll", "caller", "mover"];

fn check_allocations(d: &ReportData) {
    let a = d.allocations.as_ref().expect("allocations ran");
    assert!(a.tracked && !a.approximate);
    let stacks = stacks(d, &a.contexts, &a.parent_indices());
    // Nothing of the future under the root: its polls on thread B are under its first poll.
    assert!(
        stacks.iter().all(|s| s[0] == "first_poll"),
        "contexts {stacks:?}"
    );
    let counts = |allocs, bytes, frees, freed_bytes| AllocCountsEntry {
        allocs,
        bytes,
        reallocs: 0,
        frees,
        freed_bytes,
    };
    let at = |names: &[&str]| find(&stacks, &a.contexts, names).counts;
    // The box (first poll, thread A) and the 300-byte block (second poll, thread B), and the
    // three frees when it returns.
    assert_eq!(at(&CTX), counts(2, 400, 3, 900));
    assert_eq!(
        at(&["first_poll", "caller", "mover", "fill"]),
        counts(1, 500, 0, 0)
    );
    let inclusive = |name: &str| {
        a.functions
            .iter()
            .find(|f| f.method != 0 && short(d, f.method) == name)
            .unwrap_or_else(|| panic!("no function {name}"))
            .inclusive
    };
    for f in CTX {
        assert_eq!(inclusive(f), counts(3, 900, 3, 900), "{f} inclusive");
    }
}

fn check_time(d: &ReportData, polled: Duration) {
    let t = d.time.as_ref().expect("time ran");
    assert!(!t.approximate);
    let stacks = stacks(d, &t.contexts, &t.parent_indices());
    assert!(
        stacks.iter().all(|s| s[0] == "first_poll"),
        "contexts {stacks:?}"
    );
    let at = |names: &[&str]| -> &ContextTimeEntry { find(&stacks, &t.contexts, names) };
    let spun = (FIRST + LATER).as_nanos() as f64;
    let polled = polled.as_nanos() as f64;
    // Each future: one call, timed, its time the sum of its polls on both threads.
    for depth in 2..=3 {
        let c = at(&CTX[..depth]);
        assert_eq!((c.calls, c.timed), (1, 1), "{:?}", &CTX[..depth]);
        assert!(
            c.inclusive_ns >= spun && c.inclusive_ns <= polled * 1.01 + 100_000.0,
            "{:?}: {} ns, spun {spun}, polled {polled}",
            &CTX[..depth],
            c.inclusive_ns
        );
    }
    // Both spins, one per thread, under the future's context.
    let s = at(&["first_poll", "caller", "mover", "spin"]);
    assert_eq!((s.calls, s.timed), (2, 2));
    assert!(s.inclusive_ns >= spun);
    let f = t
        .functions
        .iter()
        .find(|f| short(d, f.method) == "caller")
        .expect("caller timed");
    assert_eq!((f.calls, f.timed), (1, 1));
    assert!(f.inclusive_ns >= spun && f.inclusive_ns <= polled * 1.01 + 100_000.0);
}

#[test]
fn a_moved_future_is_charged_under_its_first_poll_exhaustive() {
    let (d, polled) = run(RunMode::Exhaustive);
    check_allocations(&d);
    check_time(&d, polled);
}

#[test]
fn a_moved_future_is_charged_under_its_first_poll_sequential() {
    let (d, polled) = run(RunMode::Sequential);
    check_allocations(&d);
    check_time(&d, polled);
}
