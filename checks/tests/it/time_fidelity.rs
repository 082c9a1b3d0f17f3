//! The time analysis' compensation on a real program (`cabprof_checks::fidelity`, built plain
//! and instrumented): the calibration is stated, compensation takes time out and never makes a
//! figure negative. How close the compensated figures come to the plain program's is a
//! measurement, not a test: it depends on the host, its load and the build profile (a debug
//! build under a loaded CI host overcompensated one round in three), so
//! `benches/time_fidelity.rs` measures it in alternated rounds and prints the errors. One
//! session at a time: a single test.

use cabprof_checks::fidelity::profiled_costs;

/// `mid` calls per run.
const N: u64 = 4_000;

#[test]
fn compensation_is_stated_takes_time_out_and_leaves_nothing_negative() {
    let mut tiny = Vec::new();
    for _ in 0..3 {
        let (raw, comp, data) = profiled_costs(N, 1);
        let t = data.time.as_ref().expect("time ran");
        let c = t
            .compensation
            .as_ref()
            .expect("the session calibrated its probe");
        assert!(c.timed_ns > 0.0 && c.inside_ns >= 0.0, "{c:?}");
        assert!(c.resolution_ns >= c.clock_ns, "{c:?}");
        // The whole run loses what its timed calls cost it.
        assert!(
            comp.mean_ns[0] < raw.mean_ns[0],
            "compensated {} below raw {}",
            comp.mean_ns[0],
            raw.mean_ns[0]
        );
        tiny.push((raw.mean_ns[3], comp.mean_ns[3]));
        // Nothing negative, whatever the compensation.
        for f in &t.functions {
            assert!(
                f.inclusive_ns >= 0.0 && f.exclusive_ns >= 0.0 && f.mean_ns >= 0.0,
                "{f:?}"
            );
        }
    }
    // `tiny` (one multiply) never costs more than its raw figure says (equal when the
    // calibration found no part of the probe inside the call's own interval).
    for (raw, comp) in tiny {
        assert!(raw >= comp, "raw {raw} >= compensated {comp}");
    }
}
