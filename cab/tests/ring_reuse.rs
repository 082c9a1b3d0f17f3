//! Freed rings are kept, zeroed, for the next ring of the same size (Unix): a new thread's
//! ring then costs it no page faults, and none of the last owner's words reach the new
//! consumer. Tests in their own binary, one at a time, because the kept rings are
//! process-wide: each test then knows which rings are kept when it starts one.
//!
//! Its own test binary, not a module of `tests/it/`: the kept rings are process-wide, and other
//! tests' sessions would take or leave some.

#![cfg(unix)]

use cabprof_cab::event::{decode, Event, EventKind};
use cabprof_cab::ring;
use cabprof_cab::{Mode, Poll, RingConfig};
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's minor page faults so far (Linux), or `None`.
fn thread_minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// A 1 MiB exhaustive ring of 64 KiB chunks: below the huge-page size, so it is in 4 KiB
/// pages whatever the kernel's transparent huge page mode.
fn config() -> RingConfig {
    RingConfig::new(1 << 20, 64 << 10)
}

/// Events pushed per round: half the ring (512 KiB, 128 pages), which a fresh exhaustive
/// ring takes without waiting for its consumer.
const EVENTS: u64 = (1 << 20) / 8 / 2;

/// Push `EVENTS` markers starting at `base` on a new ring; the faults the pushes took.
fn fill(base: u64) -> (Option<u64>, ring::Producer, ring::Consumer) {
    let (mut p, c) = ring::channel(&config()).unwrap();
    let before = thread_minor_faults();
    for i in 0..EVENTS {
        p.push(Event::marker(base + i).unwrap());
    }
    let after = thread_minor_faults();
    (after.zip(before).map(|(a, b)| a - b), p, c)
}

#[test]
fn a_freed_ring_is_reused_zeroed_and_costs_no_faults() {
    let _g = serial();
    // First owner: writes half the ring and goes away with nothing read.
    let (first_faults, p, c) = fill(1_000_000);
    drop(p);
    drop(c);
    // Next owner: the same size. On its own thread: a producer that finds a stale word where
    // it expects a free slot waits for a consumer that never reads.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(fill(1));
    });
    let (second_faults, mut p, mut c) = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the next owner's producer hung on a stale word");
    p.close();
    let mut seen = Vec::new();
    c.drain_live(|words| {
        seen.extend(words.iter().map(|&w| match decode(w) {
            Some(EventKind::Marker { value }) => value,
            other => panic!("not a marker: {other:?}"),
        }))
    });
    assert_eq!(
        seen,
        (1..=EVENTS).collect::<Vec<_>>(),
        "the new consumer reads exactly the new owner's events"
    );
    if let (Some(first), Some(second)) = (first_faults, second_faults) {
        eprintln!("half a 1 MiB ring: {first} faults fresh, {second} reused");
        assert!(
            first >= 128,
            "a fresh ring faults in its pages: {first} faults"
        );
        assert!(second <= 8, "a reused ring takes no faults: {second}");
    }
}

fn marker_values(words: &[u64], into: &mut Vec<u64>) {
    into.extend(words.iter().map(|&w| match decode(w) {
        Some(EventKind::Marker { value }) => value,
        other => panic!("not a marker: {other:?}"),
    }));
}

/// Push markers `base..base + events` into a new ring of `cfg`, polling its consumer after
/// every `step` pushes (so an exhaustive producer never waits), and return what the consumer
/// read: all of it if `finish`, else what it had read when the ring is dropped with the rest
/// unread.
fn round(cfg: &RingConfig, base: u64, events: u64, finish: bool) -> Vec<u64> {
    let step = (cfg.chunk_bytes / 8) as u64;
    let mut seen = Vec::new();
    macro_rules! run {
        ($p:ident, $c:ident) => {{
            for i in 0..events {
                $p.push(Event::marker(base + i).unwrap());
                if (i + 1) % step == 0 {
                    $c.poll_with(|ws| marker_values(ws, &mut seen));
                }
            }
            if finish {
                $p.close();
                while let Poll::Consumed(_) | Poll::Empty =
                    $c.poll_with(|ws| marker_values(ws, &mut seen))
                {}
            }
        }};
    }
    if matches!(cfg.mode, Mode::Exhaustive) {
        let (mut p, mut c) = ring::channel(cfg).unwrap();
        run!(p, c);
    } else {
        let (mut p, mut c) = ring::sampling_channel(cfg).unwrap();
        run!(p, c);
    }
    seen
}

/// Rings that lapped (every slot written; sampling: chunk starts armed) and rings that did
/// not, each freed with events unread and its memory reused: the next owner's consumer reads
/// exactly the next owner's events, over more than a lap.
#[test]
fn reused_rings_hold_nothing_of_their_last_owner() {
    let _g = serial();
    // Sizes of their own, so these never share a kept ring with the other test.
    let words = (512u64 << 10) / 8;
    for cfg in [
        RingConfig::new(512 << 10, 32 << 10),
        RingConfig::new(512 << 10, 32 << 10).with_mode(Mode::sampling(1.0)),
    ] {
        // Past the wrap by a chunk: what is unread then spans the wrap.
        for first in [words + words / 16, 3 * words / 2, words / 3] {
            round(&cfg, 1_000_000_000, first, false);
            let n = 5 * words / 4;
            // On its own thread: an exhaustive producer that finds a stale word where it
            // expects a free slot waits for a consumer that will never clear it.
            let (tx, rx) = std::sync::mpsc::channel();
            let c = cfg;
            std::thread::spawn(move || tx.send(round(&c, 1, n, true)));
            let seen = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| {
                    panic!(
                        "{:?}: the next owner's producer hung on a stale word",
                        cfg.mode
                    )
                });
            assert_eq!(
                seen,
                (1..=n).collect::<Vec<_>>(),
                "{:?}, after a first owner of {first} events",
                cfg.mode
            );
        }
    }
}

/// A sampling producer arms the start of the chunk after the one it is in (`MAGIC`), ahead of
/// its cursor. Left in a kept ring, such a word is harmless to a next owner of the same chunk
/// size (it arms that slot itself before reaching it), but not to one of the same ring size
/// with longer chunks: there it lies inside a chunk, and the producer takes it for an armed
/// chunk start, hands over half a chunk as if it were a whole one and arms chunk starts off
/// the chunk grid from there on, lap after lap. So the consumer would read a block of the
/// wrong events where it expects chunk 1.
#[test]
fn a_reused_sampling_ring_keeps_no_chunk_start_armed_ahead() {
    let _g = serial();
    // 32,768 slots; a size of its own, so no other test's ring is kept for it.
    let buffer = 256 << 10;
    let short = RingConfig::new(buffer, 32 << 10).with_mode(Mode::sampling(1.0));
    let long = RingConfig::new(buffer, 64 << 10).with_mode(Mode::sampling(1.0));
    let (cap, chunk) = (buffer as u64 / 8, (64 << 10) / 8);
    // First owner, 4,096-slot chunks: in chunk 2, so chunk 3's start (slot 12,288) is armed.
    {
        let (mut p, _c) = ring::sampling_channel(&short).unwrap();
        for i in 0..2 * 4096 + 100 {
            p.push(Event::marker(1_000_000 + i).unwrap());
        }
    }
    // Next owner, 8,192-slot chunks: slot 12,288 lies inside chunk 1 (and, lap after lap,
    // a stale `MAGIC` there would be carried a chunk on: to slot 4,096 of the next lap).
    let (mut p, mut c) = ring::sampling_channel(&long).unwrap();
    let before = thread_minor_faults();
    for i in 0..chunk {
        p.push(Event::marker(i).unwrap());
    }
    let faults = thread_minor_faults().zip(before).map(|(a, b)| a - b);
    // Into chunk 2: chunk 0 is ready; read it.
    for i in chunk..2 * chunk + 1 {
        p.push(Event::marker(i).unwrap());
    }
    let mut seen = Vec::new();
    assert!(matches!(
        c.poll_with(|ws| marker_values(ws, &mut seen)),
        Poll::Consumed(_)
    ));
    assert_eq!(seen, (0..chunk).collect::<Vec<_>>());
    // On through the wrap, past slot 4,096 of the next lap: chunk 1's block, handed over
    // when the producer entered chunk 2, is still in the handoff.
    for i in 2 * chunk + 1..cap + 4096 + 1 {
        p.push(Event::marker(i).unwrap());
    }
    seen.clear();
    assert!(matches!(
        c.poll_with(|ws| marker_values(ws, &mut seen)),
        Poll::Consumed(_)
    ));
    assert_eq!(c.stats().chunks_lapped, 0, "chunk 1 was not overwritten");
    assert_eq!(
        seen,
        (chunk..2 * chunk).collect::<Vec<_>>(),
        "chunk 1 of the first lap, read almost a lap later"
    );
    // The ring was the kept one (else this proves nothing): the 64 KiB the first owner
    // wrote took no faults, where a fresh ring takes two per 4 KiB page.
    if let Some(f) = faults {
        assert!(f <= 8, "the ring was not the kept one: {f} faults");
    }
}
