//! Growing CAB rings (`ring::growing_channel`): the producer switches segments at the end of
//! a segment, the consumer follows, and every event arrives once, in order, whatever sizes
//! the ring goes through; memory grants are asked for larger segments and freed with them.

use cabprof_cab::event::Event;
use cabprof_cab::ring::{self, Growth};
use cabprof_cab::{Poll, RingConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn ev(i: u64) -> Event {
    Event::marker(i + 1).unwrap()
}

/// A grant that always says yes and counts the bytes it has out.
fn counting_grant(out: Arc<AtomicUsize>) -> ring::Grant {
    struct Held(Arc<AtomicUsize>, usize);
    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_sub(self.1, Ordering::Relaxed);
        }
    }
    Box::new(move |bytes| {
        out.fetch_add(bytes, Ordering::Relaxed);
        Some(Box::new(Held(out.clone(), bytes)))
    })
}

/// A consumer thread checks that it gets `0..n` exactly, in order; returns what it saw.
fn check_in_order(mut rx: ring::Consumer, n: u64) -> std::thread::JoinHandle<ring::Consumer> {
    std::thread::spawn(move || {
        let mut expect = 0u64;
        loop {
            let r = rx.poll_with(|w| {
                for &x in w {
                    assert_eq!(x, ev(expect).word(), "event {expect}");
                    expect += 1;
                }
            });
            match r {
                Poll::Closed => break,
                Poll::Empty => std::thread::yield_now(),
                Poll::Consumed(_) => {}
            }
        }
        assert_eq!(expect, n);
        rx
    })
}

/// The sizes from 256 bytes (4 chunks of 64) to 4 KiB (8 chunks of 512): 256, 512, 1K, 2K, 4K.
fn config() -> RingConfig {
    RingConfig::new(4096, 512)
}

#[test]
fn a_scripted_ring_grows_and_shrinks_at_every_wrap_and_loses_nothing() {
    let out = Arc::new(AtomicUsize::new(0));
    // Up one size at a time, down to the smallest in one step, up again, down by one.
    let script = vec![0, 1, 2, 3, 4, 0, 2, 4, 3, 1, 0, 4, 4, 2];
    let growth = Growth::new(256, counting_grant(out.clone())).scripted(script);
    let (mut tx, rx) = ring::growing_channel(&config(), growth).unwrap();
    let n = 200_000u64;
    let consumer = check_in_order(rx, n);
    for i in 0..n {
        tx.push(ev(i));
        if i % 997 == 0 {
            tx.flush();
        }
    }
    tx.close();
    let rx = consumer.join().unwrap();
    assert_eq!(rx.largest_slots(), 4096 / 8);
    let (grown, shrunk) = rx.resizes();
    assert!(grown >= 6 && shrunk >= 4, "{grown} {shrunk}");
    drop(tx);
    drop(rx);
    assert_eq!(out.load(Ordering::Relaxed), 0, "every grant is given back");
}

#[test]
fn a_ring_behind_a_slow_consumer_grows_to_its_largest_size() {
    let out = Arc::new(AtomicUsize::new(0));
    let growth = Growth::new(256, counting_grant(out.clone()));
    let (mut tx, rx) = ring::growing_channel(&config(), growth).unwrap();
    let n = 100_000u64;
    // The consumer starts only once the producer has written a lot: the ring is full at
    // every wrap until it is as large as it may be.
    for i in 0..2_000 {
        tx.push(ev(i));
        if i == 200 {
            // Not started yet: the producer must wait here, not lose anything.
            break;
        }
    }
    let consumer = check_in_order(rx, n);
    for i in 201..n {
        tx.push(ev(i));
    }
    tx.close();
    let rx = consumer.join().unwrap();
    assert!(
        rx.largest_slots() > 256 / 8,
        "it grew: {}",
        rx.largest_slots()
    );
    assert_eq!(tx.stats().dropped, 0);
}

#[test]
fn a_refused_grant_keeps_the_ring_small_and_loses_nothing() {
    let growth = Growth::new(256, Box::new(|_| None));
    let (mut tx, rx) = ring::growing_channel(&config(), growth).unwrap();
    let n = 50_000u64;
    let consumer = check_in_order(rx, n);
    for i in 0..n {
        tx.push(ev(i));
    }
    tx.close();
    let rx = consumer.join().unwrap();
    assert_eq!(rx.largest_slots(), 256 / 8);
    assert_eq!(rx.resizes(), (0, 0));
}

#[test]
fn draining_a_live_ring_follows_its_switches() {
    let script = vec![0, 1, 2, 0, 3, 4];
    let growth = Growth::new(256, Box::new(|_| Some(Box::new(())))).scripted(script);
    let (mut tx, mut rx) = ring::growing_channel(&config(), growth).unwrap();
    let mut out = Vec::new();
    let mut next = 0u64;
    for round in 0..400u64 {
        for _ in 0..(round % 13 + 1) {
            tx.push(ev(next));
            next += 1;
        }
        rx.drain_live(|w| out.extend_from_slice(w));
        assert_eq!(out.len() as u64, next, "round {round}");
    }
    let want: Vec<u64> = (0..next).map(|i| ev(i).word()).collect();
    assert_eq!(out, want);
    assert!(rx.resizes().0 >= 3);
}

#[test]
fn growth_is_exhaustive_only() {
    let sampling = config().with_mode(cabprof_cab::Mode::sampling(0.5));
    assert!(ring::growing_channel(&sampling, Growth::new(256, Box::new(|_| None))).is_err());
}
