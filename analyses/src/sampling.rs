//! Sampling error, as the CAB paper measures it.
//!
//! Contract: [`error_rate`] compares a sampled profile with the exact one by the formula of Ha et
//! al. (OOPSLA 2009, §6.4): for every entry of the *exact* profile, the individual error is
//!
//! ```text
//! | actual − sampled / rate | / actual
//! ```
//!
//! and the result is the plain average of the individual errors, so rare and frequent entries
//! weigh the same. An entry missing from the sample counts as sampled 0 (individual error 1);
//! entries only in the sample are ignored, as are exact entries with count 0 (their error is
//! undefined). `rate` is the fraction of events analyzed, in `(0, 1]` for a real sample.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashMap;

/// The estimate of a full count from a count sampled at `rate`: `count / rate`.
///
/// # Panics
/// If `rate` is not a positive finite number.
pub fn scale(count: u64, rate: f64) -> f64 {
    check_rate(rate);
    count as f64 / rate
}

/// Average individual error of `sampled` (taken at `rate`) against `exact`; see the module docs.
/// Returns 0.0 when `exact` has no entry with a non-zero count.
///
/// # Panics
/// If `rate` is not a positive finite number.
pub fn error_rate<K, S1, S2>(
    exact: &HashMap<K, u64, S1>,
    sampled: &HashMap<K, u64, S2>,
    rate: f64,
) -> f64
where
    K: Eq + Hash,
    S1: BuildHasher,
    S2: BuildHasher,
{
    check_rate(rate);
    let mut sum = 0.0;
    let mut n = 0u64;
    for (k, &actual) in exact {
        if actual == 0 {
            continue;
        }
        let estimate = sampled.get(k).copied().unwrap_or(0) as f64 / rate;
        let actual = actual as f64;
        sum += (actual - estimate).abs() / actual;
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

fn check_rate(rate: f64) {
    assert!(
        rate > 0.0 && rate.is_finite(),
        "sampling rate must be a positive finite number, got {rate}"
    );
}
