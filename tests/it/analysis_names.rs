//! The analysis registry as users see it: names, defaults, `CABPROF_ANALYSES`, the plan's
//! validation, and what `AnalysisSet` a plan builds.

use cabprof::{Analysis, AnalysisPlan, SessionBuilder};

#[test]
fn every_analysis_parses_from_its_name_and_aliases() {
    for a in Analysis::ALL {
        assert_eq!(Analysis::parse(a.name()), Some(a));
        assert_eq!(
            Analysis::parse(&a.name().to_uppercase().replace('-', "_")),
            Some(a)
        );
        assert_eq!(a.to_string(), a.name());
    }
    let names: Vec<&str> = Analysis::ALL.iter().map(|a| a.name()).collect();
    assert_eq!(
        names,
        [
            "method-count",
            "call-graph",
            "call-tree",
            "paths",
            "cache",
            "reuse-distance",
            "time",
            "allocations",
            "timeline",
            "waits"
        ]
    );
    for (alias, a) in [
        ("methods", Analysis::MethodCount),
        ("graph", Analysis::CallGraph),
        (" tree ", Analysis::CallTree),
        ("path", Analysis::Paths),
        ("reuse", Analysis::ReuseDistance),
        ("alloc", Analysis::Allocations),
        ("allocs", Analysis::Allocations),
    ] {
        assert_eq!(Analysis::parse(alias), Some(a), "{alias}");
    }
    assert_eq!(Analysis::parse("flame"), None);
}

#[test]
fn defaults_are_the_four_call_analyses() {
    assert_eq!(
        Analysis::defaults(),
        [
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::CallTree,
            Analysis::Paths
        ]
    );
    assert_eq!(AnalysisPlan::default().kinds, Analysis::defaults());
}

#[test]
fn cabprof_analyses_chooses_or_names_every_allowed_value() {
    let mut plan = AnalysisPlan::default();
    plan.apply_env(|_| None).unwrap();
    assert_eq!(plan.kinds, Analysis::defaults());
    plan.apply_env(|k| (k == "CABPROF_ANALYSES").then(|| "cache, reuse,".to_string()))
        .unwrap();
    assert_eq!(plan.kinds, [Analysis::Cache, Analysis::ReuseDistance]);

    let e = plan
        .apply_env(|_| Some("method-count,flame".to_string()))
        .unwrap_err();
    assert_eq!(e.field, "CABPROF_ANALYSES");
    assert_eq!(e.value, "method-count,flame");
    for a in Analysis::ALL {
        assert!(e.allowed.contains(a.name()), "{}", e.allowed);
    }

    let e = SessionBuilder::new()
        .from_vars(|k| (k == "CABPROF_ANALYSES").then(|| "nope".to_string()))
        .expect_err("an unknown analysis is an error");
    assert_eq!(e.field, "CABPROF_ANALYSES");
}

#[test]
fn the_plan_validates_only_the_chosen_analyses() {
    let mut plan = AnalysisPlan::with_analyses(&[Analysis::MethodCount]);
    plan.reuse_line_bytes = 3;
    plan.cache_levels.clear();
    plan.validate().unwrap();
    plan.kinds.push(Analysis::ReuseDistance);
    assert_eq!(plan.validate().unwrap_err().field, "reuse_line_bytes");
    plan.kinds.push(Analysis::Cache);
    assert_eq!(plan.validate().unwrap_err().field, "cache levels");
}

#[test]
fn a_plan_builds_exactly_its_analyses() {
    let set = AnalysisPlan::with_analyses(&[Analysis::CallTree, Analysis::ReuseDistance]).build();
    assert!(set.call_tree.is_some() && set.reuse_distance.is_some());
    assert!(set.method_count.is_none() && set.call_graph.is_none());
    assert!(set.paths.is_none() && set.cache.is_none());
    let all = AnalysisPlan::with_analyses(&Analysis::ALL).build();
    assert!(all.call_graph.is_some() && all.paths.is_some());
    assert!(all.cache.is_some() && all.time.is_some());
    // With the call graph or time, calls are counted by them alone (a report fills the
    // method counts in from theirs: tests/it/time.rs).
    assert!(all.method_count.is_none());
    for (with, counted) in [
        (Analysis::CallGraph, false),
        (Analysis::Time, false),
        (Analysis::CallTree, true),
    ] {
        let set = AnalysisPlan::with_analyses(&[Analysis::MethodCount, with]).build();
        assert_eq!(set.method_count.is_some(), counted, "{with}");
    }
}

#[test]
fn an_empty_cabprof_analyses_is_an_error_not_a_silent_empty_run() {
    for empty in ["", " ", ",", " , "] {
        let mut plan = AnalysisPlan::default();
        let err = plan
            .apply_env(|k| (k == "CABPROF_ANALYSES").then(|| empty.to_string()))
            .unwrap_err();
        assert_eq!(err.field, "CABPROF_ANALYSES");
        assert!(err.allowed.contains("at least one"), "{err}");
        assert_eq!(plan.kinds, Analysis::defaults(), "the plan is unchanged");
    }
}
