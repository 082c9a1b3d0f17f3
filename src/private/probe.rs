//! The calibration probe: what an instrumented call costs, measured on the program's own
//! thread, in its own ring, while the program runs.
//!
//! What a timed call costs its caller is not a constant of the machine. On the 2-vCPU hosts
//! these figures come from it moved between two levels about 20 clock ticks apart, within one
//! process and from one process to the next (where the host put the two vCPUs, and what state
//! the ring's lines were in), so a calibration taken once, before the session, was wrong for
//! the whole run whenever the level changed. So while a timed session runs, each thread
//! measures again each time its ring laps (at most once per [`MIN_GAP_TICKS`]): a probe
//! function, entered and left through the very code [`enter_recorded`] and [`leave`] that every
//! instrumented function runs (writing a probe word where a call writes its `Call` and
//! `Return`), against a plain twin, in alternated batches. The thread then writes a `Stall`
//! word for the time the probe took (the frames open around it lose it) and a calibration word
//! with the result, which the time analysis uses for that thread's calls from then on.
//!
//! What the probe does not stand for: a function of a few nanoseconds whose body is a short
//! chain of loads and data-dependent branches (a decoder's copy of a match, a bit-buffer
//! refill). The entry's clock read waits for the work before it and the exit's for the body,
//! so a timed body runs alone between them and its figure is its latency; inline in its
//! caller, the plain build overlaps that work with the caller's and predicts its branches from
//! the caller's, and `perf` finds the recorded copy's extra time at its branches' targets,
//! even with no clock read (the `self_shares` bench's counting profile). A recorded copy kept
//! inline in the caller measured the same. That time stays in the
//! function's own figure: a profile of such functions over-weights them against their caller
//! (they are usually below the calibration's resolution, and shown as a bound).
//!
//! A lap is a ring's worth of words, so a thread is probed in proportion to what it writes
//! (480 probe calls per lap of a 2 MiB ring, about 131,000 calls): well under 1 % of its
//! calls and of its time.

use super::frames::{enter_recorded, leave, Entry};
use super::timing::{sample, COARSE, SAMPLED, UNTIMED};
use super::Site;
use cabprof_cab::clock;
use cabprof_cab::event::{as_timed_return, CallCosts, Event};
use cabprof_cab::runtime::{emit, emit_with, session_key};
use std::cell::Cell;
use std::hint::black_box;

/// Rounds of three batches (plain, timed, untimed) per probe.
const ROUNDS: usize = 5;
/// Calls per batch.
const BATCH: u64 = 32;
/// Clock ticks that must pass between two probes of one thread (about 3 ms at 3 GHz): a
/// thread whose ring laps faster (a small ring) is probed at most this often.
const MIN_GAP_TICKS: u64 = 1 << 23;

thread_local! {
    /// Whether the probe's calls are timed now.
    static TIMED: Cell<bool> = const { Cell::new(false) };
    /// The durations the probe's timed calls measured, summed.
    static TICKS: Cell<u64> = const { Cell::new(0) };
    /// The clock when this thread was last probed (0: never).
    static LAST: Cell<u64> = const { Cell::new(0) };
    /// A probe runs on this thread: a lap during it starts no other.
    static PROBING: Cell<bool> = const { Cell::new(false) };
}

/// The probe's site: unregistered, so that it takes no id from the program's functions.
pub(crate) static PROBE_SITE: Site =
    Site::unregistered(|| "cabprof::calibration::probe", module_path!());

/// Rounds of the probe's body: four independent multiply chains, about 10 ns of work.
const BODY_STEPS: u32 = 16;

/// The probe's body (and its twin's). Not empty: out-of-order execution runs part of the
/// instrumentation alongside the function's own work, as it does in a real function. How much
/// depends on the function (a long dependency chain hides more of its calls' cost than a
/// one-multiply accessor does). Sixteen rounds hide an untimed call's work behind the body
/// about as the functions of `cabprof_checks::fidelity` and of miniz_oxide hide it: a shorter
/// body hides less, and a sampled session then takes too much out of every untimed call; a
/// much longer one hides all of it. A timed call's cost barely moves with the length (its
/// exit's clock read waits for the body). `cargo bench -p cabprof-checks --bench
/// time_fidelity` judges it.
#[inline(always)]
pub(crate) fn body(x: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let (mut a, mut b, mut c, mut d) = (x, x ^ 1, x ^ 2, x ^ 3);
    // A loop, not 32 unrolled multiplies: the body is then shaped as a small function's.
    for _ in 0..black_box(BODY_STEPS) {
        a = a.wrapping_mul(K).wrapping_add(1);
        b = b.wrapping_mul(K).wrapping_add(3);
        c = c.wrapping_mul(K).wrapping_add(5);
        d = d.wrapping_mul(K).wrapping_add(7);
    }
    a ^ b ^ c ^ d
}

/// The plain twin.
#[inline(never)]
pub(crate) fn plain(x: u64) -> u64 {
    body(black_box(x))
}

/// The probe, shaped as `#[profile]` makes a function (`run`): the session check inline, the
/// recorded copy out of line.
#[inline(never)]
fn probe(x: u64) -> u64 {
    let key = session_key();
    if key == 0 {
        return body(x);
    }
    probe_recorded(x, key)
}

/// The probe's recorded copy, as `run_recorded`.
#[cold]
#[inline(never)]
fn probe_recorded(x: u64, key: u64) -> u64 {
    let _frame = ProbeFrame(enter_recorded::<true>(&PROBE_SITE, key));
    let mut x = x;
    black_box(&mut x);
    let r = body(x);
    black_box(&r);
    r
}

/// The probe's frame guard: its drop is [`leave`]'s probe copy.
struct ProbeFrame(Entry);

impl Drop for ProbeFrame {
    #[inline(always)]
    fn drop(&mut self) {
        let e = self.0;
        if e.callee() != 0 {
            leave::<true>(e.callee(), e.caller(), e.start);
        }
    }
}

/// The probe's entry: what a call of the running session keeps for its exit, timed or not as
/// the batch asks. With sampled timing an untimed call also counts down to its next timed one
/// and keeps the coarse clock's tick, and a timed one marks its reading: the probe does the
/// same, so that it costs what the session's calls cost (its countdown is id 0's, which no
/// function has).
#[inline(always)]
pub(super) fn entry_start() -> u64 {
    let k = super::time_period();
    if TIMED.with(Cell::get) {
        if k > 1 {
            (clock::now_before() & (SAMPLED - 1)) | SAMPLED
        } else {
            clock::now_before()
        }
    } else if k > 1 {
        black_box(sample(0, k));
        super::ticker::seq() | COARSE
    } else {
        UNTIMED
    }
}

/// The probe's exit word: a probe word in place of its `Return` or `TimedReturn`, whose
/// duration is kept (and of a timeline's exit stamp, which costs the same push).
#[inline(always)]
pub(super) fn exit_word(e: Event) {
    if let Some((_, ticks)) = as_timed_return(e.word()) {
        TICKS.with(|t| t.set(t.get().wrapping_add(ticks)));
    }
    // A thread mark (timeline mode) names the thread to the session, probe or not.
    if cabprof_cab::event::as_thread_mark(e.word()).is_some() {
        return emit(e);
    }
    emit(Event::probe());
}

/// Ticks per call of `f` over a batch of `calls`, each call's input the last one's result.
pub(crate) fn batch(f: fn(u64) -> u64, calls: u64) -> f64 {
    let mut x = 1;
    let t0 = clock::now();
    for _ in 0..calls {
        x = f(x);
    }
    let t1 = clock::now();
    black_box(x);
    t1.saturating_sub(t0) as f64 / calls as f64
}

/// The median as `cabprof-bench-support`'s `stats::median` defines it (this crate cannot
/// depend on that unpublished one): values ordered by `f64::total_cmp` (a NaN sorts to an end
/// by its sign), an even count's median is the mean of the middle two, and an empty list's is
/// `NaN`.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// This thread's ring lapped (a call of the session `key` is being entered): probe again if
/// the time analysis runs and the last probe is old enough. Out of line and cold.
#[cold]
#[inline(never)]
pub(super) fn on_lap(key: u64) {
    // The probe's calls record into the running session: a private one's entry (the start
    // calibration's) is not probed.
    if !cabprof_cab::lap::take() || super::time_period() == 0 || session_key() != key {
        return;
    }
    let start = clock::now();
    let last = LAST.with(Cell::get);
    if last != 0 && start.wrapping_sub(last) < MIN_GAP_TICKS {
        return;
    }
    if PROBING.with(|c| c.replace(true)) {
        return;
    }
    LAST.with(|c| c.set(start));
    let told = cabprof_cab::lap::stalled();
    let costs = measure();
    PROBING.with(|c| c.set(false));
    // The probe's time, less the waits for the analyzer the producer already told in `Stall`
    // words of its own while the probe ran.
    let waited = cabprof_cab::lap::stalled().wrapping_sub(told);
    let took = clock::now().saturating_sub(start).saturating_sub(waited);
    emit_with(key, Event::stall(took));
    emit_with(key, Event::calibration(costs));
}

/// One probe: [`ROUNDS`] rounds of a plain, a timed and an untimed batch, in rotated order;
/// each cost the median over the rounds.
fn measure() -> CallCosts {
    let was = TIMED.with(Cell::get);
    let (mut timed, mut untimed, mut inside) = ([0.0; ROUNDS], [0.0; ROUNDS], [0.0; ROUNDS]);
    for round in 0..ROUNDS {
        let mut one = [0.0; 3];
        let mut reported = 0.0;
        for k in 0..3 {
            let which = (k + round) % 3;
            one[which] = match which {
                0 => batch(plain, BATCH),
                1 => {
                    TIMED.with(|c| c.set(true));
                    TICKS.with(|c| c.set(0));
                    let t = batch(probe, BATCH);
                    reported = TICKS.with(Cell::get) as f64 / BATCH as f64;
                    t
                }
                _ => {
                    TIMED.with(|c| c.set(false));
                    batch(probe, BATCH)
                }
            };
        }
        timed[round] = one[1] - one[0];
        untimed[round] = one[2] - one[0];
        inside[round] = reported - one[0];
    }
    TIMED.with(|c| c.set(was));
    CallCosts {
        timed: median(&mut timed),
        untimed: median(&mut untimed),
        inside: median(&mut inside),
    }
}
