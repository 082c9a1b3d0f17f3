//! The CAB paper's sampling error rate on hand examples.

use cabprof_analyses::sampling::{error_rate, scale};
use hashbrown::HashMap;

#[test]
fn perfect_sample_has_no_error() {
    let exact: HashMap<&str, u64> = [("a", 100), ("b", 40)].into_iter().collect();
    let sampled: HashMap<&str, u64> = [("a", 10), ("b", 4)].into_iter().collect();
    assert_eq!(error_rate(&exact, &sampled, 0.1), 0.0);
}

#[test]
fn averages_individual_errors_equally() {
    // a: |100 - 12/0.1| / 100 = 0.2; b: |40 - 2/0.1| / 40 = 0.5; c missing: 1.0.
    let exact: HashMap<&str, u64> = [("a", 100), ("b", 40), ("c", 5)].into_iter().collect();
    let sampled: HashMap<&str, u64> = [("a", 12), ("b", 2), ("z", 99)].into_iter().collect();
    let e = error_rate(&exact, &sampled, 0.1);
    assert!((e - (0.2 + 0.5 + 1.0) / 3.0).abs() < 1e-12, "{e}");
}

#[test]
fn zero_exact_entries_are_skipped_and_empty_is_zero() {
    let exact: HashMap<u32, u64> = [(1, 0), (2, 10)].into_iter().collect();
    let sampled: HashMap<u32, u64> = [(2, 5)].into_iter().collect();
    assert_eq!(error_rate(&exact, &sampled, 0.5), 0.0);
    let empty: HashMap<u32, u64> = HashMap::new();
    assert_eq!(error_rate(&empty, &sampled, 0.5), 0.0);
}

#[test]
fn scale_divides_by_rate() {
    assert_eq!(scale(5, 0.05), 100.0);
    assert_eq!(scale(0, 0.5), 0.0);
}

#[test]
#[should_panic(expected = "sampling rate")]
fn zero_rate_is_refused() {
    let m: HashMap<u32, u64> = HashMap::new();
    error_rate(&m, &m, 0.0);
}
