//! `#[profile]` with and without cabprof's `enabled` feature: a test profile says whether
//! calls were recorded, and reading counts from one that recorded none neither panics nor
//! pretends. CI runs this file both ways (`cargo test -p cabprof --no-default-features --test
//! compiled_out`, and with the workspace's `--all-features`).

#[cabprof::profile]
fn parse(x: u64) -> u64 {
    x.rotate_left(7) ^ 0x5A
}

#[test]
fn a_test_profile_says_whether_calls_were_recorded() {
    let profile = cabprof::test_profile();
    let mut acc = 0;
    for i in 0..25 {
        acc ^= parse(i);
    }
    std::hint::black_box(acc);
    let report = profile.finish();
    let text = report.text(5);
    assert_eq!(report.instrumented(), cfg!(feature = "enabled"));
    if report.instrumented() {
        assert_eq!(report.data.calls("parse"), 25);
        assert_eq!(report.data.calls("compiled_out::parse"), 25);
        assert!(!text.contains("compiled out"), "{text}");
    } else {
        assert_eq!(report.data.calls("parse"), 0);
        assert!(report
            .data
            .method_count
            .as_ref()
            .is_none_or(|counts| counts.is_empty()));
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("instrumentation compiled out")
                && first.contains("`enabled` feature"),
            "{text}"
        );
    }
}

#[test]
fn calls_match_whole_path_segments_only() {
    let profile = cabprof::test_profile();
    std::hint::black_box(parse(1));
    let report = profile.finish();
    // `arse` ends `parse` but is not a segment of its path.
    assert_eq!(report.data.calls("arse"), 0);
    assert_eq!(report.data.calls("no_such_function"), 0);
    assert_eq!(report.data.calls("parse"), u64::from(report.instrumented()));
}
