//! What `#[cabprof::profile]` costs per call, and what `paths` adds per branch.
//!
//! The application thread is pinned to core 0 and the analyzer (the method-count analysis,
//! which keeps up) to the other core, in concurrent exhaustive mode with the default ring. Each
//! figure is the median (with the 10th percentile and the min) of `REPS` runs of `CALLS` calls,
//! in ns per call, of an `#[inline(never)]` function:
//!
//! - `empty fn`: uninstrumented, the floor;
//! - `#[profile], no session`: instrumented, nothing running (one load and a branch);
//! - `8 ifs, plain` and `8 ifs, #[profile], no session`: the same with a body of eight
//!   data-dependent `if`s, so that the no-session cost is also seen next to a body that does
//!   something;
//! - `#[profile]`: instrumented, session running (a `Call` and a `Return` event, shadow stack);
//! - `2 x emit`: the same two events written by hand, for the runtime's share;
//! - `8 ifs, #[profile]` and `8 ifs, #[profile(paths)]`: eight data-dependent `if`s, so the
//!   difference divided by 8 is the path instrumentation's cost per branch, its one extra
//!   `Path` event at exit included;
//! - `no ifs, #[profile(paths)]`: the empty fn with `paths`: that one `Path` event alone, so
//!   `(8 ifs - no ifs) / 8` is the cost of the branch instrumentation itself.
//!
//! `cargo bench --bench profile_overhead` (release, LTO as the workspace's bench profile sets).

use cabprof::profile;
use cabprof_analyses::MethodCount;
use cabprof_cab::event::{Event, MethodId};
use cabprof_cab::runtime::{emit, RuntimeConfig, Session};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Calls per run: a few milliseconds per run, many ring laps.
const CALLS: u64 = 2_000_000;
/// Runs per figure; the median is reported with the min and the 10th percentile. On a shared
/// machine the low figures are the best estimate of the undisturbed cost (interference only
/// ever adds time).
const REPS: usize = 61;

#[inline(never)]
fn empty(x: u64) -> u64 {
    x
}

#[profile]
#[inline(never)]
fn profiled(x: u64) -> u64 {
    x
}

/// `paths` on a body without branches: one path, so one extra `Path` event per call.
#[profile(paths)]
#[inline(never)]
fn straight_paths(x: u64) -> u64 {
    x
}

#[inline(never)]
fn two_emits(x: u64) -> u64 {
    let m = MethodId::new(1).unwrap();
    emit(Event::call(MethodId::ROOT, m));
    emit(Event::ret(m));
    x
}

/// The eight `if`s of both branchy functions.
macro_rules! eight_ifs {
    ($x:ident) => {{
        let mut s = 0u64;
        if $x & 1 != 0 {
            s += 3;
        }
        if $x & 2 != 0 {
            s ^= 5;
        }
        if $x & 4 != 0 {
            s += 7;
        }
        if $x & 8 != 0 {
            s ^= 11;
        }
        if $x & 16 != 0 {
            s += 13;
        }
        if $x & 32 != 0 {
            s ^= 17;
        }
        if $x & 64 != 0 {
            s += 19;
        }
        if $x & 128 != 0 {
            s ^= 23;
        }
        s
    }};
}

#[profile]
#[inline(never)]
fn branchy(x: u64) -> u64 {
    eight_ifs!(x)
}

#[inline(never)]
fn branchy_plain(x: u64) -> u64 {
    eight_ifs!(x)
}

// The same body written out, since macros in a body are straight-line code to `paths`.
#[profile(paths)]
#[inline(never)]
fn branchy_paths(x: u64) -> u64 {
    let mut s = 0u64;
    if x & 1 != 0 {
        s += 3;
    }
    if x & 2 != 0 {
        s ^= 5;
    }
    if x & 4 != 0 {
        s += 7;
    }
    if x & 8 != 0 {
        s ^= 11;
    }
    if x & 16 != 0 {
        s += 13;
    }
    if x & 32 != 0 {
        s ^= 17;
    }
    if x & 64 != 0 {
        s += 19;
    }
    if x & 128 != 0 {
        s ^= 23;
    }
    s
}

/// Nanoseconds per call of `f` over `CALLS` calls.
fn per_call(f: fn(u64) -> u64) -> f64 {
    let start = Instant::now();
    let mut acc = 0u64;
    for i in 0..CALLS {
        // Mix the bits so the branchy functions see a varied but cheap input.
        let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        acc = acc.wrapping_add(f(black_box(x)));
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

struct Figure {
    median: f64,
    min: f64,
    p10: f64,
}

/// Measure several functions with their runs interleaved (A B C A B C ...), so that a change
/// in the machine's load hits them alike.
fn measure(fs: &[fn(u64) -> u64]) -> Vec<Figure> {
    for &f in fs {
        per_call(f); // warm up (and register the method id)
    }
    let mut runs = vec![Vec::with_capacity(REPS); fs.len()];
    for _ in 0..REPS {
        for (i, &f) in fs.iter().enumerate() {
            // Let the analyzer drain the previous run's backlog (at most one ring, well under
            // a millisecond of work), so no run pays for another.
            std::thread::sleep(Duration::from_millis(2));
            runs[i].push(per_call(f));
        }
    }
    runs.into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            Figure {
                median: v[REPS / 2],
                min: v[0],
                p10: v[REPS / 10],
            }
        })
        .collect()
}

fn main() {
    let cores = core_affinity::get_core_ids().map_or(1, |c| c.len());
    println!("profile_overhead: {CALLS} calls per run, median of {REPS} runs, {cores} cores");

    // Default ring, exhaustive. Starting the session pins this thread to core 0 and the
    // analyzer to the last core; this thread stays pinned for the figures without a session.
    let config = RuntimeConfig {
        pin: true,
        pin_application: true,
        ..RuntimeConfig::default()
    };
    let session = Session::start(config, MethodCount::default).expect("session starts");
    let with_session = measure(&[profiled, two_emits, branchy, branchy_paths, straight_paths]);
    let report = session.finish();
    let without = measure(&[empty, profiled, branchy_plain, branchy]);
    let ([active, emits, plain, paths, one_path], [floor, inactive, ifs_floor, ifs_inactive]) =
        (&with_session[..], &without[..])
    else {
        unreachable!("one figure per function")
    };

    let rows = [
        ("empty fn", floor),
        ("#[profile], no session", inactive),
        ("8 ifs, plain", ifs_floor),
        ("8 ifs, #[profile], no session", ifs_inactive),
        ("#[profile]", active),
        ("2 x emit (runtime alone)", emits),
        ("8 ifs, #[profile]", plain),
        ("8 ifs, #[profile(paths)]", paths),
        ("no ifs, #[profile(paths)]", one_path),
    ];
    println!("{:<30} {:>10} {:>10} {:>10}", "", "median", "p10", "min");
    for (name, f) in rows {
        println!(
            "{:<30} {:>10.2} {:>10.2} {:>10.2}",
            name, f.median, f.p10, f.min
        );
    }
    let per_branch = |p: f64, q: f64| (p - q) / 8.0;
    println!();
    println!(
        "#[profile]: {:.2} ns/call over the empty fn, median ({:.2} p10, {:.2} min); \
         {:.1}x its time; target <= 5 ns",
        active.median - floor.median,
        active.p10 - floor.p10,
        active.min - floor.min,
        active.median / floor.median
    );
    println!(
        "#[profile] vs 2 x emit: {:.2} ns/call for the guard, shadow stack and id (median)",
        active.median - emits.median
    );
    println!(
        "#[profile], no session: {:.2} ns/call over the empty fn (median; {:.2} min), {:.2} \
         over the plain 8 ifs (median; {:.2} min); target <= 0.5 ns",
        inactive.median - floor.median,
        inactive.min - floor.min,
        ifs_inactive.median - ifs_floor.median,
        ifs_inactive.min - ifs_floor.min
    );
    println!(
        "paths: {:.2} ns/call over #[profile] ({:.2}x); {:.2} ns per branch with the Path \
         event, median ({:.2} p10, {:.2} min); target <= 2 ns",
        paths.median - plain.median,
        paths.median / plain.median,
        per_branch(paths.median, plain.median),
        per_branch(paths.p10, plain.p10),
        per_branch(paths.min, plain.min)
    );
    println!(
        "paths: the Path event {:.2} ns/call (median); the branch instrumentation alone \
         {:.2} ns per branch, median ({:.2} p10)",
        one_path.median - active.median,
        per_branch(paths.median - one_path.median, plain.median - active.median),
        per_branch(paths.p10 - one_path.p10, plain.p10 - active.p10)
    );
    println!(
        "session: {} events, {} producer blocks, {} dropped",
        report.totals.events, report.totals.blocks, report.totals.dropped
    );
}
