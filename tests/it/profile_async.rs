//! `async fn`: the frame spans the whole future, from its first poll to completion (or to being
//! dropped unfinished). During each poll the function is the innermost frame, so what it calls
//! names it as caller; between polls it is off the shadow stack.

use crate::support;

use cabprof::profile;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use support::{assert_balanced, calls, record, serial};

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Poll `f` to completion on this thread; returns its output and how many polls it took.
fn block_on<F: Future>(f: F) -> (F::Output, u32) {
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return (v, polls);
        }
    }
}

/// Pending once, then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

#[profile]
fn sync_helper(x: u32) -> u32 {
    x + 1
}

#[profile]
async fn fetch(x: u32) -> u32 {
    YieldOnce(false).await;
    sync_helper(x)
}

#[profile]
async fn pipeline(x: u32) -> Result<u32, String> {
    let a = fetch(x).await;
    if a > 100 {
        return Err("too big".into());
    }
    let b: u32 = "2".parse().map_err(|_| String::from("bad"))?;
    Ok(a * b)
}

#[profile]
async fn borrows<'a>(s: &'a str, t: &str) -> &'a str {
    YieldOnce(false).await;
    if t.is_empty() {
        s
    } else {
        &s[..1]
    }
}

#[test]
fn the_frame_spans_every_poll() {
    let _g = serial();
    let ((r, polls), ev) = record(|| block_on(pipeline(1)));
    assert_eq!(r, Ok(4));
    assert_eq!(polls, 2);
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>pipeline",
            "+pipeline>fetch",
            "+fetch>sync_helper",
            "-sync_helper",
            "-fetch",
            "-pipeline"
        ]
    );
}

#[test]
fn early_return_and_question_mark_inside_async() {
    let _g = serial();
    let ((r, _), ev) = record(|| block_on(pipeline(200)));
    assert_eq!(r, Err("too big".to_string()));
    assert_balanced(&ev);
    let ((r, _), _) = record(|| block_on(borrows("xyz", "t")));
    assert_eq!(r, "x");
}

#[test]
fn between_polls_the_caller_is_not_the_future() {
    let _g = serial();
    let (_, ev) = record(|| {
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut f = Box::pin(fetch(1));
        assert!(f.as_mut().poll(&mut cx).is_pending());
        sync_helper(0); // called by the root, not by the suspended `fetch`
        assert_eq!(f.as_mut().poll(&mut cx), Poll::Ready(2));
    });
    assert_eq!(
        calls(&ev),
        [
            "+root>fetch",
            "+root>sync_helper",
            "-sync_helper",
            "+fetch>sync_helper",
            "-sync_helper",
            "-fetch"
        ]
    );
}

#[test]
fn a_future_dropped_unfinished_closes_its_frame() {
    let _g = serial();
    let (_, ev) = record(|| {
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut f = Box::pin(fetch(1));
        assert!(f.as_mut().poll(&mut cx).is_pending());
        drop(f);
        // Never polled: no frame at all.
        drop(fetch(2));
    });
    assert_balanced(&ev);
    assert_eq!(calls(&ev), ["+root>fetch", "-fetch"]);
}
