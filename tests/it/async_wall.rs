//! An `async fn`'s wall time, polled time and suspended time: ten rounds of 1 ms of work and a
//! 50 ms sleep give about 510 ms of wall time, about 10 ms polled and about 500 ms suspended,
//! on tokio's current-thread and multi-thread runtimes (where its polls may move threads).
//! Ranges, not a timed test of cabprof: a loaded host stretches the work and the sleeps.
//! And the executor's delay after a wake: a future woken from another thread while a task
//! hogging the runtime's one worker spins for 20 ms is polled only when that task yields.

use cabprof::{profile, Analysis, ReportData, Session};
use std::time::{Duration, Instant};

use crate::support::serial;

/// 1 ms of work: spinning, so that it is polled time.
fn work_1ms() {
    let until = Instant::now() + Duration::from_millis(1);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[profile]
async fn rounds_of_work_and_sleep() -> u32 {
    for _ in 0..10 {
        work_1ms();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    10
}

/// Runs the future on `rt`: spawned as a task (`spawn`: on a worker of a multi-thread
/// runtime, where its polls may move threads) or in `block_on`.
fn run(mut rt: tokio::runtime::Builder, spawn: bool) -> (ReportData, f64) {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    let rt = rt.enable_time().build().unwrap();
    let began = Instant::now();
    let n = if spawn {
        rt.block_on(async { tokio::spawn(rounds_of_work_and_sleep()).await.unwrap() })
    } else {
        rt.block_on(rounds_of_work_and_sleep())
    };
    assert_eq!(n, 10);
    let took = began.elapsed().as_secs_f64() * 1e3;
    drop(rt);
    (s.finish().data.clone(), took)
}

fn check(d: &ReportData, took_ms: f64, runtime: &str) {
    let f = d
        .time
        .as_ref()
        .unwrap()
        .functions
        .iter()
        .find(|f| d.name(f.method).ends_with("::rounds_of_work_and_sleep"))
        .expect("the async fn was timed");
    let wall = f.wall_ns.expect("wall time of an async fn") / 1e6;
    let suspended = f.suspended_ns.expect("suspended time") / 1e6;
    let polled = wall - suspended;
    // The program's own clock around `block_on` bounds the future's wall time.
    assert!(
        (500.0..=took_ms + 1.0).contains(&wall),
        "{runtime}: wall {wall:.1} ms (block_on took {took_ms:.1} ms)"
    );
    assert!(
        (9.0..=60.0).contains(&polled),
        "{runtime}: polled {polled:.1} ms of {wall:.1}"
    );
    assert!(
        (495.0..=wall).contains(&suspended),
        "{runtime}: suspended {suspended:.1} ms of {wall:.1}"
    );
    eprintln!("{runtime}: wall {wall:.1} ms, polled {polled:.1}, suspended {suspended:.1}");
    let text = d.text(10);
    assert!(text.contains("async functions, wall time"), "{text}");
}

#[test]
fn an_async_fn_is_wall_polled_and_suspended_on_a_current_thread_runtime() {
    let (d, took) = run(tokio::runtime::Builder::new_current_thread(), false);
    check(&d, took, "current-thread");
}

#[test]
fn an_async_fn_is_wall_polled_and_suspended_on_a_multi_thread_runtime() {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2);
    let (d, took) = run(b, true);
    check(&d, took, "multi-thread");
}

#[profile]
async fn woken_five_times(notify: std::sync::Arc<tokio::sync::Notify>) -> u32 {
    for _ in 0..5 {
        notify.notified().await;
    }
    5
}

/// `woken_five_times` on `rt` (one worker), woken every 30 ms by another thread, while a task
/// spins 20 ms at a time between yields: (its woken polls, their delay in ms, and how long the
/// run took).
fn woken_behind_a_hog(mut rt: tokio::runtime::Builder) -> (u64, f64, f64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    let rt = rt.enable_all().build().unwrap();
    let notify = Arc::new(tokio::sync::Notify::new());
    let done = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let waker = {
        let (notify, done) = (notify.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                // Longer than a spin: the future waits again by the next wake.
                std::thread::sleep(Duration::from_millis(30));
                notify.notify_one();
            }
        })
    };
    let n = rt.block_on(async {
        let hog = {
            let done = done.clone();
            tokio::spawn(async move {
                while !done.load(Ordering::Acquire) {
                    let until = Instant::now() + Duration::from_millis(20);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        let n = tokio::spawn(woken_five_times(notify.clone()))
            .await
            .unwrap();
        done.store(true, Ordering::Release);
        hog.await.unwrap();
        n
    });
    assert_eq!(n, 5);
    let took = began.elapsed().as_secs_f64() * 1e3;
    waker.join().unwrap();
    drop(rt);
    let d = s.finish().data;
    let f = d
        .time
        .as_ref()
        .unwrap()
        .functions
        .iter()
        .find(|f| d.name(f.method).ends_with("::woken_five_times"))
        .expect("the async fn was timed");
    let text = d.text(10);
    assert!(text.contains("woken to polled"), "{text}");
    (
        f.woken_polls.expect("woken polls"),
        f.wake_delay_ns.expect("a wake delay") / 1e6,
        took,
    )
}

fn check_delay((woken, delay_ms, took_ms): (u64, f64, f64), runtime: &str) {
    eprintln!("{runtime}: {woken} woken polls, {delay_ms:.1} ms from wakes to polls");
    // Every wake found the worker inside a 20 ms spin, or at its yield: five wakes wait
    // about 10 ms each on average; at most the whole run.
    assert_eq!(woken, 5, "{runtime}: one poll per wake");
    assert!(
        (5.0..=took_ms).contains(&delay_ms),
        "{runtime}: {delay_ms:.1} ms of delay in a run of {took_ms:.1} ms"
    );
}

#[test]
fn a_wake_behind_a_busy_current_thread_runtime_waits_for_its_poll() {
    check_delay(
        woken_behind_a_hog(tokio::runtime::Builder::new_current_thread()),
        "current-thread",
    );
}

#[test]
fn a_wake_behind_a_busy_multi_thread_runtime_waits_for_its_poll() {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(1);
    check_delay(woken_behind_a_hog(b), "multi-thread, one worker");
}

/// Pending until it has been polled `ready_at` times; each poll wakes its task at once (`wake`),
/// stores the waker (`stash`), or drops it unused.
struct Pends {
    polls: u32,
    ready_at: u32,
    wake: bool,
    /// Where to store the waker, if anywhere.
    stash: Option<std::sync::Arc<std::sync::Mutex<Option<std::task::Waker>>>>,
}

impl std::future::Future for Pends {
    type Output = u32;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<u32> {
        self.polls += 1;
        if self.polls >= self.ready_at {
            return std::task::Poll::Ready(self.polls);
        }
        if self.wake {
            cx.waker().wake_by_ref();
        }
        if let Some(stash) = &self.stash {
            *stash.lock().unwrap() = Some(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}

#[profile]
async fn awaits(p: Pends) -> u32 {
    p.await
}

/// A task of a minimal executor: its future, polled by `run`.
struct Task {
    future:
        std::sync::Mutex<Option<std::pin::Pin<Box<dyn std::future::Future<Output = u32> + Send>>>>,
    /// Poll it inside `wake` (an executor that runs a woken task at once).
    inline: bool,
    done: std::sync::atomic::AtomicU32,
}

impl std::task::Wake for Task {
    fn wake(self: std::sync::Arc<Self>) {
        if self.inline {
            poll_task(&self);
        }
    }
}

fn poll_task(task: &std::sync::Arc<Task>) {
    // A wake during this poll polls again once this one is over.
    let Ok(mut slot) = task.future.try_lock() else {
        return;
    };
    let Some(f) = slot.as_mut() else { return };
    let waker = std::task::Waker::from(task.clone());
    if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut std::task::Context::from_waker(&waker))
    {
        task.done.store(v, std::sync::atomic::Ordering::Relaxed);
        *slot = None;
    }
}

fn task(
    f: impl std::future::Future<Output = u32> + Send + 'static,
    inline: bool,
) -> std::sync::Arc<Task> {
    std::sync::Arc::new(Task {
        future: std::sync::Mutex::new(Some(Box::pin(f))),
        inline,
        done: std::sync::atomic::AtomicU32::new(0),
    })
}

/// A timed future left pending with no waker stored anywhere holds no reference to its own
/// task: an executor that frees a task with its last waker frees it.
#[test]
fn a_pending_timed_future_does_not_keep_its_task_alive() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    let t = task(
        awaits(Pends {
            polls: 0,
            ready_at: u32::MAX,
            wake: false,
            stash: None,
        }),
        false,
    );
    poll_task(&t);
    poll_task(&t);
    let weak = std::sync::Arc::downgrade(&t);
    drop(t);
    assert!(
        weak.upgrade().is_none(),
        "the pending task is still referenced"
    );
    drop(s.finish());
}

/// An executor that polls a task inside its wake: a waker the body stored, woken after the
/// poll, polls the timed future again at once, with no lock of cabprof's held across the wake.
#[test]
fn a_wake_that_polls_at_once_finishes_the_timed_future() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    let finished = std::thread::spawn(|| {
        let stored = std::sync::Arc::new(std::sync::Mutex::new(None));
        let t = task(
            awaits(Pends {
                polls: 0,
                ready_at: 2,
                wake: false,
                stash: Some(stored.clone()),
            }),
            true,
        );
        poll_task(&t);
        let waker: std::task::Waker = stored.lock().unwrap().take().expect("a stored waker");
        // Polls the task inside the wake: it completes there.
        waker.wake();
        t.done.load(std::sync::atomic::Ordering::Relaxed)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !finished.is_finished() {
        assert!(Instant::now() < deadline, "the executor's wake deadlocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(finished.join().expect("no panic in the wake"), 2);
    drop(s.finish());
}
