//! How many rounds a bench measures, and the interleaved rounds themselves.

/// The whole number of rounds in the environment variable `var`, from `lo` to `hi`
/// (`default` when unset). Anything else exits with status 2 after naming the variable and
/// the range: a typo must not quietly measure a different number of rounds.
pub fn rounds(var: &str, lo: usize, hi: usize, default: usize) -> usize {
    match parse(var, std::env::var_os(var), lo, hi, default) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}

/// [`rounds`]' reading of one value, apart from the process's environment and exit.
fn parse(
    var: &str,
    value: Option<std::ffi::OsString>,
    lo: usize,
    hi: usize,
    default: usize,
) -> Result<usize, String> {
    let Some(v) = value else {
        return Ok(default);
    };
    match v.to_str().and_then(|s| s.trim().parse::<usize>().ok()) {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!(
            "{var}={v:?}: expected a whole number from {lo} to {hi} (unset: {default})"
        )),
    }
}

/// `rounds` rounds of `variants` variants, each round running every variant once in a fresh
/// random order (seeded, so a run is reproducible), so that no variant always follows the same
/// one or always meets the machine's slow moments. `measure(i)` measures variant `i`; the
/// result holds variant `i`'s samples at index `i`, in round order.
pub fn interleaved(
    rounds: usize,
    variants: usize,
    seed: u64,
    mut measure: impl FnMut(usize) -> f64,
) -> Vec<Vec<f64>> {
    let mut samples = vec![Vec::with_capacity(rounds); variants];
    let mut order: Vec<usize> = (0..variants).collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    for _ in 0..rounds {
        rng.shuffle(&mut order);
        for &i in &order {
            samples[i].push(measure(i));
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_the_default_and_in_range_values_are_taken() {
        assert_eq!(parse("R", None, 3, 9, 7), Ok(7));
        assert_eq!(parse("R", Some("3".into()), 3, 9, 7), Ok(3));
        assert_eq!(parse("R", Some(" 9 ".into()), 3, 9, 7), Ok(9));
    }

    #[test]
    fn bad_values_name_the_variable_and_the_range() {
        for bad in ["2", "10", "-1", "seven", ""] {
            let e = parse("X_ROUNDS", Some(bad.into()), 3, 9, 7).unwrap_err();
            assert!(e.starts_with("X_ROUNDS="), "{e}");
            assert!(e.contains("from 3 to 9"), "{e}");
        }
    }

    #[test]
    fn interleaved_runs_each_variant_once_per_round_in_varying_orders() {
        let mut log = Vec::new();
        let samples = interleaved(20, 3, 1, |i| {
            log.push(i);
            (i * 100 + log.len()) as f64
        });
        assert_eq!(samples.len(), 3);
        for (i, s) in samples.iter().enumerate() {
            assert_eq!(s.len(), 20);
            assert!(s.iter().all(|&x| (x as usize) / 100 == i), "{s:?}");
        }
        let rounds: Vec<&[usize]> = log.chunks(3).collect();
        for r in &rounds {
            let mut sorted = r.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2]);
        }
        assert!(
            rounds.iter().any(|r| *r != rounds[0]),
            "the order never changed"
        );
    }
}
