//! The coarse clock of sampled timing: a ticker thread's clock readings, about one a
//! millisecond, so that an untimed call can tell at its exit whether it was long.
//!
//! With sampled timing (one call in K per function and thread timed) a rare long call is
//! usually not in the sample, and an estimate scaled from the sample would miss it entirely,
//! interval included. An untimed call therefore keeps the number of the last tick at its entry
//! (one load of a line written once per tick) and compares it at its exit with the current one
//! (one load and a compare): if the ticker ticked at least [`LONG_TICKS`] times in between,
//! the call is long, so it reads the clock and returns with a `LongReturn` word carrying its
//! duration, measured from the middle of the tick interval it entered in (each tick's reading
//! is kept here, [`HISTORY`] of them). A timed call of a sampled session asks the same question
//! at its exit (did that many ticks come after its entry?), so that "long" means the same for
//! timed and untimed calls, and the time analysis can count the long calls in full and
//! estimate only the others from the sample.
//!
//! One ticker per process, running while a session with sampled timing runs: started before
//! the session ([`start`]), stopped and joined when it finishes ([`stop`]). It also stops by
//! itself once no session has run for [`IDLE_TICKS`] ticks (a session dropped without
//! `finish`). A child forked from a process whose ticker runs has no ticker thread: its tick
//! number stays where it was, so no call is ever found long there, and [`stop`] in the child
//! does not wait for a thread it does not have.

use cabprof_cab::clock;
use cabprof_cab::runtime::{activity, Activity};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the ticker sleeps between ticks (its intervals are this plus the scheduler's
/// lateness).
pub(crate) const PERIOD: Duration = Duration::from_millis(1);

/// Tick readings kept: a call's entry is placed from them if it returned within this many
/// ticks (about 8 s); an older entry is placed from the mean interval since (see
/// [`entry_estimate`]).
const HISTORY: usize = 8192;

/// Ticks that must come during a call for it to be long (about 17 ms at 1.1 ms a tick). Placed
/// from the middle of the interval it entered in, a long call's duration is off by at most half
/// an interval, under 4 % of it. Not fewer: a call of about the threshold is found long only
/// when it entered late in its interval, so calls that all last about as long as the threshold
/// (1 ms calls against a two-tick threshold, say) would all be placed too early, and their
/// errors would add up instead of cancelling. Not more: a call shorter than the threshold is
/// estimated from the sample, rare or not.
pub(crate) const LONG_TICKS: u64 = 16;

/// Ticks without a session after which the ticker stops by itself.
const IDLE_TICKS: u32 = 200;

/// The number of the last tick (0: none yet), alone on its cache line: the hot path reads
/// it, and it changes once per tick.
#[repr(align(128))]
struct Line(AtomicU64);

static SEQ: Line = Line(AtomicU64::new(0));

/// Tick `n`'s clock reading, at `n % HISTORY`; written before `SEQ` says `n`.
static AT: [AtomicU64; HISTORY] = [const { AtomicU64::new(0) }; HISTORY];

/// The running ticker: its thread, and the process that started it.
struct Running {
    thread: JoinHandle<()>,
    pid: u32,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);
/// The process whose ticker [`RUNNING`] holds (0: none): checked before taking the lock, which
/// a forked child may have inherited held.
static PID: AtomicU32 = AtomicU32::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

/// The intervals of the ticks so far (for the analysis' interval): their count, sum, and sum
/// of cubes (`f64` bits), in clock ticks. Written by the ticker thread alone; read after it
/// stopped, or while it runs (a snapshot, from fields a tick apart at worst). Atomics, not a
/// lock that a forked child could inherit held.
static N: AtomicU64 = AtomicU64::new(0);
static SUM: AtomicU64 = AtomicU64::new(0);
static CUBES: AtomicU64 = AtomicU64::new(0);

/// The last tick's number.
#[inline(always)]
pub(super) fn seq() -> u64 {
    SEQ.0.load(Ordering::Acquire)
}

/// Whether at least [`LONG_TICKS`] ticks came after clock reading `start` (a timed call's
/// entry): whether the tick that many before the next one did.
#[inline(always)]
pub(super) fn long_since(start: u64) -> bool {
    let s = seq();
    s >= LONG_TICKS && AT[(s + 1 - LONG_TICKS) as usize % HISTORY].load(Ordering::Relaxed) > start
}

/// Publish tick `n`, read now.
fn tick(n: u64) -> u64 {
    let now = clock::now();
    AT[n as usize % HISTORY].store(now, Ordering::Relaxed);
    SEQ.0.store(n, Ordering::Release);
    now
}

/// The clock reading at the entry of an untimed call entered after tick `entered` and
/// ending at `end`, the last tick then being `last`: the middle of the interval it entered in,
/// or for an interval no longer kept, the oldest kept reading less the mean interval since
/// times the ticks between.
#[cold]
pub(super) fn entry_estimate(entered: u64, last: u64) -> u64 {
    let at = |n: u64| AT[n as usize % HISTORY].load(Ordering::Relaxed);
    // The ticker may be writing the slot after `last`: slots older than that are intact.
    let oldest = last.saturating_sub(HISTORY as u64 - 2);
    if entered >= oldest && entered < last {
        let (lo, hi) = (at(entered), at(entered + 1));
        return lo + hi.saturating_sub(lo) / 2;
    }
    let (o, l) = (at(oldest), at(last));
    let mean = l.saturating_sub(o) as f64 / (last - oldest).max(1) as f64;
    let back = ((oldest - entered.min(oldest)) as f64 - 0.5) * mean;
    o.saturating_sub(back.max(0.0) as u64)
}

/// Start the ticker (a session with sampled timing is about to start), with its interval
/// statistics from zero; a ticker left running (a session dropped without `finish`) is
/// stopped first.
pub(crate) fn start() {
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = running.take() {
        join(r);
    }
    N.store(0, Ordering::Relaxed);
    SUM.store(0f64.to_bits(), Ordering::Relaxed);
    CUBES.store(0f64.to_bits(), Ordering::Relaxed);
    STOP.store(false, Ordering::Relaxed);
    PID.store(std::process::id(), Ordering::Relaxed);
    // The first tick before the session starts: every call entering it has a tick before it.
    let first = seq() + 1;
    let t0 = tick(first);
    let spawned = std::thread::Builder::new()
        .name("cabprof-ticker".into())
        .spawn(move || run(first, t0));
    if let Ok(thread) = spawned {
        *running = Some(Running {
            thread,
            pid: std::process::id(),
        });
    }
}

/// The ticker's loop.
fn run(mut n: u64, mut last: u64) {
    let mut idle = 0;
    while !STOP.load(Ordering::Relaxed) {
        std::thread::park_timeout(PERIOD);
        if STOP.load(Ordering::Relaxed) {
            break;
        }
        n += 1;
        let now = tick(n);
        let d = now.saturating_sub(last) as f64;
        last = now;
        let add = |a: &AtomicU64, x: f64| {
            let v = f64::from_bits(a.load(Ordering::Relaxed)) + x;
            a.store(v.to_bits(), Ordering::Relaxed);
        };
        add(&SUM, d);
        add(&CUBES, d * d * d);
        N.fetch_add(1, Ordering::Relaxed);
        idle = if activity() == Activity::Idle {
            idle + 1
        } else {
            0
        };
        if idle >= IDLE_TICKS {
            break;
        }
    }
}

/// Stop the ticker and wait for its thread (a session has finished, or did not start).
pub(crate) fn stop() {
    if PID.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(r) = running {
        join(r);
    }
}

fn join(r: Running) {
    // A forked child has no ticker thread to join: forget the handle.
    if r.pid != std::process::id() {
        std::mem::forget(r.thread);
        return;
    }
    STOP.store(true, Ordering::Relaxed);
    r.thread.thread().unpark();
    let _ = r.thread.join();
}

/// The ticker's intervals since it last started: their mean, and the variance of the
/// error of an entry placed in the middle of the interval it fell in, for an entry at a
/// random moment (`E[I³] / (12 E[I])`: longer intervals catch more entries). In clock ticks
/// (and ticks squared); `None` before two ticks.
pub(crate) fn intervals() -> Option<(f64, f64)> {
    let n = N.load(Ordering::Relaxed);
    let sum = f64::from_bits(SUM.load(Ordering::Relaxed));
    let cubes = f64::from_bits(CUBES.load(Ordering::Relaxed));
    (n > 0 && sum > 0.0).then(|| (sum / n as f64, cubes / (12.0 * sum)))
}
