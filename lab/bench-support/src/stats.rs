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
//! **Comparing two designs on a noisy machine.** Run them in rounds, each design once per
//! round, and divide within the round ([`paired_ratios`]): whatever slows the machine during a
//! round (another job, a frequency change) slows both sides of that round's ratio. The summary
//! is the median of those ratios with a bootstrap percentile interval ([`median_interval`]),
//! and the comparison is resolved only when the interval lies wholly on one side of 1
//! ([`MedianInterval::side_of`]). The resampling uses a fixed seed, so the same samples give
//! the same interval every time.
//!
//! ```
//! use cabprof_bench_support::stats::{mean, median, percentile, variance};
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

/// `a[i] / b[i]` for every `i`: one paired ratio per round when `a` and `b` hold two designs'
/// times in the same rounds.
///
/// # Panics
///
/// If the slices differ in length: the pairs would not be rounds, a bug in the caller.
pub fn paired_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    assert_eq!(
        a.len(),
        b.len(),
        "paired_ratios: both sides need one value per round"
    );
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// Bootstrap resamples [`median_interval`] callers use unless they have a reason not to:
/// enough that the 2.5 % and 97.5 % points of the resampled medians move by less than one
/// rank of a 15-round sample from one seed to another.
pub const RESAMPLES: usize = 10_000;

/// Rounds the paired comparisons run by default, and the fewest they accept
/// ([`MIN_ROUNDS`]). With 17 ratios the 95 % bootstrap interval of the median runs from the
/// 5th to the 13th smallest, clear of the neighbouring ranks (the resampled medians reach the
/// 5th smallest with probability 0.036 and stay at or below the 4th with 0.008), and the
/// binomial chance that those two ranks bracket the true median is 0.951. At 15 rounds the
/// 2.5 % point falls on a knife edge (0.0255) between the 4th and the 5th smallest, and the
/// interval from the 5th to the 11th covers only 0.88.
pub const ROUNDS: usize = 17;

/// The fewest rounds a paired comparison accepts. Below 9 the percentile-bootstrap interval of
/// a median is far too narrow for 95 % (7 rounds: it covers 0.875; 3: it is the minimum to the
/// maximum, 0.75); with an odd count from 9 to 17 it covers 0.91 to 0.96.
pub const MIN_ROUNDS: usize = 9;

/// The fixed seed of the benches' resampling, so that a table is reproducible from its samples.
pub const SEED: u64 = 0x5eed_cab0_2009;

/// A sample's median and a bootstrap confidence interval around it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianInterval {
    /// The median of the sample itself.
    pub median: f64,
    /// The interval's lower end.
    pub lo: f64,
    /// The interval's upper end.
    pub hi: f64,
}

/// Where an interval lies relative to a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The whole interval is below the value.
    Below,
    /// The whole interval is above the value.
    Above,
    /// The interval contains the value (or is undefined): the comparison is not resolved.
    Contains,
}

impl MedianInterval {
    /// Where the interval lies relative to `x`; [`Side::Contains`] when either end is `NaN`.
    pub fn side_of(&self, x: f64) -> Side {
        if self.hi < x {
            Side::Below
        } else if self.lo > x {
            Side::Above
        } else {
            Side::Contains
        }
    }

    /// The verdict on a ratio of *times* (design / reference): `"faster"` when the whole
    /// interval is below 1, `"slower"` when it is above 1, `"unresolved"` when it contains 1.
    pub fn time_verdict(&self) -> &'static str {
        match self.side_of(1.0) {
            Side::Below => "faster",
            Side::Above => "slower",
            Side::Contains => "unresolved",
        }
    }
}

/// The median of `xs` with a percentile-bootstrap interval at confidence `level` (`0.95` for
/// 95 %): draw `resamples` samples of `xs.len()` values from `xs` with replacement (seeded by
/// `seed`), take each one's median, and report the [`percentile`]s `(1 - level) / 2` and
/// `(1 + level) / 2` of those medians.
///
/// A constant sample gives a zero-width interval. The ends are `NaN` when `xs` is empty,
/// `resamples` is 0 or `level` is not strictly between 0 and 1; the median is `NaN` only
/// when `xs` is empty.
///
/// ```
/// use cabprof_bench_support::stats::{median_interval, Side, RESAMPLES, SEED};
///
/// let ratios = [1.02, 0.97, 1.10, 1.00, 1.05, 0.90, 1.03, 1.50, 0.95, 1.08, 1.20];
/// let ci = median_interval(&ratios, 0.95, RESAMPLES, SEED);
/// assert_eq!((ci.median, ci.lo, ci.hi), (1.03, 0.97, 1.10));
/// assert_eq!(ci.side_of(1.0), Side::Contains); // not resolved
/// ```
pub fn median_interval(xs: &[f64], level: f64, resamples: usize, seed: u64) -> MedianInterval {
    let median = median(xs);
    if xs.is_empty() || resamples == 0 || !(level > 0.0 && level < 1.0) {
        return MedianInterval {
            median,
            lo: f64::NAN,
            hi: f64::NAN,
        };
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut draw = vec![0.0; xs.len()];
    let medians: Vec<f64> = (0..resamples)
        .map(|_| {
            for d in &mut draw {
                *d = xs[rng.usize(..xs.len())];
            }
            draw.sort_unstable_by(f64::total_cmp);
            let n = draw.len();
            if n % 2 == 1 {
                draw[n / 2]
            } else {
                (draw[n / 2 - 1] + draw[n / 2]) / 2.0
            }
        })
        .collect();
    MedianInterval {
        median,
        lo: percentile(&medians, (1.0 - level) / 2.0),
        hi: percentile(&medians, (1.0 + level) / 2.0),
    }
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

    /// The exact bootstrap distribution of the median of 11 distinct values, by hand: a
    /// resample's median is at most the k-th smallest value exactly when at least 6 of its 11
    /// draws are among the k smallest, each draw with probability k/11, so
    /// `P(median <= x_k) = sum_{j=6..=11} C(11, j) (k/11)^j (1 - k/11)^(11-j)`:
    /// k = 2: 0.0072, k = 3: 0.0512, k = 8: 0.9488, k = 9: 0.9928. The 2.5 % point is
    /// therefore the 3rd smallest value and the 97.5 % point the 9th, whatever the values.
    fn exact_cdf(k: u32) -> f64 {
        let p = f64::from(k) / 11.0;
        (6..=11u32)
            .map(|j| {
                let c = (0..j).fold(1.0, |c, i| c * f64::from(11 - i) / f64::from(i + 1));
                c * p.powi(j as i32) * (1.0 - p).powi(11 - j as i32)
            })
            .sum()
    }

    #[test]
    fn the_hand_computed_cdf_puts_the_95_percent_ends_at_ranks_3_and_9() {
        assert!((exact_cdf(2) - 0.0072).abs() < 1e-4);
        assert!((exact_cdf(3) - 0.0512).abs() < 1e-4);
        assert!((exact_cdf(8) - 0.9488).abs() < 1e-4);
        assert!((exact_cdf(9) - 0.9928).abs() < 1e-4);
        assert!((exact_cdf(11) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_interval_matches_the_exact_distribution() {
        let xs: Vec<f64> = (1..=11).map(f64::from).collect();
        // Not one lucky seed: every one of these gives the exact ranks.
        for seed in 0..20 {
            let ci = median_interval(&xs, 0.95, RESAMPLES, seed);
            assert_eq!((ci.median, ci.lo, ci.hi), (6.0, 3.0, 9.0), "seed {seed}");
        }
        // A 50 % interval, from the same CDF:
        let ci = median_interval(&xs, 0.5, RESAMPLES, SEED);
        // 25 %: CDF(4) = 0.173 < 0.25 < CDF(5) = 0.379; 75 %: CDF(6) = 0.621 < 0.75 <
        // CDF(7) = 0.827.
        assert_eq!((ci.lo, ci.hi), (5.0, 7.0));
    }

    #[test]
    fn the_default_rounds_give_ranks_5_to_13() {
        // P(median of a resample of 17 <= x_k) = P(Bin(17, k/17) >= 9): k = 4: 0.008,
        // k = 5: 0.036, k = 12: 0.964, k = 13: 0.992 (as in `exact_cdf`, for 17 draws).
        let xs: Vec<f64> = (1..=ROUNDS as u32).map(f64::from).collect();
        for seed in 0..20 {
            let ci = median_interval(&xs, 0.95, RESAMPLES, seed);
            assert_eq!((ci.median, ci.lo, ci.hi), (9.0, 5.0, 13.0), "seed {seed}");
        }
    }

    #[test]
    fn known_ratios_resolve_or_not() {
        // Eleven ratios, unordered, with an outlier that a mean would follow.
        let ratios = [
            1.02, 0.97, 1.10, 1.00, 1.05, 0.90, 1.03, 1.50, 0.95, 1.08, 1.20,
        ];
        let ci = median_interval(&ratios, 0.95, RESAMPLES, SEED);
        assert_eq!((ci.median, ci.lo, ci.hi), (1.03, 0.97, 1.10));
        assert_eq!(ci.side_of(1.0), Side::Contains);
        assert_eq!(ci.time_verdict(), "unresolved");
        // The same spread moved wholly above or below 1.
        let up: Vec<f64> = ratios.iter().map(|r| r + 0.1).collect();
        let ci = median_interval(&up, 0.95, RESAMPLES, SEED);
        assert!((ci.lo - 1.07).abs() < 1e-12 && (ci.hi - 1.20).abs() < 1e-12);
        assert_eq!(ci.side_of(1.0), Side::Above);
        assert_eq!(ci.time_verdict(), "slower");
        let down: Vec<f64> = ratios.iter().map(|r| r - 0.2).collect();
        let ci = median_interval(&down, 0.95, RESAMPLES, SEED);
        assert!((ci.lo - 0.77).abs() < 1e-12 && (ci.hi - 0.90).abs() < 1e-12);
        assert_eq!(ci.side_of(1.0), Side::Below);
        assert_eq!(ci.time_verdict(), "faster");
    }

    #[test]
    fn constant_sample_has_a_zero_width_interval() {
        let ci = median_interval(&[1.25; 15], 0.95, RESAMPLES, SEED);
        assert_eq!((ci.median, ci.lo, ci.hi), (1.25, 1.25, 1.25));
        assert_eq!(ci.side_of(1.0), Side::Above);
        assert_eq!(ci.side_of(1.25), Side::Contains);
        let one = median_interval(&[0.8], 0.95, RESAMPLES, SEED);
        assert_eq!((one.median, one.lo, one.hi), (0.8, 0.8, 0.8));
    }

    #[test]
    fn even_count_resamples_use_the_mean_of_the_middle_two() {
        // Two values: a resample is {1,1}, {1,3}, {3,1} or {3,3}, medians 1, 2, 2, 3, so
        // P(median <= 1) = 1/4 and P(median <= 2) = 3/4. The 20 % point is then 1 and the
        // 80 % point 3.
        let ci = median_interval(&[1.0, 3.0], 0.6, RESAMPLES, SEED);
        assert_eq!((ci.median, ci.lo, ci.hi), (2.0, 1.0, 3.0));
        // The 40 % and 60 % points both lie between 1/4 and 3/4: both are 2.
        let ci = median_interval(&[1.0, 3.0], 0.2, RESAMPLES, SEED);
        assert_eq!((ci.lo, ci.hi), (2.0, 2.0));
    }

    #[test]
    fn same_seed_same_interval_and_undefined_cases_are_nan() {
        let xs = [1.3, 0.7, 1.1, 0.9, 1.0, 1.2, 0.8];
        assert_eq!(
            median_interval(&xs, 0.95, 1000, 7),
            median_interval(&xs, 0.95, 1000, 7)
        );
        let empty = median_interval(&[], 0.95, RESAMPLES, SEED);
        assert!(empty.median.is_nan() && empty.lo.is_nan() && empty.hi.is_nan());
        assert_eq!(empty.side_of(1.0), Side::Contains);
        for level in [0.0, 1.0, f64::NAN, 95.0] {
            let ci = median_interval(&xs, level, RESAMPLES, SEED);
            assert_eq!(ci.median, 1.0);
            assert!(ci.lo.is_nan() && ci.hi.is_nan(), "level {level}");
        }
        assert!(median_interval(&xs, 0.95, 0, SEED).lo.is_nan());
    }

    #[test]
    fn paired_ratios_divide_round_by_round() {
        assert_eq!(
            paired_ratios(&[2.0, 3.0, 4.0], &[1.0, 2.0, 4.0]),
            vec![2.0, 1.5, 1.0]
        );
    }

    #[test]
    #[should_panic(expected = "one value per round")]
    fn paired_ratios_refuse_unpaired_slices() {
        paired_ratios(&[1.0, 2.0], &[1.0]);
    }
}
