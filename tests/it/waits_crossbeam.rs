//! `cabprof::sync::crossbeam` (feature `crossbeam`): a full bounded channel is a blocked send
//! in the sender's context, each message's time in the channel is its site's latency, and the
//! wrapper keeps crossbeam-channel's capacity, order and answers. Durations are asserted in generous ranges around what the test itself sleeps.

use crate::support::serial;
use crate::waits::{channel_latency, session, Rng, MS};
use cabprof::sync::crossbeam;
use cabprof::ReportData;
use std::time::Duration;

#[cabprof::profile]
fn produce(tx: &crossbeam::Sender<u32>, n: u32) {
    for i in 0..n {
        tx.send(i).unwrap();
    }
}

#[test]
fn a_full_crossbeam_channel_is_a_blocked_send_in_the_senders_context() {
    let _one = serial();
    let s = session();
    let (tx, rx) = crossbeam::bounded(1);
    let line = line!() - 1;
    let consumer = crate::waits::slow_consumer(rx);
    produce(&tx, 40);
    drop(tx);
    assert_eq!(consumer.join().unwrap(), (0..40).collect::<Vec<_>>());
    let data: ReportData = s.finish().data;
    let sender = crate::waits::context(&data, "it::waits_crossbeam::produce");
    // One message in the channel, one in the consumer's hand: the first sends do not wait,
    // the others about 5 ms each.
    assert!((30..=40).contains(&sender.block.count), "{sender:?}");
    assert!(
        (150 * MS..=600 * MS).contains(&sender.block.ns),
        "about 40 x 5 ms blocked: {sender:?}"
    );
    let w = data.waits.as_ref().expect("the waits analysis ran");
    let site = &w.sites[0];
    assert_eq!(site.kind, "crossbeam::bounded");
    assert!(
        site.site.contains(&format!("waits_crossbeam.rs:{line}:")),
        "{}",
        site.site
    );
    // Go's reader names the sender's context with its delay and count.
    #[cfg(feature = "serve")]
    for (index, value) in [
        ("delay", sender.block.ns),
        ("contentions", sender.block.count),
    ] {
        use cabprof::report::WaitProfile;
        let Some(rows) = crate::waits::go_top(&data, WaitProfile::Block, index, "crossbeam") else {
            break;
        };
        let name = "it::waits_crossbeam::produce";
        let (flat, _) = rows
            .get(name)
            .unwrap_or_else(|| panic!("{name} in the {index} top: {rows:?}"));
        assert_eq!(*flat, value, "{index}: {rows:?}");
    }
}

/// Many random sequences of operations on a wrapped and a plain crossbeam channel of the
/// same capacity (bounded, or unbounded), in one thread, through two clones of each receiver:
/// every step answers the same, and messages come out in the same order. A session records,
/// so the wrapped paths run.
#[test]
fn crossbeam_channels_keep_crossbeams_capacity_and_order() {
    let _one = serial();
    let s = session();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for case in 0..300 {
        let cap = (rng.next() % 6) as usize;
        let ((tx, rx), (ptx, prx)) = if cap == 5 {
            (
                crossbeam::unbounded::<u64>(),
                crossbeam_channel::unbounded(),
            )
        } else {
            (crossbeam::bounded(cap), crossbeam_channel::bounded(cap))
        };
        let (rx2, prx2) = (rx.clone(), prx.clone());
        let tx2 = tx.clone();
        assert!(tx.same_channel(&tx2) && rx.same_channel(&rx2));
        for step in 0..60 {
            let v = rng.next();
            let fits = !ptx.is_full();
            let (r, pr) = if rng.next().is_multiple_of(2) {
                (&rx, &prx)
            } else {
                (&rx2, &prx2)
            };
            match rng.next() % 6 {
                0 => assert_eq!(
                    tx.try_send(v),
                    ptx.try_send(v),
                    "case {case} step {step}: try_send"
                ),
                // A blocking send only where it cannot block: the plain one says it fits.
                1 if fits => {
                    tx2.send(v).unwrap();
                    ptx.send(v).unwrap();
                }
                2 => assert_eq!(
                    tx.send_timeout(v, Duration::from_micros(10)),
                    ptx.send_timeout(v, Duration::from_micros(10)),
                    "case {case} step {step}: send_timeout"
                ),
                3 => assert_eq!(
                    r.try_recv(),
                    pr.try_recv(),
                    "case {case} step {step}: try_recv"
                ),
                4 if !prx.is_empty() => {
                    assert_eq!(r.recv(), pr.recv(), "case {case} step {step}: recv")
                }
                _ => assert_eq!(
                    r.recv_timeout(Duration::from_micros(10)),
                    pr.recv_timeout(Duration::from_micros(10)),
                    "case {case} step {step}: recv_timeout"
                ),
            }
            assert_eq!(
                (tx.len(), tx.is_empty(), tx.is_full(), tx.capacity()),
                (ptx.len(), ptx.is_empty(), ptx.is_full(), ptx.capacity()),
                "case {case} step {step}: the sender's view"
            );
            assert_eq!(
                (rx.len(), rx.is_empty(), rx.is_full(), rx.capacity()),
                (prx.len(), prx.is_empty(), prx.is_full(), prx.capacity()),
                "case {case} step {step}: the receiver's view"
            );
        }
        assert_eq!(
            rx.try_iter().take(3).collect::<Vec<_>>(),
            prx.try_iter().take(3).collect::<Vec<_>>()
        );
        drop((tx, tx2, ptx));
        assert_eq!(
            rx.iter().collect::<Vec<_>>(),
            prx.iter().collect::<Vec<_>>(),
            "case {case}: the rest in order"
        );
        assert_eq!(rx2.recv(), Err(crossbeam::RecvError));
        assert_eq!(
            rx2.recv_timeout(Duration::from_millis(1)),
            Err(crossbeam::RecvTimeoutError::Disconnected)
        );
    }
    // Across threads: a capacity-2 channel's sender blocks and resumes in order.
    let (tx, rx) = crossbeam::bounded(2);
    let producer = std::thread::spawn(move || {
        for i in 0..2000u32 {
            tx.send(i).unwrap();
        }
    });
    let got: Vec<u32> = rx.into_iter().collect();
    producer.join().unwrap();
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
    // Disconnected the other way: the message comes back.
    let (tx, rx) = crossbeam::bounded(0);
    drop(rx);
    assert_eq!(tx.send(7u8), Err(crossbeam::SendError(7)));
    drop(s.finish());
}

#[test]
fn a_receive_that_times_out_is_a_blocked_receive() {
    let _one = serial();
    let s = session();
    let (_tx, rx) = crossbeam::unbounded::<u8>();
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(20)),
        Err(crossbeam::RecvTimeoutError::Timeout)
    );
    let data = s.finish().data;
    let w = data.waits.as_ref().expect("the waits analysis ran");
    assert_eq!(w.root.block.count, 1, "{w:?}");
    assert!((15 * MS..=2_000 * MS).contains(&w.root.block.ns), "{w:?}");
    assert_eq!(w.sites[0].kind, "crossbeam::unbounded");
}

/// Messages that sat 20 ms in an unbounded channel, and in a bounded one, received every way
/// (`recv`, `try_recv`, `recv_timeout`, `try_iter`, `iter`, `into_iter`): each has its
/// latency, at its channel's site.
#[test]
fn crossbeam_messages_have_their_latency_however_received() {
    let _one = serial();
    let s = session();
    let (tx, rx) = crossbeam::unbounded();
    let (btx, brx) = crossbeam::bounded(8);
    for i in 0..8u32 {
        tx.send(i).unwrap();
        btx.send_timeout(i, Duration::from_secs(1)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(rx.recv(), Ok(0));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)), Ok(2));
    assert_eq!(rx.try_iter().take(2).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(rx.iter().take(3).collect::<Vec<_>>(), [5, 6, 7]);
    drop(btx);
    assert_eq!(
        brx.into_iter().collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    let data = s.finish().data;
    for kind in ["crossbeam::unbounded", "crossbeam::bounded"] {
        let l = channel_latency(&data, kind);
        assert_eq!(l.count, 8, "{kind}: {l:?}");
        assert!(
            (20 * MS..=2_000 * MS).contains(&l.mean_ns()),
            "{kind}: {l:?}"
        );
    }
    // Refused messages come back bare.
    let (tx, rx) = crossbeam::bounded(1);
    tx.send(1u8).unwrap();
    assert_eq!(tx.try_send(2), Err(crossbeam::TrySendError::Full(2)));
    assert_eq!(
        tx.send_timeout(3, Duration::from_millis(1)),
        Err(crossbeam::SendTimeoutError::Timeout(3))
    );
    drop(rx);
    assert_eq!(
        tx.send_deadline(4, std::time::Instant::now()),
        Err(crossbeam::SendTimeoutError::Disconnected(4))
    );
}

#[test]
fn iterators_print_without_a_printable_message() {
    struct Opaque;
    let (tx, rx) = crossbeam::unbounded::<Opaque>();
    tx.send(Opaque).unwrap();
    assert_eq!(format!("{:?}", rx.try_iter()), "TryIter { .. }");
    assert_eq!(format!("{:?}", rx.iter()), "Iter { .. }");
    drop(tx);
    assert_eq!(format!("{:?}", rx.into_iter()), "IntoIter { .. }");
}
