//! The time analysis' compensated figures are much closer to the plain program's than its raw
//! figures are: the program of `cabprof_checks::fidelity`, built plain and
//! instrumented, its plain costs measured with plain loops. The bounds are wide because the
//! machine is shared; the bench (`benches/time_fidelity.rs`) measures the errors. One session
//! at a time: a single test.

use cabprof_checks::fidelity::{plain_costs, profiled_costs};

/// `mid` calls per run.
const N: u64 = 4_000;

#[test]
fn compensated_times_are_the_plain_programs_and_raw_ones_are_not() {
    // Three attempts, the median error kept: one noisy moment cannot decide.
    let mut whole = Vec::new();
    let mut tiny = Vec::new();
    for _ in 0..3 {
        let plain = plain_costs(N);
        let (raw, comp, data) = profiled_costs(N, 1);
        let t = data.time.as_ref().expect("time ran");
        let c = t
            .compensation
            .as_ref()
            .expect("the session calibrated its probe");
        assert!(c.timed_ns > 0.0 && c.inside_ns >= 0.0, "{c:?}");
        assert!(c.resolution_ns >= c.clock_ns, "{c:?}");
        let err = |x: f64| (x - plain.mean_ns[0]) / plain.mean_ns[0];
        whole.push((err(raw.mean_ns[0]), err(comp.mean_ns[0])));
        tiny.push((raw.mean_ns[3], comp.mean_ns[3]));
        // Nothing negative, whatever the compensation.
        for f in &t.functions {
            assert!(
                f.inclusive_ns >= 0.0 && f.exclusive_ns >= 0.0 && f.mean_ns >= 0.0,
                "{f:?}"
            );
        }
    }
    // Medians over the attempts, each figure on its own.
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let raw_err = med(whole.iter().map(|w| w.0).collect());
    let comp_err = med(whole.iter().map(|w| w.1.abs()).collect());
    assert!(
        raw_err > 0.3,
        "the raw whole run is well above plain (else this test has no teeth): {whole:?}"
    );
    // The absolute error is the bench's to measure (it depends on the host's load); here the
    // compensation must take out a good part of the raw error, whatever the load.
    assert!(
        comp_err < 0.8 * raw_err,
        "the whole run, compensated, closer to plain than raw by a fifth at least: {whole:?}"
    );
    // `tiny` (one multiply) never costs more than its raw figure says (equal when the
    // calibration found no part of the probe inside the call's own interval).
    for (raw, comp) in tiny {
        assert!(raw >= comp, "raw {raw} >= compensated {comp}");
    }
}
