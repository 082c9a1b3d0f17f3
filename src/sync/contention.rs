//! What a wrapped lock keeps beside parking_lot's: who waits now, since when, and where the
//! lock was made; and the timing around a contended acquisition and release.

use super::sites::{self, Site};
use cabprof_cab::event::{Event, WaitKind};
use cabprof_cab::runtime::{emit, recording};
use std::panic::Location;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The clock at a wait's start if the timeline draws waits (timeline mode), else `None`.
#[inline]
pub(crate) fn span_start() -> Option<u64> {
    crate::__private::timeline().then(cabprof_cab::clock::now)
}

/// A block-profile wait of `kind` at site `site` that took `ns`: its two words, and, from a
/// [`span_start`] reading, its stamps for the timeline.
pub(crate) fn emit_wait(kind: WaitKind, site: u32, ns: u64, from: Option<u64>) {
    emit(Event::wait(kind, 1, site));
    emit(Event::wait_ns(ns));
    if let Some(from) = from {
        for e in Event::wait_span(from, cabprof_cab::clock::now()) {
            emit(e);
        }
    }
}

/// Nanoseconds since the first call in the process, never 0 (0 means "unset" below).
pub(super) fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch.elapsed().as_nanos() as u64 + 1
}

/// A lock's contention state. Its counters only describe timing: no data is published through
/// them, so their orderings need only make `since` visible to a releaser that sees a waiter.
///
/// `repr(C)` with `waiters` last: the wrappers put this right before parking_lot's lock, so
/// the counter every release reads sits beside the lock's state word, in its cache line.
#[derive(Debug)]
#[repr(C)]
pub(super) struct Contention {
    kind: &'static str,
    location: &'static Location<'static>,
    /// When the current stretch of waiting began: the first waiter's arrival, or the latest
    /// contended release (`now_ns`; 0 before any).
    since: AtomicU64,
    /// The site's number, 0 until the first contention asks.
    site: AtomicU32,
    /// Threads in a timed wait for the lock now.
    waiters: AtomicU32,
}

impl Contention {
    pub(super) const fn new(kind: &'static str, location: &'static Location<'static>) -> Self {
        Contention {
            kind,
            location,
            since: AtomicU64::new(0),
            site: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
        }
    }

    fn site(&self) -> u32 {
        // Relaxed: the number is the same whoever computes it, so a race only asks twice.
        match self.site.load(Ordering::Relaxed) {
            0 => {
                let n = sites::number(Site {
                    kind: self.kind,
                    location: self.location,
                });
                self.site.store(n, Ordering::Relaxed);
                n
            }
            n => n,
        }
    }

    /// A first try failed: wait with `acquire` (the blocking acquisition), timed while a
    /// session records, and charge the wait to this thread.
    #[cold]
    #[inline(never)]
    pub(super) fn wait<G>(&self, acquire: impl FnOnce() -> G) -> G {
        // The session may have ended since the caller looked.
        if !recording() {
            return acquire();
        }
        let start = now_ns();
        let from = span_start();
        // `since` is stored before the count rises: the Release increment pairs with the
        // releaser's Acquire fence, so a releaser that counts this waiter sees a `since` at
        // least this recent.
        if self.waiters.load(Ordering::Relaxed) == 0 {
            self.since.store(start, Ordering::Relaxed);
        }
        self.waiters.fetch_add(1, Ordering::Release);
        let granted = acquire();
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        let ns = now_ns().saturating_sub(start);
        emit_wait(WaitKind::Lock, self.site(), ns, from);
        granted
    }

    /// Whether a release must go through [`release`](Self::release): threads wait. One load
    /// and one branch on every release.
    #[inline(always)]
    pub(super) fn waited(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) != 0
    }

    /// A release while threads wait: `unlock`, and charge the time they waited during this
    /// hold, once per waiter, to this thread (Go's mutex profile).
    #[cold]
    #[inline(never)]
    pub(super) fn release(&self, unlock: impl FnOnce()) {
        let waiters = self.waiters.load(Ordering::Relaxed);
        // After the load it pairs with: a waiter counted here has its `since` visible.
        fence(Ordering::Acquire);
        let now = now_ns();
        let since = self.since.swap(now, Ordering::Relaxed);
        unlock();
        if waiters > 0 && since != 0 && now > since && recording() {
            emit(Event::wait(WaitKind::Hold, waiters, self.site()));
            emit(Event::wait_ns(now - since));
        }
    }
}

/// Run the blocking `op` of a channel whose first try found it full or empty, timed as a wait
/// of `kind` at `site` while a session records, and charge the wait to this thread.
#[cold]
#[inline(never)]
pub(super) fn blocked<R>(kind: WaitKind, site: Site, op: impl FnOnce() -> R) -> R {
    if !recording() {
        return op();
    }
    let start = now_ns();
    let from = span_start();
    let r = op();
    let ns = now_ns().saturating_sub(start);
    emit_wait(kind, sites::number(site), ns, from);
    r
}
