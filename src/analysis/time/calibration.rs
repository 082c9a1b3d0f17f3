//! The cost of a timed call, measured on the instrumented code path itself, so that the time
//! analysis can take it out of the times it reports (overhead compensation, as in "Overhead
//! Compensation in Performance Profiling", Malony and Shende, Euro-Par 2004).
//!
//! A probe function, instrumented exactly as `#[profile]` instruments a function (the same
//! guard, the same out-of-line entry and exit), and a plain twin, both with a body of a few
//! nanoseconds of multiplies, are called in alternated batches inside a short session of the same mode as the one about to start; each batch is
//! timed with the session's clock. Per round:
//!
//! - **timed**: (timed probe batch − plain batch) / calls: what one timed instrumented call
//!   adds to the time of the frame that calls it (entry, exit, two clock reads, two ring
//!   pushes).
//! - **untimed**: the same with timing off (or, for sampled timing, counting down to the next
//!   timed call): what an untimed call adds to its caller.
//! - **inside**: the median duration the probe's own timed calls report, minus the plain
//!   call's cost: the part of a timed call that falls inside its own interval.
//! - **clock**: two clock reads back to back.
//! - **poll**: what one poll of an instrumented future (an `async fn` completing in one poll)
//!   adds to its caller beyond a call's cost (the `Poll` and `PollEnd` words, the task id,
//!   the wrapper): the same batches with the probe's body as an `async` block, polled once.
//!
//! Each figure is the median over the rounds; the spread (half the interquartile range of the
//! rounds' `timed`, plus one clock read) is what a compensated time can resolve. Out-of-order
//! execution overlaps part of an untimed probe with the work around it, more for a long
//! dependency chain, less for an empty function (a timed one's stamps wait for the work
//! before them); the probe's body stands for a small function.
//! `cargo bench -p cabprof-checks --bench time_fidelity` compares the compensated figures
//! with the same functions built plain.

use crate::__private::{
    probe_batch as batch, probe_body, probe_median as median, probe_plain as plain, PROBE_SITE,
};
use cabprof_cab::clock;
use cabprof_cab::event;
use cabprof_cab::runtime::{EventAnalysis, RuntimeConfig, Session};
use std::hint::black_box;

/// Calls per batch: a round is three batches of two words per instrumented call (the rounds
/// together may exceed a small ring's capacity; a batch that waited for the analyzer is an
/// outlier the medians leave out).
const BATCH: u64 = 200;
/// Rounds after the warm-up round.
const ROUNDS: usize = 15;
/// The probe's reported durations kept (one per timed call).
const KEPT: usize = 4096;

/// What a timed call costs, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Overhead {
    /// One clock read (two reads back to back, minus nothing: their difference).
    pub(crate) clock: f64,
    /// The part of a timed call inside its own interval.
    pub(crate) inside: f64,
    /// What a timed call adds to its caller's time.
    pub(crate) timed: f64,
    /// What an untimed call adds to its caller's time.
    pub(crate) untimed: f64,
    /// What a compensated time can resolve.
    pub(crate) spread: f64,
    /// What a poll of an instrumented future adds to its caller beyond [`timed`](Self::timed)
    /// (or [`untimed`](Self::untimed), for an untimed future), weighted by the session's time
    /// period.
    pub(crate) poll: f64,
}

/// The calibration session's key: the probe records into it, and only the probe does.
static PROBE_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// An instrumented function, shaped as `#[profile]` makes it (the body between the entry and
/// the exit, its input and result passed through barriers), recording into the private
/// calibration session: the same entry and exit code, with the session's key given rather
/// than read from the running session.
#[inline(never)]
fn probe(x: u64) -> u64 {
    let key = PROBE_KEY.load(std::sync::atomic::Ordering::Relaxed);
    let _frame = crate::__private::enter_keyed(&PROBE_SITE, key);
    let mut x = x;
    black_box(&mut x);
    let r = probe_body(x);
    black_box(&r);
    r
}

/// The probe as the future of an instrumented `async fn`, polled once to completion.
#[inline(never)]
fn probe_future(x: u64) -> u64 {
    let key = PROBE_KEY.load(std::sync::atomic::Ordering::Relaxed);
    poll_once(crate::__private::instrument_keyed(
        &PROBE_SITE,
        key,
        async move {
            let mut x = x;
            black_box(&mut x);
            probe_body(x)
        },
    ))
}

/// The plain twin of [`probe_future`].
#[inline(never)]
fn plain_future(x: u64) -> u64 {
    poll_once(async move {
        let mut x = x;
        black_box(&mut x);
        probe_body(x)
    })
}

fn poll_once<F: std::future::Future<Output = u64>>(f: F) -> u64 {
    use std::task::{Context, Poll, Waker};
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        // The body has no `.await`.
        Poll::Pending => unreachable!("the probe's future completes in its first poll"),
    }
}

/// The durations the probe's timed calls report, as the analyzer receives them.
#[derive(Clone, Debug, Default)]
struct ProbeTicks {
    probe: u32,
    ticks: Vec<u64>,
}

impl EventAnalysis for ProbeTicks {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some((m, t)) = event::as_timed_return(w) {
                if m == self.probe && self.ticks.len() < KEPT {
                    self.ticks.push(t);
                }
            }
        }
    }

    fn merge(&mut self, other: Self) {
        let room = KEPT - self.ticks.len().min(KEPT);
        self.ticks.extend(other.ticks.into_iter().take(room));
    }
}

fn half_iqr(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n < 4 {
        return 0.0;
    }
    (v[3 * n / 4] - v[n / 4]) / 2.0
}

/// Measure [`Overhead`] in a session of `config`'s mode that times one call in `period` (1:
/// every call), with no session running; restores the time period it found. On a thread of
/// its own: the caller's thread-local state (its shadow stack, its sampled-timing countdowns)
/// stays as it was, and at process exit, when the main thread's thread-locals are gone, the
/// probe still records.
pub(crate) fn measure(config: &RuntimeConfig, period: u32) -> Result<Overhead, String> {
    let cpu = current_cpu();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("cabprof-calibration".into())
            .spawn_scoped(s, || {
                if let Some(cpu) = cpu {
                    pin_to_cpu(cpu);
                }
                measure_here(config, period)
            })
            .map_err(|e| format!("no thread to calibrate on: {e}"))?
            .join()
            .map_err(|_| "the calibration panicked".to_string())?
    })
}

/// The CPU the calling thread runs on (Linux).
fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_getcpu` takes no arguments and only reads the calling thread's state.
        usize::try_from(unsafe { libc::sched_getcpu() }).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Keep the calling thread on `cpu` (Linux; elsewhere, and on failure, nothing).
fn pin_to_cpu(cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: `set` is a zeroed `cpu_set_t` that `CPU_SET` fills within its bounds (it checks
    // `cpu` against them); `sched_setaffinity(0, ..)` reads it and changes only this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < 8 * std::mem::size_of::<libc::cpu_set_t>() {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// One batch each of `plain`, of `probe` timing every call and of `probe` timing none, in
/// an order rotated by `round` so that no batch always follows the same one: their times per
/// call, in that order.
fn rotated(round: usize, plain: fn(u64) -> u64, probe: fn(u64) -> u64) -> [f64; 3] {
    let mut one = [0.0; 3];
    for k in 0..3 {
        let which = (k + round) % 3;
        one[which] = match which {
            0 => batch(plain, BATCH),
            1 => {
                crate::__private::set_time_period(1);
                batch(probe, BATCH)
            }
            _ => {
                crate::__private::set_time_period(0);
                batch(probe, BATCH)
            }
        };
    }
    one
}

fn measure_here(config: &RuntimeConfig, period: u32) -> Result<Overhead, String> {
    let probe_id = PROBE_SITE.id();
    // Private: no other thread's events reach it, and instrumented code elsewhere keeps
    // seeing no session (or an undecided one, waiting for the process-wide session).
    let session = Session::start_private(config.clone(), move || ProbeTicks {
        probe: probe_id,
        ticks: Vec::new(),
    })
    .map_err(|e| e.to_string())?;
    PROBE_KEY.store(session.key(), std::sync::atomic::Ordering::Relaxed);
    let before = crate::__private::time_period();
    // Timed batches time every call, untimed ones none (see `rotated`). (With sampled timing
    // an untimed call also counts down and keeps the coarse clock's tick, about a nanosecond
    // more; a countdown here would change the global period that other threads' countdowns
    // read.)
    let (mut timed, mut untimed, mut plains, mut clocks) = (vec![], vec![], vec![], vec![]);
    let (mut timed_polls, mut untimed_polls) = (vec![], vec![]);
    for round in 0..=ROUNDS {
        let futures = rotated(round, plain_future, probe_future);
        let one = rotated(round, plain, probe);
        let c0 = clock::now();
        let c1 = clock::now();
        if round > 0 {
            plains.push(one[0]);
            timed.push(one[1] - one[0]);
            untimed.push(one[2] - one[0]);
            clocks.push(c1.saturating_sub(c0) as f64);
            timed_polls.push(futures[1] - futures[0] - (one[1] - one[0]));
            untimed_polls.push(futures[2] - futures[0] - (one[2] - one[0]));
        }
    }
    crate::__private::set_time_period(before);
    let report = session.finish();
    if report.analysis.ticks.is_empty() {
        return Err("the probe's timed calls did not reach the calibration session".into());
    }
    let plain_call = median(&mut plains);
    let mut reported: Vec<f64> = report.analysis.ticks.iter().map(|&t| t as f64).collect();
    let clock = median(&mut clocks);
    let timed_cost = median(&mut timed);
    // A session timing one call in `period` times one future in `period` too.
    let k = f64::from(period.max(1));
    let poll = (median(&mut timed_polls) + (k - 1.0) * median(&mut untimed_polls)) / k;
    Ok(Overhead {
        poll: poll.max(0.0),
        clock,
        inside: (median(&mut reported) - plain_call).max(0.0),
        timed: timed_cost.max(0.0),
        untimed: median(&mut untimed).max(0.0),
        spread: half_iqr(&mut timed) + clock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads_of_known_lists() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
        assert_eq!(median(&mut [f64::NAN, 1.0, 2.0]), 2.0);
        assert_eq!(half_iqr(&mut [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), 2.0);
    }
}
