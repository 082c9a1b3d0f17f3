//! A program with known costs, built twice from one source (a `macro_rules!` stamps it out):
//! `plain`, and `instrumented` with `#[cabprof::profile]` on every function. The plain build is
//! the reference nobody here wrote a number for: its functions' costs are measured with plain
//! loops, and the time analysis' figures for the instrumented build (raw and compensated) are
//! compared with them (`benches/time_fidelity.rs`, `tests/it/time_fidelity.rs`).
//!
//! - `tiny`: one multiply;
//! - `leaf`: 800 multiplies (four independent chains);
//! - `mid`: 800 multiplies, and 4 calls of `leaf` and 20 of `tiny` among them;
//! - `kernel`: a 40-round multiply-rotate chain on one `u64`, pure register arithmetic (the
//!   shape of a hash or a checksum, which a compiler moves freely across opaque calls);
//! - `spin(n)`: a loop calling `kernel` n times, each call's input its last result: almost
//!   all of its time is its callee's, so its own (self) time is the loop's few cycles;
//! - `run(n)`: `mid` n times, then `spin(4n)`.
//!
//! Every function is `#[inline(never)]` in both builds, so both have the same calls.

use cabprof::{Analysis, ReportData, Session};
use std::hint::black_box;
use std::time::Instant;

const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// `steps` rounds of four independent multiply-add chains from `x`: about one multiply per
/// cycle, so that little of a function's work is still in flight when its exit reads the
/// clock (an unserialised clock read does not wait for it).
#[inline(always)]
fn work(x: u64, steps: u32) -> u64 {
    let (mut a, mut b, mut c, mut d) = (x, x ^ 1, x ^ 2, x ^ 3);
    for _ in 0..steps {
        a = a.wrapping_mul(K).wrapping_add(1);
        b = b.wrapping_mul(K).wrapping_add(3);
        c = c.wrapping_mul(K).wrapping_add(5);
        d = d.wrapping_mul(K).wrapping_add(7);
    }
    a ^ b ^ c ^ d
}

macro_rules! program {
    ($name:ident $(, #[$attr:meta])?) => {
        /// The program, built this way.
        pub mod $name {
            use super::{work, K};
            use std::hint::black_box;

            /// One multiply.
            #[inline(never)]
            $(#[$attr])?
            pub fn tiny(x: u64) -> u64 {
                black_box(x).wrapping_mul(K)
            }

            /// 800 multiplies.
            #[inline(never)]
            $(#[$attr])?
            pub fn leaf(x: u64) -> u64 {
                work(black_box(x), 200)
            }

            /// 800 multiplies in 20 slices, each followed by a call of `tiny`, and every
            /// fifth by one of `leaf`.
            #[inline(never)]
            $(#[$attr])?
            pub fn mid(x: u64) -> u64 {
                let mut v = black_box(x);
                for i in 0..20 {
                    v = work(v, 10);
                    v ^= tiny(v);
                    if i % 5 == 0 {
                        v ^= leaf(v);
                    }
                }
                v
            }

            /// 40 rounds of multiply, rotate and xor on one value: a dependent chain.
            #[inline(never)]
            $(#[$attr])?
            pub fn kernel(x: u64) -> u64 {
                let mut v = x;
                for i in 0..40u64 {
                    v = v.wrapping_mul(K).rotate_left(17) ^ i;
                }
                v
            }

            /// `kernel` `n` times, each call on the last one's result.
            #[inline(never)]
            $(#[$attr])?
            pub fn spin(n: u64) -> u64 {
                let mut v = black_box(n);
                for _ in 0..n {
                    v = kernel(v);
                }
                v
            }

            /// `mid` `n` times, then `spin(4 n)`.
            #[inline(never)]
            $(#[$attr])?
            pub fn run(n: u64) -> u64 {
                let mut v = 1;
                for i in 0..n {
                    v ^= mid(v ^ i);
                }
                v ^ spin(4 * n)
            }
        }
    };
}

program!(plain);
program!(instrumented, #[cabprof::profile]);

/// The functions, in the order tables list them.
pub const FUNCTIONS: [&str; 6] = ["run", "mid", "leaf", "tiny", "spin", "kernel"];
/// Index of `spin` in [`FUNCTIONS`]: a caller whose own time is a loop's.
pub const SPIN: usize = 4;
/// Index of `kernel` in [`FUNCTIONS`]: the pure-arithmetic function.
pub const KERNEL: usize = 5;

/// Per function (in [`FUNCTIONS`] order): self time per call, and mean inclusive time per
/// call, in ns; `run`'s is the whole run's.
#[derive(Clone, Copy, Debug, Default)]
pub struct Costs {
    /// Exclusive ns per call.
    pub self_ns: [f64; 6],
    /// Inclusive ns per call.
    pub mean_ns: [f64; 6],
    /// Functions whose compensated cost is below the calibration's resolution.
    pub below_resolution: [bool; 6],
    /// How far the report says the whole run's figure may be off, in ns: its sample's 95 %
    /// interval plus its calibration's error (0 for a plain build).
    pub whole_error_ns: f64,
}

/// ns per call of `f` over `n` calls, each call's input the last one's result.
fn per_call(n: u64, f: fn(u64) -> u64) -> f64 {
    let t = Instant::now();
    let mut v = 1u64;
    for i in 0..n {
        v ^= f(black_box(v ^ i));
    }
    black_box(v);
    t.elapsed().as_nanos() as f64 / n as f64
}

/// ns of one call `f(arg)`.
fn once(f: fn(u64) -> u64, arg: u64) -> f64 {
    let t = Instant::now();
    black_box(f(black_box(arg)));
    t.elapsed().as_nanos() as f64
}

/// The plain build's costs, from plain loops: `tiny`, `leaf` and `kernel` alone, `mid`
/// inclusive, its self time as that minus its callees' plain costs, `spin(4n)` whole and its
/// self time as that minus its calls' plain cost, and the whole `run(n)`.
pub fn plain_costs(n: u64) -> Costs {
    let tiny = per_call(n * 20, plain::tiny);
    let leaf = per_call(n * 4, plain::leaf);
    let kernel = per_call(n * 4, plain::kernel);
    let mid = per_call(n, plain::mid);
    let spin = once(plain::spin, 4 * n);
    let run = once(plain::run, n);
    let mid_self = mid - 4.0 * leaf - 20.0 * tiny;
    Costs {
        self_ns: [
            run - n as f64 * mid - spin,
            mid_self,
            leaf,
            tiny,
            spin - 4.0 * n as f64 * kernel,
            kernel,
        ],
        mean_ns: [run, mid, leaf, tiny, spin, kernel],
        below_resolution: [false; 6],
        whole_error_ns: 0.0,
    }
}

/// The instrumented build's `run(n)` under a session timing one call in `time_sample`:
/// (raw, compensated) costs as its report gives them, and the report.
pub fn profiled_costs(n: u64, time_sample: u32) -> (Costs, Costs, ReportData) {
    black_box(instrumented::run(black_box(n / 10 + 1)));
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .time_sample(time_sample)
        .start()
        .expect("no other session runs");
    black_box(instrumented::run(black_box(n)));
    let report = s.finish();
    let data = report.data;
    let t = data.time.as_ref().expect("the time analysis ran");
    let (mut raw, mut comp) = (Costs::default(), Costs::default());
    let entry = |name: &str| {
        t.functions
            .iter()
            .find(|f| {
                data.name(f.method)
                    .ends_with(&format!("instrumented::{name}"))
            })
            .unwrap_or_else(|| panic!("{name} is in the report"))
    };
    for (k, name) in FUNCTIONS.iter().enumerate() {
        let f = entry(name);
        let calls = f.calls.max(1) as f64;
        comp.self_ns[k] = f.exclusive_ns / calls;
        comp.mean_ns[k] = f.inclusive_ns / calls;
        comp.below_resolution[k] = f.below_resolution == Some(true);
        raw.self_ns[k] = f.raw_exclusive_ns.unwrap_or(f.exclusive_ns) / calls;
        raw.mean_ns[k] = f.raw_inclusive_ns.unwrap_or(f.inclusive_ns) / calls;
    }
    // With sampled timing `run`'s one call is likely untimed, and so is `spin`'s: the whole
    // run is then the estimated inclusive time of all `mid` calls and of `spin` (all of `run`
    // but its loop), or of all `kernel` calls if `spin` was not timed (all of `spin` but its
    // loop).
    // The sample intervals of two functions are independent (their squares add), their
    // calibration errors systematic (they add).
    let error = |fs: &[&cabprof::report::FunctionTimeEntry]| {
        fs.iter()
            .map(|f| f.inclusive_ci_ns.powi(2))
            .sum::<f64>()
            .sqrt()
            + fs.iter()
                .map(|f| f.calibration_error_ns.unwrap_or(0.0))
                .sum::<f64>()
    };
    comp.whole_error_ns = error(&[entry("run")]);
    if entry("run").timed == 0 {
        let mid = entry("mid");
        let spin = match entry("spin") {
            s if s.timed > 0 => s,
            _ => entry("kernel"),
        };
        comp.mean_ns[0] = mid.inclusive_ns + spin.inclusive_ns;
        raw.mean_ns[0] = mid.raw_inclusive_ns.unwrap_or(mid.inclusive_ns)
            + spin.raw_inclusive_ns.unwrap_or(spin.inclusive_ns);
        comp.whole_error_ns = error(&[mid, spin]);
    }
    (raw, comp, data)
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_builds_compute_the_same() {
        assert_eq!(super::plain::run(100), super::instrumented::run(100));
    }
}
