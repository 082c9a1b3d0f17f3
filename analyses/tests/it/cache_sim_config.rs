//! Cache geometry validation: every refusal names the level and the field.

use cabprof_analyses::{CacheSim, LevelConfig, Policy};

fn refused(levels: &[LevelConfig]) -> (Option<usize>, &'static str, u64) {
    let e = CacheSim::new(levels).unwrap_err();
    assert!(!e.to_string().is_empty());
    (e.level, e.field, e.value)
}

#[test]
fn paper_default_is_two_fifo_levels() {
    let sim = CacheSim::default();
    assert_eq!(
        sim.config(),
        &[LevelConfig::PAPER_L1, LevelConfig::PAPER_L2]
    );
    assert_eq!(LevelConfig::PAPER_L1.sets(), 128);
    assert_eq!(LevelConfig::PAPER_L2.sets(), 1024);
    assert_eq!(LevelConfig::PAPER_L2.policy, Policy::Fifo);
}

#[test]
fn no_levels() {
    assert_eq!(refused(&[]), (None, "levels", 0));
}

#[test]
fn size_must_be_a_positive_multiple_of_ways_times_line() {
    let l = LevelConfig::new(1000, 4, 64, Policy::Lru);
    assert_eq!(refused(&[l]), (Some(0), "size_bytes", 1000));
    let e = CacheSim::new(&[l]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cache L1 size_bytes = 1000: \
         must be a positive multiple of ways × line_bytes = 4 × 64 = 256"
    );
    let l = LevelConfig::new(0, 4, 64, Policy::Lru);
    assert_eq!(refused(&[l]), (Some(0), "size_bytes", 0));
}

#[test]
fn line_must_be_a_power_of_two_and_the_same_everywhere() {
    let l = LevelConfig::new(48 * 4, 4, 48, Policy::Fifo);
    assert_eq!(refused(&[l]), (Some(0), "line_bytes", 48));
    let l = LevelConfig::new(4, 4, 1, Policy::Fifo);
    assert_eq!(refused(&[l]), (Some(0), "line_bytes", 1));
    let l2 = LevelConfig::new(512 * 1024, 8, 128, Policy::Fifo);
    assert_eq!(
        refused(&[LevelConfig::PAPER_L1, l2]),
        (Some(1), "line_bytes", 128)
    );
}

#[test]
fn ways_must_be_positive() {
    let l2 = LevelConfig::new(512 * 1024, 0, 64, Policy::Fifo);
    assert_eq!(refused(&[LevelConfig::PAPER_L1, l2]), (Some(1), "ways", 0));
}

#[test]
fn sets_need_not_be_a_power_of_two() {
    // 3 sets of 4 ways, 12 sets of 2 ways, one fully associative 40-line level.
    let sim = CacheSim::new(&[
        LevelConfig::new(3 * 4 * 64, 4, 64, Policy::Fifo),
        LevelConfig::new(12 * 2 * 64, 2, 64, Policy::Lru),
        LevelConfig::new(40 * 64, 40, 64, Policy::Lru),
    ]);
    assert!(sim.is_ok());
}

#[test]
fn absurd_sizes_are_refused() {
    let l = LevelConfig::new(1 << 40, 8, 64, Policy::Fifo);
    assert_eq!(refused(&[l]), (Some(0), "size_bytes", 1 << 40));
}
