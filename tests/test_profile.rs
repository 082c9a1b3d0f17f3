//! `cabprof::test_profile()`: each test's profile holds its own thread's events while other
//! tests (and threads the tests spawn) emit at the same time.
//!
//! Its own test binary, not a module of `tests/it/`: `test_profile()` guards share one process-
//! wide session, which this file's tests start and finish, and each checks whose events reach
//! it.

use cabprof::report::ReportData;

#[cabprof::profile]
fn step(x: u64) -> u64 {
    x ^ 0x5A
}

fn steps(data: &ReportData) -> u64 {
    data.method_count
        .as_ref()
        .unwrap()
        .iter()
        .filter(|c| data.name(c.method).ends_with("::step"))
        .map(|c| c.count)
        .sum()
}

/// `n` steps on this thread under a test profile while another thread takes steps too; the
/// profile counts this thread's `n` only.
fn profiled_steps(n: u64) -> cabprof::Report {
    step(0); // before the profile: not in it
    let noise = std::thread::spawn(|| (0..50_000).map(step).sum::<u64>());
    let profile = cabprof::test_profile();
    for i in 0..n {
        step(i);
    }
    let report = profile.finish();
    noise.join().unwrap();
    step(1); // after: not in it either
    report
}

#[test]
fn first_test_sees_only_its_calls() {
    let r = profiled_steps(1_000);
    assert_eq!(steps(&r.data), 1_000);
    let me = std::thread::current().name().unwrap().to_owned();
    assert_eq!(r.data.threads.len(), 1);
    assert_eq!(r.data.threads[0].thread, me);
}

#[test]
fn second_test_sees_only_its_calls() {
    assert_eq!(steps(&profiled_steps(2_000).data), 2_000);
}

#[test]
fn third_test_sees_only_its_calls() {
    assert_eq!(steps(&profiled_steps(3_000).data), 3_000);
}

#[test]
fn a_dropped_profile_writes_its_report() {
    let dir = std::env::current_exe()
        .unwrap()
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file() || d.join(".rustc_info.json").is_file())
        .unwrap()
        .join("cabprof/test_profile");
    let path = dir.join("a_dropped_profile_writes_its_report.json");
    let _ = std::fs::remove_file(&path);
    {
        let _profile = cabprof::test_profile();
        for i in 0..77 {
            step(i);
        }
    }
    let data = ReportData::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(steps(&data), 77);
}

#[test]
fn nested_profiles_each_hold_their_own_span() {
    let outer = cabprof::test_profile();
    for i in 0..3 {
        step(i);
    }
    let inner = cabprof::test_profile();
    for i in 0..5 {
        step(i);
    }
    let inner = inner.finish();
    for i in 0..7 {
        step(i);
    }
    let outer = outer.finish();
    assert_eq!(steps(&inner.data), 5);
    assert_eq!(
        steps(&outer.data),
        3 + 5 + 7,
        "the outer profile holds the inner's calls too"
    );
}

#[test]
fn an_unnamed_threads_profile_lists_its_thread() {
    let data = std::thread::spawn(|| {
        let profile = cabprof::test_profile();
        for i in 0..10 {
            step(i);
        }
        profile.finish().data
    })
    .join()
    .unwrap();
    assert_eq!(steps(&data), 10);
    assert_eq!(data.threads.len(), 1, "{:?}", data.threads);
    assert!(data.threads[0].thread.starts_with("thread-"));
}
