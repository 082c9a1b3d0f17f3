//! One correctness suite, run through the [`Transport`] trait against every exhaustive design:
//! the CAB ring, FastForward and N-way buffering. Each generic function below is one behaviour;
//! `suite!` instantiates all of them per design, so a failure names the design and behaviour.

use cabprof_cab::event::Event;
use cabprof_cab::fastforward::FastForward;
use cabprof_cab::nway::NWay;
use cabprof_cab::ring::Cab;
use cabprof_cab::{EventConsumer, EventProducer, Mode, Poll, RingConfig, Transport};
use std::time::Duration;

/// The `i`-th event of a test stream: marker `i + 1`, so that consecutive events are consecutive
/// words and a word gives its index back.
fn ev(i: u64) -> Event {
    Event::marker(i + 1).unwrap()
}

/// `ev(0).word() - 1`: the word of event `i` is `BASE + i + 1`.
fn base() -> u64 {
    ev(0).word() - 1
}

fn drain<C: EventConsumer>(rx: &mut C, out: &mut Vec<u64>) -> Poll {
    rx.poll(&mut |w| out.extend_from_slice(w))
}

/// Poll until `Closed`, collecting everything.
fn drain_to_close<C: EventConsumer>(rx: &mut C, out: &mut Vec<u64>) {
    let mut empties = 0;
    loop {
        match drain(rx, out) {
            Poll::Closed => return,
            Poll::Empty => {
                empties += 1;
                assert!(
                    empties < 1000,
                    "closed producer, but poll keeps saying Empty"
                );
            }
            Poll::Consumed(_) => {}
        }
    }
}

fn words(range: std::ops::Range<u64>) -> Vec<u64> {
    range.map(|i| ev(i).word()).collect()
}

/// Events pushed before `close` in a single thread are all delivered, including a partial
/// chunk the producer never filled; whatever arrived before the close is a prefix.
fn single_thread_partial_chunk_after_close<T: Transport>() {
    let (mut tx, mut rx) = T::channel(&RingConfig::new(512, 64)).unwrap();
    for i in 0..13 {
        tx.push(ev(i));
    }
    let mut out = Vec::new();
    drain(&mut rx, &mut out);
    assert_eq!(
        out,
        words(0..out.len() as u64),
        "{}: a prefix before close",
        T::NAME
    );
    tx.close();
    drain_to_close(&mut rx, &mut out);
    assert_eq!(out, words(0..13), "{}", T::NAME);
    assert_eq!(tx.stats().pushed, 13);
    assert_eq!(rx.stats().delivered, 13);
    // Closed is sticky.
    assert_eq!(drain(&mut rx, &mut out), Poll::Closed);
}

/// Flushing hands over exactly what was pushed; the stream then goes on, many rounds, crossing
/// chunk and sub-buffer boundaries and wrapping the ring; every event arrives once, in order.
fn flush_then_continue_many_rounds<T: Transport>() {
    let (mut tx, mut rx) = T::channel(&RingConfig::new(512, 64)).unwrap();
    let mut out = Vec::new();
    let mut next = 0u64;
    for round in 0..300u64 {
        // 1..=40 events: from a single one to five 8-event chunks (the ring holds 64).
        for _ in 0..(round * 13 % 40 + 1) {
            tx.push(ev(next));
            next += 1;
        }
        tx.flush();
        if round % 3 == 2 {
            // A flush with nothing new must hand over nothing twice.
            tx.flush();
        }
        while let Poll::Consumed(_) = drain(&mut rx, &mut out) {}
        assert_eq!(out.len() as u64, next, "{}: round {round}", T::NAME);
    }
    tx.close();
    drain_to_close(&mut rx, &mut out);
    assert_eq!(out, words(0..next), "{}", T::NAME);
}

/// Two threads: every event arrives once, in order (each word is its predecessor's successor),
/// and the count and sum match. Returns the producer's block count.
fn two_threads_exact<T: Transport>(config: RingConfig, n: u64) -> u64
where
    T::Consumer: 'static,
{
    let (mut tx, mut rx) = T::channel(&config).unwrap();
    let base = base();
    let consumer = std::thread::spawn(move || {
        let mut expect = 0u64;
        let mut sum = 0u64;
        let mut bad = None;
        loop {
            let r = rx.poll(&mut |w| {
                for &x in w {
                    if x != base + expect + 1 && bad.is_none() {
                        bad = Some((expect, x));
                    }
                    sum = sum.wrapping_add(x - base);
                    expect += 1;
                }
            });
            match r {
                Poll::Closed => break,
                Poll::Empty => std::thread::yield_now(),
                Poll::Consumed(_) => {}
            }
        }
        (expect, sum, bad, rx.stats())
    });
    for i in 0..n {
        tx.push(ev(i));
    }
    tx.close();
    let stats = tx.stats();
    let (count, sum, bad, rx_stats) = consumer.join().unwrap();
    let name = T::NAME;
    assert_eq!(
        bad, None,
        "{name} {config:?}: first out-of-order (index, word)"
    );
    assert_eq!(count, n, "{name} {config:?}");
    assert_eq!(sum, n * (n + 1) / 2, "{name} {config:?}");
    assert_eq!(rx_stats.delivered, n, "{name} {config:?}");
    assert_eq!(stats.pushed, n, "{name} {config:?}");
    assert_eq!(stats.dropped, 0, "{name} {config:?}");
    stats.blocks
}

/// The smallest ring allowed (4 chunks of 64 bytes: 32 events): the producer is nearly always
/// waiting for the consumer.
fn two_threads_tiny_ring_blocks_constantly<T: Transport>()
where
    T::Consumer: 'static,
{
    let blocks = two_threads_exact::<T>(RingConfig::new(256, 64), 1_000_000);
    assert!(blocks > 0, "{}: a 32-event ring never filled?", T::NAME);
}

fn two_threads_small_ring<T: Transport>()
where
    T::Consumer: 'static,
{
    two_threads_exact::<T>(RingConfig::new(4096, 512), 1_000_000);
}

fn two_threads_medium_ring<T: Transport>()
where
    T::Consumer: 'static,
{
    two_threads_exact::<T>(RingConfig::new(64 << 10, 8 << 10), 2_000_000);
}

/// The paper's setting: 2 MB of 128 KB chunks (16 sub-buffers for N-way).
fn two_threads_default_ring<T: Transport>()
where
    T::Consumer: 'static,
{
    two_threads_exact::<T>(RingConfig::default(), 2_000_000);
}

/// With the consumer gone, the producer fills the ring once and then drops and counts every
/// further event instead of waiting forever.
fn dead_consumer_never_blocks_the_producer<T: Transport>() {
    let (mut tx, rx) = T::channel(&RingConfig::new(512, 64)).unwrap();
    drop(rx);
    for i in 0..10_000 {
        tx.push(ev(i));
    }
    let s = tx.stats();
    assert_eq!(s.pushed, 64, "{}: the ring holds 64 events", T::NAME);
    assert_eq!(s.dropped, 10_000 - 64, "{}", T::NAME);
    assert_eq!(s.pushed + s.dropped, 10_000);
    tx.close();
}

/// A producer already waiting on a full ring is released when the consumer is dropped.
fn consumer_dying_while_producer_blocked_releases_it<T: Transport>()
where
    T::Consumer: 'static,
{
    let (mut tx, rx) = T::channel(&RingConfig::new(512, 64)).unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        drop(rx);
    });
    for i in 0..1000 {
        tx.push(ev(i));
    }
    killer.join().unwrap();
    let s = tx.stats();
    assert!(s.blocks >= 1, "{}: {s:?}", T::NAME);
    assert!(s.blocked > Duration::ZERO, "{}: {s:?}", T::NAME);
    assert_eq!(s.pushed, 64, "{}: {s:?}", T::NAME);
    assert_eq!(s.pushed + s.dropped, 1000, "{}: {s:?}", T::NAME);
}

/// Bad sizes are refused with an error naming the field. FastForward and N-way also need powers
/// of two (`POW2`); every design here is exhaustive only.
fn bad_sizes_name_the_field<T: Transport>(pow2: bool) {
    let err = |cfg: RingConfig| match T::channel(&cfg) {
        Ok(_) => None,
        Err(e) => {
            assert!(e.to_string().contains(&e.field), "{e}");
            Some(e)
        }
    };
    let e = err(RingConfig::new(4096, 32)).unwrap();
    assert_eq!((e.field.as_str(), T::NAME), ("chunk_bytes", T::NAME));
    assert!(e.allowed.contains("at least 64"), "{e}");
    let e = err(RingConfig::new(4096 + 64, 1024)).unwrap();
    assert_eq!(e.field, "buffer_bytes", "{}", T::NAME);
    let e = err(RingConfig::new(3072, 1024)).unwrap();
    assert_eq!(e.field, "buffer_bytes", "{}", T::NAME);
    assert!(e.allowed.contains("at least 4 chunks"), "{e}");
    // Five chunks: fine for CAB, not a power of two for the others.
    match err(RingConfig::new(5 * 1024, 1024)) {
        None => assert!(!pow2, "{} accepted a 5 KiB buffer", T::NAME),
        Some(e) => {
            assert!(pow2, "{}: {e}", T::NAME);
            assert_eq!(e.field, "buffer_bytes");
            assert!(e.allowed.contains("power of two"), "{e}");
        }
    }
    let e = err(RingConfig::new(4096, 1024).with_mode(Mode::sampling(0.5))).unwrap();
    assert_eq!(e.field, "mode", "{}", T::NAME);
    assert!(err(RingConfig::new(4096, 1024)).is_none());
    assert!(err(RingConfig::new(256, 64)).is_none());
}

macro_rules! suite {
    ($($module:ident: $transport:ty, pow2 = $pow2:expr;)*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn single_thread_partial_chunk_after_close() {
                super::single_thread_partial_chunk_after_close::<$transport>();
            }
            #[test]
            fn flush_then_continue_many_rounds() {
                super::flush_then_continue_many_rounds::<$transport>();
            }
            #[test]
            fn two_threads_tiny_ring_blocks_constantly() {
                super::two_threads_tiny_ring_blocks_constantly::<$transport>();
            }
            #[test]
            fn two_threads_small_ring() {
                super::two_threads_small_ring::<$transport>();
            }
            #[test]
            fn two_threads_medium_ring() {
                super::two_threads_medium_ring::<$transport>();
            }
            #[test]
            fn two_threads_default_ring() {
                super::two_threads_default_ring::<$transport>();
            }
            #[test]
            fn dead_consumer_never_blocks_the_producer() {
                super::dead_consumer_never_blocks_the_producer::<$transport>();
            }
            #[test]
            fn consumer_dying_while_producer_blocked_releases_it() {
                super::consumer_dying_while_producer_blocked_releases_it::<$transport>();
            }
            #[test]
            fn bad_sizes_name_the_field() {
                super::bad_sizes_name_the_field::<$transport>($pow2);
            }
        }
    )*};
}

suite! {
    cab_ring: Cab, pow2 = false;
    fastforward: FastForward, pow2 = true;
    nway: NWay, pow2 = true;
}

// Design-specific behaviour, beyond the shared contract.

/// FastForward's temporal slipping (CAB paper §6.1: dangerous distance 2 cache lines, safe
/// distance 6): the consumer does not read within 16 events of the producer, and once that
/// close it waits until the producer is 48 ahead; a flush lets it read everything.
#[test]
fn fastforward_slips_between_the_dangerous_and_safe_distances() {
    use cabprof_cab::fastforward::{channel, slip_distances};
    assert_eq!(slip_distances(512), (16, 48), "the paper's distances");
    assert_eq!(
        slip_distances(32),
        (4, 12),
        "scaled down for the smallest ring"
    );
    let (mut tx, mut rx) = channel(&RingConfig::new(4096, 64)).unwrap(); // 512 slots
    let mut out = Vec::new();
    let mut next = 0u64;
    let mut push_to = |tx: &mut cabprof_cab::fastforward::Producer, n: u64| {
        while next < n {
            tx.push(ev(next));
            next += 1;
        }
    };
    push_to(&mut tx, 16);
    assert_eq!(
        drain(&mut rx, &mut out),
        Poll::Empty,
        "within the dangerous distance"
    );
    push_to(&mut tx, 48);
    assert_eq!(
        drain(&mut rx, &mut out),
        Poll::Empty,
        "slipping until 48 ahead"
    );
    push_to(&mut tx, 49);
    // 49 ahead: read until 16 remain.
    assert_eq!(drain(&mut rx, &mut out), Poll::Consumed(33));
    assert_eq!(drain(&mut rx, &mut out), Poll::Empty);
    tx.flush();
    assert_eq!(
        drain(&mut rx, &mut out),
        Poll::Consumed(16),
        "a flush overrides slipping"
    );
    // On to 1000 events in steps of 100 (the ring holds 512, and this is one thread).
    for step in 1..=10 {
        push_to(&mut tx, 100 * step);
        while let Poll::Consumed(_) = drain(&mut rx, &mut out) {}
    }
    tx.close();
    drain_to_close(&mut rx, &mut out);
    assert_eq!(out, words(0..1000));
    // Batches are at most `BATCH` events.
    assert!(rx.stats().chunks >= 1000 / cabprof_cab::fastforward::BATCH as u64);
}

/// N-way hands over whole sub-buffers as one slice each; after a flush the producer keeps
/// filling the same sub-buffer and the consumer gets only the part it has not had.
#[test]
fn nway_hands_over_whole_sub_buffers_and_flushed_parts_once() {
    let (mut tx, mut rx) = cabprof_cab::nway::channel(&RingConfig::new(256, 64)).unwrap(); // 4 x 8
    let mut slices: Vec<Vec<u64>> = Vec::new();
    let mut poll = |rx: &mut cabprof_cab::nway::Consumer| rx.poll_with(|w| slices.push(w.to_vec()));
    for i in 0..7 {
        tx.push(ev(i));
    }
    assert_eq!(poll(&mut rx), Poll::Empty, "sub-buffer 0 is not full yet");
    tx.push(ev(7));
    assert_eq!(poll(&mut rx), Poll::Consumed(8), "sub-buffer 0, whole");
    assert_eq!(poll(&mut rx), Poll::Empty);
    for i in 8..11 {
        tx.push(ev(i));
    }
    tx.flush();
    assert_eq!(
        poll(&mut rx),
        Poll::Consumed(3),
        "the flushed part of sub-buffer 1"
    );
    tx.flush();
    assert_eq!(
        poll(&mut rx),
        Poll::Empty,
        "a repeated flush hands over nothing new"
    );
    for i in 11..16 {
        tx.push(ev(i));
    }
    assert_eq!(poll(&mut rx), Poll::Consumed(5), "the rest of sub-buffer 1");
    // Sub-buffers 2, 3, 0 (wrapping), then a partial 1 handed over by the close.
    for i in 16..44 {
        tx.push(ev(i));
        if i % 8 == 7 {
            assert_eq!(poll(&mut rx), Poll::Consumed(8));
        }
    }
    tx.close();
    assert_eq!(poll(&mut rx), Poll::Consumed(4));
    assert_eq!(poll(&mut rx), Poll::Closed);
    let lens: Vec<usize> = slices.iter().map(Vec::len).collect();
    assert_eq!(lens, [8, 3, 5, 8, 8, 8, 4]);
    assert_eq!(slices.concat(), words(0..44));
}
