//! Model checks of the hand-off protocols with loom: every interleaving (up to a preemption
//! bound) and every value the C++ memory model lets each atomic load return.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p cabprof-cab --test loom --release
//! ```
//!
//! Under `cfg(loom)`, `cabprof_cab::sync` swaps every atomic, fence and spin hint for loom's, so these
//! models check the same source the library ships. The rings are the smallest allowed (4 chunks
//! of 64 bytes: 32 events, 8 per chunk) and the event counts small: loom's state space grows
//! exponentially with both. The preemption bound is 3 (the whole file takes 6 to 7 minutes
//! optimized on 2 cores in CI); `LOOM_PREEMPTIONS=<n>` overrides it.
//!
//! Its own test binary, not a module of `tests/it/`: built only with `--cfg loom` (its own
//! target dir in CI), which swaps the atomics of the whole crate.

#![cfg(loom)]

use cabprof_cab::event::{decode, Event, EventKind};
use cabprof_cab::fastforward::FastForward;
use cabprof_cab::nway::NWay;
use cabprof_cab::ring::{self, Cab};
use cabprof_cab::{EventConsumer, EventProducer, Mode, Poll, RingConfig, Transport};
use loom::model::Builder;

/// The smallest ring: 32 slots, 4 chunks (or sub-buffers) of 8.
fn tiny() -> RingConfig {
    RingConfig::new(256, 64)
}

fn ev(i: u64) -> Event {
    Event::marker(i + 1).unwrap()
}

fn words(n: u64) -> Vec<u64> {
    (0..n).map(|i| ev(i).word()).collect()
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let bound = std::env::var("LOOM_PREEMPTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    check(Some(bound), f);
}

/// Run a loom model with `preemption_bound`, printing how many executions it explored (so a
/// run shows how much was checked, with `--nocapture`).
fn check(preemption_bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut b = Builder::new();
    b.preemption_bound = preemption_bound;
    b.max_branches = 100_000;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    b.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    eprintln!(
        "explored {} executions",
        runs.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// Poll until `Closed`, yielding to the model's scheduler on `Empty` (a spin loop loom can see).
fn drain<C: EventConsumer>(rx: &mut C) -> Vec<u64> {
    let mut out = Vec::new();
    loop {
        match rx.poll(&mut |w| out.extend_from_slice(w)) {
            Poll::Closed => return out,
            Poll::Empty => loom::thread::yield_now(),
            Poll::Consumed(_) => {}
        }
    }
}

/// A producer thread pushes `n` events, flushing after the first `flush_after` (if given), then
/// closes; the model's main thread drains. Every event arrives once, in order.
fn handoff<T: Transport>(n: u64, flush_after: Option<u64>)
where
    T::Producer: 'static,
{
    model(move || {
        let (mut tx, mut rx) = T::channel(&tiny()).unwrap();
        let producer = loom::thread::spawn(move || {
            for i in 0..n {
                if Some(i) == flush_after {
                    tx.flush();
                }
                tx.push(ev(i));
            }
            tx.close();
            tx.stats()
        });
        let out = drain(&mut rx);
        let stats = producer.join().unwrap();
        assert_eq!(out, words(n), "{}", T::NAME);
        assert_eq!((stats.pushed, stats.dropped), (n, 0), "{}", T::NAME);
    });
}

/// (a) CAB exhaustive: 20 events cross two chunk boundaries and open chunks by the gate (chunk
/// `n + 2`'s first slot) as well as by the final close.
#[test]
fn cab_exhaustive_handoff_across_chunks() {
    handoff::<Cab>(20, None);
}

/// (b) CAB flush then close: push 3, flush, push 2, close; all 5 arrive, in order, once.
#[test]
fn cab_flush_then_close() {
    handoff::<Cab>(5, Some(3));
}

/// CAB full ring: 36 events through 32 slots, so the producer spins, flushes its partial chunk
/// and blocks until the slot two chunks ahead is cleared (paper Fig. 3b).
#[test]
fn cab_producer_blocks_on_full_ring() {
    handoff::<Cab>(36, None);
}

/// A growing CAB ring (`ring::growing_channel`) of sizes 32 slots (4 chunks of 8) and 64 (8 of
/// 8), which the producer goes through as `script` says (its first entry the size it starts
/// at, the next one the size it switches to at its first wrap); it pushes `n` events, flushing
/// before event `flush_after`, and closes while the consumer drains. Every event arrives once,
/// in order, across the switch, and the memory granted for the larger size is given back.
fn growing_handoff(script: Vec<usize>, n: u64, flush_after: Option<u64>) {
    model(move || {
        let granted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        struct Held(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Held {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let counter = granted.clone();
        let grant: ring::Grant = Box::new(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(Box::new(Held(counter.clone())))
        });
        let growth = ring::Growth::new(256, grant).scripted(script.clone());
        let (mut tx, mut rx) = ring::growing_channel(&RingConfig::new(512, 64), growth).unwrap();
        let producer = loom::thread::spawn(move || {
            for i in 0..n {
                if Some(i) == flush_after {
                    tx.flush();
                }
                tx.push(ev(i));
            }
            tx.close();
            tx.stats()
        });
        let out = drain(&mut rx);
        let stats = producer.join().unwrap();
        assert_eq!(out, words(n));
        assert_eq!((stats.pushed, stats.dropped), (n, 0));
        let want = if script[1] > script[0] {
            (1, 0)
        } else {
            (0, 1)
        };
        assert_eq!(rx.resizes(), want);
        drop(rx);
        assert_eq!(granted.load(std::sync::atomic::Ordering::Relaxed), 0);
    });
}

/// A growing ring switches from 32 to 64 slots at its first wrap while the consumer may be
/// anywhere in the first segment: 36 events, the last 4 in the new segment.
#[test]
fn cab_grows_across_a_switch() {
    growing_handoff(vec![0, 1], 36, None);
}

/// As above with a flush at the very end of the first segment, before the wrap: the consumer
/// can reach the switch position by `published` before the switch exists, then find a larger
/// `published` (the close) while the switch is still unseen by its first load; it must not
/// take the old segment's first slots for what follows.
#[test]
fn cab_grows_across_a_switch_after_a_flush() {
    growing_handoff(vec![0, 1], 34, Some(32));
}

/// A growing ring shrinks from 64 to 32 slots at its first wrap: 68 events, the last 4 in the
/// smaller segment.
#[test]
fn cab_shrinks_across_a_switch() {
    growing_handoff(vec![1, 0], 68, None);
}

/// A sampling producer pushes 40 events (more than the 32-slot ring holds) and closes while the
/// consumer reads the handoff. Returns every delivered word.
fn sampling_wrap() -> Vec<u64> {
    // Two words of each chunk: the copies' loads and stores are most of the model's steps.
    let config = tiny().with_mode(Mode::Sampling {
        rate: 0.25,
        burst_words: 2,
    });
    let (mut tx, mut rx) = ring::sampling_channel(&config).unwrap();
    let producer = loom::thread::spawn(move || {
        for i in 0..40 {
            tx.push(ev(i));
        }
        tx.close();
    });
    let out = drain(&mut rx);
    producer.join().unwrap();
    out
}

fn is_pushed(word: u64) -> bool {
    matches!(decode(word), Some(EventKind::Marker { value }) if (1..=40).contains(&value))
}

/// (c) CAB sampling wraps: every delivered word is a whole pushed event, through the ring's
/// wrap, the producer's copies into the handoff at each chunk start and the close's flush.
#[test]
fn cab_sampling_wrap_delivers_only_pushed_events() {
    model(|| {
        for w in sampling_wrap() {
            assert!(is_pushed(w), "delivered {w:#x}, never pushed");
        }
    });
}

/// The handoff's seqlock when the producer laps the consumer: with rate 1.0 every chunk's
/// 8 events go to one of 4 handoff blocks. The main thread first pushes 0..32 (blocks 0, 1
/// and 2 done), reads block 0, and pushes 32..41 (block 3, and block 4 into block 0's slot).
/// Then the producer pushes 41..48 and closes, whose flush writes block 5 into the slot block
/// 1 has, while the consumer reads block 1. Whatever the interleaving and whatever values the
/// memory model lets the consumer's loads see:
///
/// - the poll delivers block 1 whole (events 8..16), or nothing (torn, counted as lapped), or,
///   when block 5 was done before the poll began, block 2 whole with block 1 counted as
///   skipped; never a mix of blocks 1 and 5;
/// - afterwards, every block is delivered or counted lost: delivered + 8 x lapped = 48.
///
/// Run twice: as is, and with the consumer yielding first, so that the exploration starts
/// from the schedules where the producer runs ahead and branches from there.
#[test]
fn cab_sampling_torn_blocks_are_never_delivered() {
    torn_blocks(false);
    torn_blocks(true);
}

fn torn_blocks(yield_first: bool) {
    fn markers(words: &[u64]) -> Vec<u64> {
        words
            .iter()
            .map(|&w| match decode(w) {
                Some(EventKind::Marker { value }) => value - 1,
                _ => panic!("delivered {w:#x}, never pushed"),
            })
            .collect()
    }
    model(move || {
        let (mut tx, mut rx) =
            ring::sampling_channel(&tiny().with_mode(Mode::sampling(1.0))).unwrap();
        for i in 0..32 {
            tx.push(ev(i));
        }
        let mut got = Vec::new();
        assert_eq!(
            rx.poll_with(|w| got.extend_from_slice(w)),
            Poll::Consumed(8)
        );
        assert_eq!(
            markers(&got),
            (0..8).collect::<Vec<_>>(),
            "block 0, read alone"
        );
        for i in 32..41 {
            tx.push(ev(i));
        }
        let producer = loom::thread::spawn(move || {
            for i in 41..48 {
                tx.push(ev(i));
            }
            tx.close();
        });
        if yield_first {
            loom::thread::yield_now();
        }
        let mut block = Vec::new();
        let poll = rx.poll_with(|w| block.extend_from_slice(w));
        let block = markers(&block);
        let lapped = rx.stats().chunks_lapped;
        match (poll, lapped) {
            (Poll::Consumed(8), 0) => assert_eq!(block, (8..16).collect::<Vec<_>>(), "torn"),
            (Poll::Consumed(8), 1) => assert_eq!(block, (16..24).collect::<Vec<_>>(), "torn"),
            (Poll::Consumed(0), 1) => assert!(block.is_empty()),
            other => panic!("{other:?}: {block:?}"),
        }
        producer.join().unwrap();
        let mut delivered = 8 + block.len() as u64;
        delivered += drain(&mut rx).len() as u64;
        let lapped = rx.stats().chunks_lapped;
        assert_eq!(delivered + 8 * lapped, 48, "{:?}", rx.stats());
    });
}

/// N-way: 12 events fill one sub-buffer (handed over by the swap) and half of the next (handed
/// over by the close).
#[test]
fn nway_swap_and_close() {
    handoff::<NWay>(12, None);
}

/// N-way flush mid-sub-buffer: the consumer delivers the flushed part, the producer goes on in
/// the same sub-buffer, and the rest follows; nothing twice, nothing skipped.
#[test]
fn nway_flush_then_continue_in_the_same_sub_buffer() {
    handoff::<NWay>(6, Some(3));
}

/// N-way wrap: 36 events go round all four sub-buffers, so the producer must wait for the
/// consumer to release sub-buffer 0 before reusing it.
#[test]
fn nway_producer_waits_for_release_on_wrap() {
    handoff::<NWay>(36, None);
}

/// FastForward: 16 events pass the slip distances of a 32-slot ring (dangerous 4, safe 12), so
/// the consumer reads by the slip rule and, after the close, by the flushed position.
#[test]
fn fastforward_handoff_with_slipping() {
    handoff::<FastForward>(16, None);
}

/// FastForward full queue: 36 events through 32 slots, so the producer waits for the consumer
/// to empty a slot.
#[test]
fn fastforward_producer_waits_on_full_queue() {
    handoff::<FastForward>(36, None);
}

/// Like [`model`] with no preemption bound: the pending-buffer models below are small enough
/// for loom to explore every interleaving (the bound saturates at about 15: 675 and 6652
/// executions, under a second).
fn model_unbounded(f: impl Fn() + Sync + Send + 'static) {
    check(None, f);
}

/// Sequential mode's pending buffer (`runtime::pending`), run by the same functions as the
/// runtime: an owner thread pushes `n` words into a `capacity`-word buffer; when a push finds
/// it full, the owner locks its slot, flushes (analyzes what a snapshot has not, empties the
/// buffer) and analyzes that word directly, as `emit`'s slow path does; at the end it flushes
/// once more, as a thread's exit does. `None` in the slot: `finish` took the analysis.
mod pending {
    use cabprof_cab::runtime::pending::{self, Pending};
    use loom::sync::{Arc, Mutex};

    /// A thread's inline analysis: what it analyzed, in order, and how many of the pending
    /// words a snapshot or `finish` already analyzed.
    #[derive(Default)]
    pub(super) struct State {
        pub(super) analyzed: Vec<u64>,
        consumed: usize,
    }

    pub(super) type Slot = Arc<Mutex<Option<State>>>;

    /// The `i`th word (never 0, the buffer's initial value).
    pub(super) fn word(i: usize) -> u64 {
        i as u64 + 1
    }

    pub(super) fn expected(n: usize) -> Vec<u64> {
        (0..n).map(word).collect()
    }

    /// The owner's flush, holding the slot's lock, then `words` (`InlineAnalysis::consume`).
    fn consume(slot: &Slot, buf: &Pending, words: &[u64]) {
        let mut slot = slot.lock().unwrap();
        match &mut *slot {
            Some(state) => {
                let analyzed = &mut state.analyzed;
                pending::flush(buf, &mut state.consumed, |w| analyzed.extend_from_slice(w));
                state.analyzed.extend_from_slice(words);
            }
            None => buf.reset(),
        }
    }

    /// Spawn the owner: `n` words, then the exit's flush.
    pub(super) fn owner(
        n: usize,
        capacity: usize,
    ) -> (Slot, Arc<Pending>, loom::thread::JoinHandle<()>) {
        let slot: Slot = Arc::new(Mutex::new(Some(State::default())));
        let buf = Arc::new(Pending::new(capacity));
        let (s, b) = (slot.clone(), buf.clone());
        let handle = loom::thread::spawn(move || {
            for i in 0..n {
                if !b.push(word(i)) {
                    consume(&s, &b, &[word(i)]);
                }
            }
            consume(&s, &b, &[]);
        });
        (slot, buf, handle)
    }

    /// A snapshot: analyze the pending words under the slot's lock, then copy the results.
    pub(super) fn snapshot(slot: &Slot, buf: &Pending) -> Vec<u64> {
        let mut slot = slot.lock().unwrap();
        let state = slot.as_mut().expect("only finish takes the analysis");
        let analyzed = &mut state.analyzed;
        pending::drain(buf, &mut state.consumed, |w| analyzed.extend_from_slice(w));
        state.analyzed.clone()
    }

    /// `finish` on a live thread (`InlineRegistry::take_live`): take the analysis, then
    /// analyze the pending words before unlocking. (Draining after unlocking lets the owner
    /// flush into the taken slot's `None`, empty the buffer and refill it in between: loom
    /// then finds `finish` analyzing a later word without the earlier ones.)
    pub(super) fn finish(slot: &Slot, buf: &Pending) -> Vec<u64> {
        let mut guard = slot.lock().unwrap();
        let mut state = guard.take().expect("taken once");
        let analyzed = &mut state.analyzed;
        pending::drain(buf, &mut state.consumed, |w| analyzed.extend_from_slice(w));
        drop(guard);
        state.analyzed
    }
}

/// Sequential mode, snapshots while the owner runs: 7 words through a 2-word buffer (the
/// owner finds it full twice, so it empties it twice while running, and once more at its
/// exit), three snapshots concurrently, then `finish` after the owner's exit. Each snapshot is
/// a prefix of the words and no shorter than the one before; at the end every word was
/// analyzed exactly once, in order, though snapshots analyzed some of them out of the owner's
/// buffer.
#[test]
fn pending_snapshot_while_the_owner_runs() {
    model_unbounded(|| {
        let n = 7;
        let (slot, buf, owner) = pending::owner(n, 2);
        let expected = pending::expected(n);
        let mut before = Vec::new();
        for _ in 0..3 {
            let seen = pending::snapshot(&slot, &buf);
            assert_eq!(seen, expected[..seen.len()], "snapshot");
            assert!(seen.len() >= before.len(), "{seen:?} after {before:?}");
            before = seen;
        }
        owner.join().unwrap();
        assert_eq!(pending::finish(&slot, &buf), expected);
    });
}

/// Sequential mode, `finish` takes a live thread's analysis while the owner still appends
/// (after a snapshot, so the taken analysis has `consumed` words): what `finish` analyzed is
/// a prefix of the words, each once; the owner's later words, and its flushes that find the
/// slot empty, analyze nothing.
#[test]
fn pending_finish_while_the_owner_appends() {
    model_unbounded(|| {
        let n = 7;
        let (slot, buf, owner) = pending::owner(n, 2);
        let expected = pending::expected(n);
        let seen = pending::snapshot(&slot, &buf);
        assert_eq!(seen, expected[..seen.len()], "snapshot");
        let taken = pending::finish(&slot, &buf);
        assert_eq!(taken, expected[..taken.len()], "finish");
        assert!(taken.len() >= seen.len(), "{taken:?} after {seen:?}");
        owner.join().unwrap();
        assert!(slot.lock().unwrap().is_none());
    });
}
