//! Summary statistics of measured samples (times, rates, errors): the one copy that the
//! benches, the cycle counter and the evaluation share.
//!
//! Every function takes a slice of `f64` and never panics. The conventions, stated once:
//!
//! - An empty slice has no mean, median or percentile: those return `NaN` (which formats as
//!   `NaN` and compares false, so a missing measurement cannot pass for a number).
//! - Values are ordered with [`f64::total_cmp`], so a `NaN` among the samples sorts last
//!   instead of making the order undefined.
//! - [`variance`] is the *population* variance (divides by `n`), `0` for fewer than two
//!   values: it describes the samples at hand, it does not estimate a larger population.
//!
//! ```
//! use cabprof_cab::stats::{mean, median, percentile, variance};
//!
//! let xs = [4.0, 1.0, 3.0, 2.0];
//! assert_eq!(mean(&xs), 2.5);
//! assert_eq!(median(&xs), 2.5); // the mean of the middle two
//! assert_eq!(percentile(&xs, 0.0), 1.0);
//! assert_eq!(percentile(&xs, 1.0), 4.0);
//! assert_eq!(variance(&xs), 1.25);
//! assert!(median(&[]).is_nan());
//! ```

/// The arithmetic mean; `NaN` when `xs` is empty.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The median: the middle value, or the mean of the middle two for an even count; `NaN`
/// when `xs` is empty. The same as [`percentile`]`(xs, 0.5)`.
pub fn median(xs: &[f64]) -> f64 {
    percentile(xs, 0.5)
}

/// The population variance (`sum (x - mean)^2 / n`); `0` for fewer than two values.
pub fn variance(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64
}

/// The population standard deviation: the square root of [`variance`].
pub fn std_dev(xs: &[f64]) -> f64 {
    variance(xs).sqrt()
}

/// The `q`-quantile (`q` in `0.0..=1.0`, clamped), interpolating linearly between the two
/// nearest ranks: `q = 0` is the minimum, `q = 1` the maximum, `q = 0.5` the [`median`].
/// `NaN` when `xs` is empty or `q` is `NaN`.
pub fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    if lo == hi {
        sorted[lo]
    } else {
        // Halfway between two ranks (an even count's median) this is their mean exactly.
        sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
    }
}

/// The smallest and the largest value; `(NaN, NaN)` when `xs` is empty.
pub fn min_max(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
    }

    #[test]
    fn empty_is_nan_and_single_has_no_spread() {
        assert!(mean(&[]).is_nan());
        assert!(median(&[]).is_nan());
        assert!(percentile(&[], 0.9).is_nan());
        assert_eq!(variance(&[]), 0.0);
        assert_eq!(variance(&[5.0]), 0.0);
        assert!(min_max(&[]).0.is_nan());
    }

    #[test]
    fn percentile_interpolates_and_clamps() {
        let xs = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(percentile(&xs, 0.25), 20.0);
        assert_eq!(percentile(&xs, 0.1), 14.0);
        assert_eq!(percentile(&xs, -1.0), 10.0);
        assert_eq!(percentile(&xs, 2.0), 50.0);
        assert_eq!(min_max(&xs), (10.0, 50.0));
    }

    #[test]
    fn variance_is_the_population_variance() {
        assert_eq!(variance(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 4.0);
        assert_eq!(std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.0);
    }
}
