//! Sampling CAB (paper §3.2): the producer never blocks and copies `rate` of each chunk, in
//! bursts, into the handoff; the consumer reads the handoff's blocks, counts the ones it lost,
//! and never delivers a word that is not an event the producer pushed.
//!
//! The tests at the end reproduce bugs the first sampling consumers had (lapping, overlapping
//! bursts, stale gates) and now guard against their return.

use cabprof_cab::event::{decode, Event, EventKind, CLEAR, MAGIC};
use cabprof_cab::ring::{self, Consumer, Producer};
use cabprof_cab::{Mode, Poll, RingConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// The `i`-th event of a test stream: marker `i + 1`.
fn ev(i: u64) -> Event {
    Event::marker(i + 1).unwrap()
}

/// The stream index of a delivered word, if it is a marker of a pushed event `0..n`.
fn index(word: u64, n: u64) -> Option<u64> {
    match decode(word) {
        Some(EventKind::Marker { value }) if (1..=n).contains(&value) => Some(value - 1),
        _ => None,
    }
}

fn sampling(buffer: usize, chunk: usize, mode: Mode) -> (Producer<true>, Consumer) {
    ring::sampling_channel(&RingConfig::new(buffer, chunk).with_mode(mode)).unwrap()
}

/// Poll until `Closed`; `f` sees every delivered slice.
fn drain_to_close(rx: &mut Consumer, mut f: impl FnMut(&[u64])) {
    let mut empties = 0;
    loop {
        match rx.poll_with(&mut f) {
            Poll::Closed => return,
            Poll::Empty => {
                empties += 1;
                assert!(
                    empties < 10_000,
                    "closed producer, but poll keeps saying Empty"
                );
                std::thread::yield_now();
            }
            Poll::Consumed(_) => {}
        }
    }
}

/// (a) A consumer that exists but is never polled does not slow the producer: 50 laps of the
/// ring go through without a single wait, and the consumer then reports the laps it missed.
#[test]
fn producer_never_blocks_when_consumer_is_stopped() {
    let (mut tx, mut rx) = sampling(64 << 10, 8 << 10, Mode::sampling(0.5));
    let cap = 8192u64;
    let chunks = 8u64;
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..50 * cap {
            tx.push(ev(i));
        }
        done.send(tx).unwrap();
    });
    // A blocked producer would never send; fail instead of hanging.
    let tx = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the sampling producer blocked on a stopped consumer");
    let s = tx.stats();
    assert_eq!((s.pushed, s.blocks, s.dropped), (50 * cap, 0, 0));
    rx.poll_with(|_| {});
    // The producer finished 50 * 8 - 1 chunks (the last is handed over when it enters the
    // next one); the handoff holds the last 8 of them, so the consumer skips the rest.
    assert_eq!(
        rx.stats().chunks_lapped,
        50 * chunks - 1 - 8,
        "{:?}",
        rx.stats()
    );
    drop(tx);
    drain_to_close(&mut rx, |_| {});
}

/// Run `n` events through `rx` from a producer thread that is throttled so that it never laps
/// the consumer: it pushes one chunk, flushes, and waits until at most `lag_chunks` flushed
/// chunks are unread (so every block is a whole chunk handed over by a flush, but the last).
/// Returns
/// every delivered slice and the consumer's counters.
fn throttled(
    mut tx: Producer<true>,
    mut rx: Consumer,
    n: u64,
    chunk: u64,
    lag_chunks: u64,
) -> (Vec<Vec<u64>>, cabprof_cab::ConsumerStats) {
    // Chunks the consumer has read past. Every flush is chunk-aligned (but the last), so each
    // `Consumed` poll reads exactly one whole chunk and `stats().chunks` counts them.
    let read = Arc::new(AtomicU64::new(0));
    let reader = read.clone();
    let consumer = std::thread::spawn(move || {
        let mut out = Vec::new();
        loop {
            match rx.poll_with(|w| out.push(w.to_vec())) {
                Poll::Closed => break,
                Poll::Empty => std::thread::yield_now(),
                Poll::Consumed(_) => reader.store(rx.stats().chunks, Ordering::Release),
            }
        }
        (out, rx.stats())
    });
    let mut pushed = 0u64;
    let mut flushed_chunks = 0u64;
    while pushed < n {
        let m = chunk.min(n - pushed);
        for i in pushed..pushed + m {
            tx.push(ev(i));
        }
        pushed += m;
        tx.flush();
        flushed_chunks += 1;
        while read.load(Ordering::Acquire) + lag_chunks < flushed_chunks {
            std::thread::yield_now();
        }
    }
    tx.close();
    consumer.join().unwrap()
}

/// (b) At rate 1.0 with a consumer that keeps up (no laps), sampling delivers exactly what
/// exhaustive mode would: every event once, in order.
#[test]
fn rate_one_keeping_up_delivers_every_event_exactly() {
    let config = RingConfig::default(); // 2 MB of 128 KB chunks: 16 chunks of 16384 events
    let chunk = config.chunk_slots() as u64;
    let (tx, rx) = ring::sampling_channel(&config.with_mode(Mode::sampling(1.0))).unwrap();
    // Three laps of the ring; the producer stays at most 3 chunks ahead of the consumer.
    let n = 48 * chunk;
    let (out, stats) = throttled(tx, rx, n, chunk, 2);
    assert_eq!(stats.chunks_lapped, 0, "{stats:?}");
    assert_eq!(stats.delivered, n);
    let all: Vec<u64> = out.concat();
    assert_eq!(all.len() as u64, n);
    for (i, &w) in all.iter().enumerate() {
        assert_eq!(w, ev(i as u64).word(), "event {i}");
    }
}

/// (c) At rate 0.25 in bursts of 8, the consumer delivers a quarter of the events, each a real
/// pushed event, each burst a run of consecutive events, none twice.
///
/// Tolerance: a full 1024-event chunk yields exactly `round(0.25 * 1024) = 256` events (32
/// bursts of 8, evenly spread). A partial chunk of `len` events (only the final flush here)
/// yields `ceil(round(0.25 * len) / 8)` whole bursts, at most 8 more than `0.25 * len` (plus
/// rounding). So `|delivered - 0.25 * n| <= 8` per partial chunk, and here there is one.
#[test]
fn quarter_rate_delivers_a_quarter_of_real_events() {
    let (tx, rx) = sampling(256 << 10, 8 << 10, Mode::sampling(0.25));
    let chunk = 1024u64;
    let n = 100 * chunk + 500;
    let (out, stats) = throttled(tx, rx, n, chunk, 4);
    assert_eq!(stats.chunks_lapped, 0, "{stats:?}");
    let delivered: u64 = out.iter().map(|b| b.len() as u64).sum();
    assert_eq!(delivered, stats.delivered);
    let expected = 0.25 * n as f64;
    assert!(
        (delivered as f64 - expected).abs() <= 8.0,
        "delivered {delivered} of {n}, expected {expected} +- 8"
    );
    let mut seen = vec![false; n as usize];
    for burst in &out {
        assert!(
            !burst.is_empty() && burst.len() <= 8,
            "burst of {}",
            burst.len()
        );
        let first = index(burst[0], n).unwrap_or_else(|| panic!("not a pushed event: {burst:x?}"));
        for (k, &w) in burst.iter().enumerate() {
            assert_eq!(index(w, n), Some(first + k as u64), "burst {burst:x?}");
            assert!(
                !seen[(first + k as u64) as usize],
                "event {} twice",
                first + k as u64
            );
            seen[(first + k as u64) as usize] = true;
        }
    }
}

/// (c, lapping) With an unthrottled producer the consumer is lapped, but every word it delivers
/// is still a whole event that was pushed: never `CLEAR`, `MAGIC`, a torn or a stale-buffer word.
#[test]
fn lapped_sampling_delivers_only_pushed_events() {
    for (buffer, chunk) in [(256, 64), (2048, 512), (64 << 10, 8 << 10)] {
        let (mut tx, mut rx) = sampling(buffer, chunk, Mode::sampling(0.25));
        let n = 2_000_000u64;
        let consumer = std::thread::spawn(move || {
            let mut bad = None;
            let mut delivered = 0u64;
            let mut last = None;
            let mut check = |w: &[u64]| {
                for &x in w {
                    let i = index(x, n);
                    // Whole blocks only: every slice is a run of consecutive events and the
                    // stream only moves forward (a torn block would mix two laps).
                    let fresh = i.is_some_and(|i| last.is_none_or(|l| i > l));
                    if !fresh && bad.is_none() {
                        bad = Some(x);
                    }
                    last = i.or(last);
                }
                let first = index(w[0], n);
                if w.iter()
                    .enumerate()
                    .any(|(k, &x)| index(x, n) != first.map(|f| f + k as u64))
                {
                    bad = bad.or(Some(w[0]));
                }
                delivered += w.len() as u64;
            };
            loop {
                match rx.poll_with(&mut check) {
                    Poll::Closed => break,
                    Poll::Empty => std::thread::yield_now(),
                    Poll::Consumed(_) => {}
                }
            }
            (bad, delivered, rx.stats())
        });
        for i in 0..n {
            tx.push(ev(i));
        }
        tx.close();
        let (bad, delivered, stats) = consumer.join().unwrap();
        assert_eq!(
            bad, None,
            "{buffer}/{chunk}: delivered a word never pushed, out of order or out of its run"
        );
        assert!(bad != Some(CLEAR) && bad != Some(MAGIC));
        assert_eq!(delivered, stats.delivered);
        assert!(delivered <= n, "{buffer}/{chunk}: {stats:?}");
    }
}

/// (d) A consumer that sleeps while the producer writes three laps and flushes counts exactly
/// the two laps it can no longer read.
///
/// The producer handed over 12 blocks (11 at chunk starts, the last by the flush); the
/// handoff holds the last 4 of them (a block per chunk of the ring), so the consumer reads
/// those and counts the 8 before them: `2 * 4` chunks, 512 events. Anything less would read
/// overwritten blocks as if they held the old lap.
#[test]
fn sleeping_consumer_counts_the_laps_it_missed() {
    let (mut tx, mut rx) = sampling(2048, 512, Mode::sampling(1.0)); // 256 events, 4 chunks
    let cap = 256u64;
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..3 * cap {
            tx.push(ev(i));
        }
        tx.flush();
        done.send(tx).unwrap();
    });
    let mut tx = finished.recv_timeout(Duration::from_secs(60)).unwrap();
    let mut out = Vec::new();
    while let Poll::Consumed(_) = rx.poll_with(|w| out.extend_from_slice(w)) {}
    assert_eq!(rx.stats().chunks_lapped, 2 * 4, "{:?}", rx.stats());
    assert_eq!(rx.stats().events_lapped, 2 * cap, "{:?}", rx.stats());
    let last_lap: Vec<u64> = (2 * cap..3 * cap).map(|i| ev(i).word()).collect();
    assert_eq!(out, last_lap);
    tx.close();
    drain_to_close(&mut rx, |w| panic!("nothing left to deliver, got {w:x?}"));
}

/// (d, no flush) Without a flush the producer has handed over the chunks it finished: 11 of
/// the 12 it wrote (the last is handed over when it enters the next chunk or flushes). The
/// handoff holds the last 4 of them, so the consumer delivers positions 448..704 exactly and
/// counts the 7 blocks before them as lapped.
#[test]
fn sleeping_consumer_without_flush_reads_the_last_finished_chunks() {
    let (mut tx, mut rx) = sampling(2048, 512, Mode::sampling(1.0));
    let cap = 256u64;
    for i in 0..3 * cap {
        tx.push(ev(i));
    }
    let mut out = Vec::new();
    while let Poll::Consumed(_) = rx.poll_with(|w| out.extend_from_slice(w)) {}
    assert_eq!(rx.stats().chunks_lapped, 7, "{:?}", rx.stats());
    assert_eq!(rx.stats().events_lapped, 448, "{:?}", rx.stats());
    let finished: Vec<u64> = (448..704).map(|i| ev(i).word()).collect();
    assert_eq!(out, finished);
    tx.close();
    let mut rest = Vec::new();
    drain_to_close(&mut rx, |w| rest.extend_from_slice(w));
    assert_eq!(rest, (704..768).map(|i| ev(i).word()).collect::<Vec<_>>());
    assert_eq!(rx.stats().events_lapped, 448, "nothing more lost");
}

/// Regression (was a bug in `ring/consumer.rs`, `Consumer::sample`): when `len / bursts < burst` the evenly spread bursts
/// overlap, so at rate 1.0 a partial chunk (after a flush) or a burst size that does not divide
/// the chunk delivers some events twice, and `delivered` exceeds what was pushed.
#[test]
fn rate_one_never_delivers_an_event_twice() {
    // 10 events, bursts of 8: want 10, bursts 2, stride 5 -> slots 0..8 and 5..10.
    let (mut tx, mut rx) = sampling(2048, 512, Mode::sampling(1.0));
    for i in 0..10 {
        tx.push(ev(i));
    }
    tx.close();
    let mut out = Vec::new();
    drain_to_close(&mut rx, |w| out.extend_from_slice(w));
    let want: Vec<u64> = (0..10).map(|i| ev(i).word()).collect();
    assert_eq!(out, want, "delivered {} words for 10 events", out.len());

    // Full chunks of 64 events, bursts of 48: want 64, bursts 2, stride 32 -> 16 twice.
    let mode = Mode::Sampling {
        rate: 1.0,
        burst_words: 48,
    };
    let (mut tx, mut rx) = sampling(2048, 512, mode);
    for i in 0..192 {
        tx.push(ev(i));
    }
    tx.close();
    drain_to_close(&mut rx, |_| {});
    assert!(rx.stats().delivered <= 192, "{:?}", rx.stats());
}

/// Regression (was a bug in `ring/consumer.rs`, `Consumer::poll_with` lap skip): after skipping laps the consumer keeps its ring
/// index, but the first slots of the chunks it skipped still hold the old lap's words, so the
/// gate test (`slot(gate) != CLEAR`) passes for chunks the producer has not reached in the new
/// lap. The consumer then reads past the producer's (flushed, even closed) position and delivers
/// older events after newer ones, including events it counted as lapped.
#[test]
fn lap_skip_never_reads_past_the_producer() {
    let (mut tx, mut rx) = sampling(2048, 512, Mode::sampling(1.0)); // 256 events, 4 chunks
    let n = 3 * 256 + 32; // three laps and half a chunk
    for i in 0..n {
        tx.push(ev(i));
    }
    tx.close();
    let mut out = Vec::new();
    drain_to_close(&mut rx, |w| out.extend_from_slice(w));
    let idx: Vec<u64> = out.iter().map(|&w| index(w, n).unwrap()).collect();
    // Only the last 256 positions (544..800) are in the ring; a correct consumer delivers a
    // subset of them in increasing order. the consumer delivers 768..800 then 544..640.
    assert!(
        idx.windows(2).all(|p| p[0] < p[1]),
        "out of order: {:?}",
        idx.iter().step_by(8).collect::<Vec<_>>()
    );
    assert!(
        rx.stats().delivered <= 256,
        "{:?} after lapped chunks",
        rx.stats()
    );
}

/// Flushes hand over the part of a chunk written so far and the chunk's end hands over the
/// rest: at rate 1.0 with a consumer that keeps up, flushes at odd places (mid-chunk, twice in
/// one chunk, at a chunk start, across the wrap) still deliver every event once, in order.
#[test]
fn flushes_hand_over_partial_chunks_once() {
    let (mut tx, mut rx) = sampling(256, 64, Mode::sampling(1.0)); // 32 events, 4 chunks of 8
    let mut out = Vec::new();
    let mut i = 0u64;
    for run in [3u64, 2, 3, 8, 1, 13, 4, 16, 7] {
        for _ in 0..run {
            tx.push(ev(i));
            i += 1;
        }
        tx.flush();
        while let Poll::Consumed(_) = rx.poll_with(|w| out.extend_from_slice(w)) {}
    }
    tx.flush(); // nothing new: hands nothing over
    tx.close();
    drain_to_close(&mut rx, |w| out.extend_from_slice(w));
    assert_eq!(out, (0..i).map(|k| ev(k).word()).collect::<Vec<_>>());
    assert_eq!(rx.stats().chunks_lapped, 0);
    assert_eq!(rx.stats().delivered, i);
}

/// Adaptive sampling lowers the rate on the consumer side; the producer takes it up at its
/// next copy, so the chunk in progress is sampled at the new rate. A rate above the one the ring was made with is held to that one (its
/// blocks hold no more).
#[test]
fn the_producer_samples_at_the_rate_the_consumer_sets() {
    let (mut tx, mut rx) = sampling(64 << 10, 8 << 10, Mode::sampling(0.5)); // 1024-event chunks
    let chunk = 1024u64;
    let mut i = 0u64;
    let mut run = |tx: &mut Producer<true>, rx: &mut Consumer, chunks: u64| {
        let before = rx.stats().delivered;
        for _ in 0..chunks * chunk {
            tx.push(ev(i));
            i += 1;
            if i.is_multiple_of(chunk) {
                while let Poll::Consumed(_) = rx.poll_with(|_| {}) {}
            }
        }
        rx.stats().delivered - before
    };
    // The first chunk's block is handed over when the producer enters the second.
    let first = run(&mut tx, &mut rx, 4);
    assert_eq!(first, 3 * 512, "rate 0.5: three finished chunks");
    rx.set_rate(0.125);
    assert_eq!(rx.rate(), 0.125);
    let lowered = run(&mut tx, &mut rx, 4);
    assert_eq!(lowered, 4 * 128);
    rx.set_rate(1.0);
    assert_eq!(rx.rate(), 0.5, "held to the ring's rate");
    assert_eq!(run(&mut tx, &mut rx, 4), 4 * 512);
    assert_eq!(rx.stats().chunks_lapped, 0);
}

/// At rate 0 the ring has no handoff: nothing is copied, nothing delivered, and the stream
/// still ends when the producer closes.
#[test]
fn rate_zero_delivers_nothing_and_closes() {
    let (mut tx, mut rx) = sampling(256, 64, Mode::sampling(0.0));
    for i in 0..100 {
        tx.push(ev(i));
    }
    assert_eq!(rx.poll_with(|w| panic!("delivered {w:x?}")), Poll::Empty);
    tx.close();
    drain_to_close(&mut rx, |w| panic!("delivered {w:x?}"));
    assert_eq!(tx.stats().pushed, 100);
    assert_eq!(rx.stats().delivered, 0);
}

/// Regression (was a bug in `ring/consumer.rs`, `Consumer::poll_sampling`): a consumer that was lapped
/// once (an analyzer that slept through a few laps, as an idle analyzer does when a program
/// starts emitting) must pick the stream up again at the next chunk. The first sampling
/// consumer trusted a chunk's gate only if it had cleared that gate in the previous lap; after
/// a lap skip it had cleared none, so it delivered nothing ever again while the producer went
/// on (0 of 20,480 events here; 98% of a real workload's events in the evaluation). Now the
/// producer hands every chunk over in a block of its own, and the consumer reads blocks.
#[test]
fn lapped_consumer_picks_the_stream_up_again() {
    let (cap, chunk) = (4096u64, 512u64);
    let (mut tx, mut rx) = sampling(32 << 10, 4 << 10, Mode::sampling(1.0));
    let n = 5 * cap + 1000 + 40 * chunk;
    let mut i = 0u64;
    for _ in 0..5 * cap + 1000 {
        tx.push(ev(i));
        i += 1;
    }
    let mut first = Vec::new();
    while let Poll::Consumed(_) = rx.poll_with(|w| first.extend_from_slice(w)) {}
    assert!(rx.stats().chunks_lapped >= 3 * 8, "{:?}", rx.stats());
    // From here the consumer polls after every chunk the producer writes: it keeps up.
    let resumed_at = i;
    let mut later = Vec::new();
    for _ in 0..40 {
        for _ in 0..chunk {
            tx.push(ev(i));
            i += 1;
        }
        while let Poll::Consumed(_) = rx.poll_with(|w| later.extend_from_slice(w)) {}
    }
    let fresh: Vec<u64> = later
        .iter()
        .map(|&w| index(w, n).expect("only pushed events are delivered"))
        .filter(|&k| k >= resumed_at)
        .collect();
    // All but the last chunk or two (each is handed over when the producer enters the next),
    // with a slot per chunk to spare.
    assert!(
        fresh.len() as u64 >= 37 * (chunk - 1),
        "only {} of the {} events pushed after the lap were delivered; {:?}",
        fresh.len(),
        40 * chunk,
        rx.stats()
    );
    assert!(fresh.windows(2).all(|p| p[0] < p[1]), "out of order");
    assert!(
        rx.stats().chunks_lapped <= 5 * 8,
        "laps counted while keeping up: {:?}",
        rx.stats()
    );
}

/// A block is delivered from the consumer's copy, checked whole first: a producer that
/// comes round and rewrites the block's handoff slot, with the very words it held and with
/// fresh ones, while the consumer's callback runs changes nothing the poll delivers, and the
/// block read was not lapped. (The paper's in-place consumer read the ring while the producer
/// rewrote it: an ABA on a chunk's first word once hid such a lap.)
#[test]
fn a_block_is_delivered_as_it_was_when_read() {
    // 4 chunks of 8 slots, read whole in bursts of 4.
    let mode = Mode::Sampling {
        rate: 1.0,
        burst_words: 4,
    };
    let (mut tx, mut rx) = sampling(256, 64, mode);
    let (same, fresh) = (Event::marker(1).unwrap(), Event::marker(2).unwrap());
    for _ in 0..25 {
        tx.push(same);
    }
    // Block 0: read.
    assert!(matches!(rx.poll_with(|_| {}), Poll::Consumed(8)));
    // Block 1: after its first burst, the producer writes blocks 3 to 5 (5 over 1's slot).
    let mut bursts = 0;
    let mut words = Vec::new();
    rx.poll_with(|w| {
        words.extend_from_slice(w);
        bursts += 1;
        if bursts == 1 {
            for _ in 0..16 {
                tx.push(same);
            }
            for _ in 0..8 {
                tx.push(fresh);
            }
        }
    });
    assert_eq!(bursts, 2);
    assert_eq!(words, vec![same.word(); 8]);
    assert_eq!(rx.stats().chunks_lapped, 0);
    // Blocks 3, 4 and 5 were written meanwhile, not 6: block 2 is still whole.
    let mut next = Vec::new();
    assert!(matches!(
        rx.poll_with(|w| next.extend_from_slice(w)),
        Poll::Consumed(8)
    ));
    assert_eq!(next, vec![same.word(); 8]);
}

/// Regression (the first handoff's phase was the block's sequence number alone, 0 for every
/// ring's first block): each ring's first burst then began at the first event the thread
/// emitted, so a program's one-shot start (`main`'s call, its setup) was in every sample and
/// counted `1 / rate` times over (the evaluation's 5 % call-graph error went from 42 % to
/// 331 %). The next phase, drawn but never past `stride - burst`, took a range's first word
/// with a seventh of the rate and its last two never. Now every word is taken with the same
/// probability: over many rings, the first event is sampled about as often as the rate says
/// (56 of 1024 words: 5.5 %, 22 of 400 rings expected), and the first burst starts anywhere.
#[test]
fn the_first_event_is_sampled_as_often_as_any() {
    let rings = 400;
    let (mut first, mut last) = (0, 0);
    let mut taken = 0u64;
    let mut starts = std::collections::HashSet::new();
    for _ in 0..rings {
        let (mut tx, mut rx) = sampling(64 << 10, 8 << 10, Mode::sampling(0.05)); // 1024 a chunk
        for i in 0..1025 {
            tx.push(ev(i));
        }
        let mut out = Vec::new();
        while let Poll::Consumed(_) = rx.poll_with(|w| out.extend_from_slice(w)) {}
        taken += out.len() as u64;
        first += u64::from(out.contains(&ev(0).word()));
        last += u64::from(out.contains(&ev(1023).word()));
        starts.insert(index(out[0], 1025));
    }
    assert_eq!(
        taken,
        rings * 56,
        "7 bursts of 8 from each 1024-event chunk"
    );
    // 22 expected, standard deviation 4.6: each bound is about four of them away.
    assert!(
        (5..=45).contains(&first),
        "the first event: {first} of {rings} rings"
    );
    assert!(
        (5..=45).contains(&last),
        "the last event: {last} of {rings} rings"
    );
    assert!(starts.len() > 100, "{} places", starts.len());
}
