//! A channel message's latency: the wrapped channels carry each message with its send time
//! ([`Stamped`]), taken when the send is called (a blocked send's message gets in later, when
//! the wrapped channel does not say), and the receive that takes it out writes the time since,
//! for the channel's creation site.
//!
//! The send time is one plain read of the cheap counter (`cabprof_cab::clock::now`, no fence),
//! taken only while a session records with the waits analysis ([`set_stamping`]); otherwise it
//! is 0, "not stamped", and the receive skips it. The receive reads the counter again and
//! turns the difference into nanoseconds with this module's own estimate of the counter's
//! rate ([`ns`]), refined as the process runs: a waits session without the time analysis has
//! no calibration of its own.

use super::sites::{self, Site};
use cabprof_cab::clock;
use cabprof_cab::event::{Event, WaitKind};
use cabprof_cab::runtime::{emit, recording};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Whether sends stamp their messages: a session with the waits analysis is starting or
/// records. A session dropped without `finish` leaves it set until the next one starts, so a
/// send also asks whether a session records.
static STAMPING: AtomicBool = AtomicBool::new(false);

/// The counter when the waits session began: a message stamped before it (in an earlier
/// session) is not this session's.
static SINCE: AtomicU64 = AtomicU64::new(0);

/// A session that records with (`on`) or without the waits analysis starts, or it ends
/// (`false`).
pub(crate) fn set_stamping(on: bool) {
    if on {
        // The counter's rate is measured from here, before the first message needs it.
        anchor();
        SINCE.store(clock::now(), Ordering::Relaxed);
    }
    STAMPING.store(on, Ordering::Relaxed);
}

/// A message and the counter when it was sent (0: not stamped).
#[derive(Debug)]
pub(super) struct Stamped<T> {
    pub(super) msg: T,
    at: u64,
}

impl<T> Stamped<T> {
    /// `msg` with the time now, if sends stamp and a session records (one load and one
    /// branch when no waits session ran).
    #[inline(always)]
    pub(super) fn new(msg: T) -> Stamped<T> {
        let at = if STAMPING.load(Ordering::Relaxed) && recording() {
            // Never 0, which means "not stamped".
            clock::now() | 1
        } else {
            0
        };
        Stamped { msg, at }
    }

    /// The message, received from the channel made at `site`: its latency is written if it
    /// was stamped.
    #[inline(always)]
    pub(super) fn open(self, site: &ChannelSite) -> T {
        if self.at != 0 {
            received(self.at, site);
        }
        self.msg
    }
}

/// A stamped message sent at `at` was received now: its latency, for `site`, if a session
/// still records.
#[cold]
#[inline(never)]
fn received(at: u64, site: &ChannelSite) {
    let now = clock::now();
    // Sent in an earlier session: not this one's message, nor its wait.
    if !recording() || at < SINCE.load(Ordering::Relaxed) {
        return;
    }
    // A counter read on another core a little behind this one's: no time, not a huge one.
    let ticks = now.saturating_sub(at);
    emit(Event::wait(WaitKind::Latency, 1, site.number()));
    emit(Event::wait_ns(ns(ticks, now)));
}

/// A channel's creation site and, once asked, its number: a receive that writes a latency
/// asks for it on every message, so it is kept beside the site rather than looked up in the
/// table of sites each time.
#[derive(Debug)]
pub(super) struct ChannelSite {
    pub(super) site: Site,
    /// 0 until the first latency asks.
    number: AtomicU32,
}

impl ChannelSite {
    pub(super) fn new(site: Site) -> ChannelSite {
        ChannelSite {
            site,
            number: AtomicU32::new(0),
        }
    }

    fn number(&self) -> u32 {
        // Relaxed: the number is the same whoever computes it, so a race only asks twice.
        match self.number.load(Ordering::Relaxed) {
            0 => {
                let n = sites::number(self.site);
                self.number.store(n, Ordering::Relaxed);
                n
            }
            n => n,
        }
    }
}

impl Clone for ChannelSite {
    fn clone(&self) -> Self {
        ChannelSite {
            site: self.site,
            number: AtomicU32::new(self.number.load(Ordering::Relaxed)),
        }
    }
}

/// A (counter, monotonic clock) pair read close together: of a few tries, the one whose
/// clock read took the fewest ticks, the counter at its middle.
fn pair() -> (u64, Instant) {
    let mut best = (u64::MAX, 0, Instant::now());
    for _ in 0..4 {
        let a = clock::now();
        let at = Instant::now();
        let b = clock::now();
        let spread = b.wrapping_sub(a);
        if spread < best.0 {
            best = (spread, a + spread / 2, at);
        }
    }
    (best.1, best.2)
}

/// The first pair: the rate's baseline starts here.
fn anchor() -> (u64, Instant) {
    static ANCHOR: OnceLock<(u64, Instant)> = OnceLock::new();
    *ANCHOR.get_or_init(pair)
}

/// Nanoseconds per counter tick (an `f64`'s bits; 0 before the first estimate).
static NS_PER_TICK: AtomicU64 = AtomicU64::new(0);
/// The counter reading after which the estimate is refined: once the baseline has doubled
/// since the last estimate, so refinements grow rarer as the process runs and the estimate
/// better.
static REFINE_AT: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds for `ticks` counter ticks, with the counter at `now`.
fn ns(ticks: u64, now: u64) -> u64 {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        // Elsewhere the counter is nanoseconds already.
        return ticks;
    }
    // Acquire: a thread that sees the refined bound sees the rate stored before it.
    if now >= REFINE_AT.load(Ordering::Acquire) {
        refine();
    }
    (ticks as f64 * f64::from_bits(NS_PER_TICK.load(Ordering::Relaxed))) as u64
}

/// A new estimate of the rate, over everything since the anchor.
#[cold]
#[inline(never)]
fn refine() {
    let (t0, i0) = anchor();
    // A baseline too short for the clock's resolution is waited out (at most once a process:
    // later baselines are longer).
    while i0.elapsed().as_nanos() < 20_000 {
        std::hint::spin_loop();
    }
    let (t, i) = pair();
    let ticks = t.saturating_sub(t0).max(1);
    let elapsed = i.duration_since(i0).as_nanos() as f64;
    NS_PER_TICK.store((elapsed / ticks as f64).to_bits(), Ordering::Relaxed);
    REFINE_AT.store(t.saturating_add(ticks), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_turn_into_nanoseconds_of_the_monotonic_clock() {
        let (t0, i0) = pair();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let (t1, i1) = pair();
        let ns = ns(t1 - t0, t1) as f64;
        let want = i1.duration_since(i0).as_nanos() as f64;
        assert!((ns / want - 1.0).abs() < 0.05, "{ns} ns for {want} ns");
    }

    #[test]
    fn an_unstamped_message_is_the_message() {
        let s = ChannelSite::new(Site {
            kind: "channel",
            location: std::panic::Location::caller(),
        });
        let m = Stamped { msg: 7u8, at: 0 };
        assert_eq!(m.open(&s), 7);
        assert_eq!(s.number.load(Ordering::Relaxed), 0, "no site number asked");
    }
}
