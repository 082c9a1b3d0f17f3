//! The session's lifecycle: [`Session::start`] (claim the process, spawn analyzers, open
//! `emit`), attaching threads to analyzers, [`snapshot`](Session::snapshot) and
//! [`finish`](Session::finish) (stop, drain, join, merge).

use super::affinity::{analyzer_core, current_core, online_cores, pin_to};
use super::analyzer::{self, AnalyzerOutput, AnalyzerShared, RingEntry};
use super::budget::{BudgetTicket, CountingSink, RingBudget, Ringless};
use super::config::RING_MEMORY_WAIT;
use super::design::{growing_cab_channel, BufferDesign, RingConsumer, ThreadProducer};
use super::merge::merge_into;
use super::pending::Pending;
use super::report::{push_thread, Report, ThreadStats};
use super::sequential::{Discard, InlineShared};
use super::stack::panic_message;
use super::tls::{self, Hub, InlineSink, HUB};
use super::work;
use super::{EventAnalysis, RunMode, RuntimeConfig, SessionError};
use crate::config::{Mode, RingConfig};
use crate::ring;
use parking_lot::{Mutex, MutexGuard};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long `finish` waits, in sampling mode, for threads that have just ended to close their
/// rings (20 ms: a thread-local destructor runs within microseconds of a thread's return; the
/// wait only costs anything when threads are still running).
const ENDING_THREADS_GRACE: Duration = Duration::from_millis(20);

/// What a session shares with its handles ([`Snapshotter`], [`Finisher`]) and, as a [`Hub`],
/// with attaching threads.
struct Core<A: EventAnalysis> {
    key: u64,
    mode: RunMode,
    design: BufferDesign,
    ring: RingConfig,
    /// Exhaustive CAB: the size a thread's ring starts at (then grows up to `ring`'s).
    ring_start: usize,
    factory: Arc<dyn Fn() -> A + Send + Sync>,
    analyzers: Vec<Arc<AnalyzerShared<A>>>,
    handles: Mutex<Vec<JoinHandle<AnalyzerOutput<A>>>>,
    next: AtomicUsize,
    /// Sequential mode: merged results of retired threads, slots of live ones.
    inline: Arc<InlineShared<A>>,
    started: Instant,
    finished: AtomicBool,
    /// Panics caught in analyzer threads.
    failures: Mutex<Vec<String>>,
    /// Serializes snapshots.
    snapshot_lock: Mutex<()>,
    /// The memory all rings may hold together.
    budget: Arc<RingBudget>,
    /// Threads that run without a ring (budget exceeded, allocation refused).
    ringless: Arc<Ringless>,
    /// The process that started the session; any other is a child forked since, in which
    /// profiling is off (see `after_fork_in_child`).
    pid: u32,
    /// Published as the running session (`emit` delivers to it); a private session receives
    /// only what is emitted with its key ([`Session::start_private`]).
    published: bool,
}

/// A handle's reference to the session's state ([`Session`], [`Snapshotter`], [`Finisher`]).
///
/// The state is made as the runtime's work, and the program may drop its last handle while
/// another session counts the program's allocations (a snapshotter kept past `finish`): the
/// `Arc` is dropped between brackets (see [`RuntimeDrop`](super::RuntimeDrop)), so the state's
/// blocks, the `Arc`'s own included, are freed as the runtime's work. Armed whoever makes the
/// handle: it only ever holds the runtime's blocks.
struct Shared<A: EventAnalysis> {
    #[allow(dead_code, reason = "never read: being dropped first is its use")]
    drop_start: work::RuntimeDropStart,
    core: Arc<Core<A>>,
    #[allow(dead_code, reason = "never read: being dropped last is its use")]
    drop_end: work::RuntimeDropEnd,
}

impl<A: EventAnalysis> Shared<A> {
    fn new(core: Arc<Core<A>>) -> Shared<A> {
        let (drop_start, drop_end) = work::runtime_drop_brackets(true);
        Shared {
            drop_start,
            core,
            drop_end,
        }
    }

    /// Another handle on the same state.
    fn handle(&self) -> Shared<A> {
        Shared::new(self.core.clone())
    }
}

impl<A: EventAnalysis> std::ops::Deref for Shared<A> {
    type Target = Core<A>;

    fn deref(&self) -> &Core<A> {
        &self.core
    }
}

impl<A: EventAnalysis> Hub for Core<A> {
    fn key(&self) -> u64 {
        self.key
    }

    fn attach_ring(&self, thread: String) -> ThreadProducer {
        if self.mode == RunMode::EnqueueOnly {
            // The ring alone, as the application writes it: rate 0, so the producer samples
            // nothing into a handoff nobody reads.
            let cfg = self.ring.with_mode(Mode::sampling(0.0));
            return match ring::sampling_channel(&cfg) {
                Ok((p, _no_analyzer)) => ThreadProducer::new(p),
                Err(_) => ThreadProducer::new(CountingSink::new(self.ringless.clone())),
            };
        }
        let made = if self.mode == RunMode::Exhaustive
            && self.design == BufferDesign::Cab
            && self.ring_start < self.ring.buffer_bytes
        {
            self.growing_ring(&thread)
        } else {
            self.fixed_ring(&thread)
        };
        let Some((producer, consumer, ticket)) = made else {
            return ThreadProducer::new(CountingSink::new(self.ringless.clone()));
        };
        let mut entry = Some(RingEntry::new(consumer, (self.factory)(), thread, ticket));
        let n = self.analyzers.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            if entry.is_none() {
                break;
            }
            self.analyzers[(first + k) % n].offer(&mut entry);
        }
        if let Some(orphan) = entry {
            // Every analyzer is dead: dropping the consumer makes the producer drop and count.
            tracing::warn!(thread = %orphan.thread(), "cabprof: no live analyzer; events of this thread are dropped");
        }
        producer
    }

    fn ringless(&self) -> ThreadProducer {
        ThreadProducer::new(CountingSink::new(self.ringless.clone()))
    }

    fn attach_inline(&self, thread: String) -> Box<dyn InlineSink> {
        if self.mode == RunMode::InstrumentOnly {
            return Box::new(Discard(Pending::new(Pending::CAPACITY)));
        }
        self.inline.attach((self.factory)(), thread)
    }
}

impl<A: EventAnalysis> Core<A> {
    /// An exhaustive CAB ring that starts at its smallest size, outside the budget (so every
    /// thread has a ring, however many there are), and grows while its thread outpaces the
    /// analyzer, each larger segment charged to the budget without waiting: refused, the
    /// ring keeps its size and its producer waits for the analyzer, dropping nothing.
    fn growing_ring(
        &self,
        thread: &str,
    ) -> Option<(ThreadProducer, RingConsumer, Option<BudgetTicket>)> {
        let budget = self.budget.clone();
        let grant: ring::Grant = Box::new(move |bytes| {
            budget
                .try_acquire(bytes)
                .map(|t| Box::new(t) as Box<dyn std::any::Any + Send + Sync>)
        });
        let growth = ring::Growth::new(self.ring_start, grant);
        match growing_cab_channel(&self.ring, growth) {
            Ok((p, c)) => Some((p, c, None)),
            Err(e) => {
                tracing::warn!(thread = %thread, error = %e, "cabprof: no ring for this thread; its events are dropped and counted");
                None
            }
        }
    }

    /// A ring of the configured size, charged to the budget whole: exhaustive producers may
    /// wait for ring memory (while an analyzer lives to free it, and not past the finish);
    /// sampling producers never wait.
    fn fixed_ring(
        &self,
        thread: &str,
    ) -> Option<(ThreadProducer, RingConsumer, Option<BudgetTicket>)> {
        let wait = if self.mode == RunMode::Exhaustive {
            RING_MEMORY_WAIT
        } else {
            Duration::ZERO
        };
        let ticket = self
            .budget
            .acquire(self.ring.ring_memory_bytes(), wait, || {
                !self.finished.load(Ordering::Acquire) && self.analyzers.iter().any(|a| a.alive())
            });
        let Some(ticket) = ticket else {
            // A sampling CAB ring never waits: beyond the budget the thread gets the smallest
            // ring, outside it as an exhaustive ring's smallest size is, and samples from it.
            if self.design == BufferDesign::Cab && matches!(self.mode, RunMode::Sampling { .. }) {
                let small = ring::smallest(&self.ring, self.ring_start);
                if small.buffer_bytes < self.ring.buffer_bytes {
                    if let Ok((p, c)) = self.design.channel(&small) {
                        return Some((p, c, None));
                    }
                }
            }
            tracing::warn!(thread = %thread, budget = self.budget.used(), "cabprof: the rings' memory budget (CABPROF_RING_MEMORY) is exhausted; this thread's events are dropped and counted");
            return None;
        };
        match self.design.channel(&self.ring) {
            Ok((p, c)) => Some((p, c, Some(ticket))),
            Err(e) => {
                tracing::warn!(thread = %thread, error = %e, "cabprof: no ring for this thread; its events are dropped and counted");
                None
            }
        }
    }
}

/// A running session of analysis `A`. See the [module docs](super) for the contract.
pub struct Session<A: EventAnalysis> {
    core: Shared<A>,
}

impl<A: EventAnalysis> fmt::Debug for Session<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("mode", &self.core.mode)
            .field("ring", &self.core.ring)
            .finish_non_exhaustive()
    }
}

fn claim_global() -> Result<MutexGuard<'static, Option<Arc<dyn Hub>>>, SessionError> {
    let hub = HUB.lock();
    if hub.is_some() {
        return Err(SessionError::AlreadyRunning);
    }
    Ok(hub)
}

impl<A: EventAnalysis> Session<A> {
    /// Validate `config` and start a session with one `factory()` analysis instance per ring
    /// (or per thread in sequential mode).
    pub fn start<F>(config: RuntimeConfig, factory: F) -> Result<Session<A>, SessionError>
    where
        F: Fn() -> A + Send + Sync + 'static,
    {
        Self::start_with(config, Arc::new(factory), None, true)
    }

    /// Start a session that is not published as the running one: instrumented code keeps
    /// seeing what it saw (no session, or the process's first event undecided), and only
    /// events emitted with [`key`](Self::key) (`emit_with`) reach it. cabprof's calibration
    /// runs its probe in one, so that no other thread's events go to it. Like any session it
    /// holds the one-session slot until it finishes.
    pub fn start_private<F>(config: RuntimeConfig, factory: F) -> Result<Session<A>, SessionError>
    where
        F: Fn() -> A + Send + Sync + 'static,
    {
        Self::start_with(config, Arc::new(factory), None, false)
    }

    /// The key events for this session are emitted with (`emit_with`).
    pub fn key(&self) -> u64 {
        self.core.key
    }

    fn start_with(
        b: RuntimeConfig,
        factory: Arc<dyn Fn() -> A + Send + Sync>,
        clone_fn: Option<fn(&A) -> A>,
        published: bool,
    ) -> Result<Session<A>, SessionError> {
        let _work = work::runtime_work();
        b.validate()?;
        let ring = b.ring_config()?;
        if matches!(b.mode, RunMode::Exhaustive | RunMode::Sampling { .. }) {
            // Make (and free) one ring now, so a size the allocator refuses is an error here
            // rather than a thread without a ring later. Pages are mapped lazily: cheap, but
            // only in 4 KiB pages (a sampling ring writes its first slot, which on a huge
            // page would zero 2 MiB); a huge-page mapping that fails falls back to those.
            // Neither taken from nor kept among the freed rings (keeping zeroes, which would
            // fault in every page).
            crate::slots::without_reuse(|| b.design.channel(&ring.with_huge_pages(false)))?;
        }
        let budget = RingBudget::new(b.ring_memory_for(&ring));
        let mut global = claim_global()?;
        tls::install_fork_handler();
        let key = tls::new_session_key(b.mode, b.design);
        let adaptive = match b.mode {
            RunMode::Sampling {
                rate,
                adaptive: true,
                ..
            } => Some(rate),
            _ => None,
        };
        let patient = matches!(b.mode, RunMode::Sampling { .. });
        let cores = online_cores().len().max(1);
        if b.pin_application && cores > 1 {
            pin_to(0);
        }
        // The core the application is on: analyzers go elsewhere. Pinned to the core the
        // unpinned application happened to run on, an analyzer shared it with the application
        // until the scheduler moved one of them, and an exhaustive producer waited on an
        // analyzer that could not run (the first run of a fresh process paid for it).
        let app_core = if b.pin_application {
            0
        } else {
            current_core().unwrap_or(0)
        };
        let mut analyzers = Vec::new();
        let mut handles = Vec::new();
        if matches!(b.mode, RunMode::Exhaustive | RunMode::Sampling { .. }) {
            for i in 0..b.analyzers {
                // Analyzers take the last cores, counting down, and never the application's.
                let pin_core = (b.pin && cores > 1).then(|| analyzer_core(i, cores, app_core));
                let (shared, handle) =
                    analyzer::spawn(i, factory.clone(), clone_fn, adaptive, patient, pin_core)
                        .map_err(SessionError::Spawn)?;
                analyzers.push(shared);
                handles.push(handle);
            }
        }
        let core = Arc::new(Core {
            key,
            mode: b.mode,
            design: b.design,
            ring,
            ring_start: b.buffer_start_bytes.unwrap_or(super::config::RING_START),
            factory,
            analyzers,
            handles: Mutex::new(handles),
            next: AtomicUsize::new(0),
            inline: Arc::new(InlineShared::new()),
            started: Instant::now(),
            finished: AtomicBool::new(false),
            failures: Mutex::new(Vec::new()),
            snapshot_lock: Mutex::new(()),
            budget,
            ringless: Arc::new(Ringless::default()),
            pid: std::process::id(),
            published,
        });
        *global = Some(core.clone() as Arc<dyn Hub>);
        if published {
            tls::open(key);
        }
        tracing::info!(mode = ?b.mode, buffer = ring.buffer_bytes, chunk = ring.chunk_bytes, "cabprof session started");
        Ok(Session {
            core: Shared::new(core),
        })
    }

    /// The mode this session runs in.
    pub fn mode(&self) -> RunMode {
        self.core.mode
    }

    /// Rings currently held by analyzers (live threads plus exited ones not yet drained).
    pub fn live_rings(&self) -> usize {
        self.core.live_rings()
    }

    /// Stop, drain every ring, join the analyzers and return the merged report.
    pub fn finish(self) -> Report<A> {
        self.core
            .finish()
            .expect("a session is finished only once (finish consumes it)")
    }

    /// A handle that can finish this session from another thread (the Ctrl-C handler).
    pub fn finisher(&self) -> Finisher<A> {
        Finisher {
            core: self.core.handle(),
        }
    }
}

impl<A: EventAnalysis + Clone> Session<A> {
    /// Like [`start`](Session::start), and enables [`snapshot`](Self::snapshot).
    pub fn start_snapshotting<F>(config: RuntimeConfig, factory: F) -> Result<Self, SessionError>
    where
        F: Fn() -> A + Send + Sync + 'static,
    {
        Self::start_with(config, Arc::new(factory), Some(A::clone), true)
    }

    /// Results so far, without stopping. Every event published or visible in a ring at the
    /// time is included; `in_flight` bounds what may still be on its way. Sequential mode
    /// includes only threads that have exited. Returns `None` if the session was not started
    /// with [`start_snapshotting`](Self::start_snapshotting) or has finished.
    pub fn snapshot(&self) -> Option<Report<A>> {
        self.core.snapshot()
    }

    /// A handle that takes snapshots from any thread (a periodic reporter) without owning the
    /// session; its snapshots return `None` once the session has finished.
    pub fn snapshotter(&self) -> Snapshotter<A> {
        Snapshotter {
            core: self.core.handle(),
        }
    }
}

/// Takes snapshots of a session from any thread. See [`Session::snapshotter`].
pub struct Snapshotter<A: EventAnalysis> {
    core: Shared<A>,
}

impl<A: EventAnalysis> fmt::Debug for Snapshotter<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshotter").finish_non_exhaustive()
    }
}

impl<A: EventAnalysis + Clone> Snapshotter<A> {
    /// Results so far, as [`Session::snapshot`]; `None` once the session has finished.
    pub fn snapshot(&self) -> Option<Report<A>> {
        self.core.snapshot()
    }
}

impl<A: EventAnalysis + Clone> Core<A> {
    fn snapshot(&self) -> Option<Report<A>> {
        let started = crate::clock::now();
        let report = self.snapshot_inner();
        // The snapshot is cabprof's time: a `Stall` takes it out of the caller's open frames.
        tls::stalled_since(started);
        report
    }

    fn snapshot_inner(&self) -> Option<Report<A>> {
        let _work = work::runtime_work();
        // One snapshot at a time: each analyzer has a single answer slot.
        if self.forked() {
            return None;
        }
        let _one = self.snapshot_lock.lock();
        if self.finished.load(Ordering::Acquire) {
            return None;
        }
        let mut analysis = (self.factory)();
        let mut threads = Vec::new();
        let mut in_flight = 0;
        for a in &self.analyzers {
            a.clone_fn?;
            let want = a.snapshot_want.fetch_add(1, Ordering::AcqRel) + 1;
            a.wake();
            loop {
                if a.snapshot_done.load(Ordering::Acquire) >= want {
                    break;
                }
                if !a.alive() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            if let Some(out) = a.snapshot_out.lock().take() {
                if let Some(part) = out.analysis {
                    analysis.merge(part);
                }
                for t in out.threads {
                    push_thread(&mut threads, t);
                }
                in_flight += out.in_flight;
            }
        }
        self.inline.snapshot_into(&mut analysis, &mut threads);
        let mut r = self.report(analysis, threads);
        r.in_flight = in_flight.max(self.unpublished_bound());
        Some(r)
    }
}

impl<A: EventAnalysis> Drop for Session<A> {
    fn drop(&mut self) {
        let _ = self.core.finish();
    }
}

/// Finishes a session from elsewhere (a signal handler thread). Finishing twice yields `None`.
pub struct Finisher<A: EventAnalysis> {
    core: Shared<A>,
}

impl<A: EventAnalysis> fmt::Debug for Finisher<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finisher").finish_non_exhaustive()
    }
}

impl<A: EventAnalysis> Finisher<A> {
    /// Finish the session if nobody has; the report, or `None` if it was already finished.
    pub fn finish(&self) -> Option<Report<A>> {
        self.core.finish()
    }
}

impl<A: EventAnalysis> Core<A> {
    /// Whether this is a child process forked while the session ran.
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// `finish` in a forked child: the analyzers and the results live in the parent, and
    /// locks may have been held by threads that do not exist here, so take none.
    fn finish_forked(&self) -> Report<A> {
        let analysis = (self.factory)();
        let (drop_start, drop_end) = work::drop_as_runtime_work();
        let mut r = Report {
            drop_start,
            analysis,
            mode: self.mode,
            ring: self.ring,
            rate_used: 1.0,
            threads: Vec::new(),
            totals: ThreadStats::default(),
            analyzer_failures: vec![format!(
                "finished in process {}, forked from the profiled process {}: profiling is off \
                 after fork, and the results are the parent's",
                std::process::id(),
                self.pid
            )],
            in_flight: 0,
            elapsed: self.started.elapsed(),
            drop_end,
        };
        r.finish_totals();
        r
    }

    fn report(&self, analysis: A, mut threads: Vec<ThreadStats>) -> Report<A> {
        if let Some(t) = self.ringless.stats() {
            push_thread(&mut threads, t);
        }
        let rate_used = threads
            .iter()
            .map(|t| t.rate)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))))
            .unwrap_or(match self.mode {
                RunMode::Sampling { rate, .. } => rate,
                _ => 1.0,
            });
        let analyzer_failures = self.failures.lock().clone();
        let (drop_start, drop_end) = work::drop_as_runtime_work();
        let mut r = Report {
            drop_start,
            analysis,
            mode: self.mode,
            ring: self.ring,
            rate_used,
            threads,
            totals: ThreadStats::default(),
            analyzer_failures,
            in_flight: 0,
            elapsed: self.started.elapsed(),
            drop_end,
        };
        r.finish_totals();
        r
    }

    /// Sampling mode: an upper bound on events live producers wrote but have not yet
    /// published. A sampling producer publishes its position when it wraps and in each
    /// handoff block, so up to a ring's worth per live thread may be uncounted
    /// (it counts every event exactly when it exits). 0 in every other mode.
    fn unpublished_bound(&self) -> u64 {
        match self.mode {
            RunMode::Sampling { .. } => self.live_rings() as u64 * self.ring.slots() as u64,
            _ => 0,
        }
    }

    /// Sampling mode: give threads that have just ended a moment to close their rings, so
    /// their totals are exact. A scoped thread's `join` (and a pool's shutdown) can return
    /// before the thread's thread-local destructor has closed its ring; a live sampling
    /// producer's last events are only bounded (`in_flight`), a closed one's are counted
    /// exactly. Threads still running after [`ENDING_THREADS_GRACE`] are reported live.
    fn wait_for_ending_threads(&self) {
        if !matches!(self.mode, RunMode::Sampling { .. }) {
            return;
        }
        let deadline = Instant::now() + ENDING_THREADS_GRACE;
        while self.live_rings() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn live_rings(&self) -> usize {
        self.analyzers
            .iter()
            .map(|a| a.rings.load(Ordering::Relaxed))
            .sum()
    }

    fn finish(&self) -> Option<Report<A>> {
        let _work = work::runtime_work();
        if self.finished.swap(true, Ordering::AcqRel) {
            return None;
        }
        if self.forked() {
            return Some(self.finish_forked());
        }
        // Stop new events first, then take the finishing thread's own sink.
        {
            let mut global = HUB.lock();
            if global.as_ref().is_some_and(|h| h.key() == self.key) {
                if self.published {
                    tls::close();
                }
                *global = None;
            }
        }
        tls::retire_current_thread(self.key);
        self.wait_for_ending_threads();
        let unpublished = self.unpublished_bound();
        for a in &self.analyzers {
            a.stop.store(true, Ordering::Release);
            a.wake();
        }
        // Each analyzer's results are merged into the first's (taken as it is, not copied
        // into an empty instance).
        let mut analysis: Option<A> = None;
        let mut threads = Vec::new();
        for (i, a) in self.analyzers.iter().enumerate() {
            if let Some(msg) = a.failure.lock().take() {
                self.failures.lock().push(format!(
                    "analyzer {i}: analysis panicked: {msg}; the results of its rings are missing and their events are counted as dropped"
                ));
            }
        }
        for (i, h) in self.handles.lock().drain(..).enumerate() {
            match h.join() {
                Ok(out) => {
                    merge_into(&mut analysis, out.analysis);
                    for t in out.threads {
                        push_thread(&mut threads, t);
                    }
                }
                Err(panic) => {
                    let msg = panic_message(&*panic);
                    tracing::error!(analyzer = i, %msg, "cabprof analyzer panicked");
                    self.failures
                        .lock()
                        .push(format!("analyzer {i} panicked: {msg}"));
                }
            }
        }
        self.inline.finish_into(&mut analysis, &mut threads);
        tracing::info!("cabprof session finished");
        let analysis = analysis.unwrap_or_else(|| (self.factory)());
        let mut r = self.report(analysis, threads);
        r.in_flight = unpublished;
        Some(r)
    }
}
