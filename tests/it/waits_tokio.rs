//! `cabprof::sync::tokio_mpsc` (feature `tokio`): a send awaiting room in a full channel is a
//! blocked send in the calling context of the `#[profile] async fn` that awaits it, on either
//! runtime flavour; a receive awaiting a message likewise (also one cut short by a timeout);
//! each message's time in the channel is its site's latency; and the wrapper keeps tokio's
//! capacity, order and answers. Durations are asserted in
//! generous ranges around what the test itself sleeps.

use crate::support::serial;
use crate::waits::{channel_latency, context, session, Rng, MS};
use cabprof::sync::tokio_mpsc;
use cabprof::ReportData;
use std::future::poll_fn;
use std::time::Duration;
use tokio::runtime::{Builder, Runtime};

fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

fn multi_thread() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[cabprof::profile]
async fn produce(tx: tokio_mpsc::Sender<u32>, n: u32) {
    for i in 0..n {
        tx.send(i).await.unwrap();
    }
}

async fn consume(mut rx: tokio_mpsc::Receiver<u32>) -> Vec<u32> {
    let mut got = Vec::new();
    while let Some(v) = rx.recv().await {
        tokio::time::sleep(Duration::from_millis(5)).await;
        got.push(v);
    }
    got
}

/// 40 messages through a channel of 1 whose consumer takes 5 ms over each, producer and
/// consumer tasks on `rt`.
fn slow_consumer(rt: Runtime) -> ReportData {
    let _one = serial();
    let s = session();
    let (tx, rx) = tokio_mpsc::channel(1);
    let got = rt.block_on(async move {
        let consumer = tokio::spawn(consume(rx));
        tokio::spawn(produce(tx, 40)).await.unwrap();
        consumer.await.unwrap()
    });
    // Worker threads exit (and hand over their events) before the session ends.
    drop(rt);
    assert_eq!(got, (0..40).collect::<Vec<_>>());
    s.finish().data
}

/// `flavour` names the profile's file.
#[cfg_attr(not(feature = "serve"), allow(unused_variables))]
fn check_blocked_sends(data: &ReportData, flavour: &str) {
    let sender = context(data, "it::waits_tokio::produce");
    // One message in the channel, one in the consumer's hand: the first sends do not wait,
    // the others about 5 ms each.
    assert!((30..=40).contains(&sender.block.count), "{sender:?}");
    assert!(
        (150 * MS..=600 * MS).contains(&sender.block.ns),
        "about 40 x 5 ms blocked: {sender:?}"
    );
    let w = data.waits.as_ref().expect("the waits analysis ran");
    let site = w
        .sites
        .iter()
        .find(|s| s.kind == "tokio::mpsc::channel")
        .unwrap_or_else(|| panic!("the channel's site in {:#?}", w.sites));
    assert!(site.site.contains("waits_tokio.rs"), "{}", site.site);
    // Go's reader names the awaiting function with its delay and count.
    #[cfg(feature = "serve")]
    for (index, value) in [
        ("delay", sender.block.ns),
        ("contentions", sender.block.count),
    ] {
        use cabprof::report::WaitProfile;
        let Some(rows) = crate::waits::go_top(data, WaitProfile::Block, index, flavour) else {
            break;
        };
        let name = "it::waits_tokio::produce";
        let (flat, _) = rows
            .get(name)
            .unwrap_or_else(|| panic!("{name} in the {index} top: {rows:?}"));
        assert_eq!(*flat, value, "{index}: {rows:?}");
    }
}

#[test]
fn a_full_tokio_channel_is_a_blocked_send_in_the_awaiting_fn_current_thread() {
    check_blocked_sends(&slow_consumer(current_thread()), "tokio-current");
}

#[test]
fn a_full_tokio_channel_is_a_blocked_send_in_the_awaiting_fn_multi_thread() {
    check_blocked_sends(&slow_consumer(multi_thread()), "tokio-multi");
}

#[cabprof::profile]
async fn give_up_waiting(rx: &mut tokio_mpsc::Receiver<u8>) -> bool {
    tokio::time::timeout(Duration::from_millis(20), rx.recv())
        .await
        .is_err()
}

#[cabprof::profile]
async fn await_one(rx: &mut tokio_mpsc::UnboundedReceiver<u8>) -> Option<u8> {
    rx.recv().await
}

#[test]
fn an_awaited_receive_is_a_blocked_receive_even_cut_short() {
    let _one = serial();
    let s = session();
    let rt = multi_thread();
    let (_tx, mut rx) = tokio_mpsc::channel::<u8>(4);
    let (utx, mut urx) = tokio_mpsc::unbounded_channel::<u8>();
    rt.block_on(async {
        assert!(tokio::spawn(async move { give_up_waiting(&mut rx).await })
            .await
            .unwrap());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            utx.send(9).unwrap();
        });
        assert_eq!(
            tokio::spawn(async move { await_one(&mut urx).await })
                .await
                .unwrap(),
            Some(9)
        );
    });
    drop(rt);
    let data = s.finish().data;
    for name in [
        "it::waits_tokio::give_up_waiting",
        "it::waits_tokio::await_one",
    ] {
        let c = context(&data, name);
        assert_eq!(c.block.count, 1, "{name}: {c:?}");
        assert!(
            (10 * MS..=2_000 * MS).contains(&c.block.ns),
            "{name}: {c:?}"
        );
    }
    let w = data.waits.as_ref().expect("the waits analysis ran");
    let mut kinds: Vec<&str> = w.sites.iter().map(|s| s.kind.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["tokio::mpsc::channel", "tokio::mpsc::unbounded_channel"]
    );
}

/// Many random sequences of operations on a wrapped and a plain tokio channel of the same
/// bound (and unbounded ones), in one task: every step answers the same, and messages come
/// out in the same order. A session records, so the wrapped paths run.
#[test]
fn tokio_channels_keep_tokios_capacity_and_order() {
    let _one = serial();
    let s = session();
    current_thread().block_on(async {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for case in 0..200 {
            let bound = 1 + (rng.next() % 4) as usize;
            let (tx, mut rx) = tokio_mpsc::channel::<u64>(bound);
            let (ptx, mut prx) = tokio::sync::mpsc::channel::<u64>(bound);
            let tx2 = tx.clone();
            assert!(tx.same_channel(&tx2));
            for step in 0..60 {
                let v = rng.next();
                match rng.next() % 6 {
                    0 => assert_eq!(
                        tx.try_send(v),
                        ptx.try_send(v),
                        "case {case} step {step}: try_send"
                    ),
                    // Awaited only where it cannot wait: the plain one says it fits (or empty).
                    1 if ptx.capacity() > 0 => {
                        tx2.send(v).await.unwrap();
                        ptx.send(v).await.unwrap();
                    }
                    2 => assert_eq!(
                        rx.try_recv(),
                        prx.try_recv(),
                        "case {case} step {step}: try_recv"
                    ),
                    3 if !prx.is_empty() => {
                        assert_eq!(rx.recv().await, prx.recv().await, "case {case}: recv")
                    }
                    4 if !prx.is_empty() => {
                        let (mut a, mut b) = (Vec::new(), Vec::new());
                        let n = rx.recv_many(&mut a, 2).await;
                        assert_eq!(n, prx.recv_many(&mut b, 2).await);
                        assert_eq!(a, b, "case {case} step {step}: recv_many");
                    }
                    _ if !prx.is_empty() => assert_eq!(
                        poll_fn(|cx| rx.poll_recv(cx)).await,
                        poll_fn(|cx| prx.poll_recv(cx)).await,
                        "case {case} step {step}: poll_recv"
                    ),
                    _ => {}
                }
                assert_eq!(
                    (tx.capacity(), tx.max_capacity(), tx.is_closed()),
                    (ptx.capacity(), ptx.max_capacity(), ptx.is_closed()),
                    "case {case} step {step}: the sender's view"
                );
                assert_eq!(
                    (rx.len(), rx.is_empty(), rx.capacity(), rx.max_capacity()),
                    (
                        prx.len(),
                        prx.is_empty(),
                        prx.capacity(),
                        prx.max_capacity()
                    ),
                    "case {case} step {step}: the receiver's view"
                );
            }
            rx.close();
            prx.close();
            assert!(rx.is_closed() && prx.is_closed());
            assert_eq!(tx.try_send(1), ptx.try_send(1), "closed: the same error");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            while let Some(v) = rx.recv().await {
                a.push(v);
            }
            while let Some(v) = prx.recv().await {
                b.push(v);
            }
            assert_eq!(a, b, "case {case}: the rest in order");
        }
        // Unbounded: the same messages in the same order.
        let (tx, mut rx) = tokio_mpsc::unbounded_channel::<u64>();
        let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        for step in 0..500 {
            let v = rng.next();
            if !rng.next().is_multiple_of(3) {
                assert_eq!(tx.send(v), ptx.send(v));
            } else {
                assert_eq!(rx.try_recv(), prx.try_recv(), "step {step}: try_recv");
            }
            assert_eq!((rx.len(), rx.is_empty()), (prx.len(), prx.is_empty()));
        }
        drop((tx, ptx));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        rx.recv_many(&mut a, usize::MAX).await;
        prx.recv_many(&mut b, usize::MAX).await;
        assert_eq!(a, b);
        assert_eq!(rx.recv().await, None);
    });
    // Across tasks on two threads: a bound-2 channel's sender waits and resumes in order.
    let rt = multi_thread();
    let got = rt.block_on(async {
        let (tx, mut rx) = tokio_mpsc::channel(2);
        tokio::spawn(async move {
            for i in 0..2000u32 {
                tx.send(i).await.unwrap();
            }
        });
        let mut got = Vec::new();
        while let Some(v) = rx.recv().await {
            got.push(v);
        }
        got
    });
    drop(rt);
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
    drop(s.finish());
}

#[cabprof::profile]
fn produce_blocking(tx: &tokio_mpsc::Sender<u32>, n: u32) {
    for i in 0..n {
        tx.blocking_send(i).unwrap();
    }
}

/// A thread outside the runtime blocking on a full channel (`blocking_send`) while a task
/// takes 5 ms over each message: blocked sends in that thread's function.
#[test]
fn a_blocking_send_outside_the_runtime_is_a_blocked_send() {
    let _one = serial();
    let s = session();
    let rt = multi_thread();
    let (tx, rx) = tokio_mpsc::channel(1);
    let consumer = rt.spawn(consume(rx));
    std::thread::spawn(move || produce_blocking(&tx, 20))
        .join()
        .unwrap();
    assert_eq!(rt.block_on(consumer).unwrap(), (0..20).collect::<Vec<_>>());
    drop(rt);
    let data = s.finish().data;
    let sender = context(&data, "it::waits_tokio::produce_blocking");
    assert!((10..=20).contains(&sender.block.count), "{sender:?}");
    assert!(
        (60 * MS..=600 * MS).contains(&sender.block.ns),
        "about 20 x 5 ms blocked: {sender:?}"
    );
}

/// Messages that sat 20 ms in a bounded and an unbounded tokio channel, received every way
/// (`recv`, `try_recv`, `recv_many`, `poll_recv`, `blocking_recv`): each has its latency, at its
/// channel's site; refused messages come back bare.
#[test]
fn tokio_messages_have_their_latency_however_received() {
    let _one = serial();
    let s = session();
    let (tx, mut rx) = tokio_mpsc::channel(8);
    let (utx, mut urx) = tokio_mpsc::unbounded_channel();
    current_thread().block_on(async {
        for i in 0..8u32 {
            tx.send(i).await.unwrap();
            utx.send(i).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(rx.recv().await, Some(0));
        assert_eq!(rx.try_recv(), Ok(1));
        let mut got = vec![1];
        assert_eq!(rx.recv_many(&mut got, 3).await, 3);
        assert_eq!(got, [1, 2, 3, 4]);
        assert_eq!(poll_fn(|cx| rx.poll_recv(cx)).await, Some(5));
        let mut rest = Vec::new();
        assert_eq!(urx.recv_many(&mut rest, usize::MAX).await, 8);
        assert_eq!(rest, (0..8).collect::<Vec<_>>());
    });
    assert_eq!(rx.blocking_recv(), Some(6));
    assert_eq!(rx.blocking_recv(), Some(7));
    let data = s.finish().data;
    for kind in ["tokio::mpsc::channel", "tokio::mpsc::unbounded_channel"] {
        let l = channel_latency(&data, kind);
        assert_eq!(l.count, 8, "{kind}: {l:?}");
        assert!(
            (20 * MS..=2_000 * MS).contains(&l.mean_ns()),
            "{kind}: {l:?}"
        );
    }
    let (tx, rx) = tokio_mpsc::channel(1);
    tx.try_send(1u8).unwrap();
    assert_eq!(
        tx.try_send(2),
        Err(tokio_mpsc::error::TrySendError::Full(2))
    );
    drop(rx);
    assert_eq!(
        tx.try_send(3),
        Err(tokio_mpsc::error::TrySendError::Closed(3))
    );
    assert_eq!(tx.blocking_send(4), Err(tokio_mpsc::error::SendError(4)));
    let (utx, urx) = tokio_mpsc::unbounded_channel();
    drop(urx);
    assert_eq!(utx.send(5u8), Err(tokio_mpsc::error::SendError(5)));
    // The receivers are `Send` and `Sync` for a `T` that is `Send` alone, as tokio's are.
    fn shared<R: Send + Sync>() {}
    shared::<tokio::sync::mpsc::Receiver<std::cell::Cell<u8>>>();
    shared::<tokio_mpsc::Receiver<std::cell::Cell<u8>>>();
    shared::<tokio_mpsc::UnboundedReceiver<std::cell::Cell<u8>>>();
}
