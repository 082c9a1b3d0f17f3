//! Stress: 10^8 events across two threads through the exhaustive CAB ring, checking exact count,
//! order and sum (every word must be its predecessor's successor).
//!
//! 10^8 events take about 7 s in a debug build on the 2-core CI machine (under a second
//! optimized), so the size is the same in every build. `CAB_STRESS_EVENTS=<n>` scales both tests
//! (the 64 KB ring runs a tenth of it), e.g. `CAB_STRESS_EVENTS=1000000000 cargo test -p
//! cabprof-cab --release --test it stress::` for a longer soak.

use cabprof_cab::event::Event;
use cabprof_cab::{ring, Poll, RingConfig};

/// Events for the main run: 10^8, or `CAB_STRESS_EVENTS`.
fn events() -> u64 {
    match std::env::var("CAB_STRESS_EVENTS") {
        Ok(v) => v
            .parse()
            .expect("CAB_STRESS_EVENTS must be a number of events"),
        Err(_) => 100_000_000,
    }
}

/// Push `n` events (marker `i + 1`) through a ring of `config` and check them on the other side.
fn run(config: RingConfig, n: u64) {
    let (mut tx, mut rx) = ring::channel(&config).unwrap();
    // Marker words are `TAG | payload`: event `i` is `base + i + 1`.
    let base = Event::marker(0).unwrap().word();
    let consumer = std::thread::spawn(move || {
        let mut expect = base + 1;
        let mut sum = 0u64;
        let mut first_bad = None;
        loop {
            let r = rx.poll_with(|words| {
                for &w in words {
                    if w != expect && first_bad.is_none() {
                        first_bad = Some((expect - base - 1, w));
                    }
                    sum = sum.wrapping_add(w - base);
                    expect += 1;
                }
            });
            match r {
                Poll::Closed => break,
                Poll::Empty => std::thread::yield_now(),
                Poll::Consumed(_) => {}
            }
        }
        (expect - base - 1, sum, first_bad, rx.stats())
    });
    let started = std::time::Instant::now();
    for i in 1..=n {
        // Built from the raw word: `Event::marker` range-checks, and this loop is the stress.
        tx.push(Event::from_word(base + i).unwrap_or_else(|| unreachable!()));
    }
    tx.close();
    let stats = tx.stats();
    let (count, sum, first_bad, rx_stats) = consumer.join().unwrap();
    eprintln!(
        "stress {config:?}: {n} events in {:.2?}, {} producer blocks ({:.2?} blocked)",
        started.elapsed(),
        stats.blocks,
        stats.blocked
    );
    assert_eq!(
        first_bad, None,
        "{config:?}: first (index, word) out of order"
    );
    assert_eq!(count, n, "{config:?}");
    assert_eq!(sum, n.wrapping_mul(n + 1) / 2, "{config:?}");
    assert_eq!(rx_stats.delivered, n);
    assert_eq!(stats.pushed, n);
    assert_eq!(stats.dropped, 0);
}

/// The paper's ring (2 MB of 128 KB chunks).
#[test]
fn hundred_million_events_default_ring() {
    run(RingConfig::default(), events());
}

/// A small ring (64 KB of 8 KB chunks), where wraps and blocking are frequent.
#[test]
fn ten_million_events_64k_ring() {
    run(RingConfig::new(64 << 10, 8 << 10), events() / 10);
}
