//! The memory budget of all rings of a session together, and what a thread does without a
//! ring.
//!
//! A ring is charged to the budget when a thread attaches and released when its analyzer
//! frees it (after draining it, once the thread has exited). Without the budget, a program
//! that keeps starting short threads behind a busy analyzer queues one ring per exited thread:
//! gigabytes. With it:
//!
//! - **exhaustive**: a thread whose ring would exceed the budget waits until the analyzer
//!   frees rings, at most [`RING_MEMORY_WAIT`](super::RING_MEMORY_WAIT), and not at all once
//!   no analyzer is alive or the session is finishing (so it never deadlocks);
//! - **sampling** (the producer never waits): it does not wait;
//! - a thread that gets no ring this way, or whose ring the allocator refuses, runs on with a
//!   [`CountingSink`]: its events are dropped and counted in the report.

use super::report::ThreadStats;
use crate::event::Event;
use crate::transport::{EventProducer, ProducerStats};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes held by rings, against a limit.
#[derive(Debug)]
pub(super) struct RingBudget {
    limit: usize,
    /// Invariant: the sum of the bytes of all live [`BudgetTicket`]s; at most `limit`.
    used: Mutex<usize>,
    freed: Condvar,
}

/// A ring's share of the budget, given back on drop.
#[derive(Debug)]
pub(super) struct BudgetTicket {
    budget: Arc<RingBudget>,
    bytes: usize,
}

impl RingBudget {
    pub(super) fn new(limit: usize) -> Arc<RingBudget> {
        Arc::new(RingBudget {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Charge `bytes`, waiting up to `wait` for rings to be freed while `keep_waiting()`
    /// holds (checked every few milliseconds). `None` if the budget stays exceeded.
    pub(super) fn acquire(
        self: &Arc<Self>,
        bytes: usize,
        wait: Duration,
        keep_waiting: impl Fn() -> bool,
    ) -> Option<BudgetTicket> {
        let deadline = Instant::now() + wait;
        let mut used = self.used.lock();
        loop {
            if let Some(total) = used.checked_add(bytes).filter(|&t| t <= self.limit) {
                *used = total;
                return Some(BudgetTicket {
                    budget: self.clone(),
                    bytes,
                });
            }
            let now = Instant::now();
            if now >= deadline || !keep_waiting() {
                return None;
            }
            let slice = (deadline - now).min(Duration::from_millis(5));
            self.freed.wait_for(&mut used, slice);
        }
    }

    /// Charge `bytes` if they fit now, without waiting (a growing ring's larger segment,
    /// asked for on its producer's slow path).
    pub(super) fn try_acquire(self: &Arc<Self>, bytes: usize) -> Option<BudgetTicket> {
        self.acquire(bytes, Duration::ZERO, || false)
    }

    /// Bytes charged now.
    pub(super) fn used(&self) -> usize {
        *self.used.lock()
    }
}

impl Drop for BudgetTicket {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock();
        *used -= self.bytes;
        drop(used);
        self.budget.freed.notify_all();
    }
}

/// Events of threads that have no ring, for the report.
#[derive(Debug, Default)]
pub(super) struct Ringless {
    threads: AtomicU64,
    events: AtomicU64,
}

impl Ringless {
    /// One report entry for all ringless threads, if there were any.
    pub(super) fn stats(&self) -> Option<ThreadStats> {
        let threads = self.threads.load(Ordering::Relaxed);
        let events = self.events.load(Ordering::Relaxed);
        (threads > 0).then(|| ThreadStats {
            thread: "(threads without a ring)".into(),
            threads,
            events,
            dropped: events,
            rate: 1.0,
            ..Default::default()
        })
    }
}

/// The producer of a thread without a ring: counts each event as dropped.
#[derive(Debug)]
pub(super) struct CountingSink {
    ringless: Arc<Ringless>,
}

impl CountingSink {
    pub(super) fn new(ringless: Arc<Ringless>) -> CountingSink {
        ringless.threads.fetch_add(1, Ordering::Relaxed);
        CountingSink { ringless }
    }
}

impl EventProducer for CountingSink {
    fn push(&mut self, _event: Event) {
        self.ringless.events.fetch_add(1, Ordering::Relaxed);
    }
    fn flush(&mut self) {}
    fn close(&mut self) {}
    fn stats(&self) -> ProducerStats {
        ProducerStats::default()
    }
}
