//! Analyzer threads: each serves its rings round-robin, runs one analysis instance per ring,
//! answers snapshot requests, adapts the sampling rate, survives a panicking analysis by
//! discarding (and counting) what it can no longer analyze, and backs off when idle
//! ([`Backoff`], also used by [`drain`] for any single consumer).

use super::budget::BudgetTicket;
use super::design::RingConsumer;
use super::report::{push_thread, ThreadStats};
use super::stack::panic_message;
use super::EventAnalysis;
use crate::transport::{EventConsumer, Poll};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One ring as its analyzer holds it.
pub(super) struct RingEntry<A> {
    consumer: RingConsumer,
    analysis: A,
    pub(super) thread: String,
    /// Adaptive sampling: laps seen at the last rate decision, chunks since, and the first
    /// handoff block sampled at the rate last set (laps before it are of blocks sampled at
    /// the rate before).
    last_lapped: u64,
    chunks_since: u64,
    settled_from: u64,
    /// Events read and thrown away because this ring's analyzer failed.
    discarded: u64,
    /// The ring's share of the session's ring memory, given back when the entry is dropped
    /// (after the consumer: fields drop in declaration order). `None` for a growing ring,
    /// whose smallest segment is outside the budget and whose larger ones hold their own.
    _ticket: Option<BudgetTicket>,
}

impl<A> RingEntry<A> {
    pub(super) fn new(
        consumer: RingConsumer,
        analysis: A,
        thread: String,
        ticket: Option<BudgetTicket>,
    ) -> Self {
        RingEntry {
            consumer,
            analysis,
            thread,
            last_lapped: 0,
            chunks_since: 0,
            settled_from: 0,
            discarded: 0,
            _ticket: ticket,
        }
    }

    /// The application thread this ring belongs to.
    pub(super) fn thread(&self) -> &str {
        &self.thread
    }

    fn stats(&self) -> ThreadStats {
        let p = self.consumer.producer_stats();
        let c = self.consumer.stats();
        let (bytes, resizes) = self.consumer.ring_size();
        let (refused, memory_wait) = self.consumer.memory_waits();
        let events = if self.consumer.is_sampling() {
            p.pushed
        } else {
            c.delivered
        };
        ThreadStats {
            thread: self.thread.clone(),
            threads: 1,
            events,
            analyzed: c.delivered,
            blocks: p.blocks,
            blocked: p.blocked,
            dropped: p.dropped + self.discarded,
            chunks_lapped: c.chunks_lapped,
            events_lapped: c.events_lapped,
            rate: self.consumer.rate(),
            ring_bytes: (bytes, bytes),
            ring_resizes: resizes,
            memory_refusals: refused,
            memory_waiters: u64::from(refused > 0),
            memory_wait,
        }
    }
}

/// What one analyzer hands back.
pub(super) struct AnalyzerOutput<A> {
    /// `None`: no ring's results (at `finish`, an analyzer that never retired a ring).
    pub(super) analysis: Option<A>,
    pub(super) threads: Vec<ThreadStats>,
    pub(super) in_flight: u64,
}

/// What an analyzer shares with the session and with attaching threads.
pub(super) struct AnalyzerShared<A> {
    /// New rings, handed over by attaching threads. `alive` is checked under this lock.
    pub(super) inbox: Mutex<Inbox<A>>,
    pub(super) has_new: AtomicBool,
    pub(super) stop: AtomicBool,
    /// Snapshot requests: the requester bumps `snapshot_want`, the analyzer answers through
    /// `snapshot_out` and bumps `snapshot_done`.
    pub(super) snapshot_want: AtomicU64,
    pub(super) snapshot_out: Mutex<Option<AnalyzerOutput<A>>>,
    pub(super) snapshot_done: AtomicU64,
    pub(super) clone_fn: Option<fn(&A) -> A>,
    pub(super) rings: AtomicUsize,
    /// Set when the analysis panicked in this analyzer; it then only drains and discards.
    pub(super) failure: Mutex<Option<String>>,
    /// The analyzer thread, once spawned: woken when there is news for it (a new ring, a
    /// snapshot request, the stop), so an idle analyzer that sleeps in `park_timeout` starts
    /// reading a new ring at once, not up to a millisecond later (a lap of a 2 MB sampling
    /// ring at the densest workloads' event rates).
    thread: std::sync::OnceLock<std::thread::Thread>,
}

impl<A> AnalyzerShared<A> {
    /// Wake the analyzer thread from its idle sleep (there is news for it).
    pub(super) fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Take `entry` into this analyzer, unless the analyzer has ended (then it stays).
    pub(super) fn offer(&self, entry: &mut Option<RingEntry<A>>) {
        let mut inbox = self.inbox.lock();
        if !inbox.alive {
            return;
        }
        let Some(entry) = entry.take() else {
            return;
        };
        inbox.rings.push(entry);
        self.rings.fetch_add(1, Ordering::Relaxed);
        self.has_new.store(true, Ordering::Release);
        self.wake();
    }

    /// Whether the analyzer thread is still running.
    pub(super) fn alive(&self) -> bool {
        self.inbox.lock().alive
    }
}

pub(super) struct Inbox<A> {
    alive: bool,
    rings: Vec<RingEntry<A>>,
}

/// A running analyzer: what it shares, and its thread.
pub(super) type Spawned<A> = (Arc<AnalyzerShared<A>>, JoinHandle<AnalyzerOutput<A>>);

/// Start analyzer number `index`. With `pin_core`, it pins itself to that core first.
pub(super) fn spawn<A: EventAnalysis>(
    index: usize,
    factory: Arc<dyn Fn() -> A + Send + Sync>,
    clone_fn: Option<fn(&A) -> A>,
    adaptive: Option<f64>,
    patient: bool,
    pin_core: Option<usize>,
) -> std::io::Result<Spawned<A>> {
    let shared = Arc::new(AnalyzerShared {
        inbox: Mutex::new(Inbox {
            alive: true,
            rings: Vec::new(),
        }),
        has_new: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        snapshot_want: AtomicU64::new(0),
        snapshot_out: Mutex::new(None),
        snapshot_done: AtomicU64::new(0),
        clone_fn,
        rings: AtomicUsize::new(0),
        failure: Mutex::new(None),
        thread: std::sync::OnceLock::new(),
    });
    let analyzer = Analyzer {
        shared: shared.clone(),
        done: None,
        factory,
        rings: Vec::new(),
        threads: Vec::new(),
        adaptive,
        patient,
        snapshots_answered: 0,
        failed: false,
    };
    // The thread's start-up (std's own, before this closure runs) may allocate; it must be
    // marked as the runtime's before the session opens, or a tracking allocator would count
    // those blocks as the program's. So wait for the mark.
    let (marked_tx, marked_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let handle = std::thread::Builder::new()
        .name(format!("cabprof-analyzer-{index}"))
        .spawn(move || {
            super::work::mark_runtime_thread();
            let _ = marked_tx.send(());
            drop(marked_tx);
            if let Some(core) = pin_core {
                super::affinity::pin_to(core);
            }
            analyzer.run()
        })?;
    // An error means the thread ended before marking itself; `finish` reports that.
    let _ = marked_rx.recv();
    let _ = shared.thread.set(handle.thread().clone());
    Ok((shared, handle))
}

struct Analyzer<A> {
    shared: Arc<AnalyzerShared<A>>,
    factory: Arc<dyn Fn() -> A + Send + Sync>,
    rings: Vec<RingEntry<A>>,
    /// The merged results of retired rings; `None` until the first retires. While the
    /// session runs, rings are merged into an empty instance (a ring's in-flight state, such
    /// as a reuse-distance table, is not kept for the rest of the session and copied by every
    /// snapshot); at `finish`, the first is taken as it is (no copy of a deep tree).
    done: Option<A>,
    threads: Vec<ThreadStats>,
    adaptive: Option<f64>,
    /// Sampling mode: back off with [`Backoff::patient`].
    patient: bool,
    snapshots_answered: u64,
    /// The analysis panicked: from then on rings are drained and their events discarded (and
    /// counted as dropped) so producers never block on a dead analysis.
    failed: bool,
}

/// Sets `alive = false` and drops queued rings when the analyzer thread ends in any way, so a
/// ring registered later goes elsewhere and blocked producers are released.
struct AnalyzerExit<A>(Arc<AnalyzerShared<A>>);

impl<A> Drop for AnalyzerExit<A> {
    fn drop(&mut self) {
        let mut inbox = self.0.inbox.lock();
        inbox.alive = false;
        inbox.rings.clear();
    }
}

impl<A: EventAnalysis> Analyzer<A> {
    fn run(mut self) -> AnalyzerOutput<A> {
        let _exit = AnalyzerExit(self.shared.clone());
        tracing::debug!("cabprof analyzer started");
        let mut backoff = if self.patient {
            Backoff::patient()
        } else {
            Backoff::new()
        };
        loop {
            if self.shared.has_new.load(Ordering::Acquire) {
                self.take_new();
                // A new ring's producer is starting: poll it eagerly, not from a long sleep.
                backoff.reset();
            }
            let stopping = self.shared.stop.load(Ordering::Acquire);
            if stopping {
                self.take_new();
                return self.drain_all();
            }
            let want = self.shared.snapshot_want.load(Ordering::Acquire);
            if want > self.snapshots_answered {
                self.answer_snapshot(want);
            }
            let worked = if self.failed {
                self.discard_round()
            } else {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.poll_round())) {
                    Ok(worked) => worked,
                    Err(panic) => {
                        self.fail(panic_message(&*panic));
                        true
                    }
                }
            };
            if worked {
                backoff.reset();
            } else {
                backoff.snooze();
            }
        }
    }

    /// The analysis panicked: record it, throw away every result (they may be half-updated)
    /// and keep draining so producers are never blocked by a dead analysis.
    fn fail(&mut self, msg: String) {
        tracing::error!(%msg, "cabprof analysis panicked; this analyzer now discards events");
        *self.shared.failure.lock() = Some(msg);
        self.failed = true;
        self.done = None;
        for entry in &mut self.rings {
            entry.analysis = (self.factory)();
            entry.discarded += entry.consumer.stats().delivered;
        }
    }

    /// A dead analysis' pass: every ready chunk of every ring read and counted, not analyzed.
    fn discard_round(&mut self) -> bool {
        self.each_ring(
            usize::MAX,
            |_, discarded, words| *discarded += words.len() as u64,
            |_| {},
        )
    }

    fn take_new(&mut self) {
        let mut inbox = self.shared.inbox.lock();
        self.rings.append(&mut inbox.rings);
        self.shared.has_new.store(false, Ordering::Release);
    }

    /// One pass over every ring, taking up to a few chunks from each. True if any work done.
    fn poll_round(&mut self) -> bool {
        let adaptive = self.adaptive;
        self.each_ring(
            4,
            |analysis, _, words| analysis.consume(words),
            |entry| {
                entry.chunks_since += 1;
                // After each block: a lap is then judged by the block it lost.
                if let Some(max) = adaptive {
                    adapt_rate(entry, max);
                }
            },
        )
    }

    /// The one poll loop: up to `chunks` polls of each ring, each batch given to `read` with
    /// the ring's analysis and its discarded count, `after` called on the ring after each
    /// chunk; a ring whose producer closed and is drained is retired. True if any ring
    /// delivered or closed.
    fn each_ring(
        &mut self,
        chunks: usize,
        mut read: impl FnMut(&mut A, &mut u64, &[u64]),
        mut after: impl FnMut(&mut RingEntry<A>),
    ) -> bool {
        let mut worked = false;
        let mut i = 0;
        while i < self.rings.len() {
            let mut closed = false;
            for _ in 0..chunks {
                let entry = &mut self.rings[i];
                let (analysis, discarded) = (&mut entry.analysis, &mut entry.discarded);
                match entry.consumer.poll_with(|w| read(analysis, discarded, w)) {
                    Poll::Consumed(_) => {
                        worked = true;
                        after(entry);
                    }
                    Poll::Empty => break,
                    Poll::Closed => {
                        closed = true;
                        break;
                    }
                }
            }
            if closed {
                let entry = self.rings.swap_remove(i);
                self.retire(entry, false);
                worked = true;
            } else {
                i += 1;
            }
        }
        worked
    }

    /// A ring closed (`last`: at `finish`, nothing more to analyze): fold its results in.
    fn retire(&mut self, entry: RingEntry<A>, last: bool) {
        let stats = entry.stats();
        tracing::debug!(thread = %stats.thread, events = stats.events, "cabprof ring drained");
        if stats.chunks_lapped > 0 {
            tracing::info!(thread = %stats.thread, lapped = stats.chunks_lapped, "cabprof sampling overflow");
        }
        if stats.blocks > 0 {
            tracing::debug!(thread = %stats.thread, blocks = stats.blocks, blocked = ?stats.blocked, "cabprof producer blocked");
        }
        push_thread(&mut self.threads, stats);
        if last {
            super::merge::merge_into(&mut self.done, Some(entry.analysis));
        } else {
            let factory = &self.factory;
            self.done
                .get_or_insert_with(|| factory())
                .merge(entry.analysis);
        }
        self.shared.rings.fetch_sub(1, Ordering::Relaxed);
    }

    /// Deliver everything a ring holds right now to `read`, a live producer's unpublished
    /// words included. True if its producer has closed.
    fn drain_now(consumer: &mut RingConsumer, mut read: impl FnMut(&[u64])) -> bool {
        loop {
            match consumer.poll_with(&mut read) {
                Poll::Consumed(_) => continue,
                Poll::Empty => {
                    consumer.drain_live(&mut read);
                    return false;
                }
                Poll::Closed => return true,
            }
        }
    }

    /// Deliver what the ring held when the snapshot was asked for, and no more: a producer
    /// that keeps writing while the analyzer lags behind it must not stretch a snapshot to
    /// the rest of the run. Reads at most one ring's worth.
    fn drain_for_snapshot(entry: &mut RingEntry<A>) {
        let target = entry.consumer.snapshot_target();
        let analysis = &mut entry.analysis;
        while entry.consumer.progress() < target {
            match entry.consumer.poll_with(|w| analysis.consume(w)) {
                Poll::Consumed(_) => continue,
                Poll::Empty => {
                    entry
                        .consumer
                        .drain_live_to(target, |w| analysis.consume(w));
                    return;
                }
                Poll::Closed => return,
            }
        }
    }

    fn drain_all(mut self) -> AnalyzerOutput<A> {
        let rings = std::mem::take(&mut self.rings);
        for mut entry in rings {
            if self.failed {
                let mut n = 0u64;
                Self::drain_now(&mut entry.consumer, |w| n += w.len() as u64);
                entry.discarded += n;
            } else if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let analysis = &mut entry.analysis;
                Self::drain_now(&mut entry.consumer, |w| analysis.consume(w))
            }))
            .is_err()
            {
                self.fail("analysis panicked while draining at finish".into());
            }
            self.retire(entry, true);
        }
        tracing::debug!("cabprof analyzer stopped");
        AnalyzerOutput {
            analysis: self.done.take(),
            threads: std::mem::take(&mut self.threads),
            in_flight: 0,
        }
    }

    fn answer_snapshot(&mut self, want: u64) {
        if self.failed {
            *self.shared.snapshot_out.lock() = None;
            self.snapshots_answered = want;
            self.shared.snapshot_done.store(want, Ordering::Release);
            return;
        }
        let clone = self.shared.clone_fn.expect("snapshot requires Clone");
        let mut analysis = match &self.done {
            Some(done) => clone(done),
            None => (self.factory)(),
        };
        let mut threads = self.threads.clone();
        let mut in_flight = 0;
        for entry in &mut self.rings {
            Self::drain_for_snapshot(entry);
            analysis.merge(clone(&entry.analysis));
            let s = entry.stats();
            in_flight += entry.consumer.unread_bound();
            push_thread(&mut threads, s);
        }
        *self.shared.snapshot_out.lock() = Some(AnalyzerOutput {
            analysis: Some(analysis),
            threads,
            in_flight,
        });
        self.snapshots_answered = want;
        self.shared.snapshot_done.store(want, Ordering::Release);
    }
}

/// Adaptive sampling (the paper's §6.4 future work): halve the rate when the producer laps the
/// analyzer, grow it by a quarter after 64 lap-free chunks, never above `max`.
///
/// The producer takes a new rate up at its next copy, so the blocks already in the handoff
/// (up to a ring's worth of chunks) were sampled at the old one: laps the analyzer takes
/// while it works through them say nothing of the new rate and do not lower it again, or one
/// slow stretch would halve the rate once per block until the handoff drained.
fn adapt_rate<A>(entry: &mut RingEntry<A>, max: f64) {
    let lapped = entry.consumer.stats().chunks_lapped;
    let rate = entry.consumer.rate();
    if lapped > entry.last_lapped {
        entry.last_lapped = lapped;
        entry.chunks_since = 0;
        // Called after each poll: a block lost in it is at most the last one it passed,
        // `progress() - 1`, an old-rate block if that is at most the last copied at the old
        // rate, `settled_from - 1`.
        if entry.consumer.progress() <= entry.settled_from {
            return;
        }
        entry.consumer.set_rate((rate * 0.5).max(1.0 / 1024.0));
        // Of a sampling ring, `progress` counts the handoff blocks read and `snapshot_target`
        // those finished. The producer may be copying one more at the old rate now: the one
        // after it is the first at the new rate.
        entry.settled_from = entry.consumer.snapshot_target() + 1;
        tracing::debug!(thread = %entry.thread, rate = entry.consumer.rate(), "cabprof adaptive sampling: rate lowered");
    } else if entry.chunks_since >= 64 && rate < max {
        entry.consumer.set_rate((rate * 1.25).min(max));
        entry.chunks_since = 0;
    }
}

/// The shortest sleep of [`Backoff::patient`], in µs.
const PATIENT_MIN_US: u64 = 10;
/// The longest sleep of [`Backoff::patient`], in µs: a 2 MB ring takes longer than this to
/// lap at the event rates of the densest real programs measured here, except the per-call
/// microbenchmark's.
const PATIENT_MAX_US: u64 = 1000;

/// How an idle poller backs off: spin briefly, then yield, then sleep up to 1 ms, so an idle
/// analyzer costs almost no CPU while a busy one reacts within microseconds. The sleep is a
/// `park_timeout`, so an `unpark` of the polling thread (news for an analyzer) cuts it short.
/// Every analyzer loop in cabprof uses this one back-off.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    /// Empty polls since the last work.
    idle_rounds: u32,
    /// Sleep at once, never spin or yield (see [`Backoff::patient`]).
    patient: bool,
    /// The patient back-off's next sleep, in µs.
    sleep_us: u64,
}

impl Backoff {
    /// A back-off that starts by spinning.
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// A back-off for a poller nobody waits on (a sampling analyzer: its producers never
    /// block, and a chunk it is late for is counted as lost, not waited for). It never spins
    /// or yields, which would take the core from the application's threads on a machine they
    /// keep busy: it sleeps, twice as long after each empty poll and half as long after one
    /// that found work (between 10 µs and 1 ms), so its sleep
    /// settles near the time the producers take to fill a chunk.
    pub fn patient() -> Backoff {
        Backoff {
            idle_rounds: 0,
            patient: true,
            sleep_us: PATIENT_MIN_US,
        }
    }

    /// Work was found: the next idle wait starts by spinning again (patient: sleeps half as
    /// long).
    pub fn reset(&mut self) {
        self.idle_rounds = 0;
        self.sleep_us = (self.sleep_us / 2).max(PATIENT_MIN_US);
    }

    /// Nothing to do: wait a little, longer the longer it has been idle.
    pub fn snooze(&mut self) {
        self.idle_rounds = self.idle_rounds.saturating_add(1);
        let round = self.idle_rounds;
        if self.patient {
            std::thread::park_timeout(Duration::from_micros(self.sleep_us));
            self.sleep_us = (self.sleep_us * 2).min(PATIENT_MAX_US);
        } else if round < 16 {
            std::hint::spin_loop();
        } else if round < 64 {
            std::thread::yield_now();
        } else {
            let us = (1u64 << ((round - 64) / 8).min(10)).min(1000);
            std::thread::park_timeout(Duration::from_micros(us));
        }
    }
}

/// Poll `consumer` until its producer closes, handing every batch to `analyze` and backing
/// off with [`Backoff`] while it is empty: the loop of a single-ring analyzer.
pub fn drain<C: EventConsumer + ?Sized>(consumer: &mut C, mut analyze: impl FnMut(&[u64])) {
    let mut backoff = Backoff::new();
    loop {
        match consumer.poll(&mut analyze) {
            Poll::Consumed(_) => backoff.reset(),
            Poll::Closed => return,
            Poll::Empty => backoff.snooze(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Backoff, PATIENT_MAX_US, PATIENT_MIN_US};

    #[test]
    fn the_patient_back_off_doubles_when_idle_and_halves_after_work() {
        let mut b = Backoff::patient();
        assert_eq!(b.sleep_us, PATIENT_MIN_US);
        for _ in 0..3 {
            b.snooze();
        }
        assert_eq!(b.sleep_us, 8 * PATIENT_MIN_US);
        b.reset();
        assert_eq!(b.sleep_us, 4 * PATIENT_MIN_US);
        for _ in 0..20 {
            b.sleep_us = (b.sleep_us * 2).min(PATIENT_MAX_US);
        }
        assert_eq!(b.sleep_us, PATIENT_MAX_US);
        for _ in 0..20 {
            b.reset();
        }
        assert_eq!(b.sleep_us, PATIENT_MIN_US);
        // The eager back-off is unchanged by any of this.
        let mut e = Backoff::new();
        e.snooze();
        e.reset();
        assert!(!e.patient);
    }
}
