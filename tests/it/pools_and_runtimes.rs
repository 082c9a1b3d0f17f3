//! Every analysis that applies to calls (method counts, call graph, call-tree patterns,
//! calling contexts, paths) on the thread set-ups real programs use: `std::thread::scope`, a
//! rayon pool, tokio's multi-thread and current-thread runtimes, and 16 threads churning, in
//! exhaustive and sequential mode. Pool and runtime threads are still alive when the session
//! finishes. Each result is compared with one derived by hand from the program's structure.

use cabprof::report::Report;
use cabprof::{profile, Analysis, RunMode, Session};
use std::collections::BTreeMap;

use crate::support::SERIAL;

/// Jobs per set-up.
const JOBS: u64 = 400;

#[profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(2654435761) >> 7
}

/// Calls `leaf` once for an even `i`, twice for an odd one: two paths.
#[profile(paths)]
fn job(i: u64) -> u64 {
    let mut r = leaf(i);
    if i % 2 == 1 {
        r ^= leaf(r);
    }
    r
}

fn start(mode: RunMode) -> cabprof::Session {
    Session::builder()
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::CallTree,
            Analysis::Paths,
        ])
        .mode(mode)
        .pin(false)
        .start()
        .expect("session starts")
}

fn scope_threads(mode: RunMode) -> Report {
    let session = start(mode);
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || (t..JOBS).step_by(4).map(job).sum::<u64>());
        }
    });
    session.finish()
}

fn rayon_pool(mode: RunMode) -> Report {
    use rayon::prelude::*;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let session = start(mode);
    let _: u64 = pool.install(|| (0..JOBS).into_par_iter().map(job).sum());
    // The pool's workers are alive (parked) while the session finishes.
    let report = session.finish();
    drop(pool);
    report
}

fn tokio_runtime(mut rt: tokio::runtime::Builder, mode: RunMode) -> Report {
    let rt = rt.enable_all().build().unwrap();
    let session = start(mode);
    rt.block_on(async {
        let tasks: Vec<_> = (0..JOBS)
            .map(|i| {
                tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    job(i)
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    // The runtime's workers are alive while the session finishes.
    let report = session.finish();
    drop(rt);
    report
}

fn tokio_multi(mode: RunMode) -> Report {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(4);
    tokio_runtime(b, mode)
}

fn tokio_current(mode: RunMode) -> Report {
    tokio_runtime(tokio::runtime::Builder::new_current_thread(), mode)
}

/// 16 threads at a time, in waves, each thread a few jobs: threads come and go.
fn churn(mode: RunMode) -> Report {
    let session = start(mode);
    let per_wave = JOBS / 5;
    for wave in 0..5 {
        let handles: Vec<_> = (0..16)
            .map(|t| {
                std::thread::spawn(move || {
                    let base = wave * per_wave;
                    (base + t..base + per_wave)
                        .step_by(16)
                        .map(job)
                        .sum::<u64>()
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
    session.finish()
}

/// The expected results, from `job`'s structure: `JOBS` jobs from the root, half of them
/// (the odd ones) calling `leaf` twice, the even ones once.
fn check(setup: &str, mode: RunMode, report: &Report) {
    let d = &report.data;
    let at = format!("{setup}, {mode:?}");
    let name = |id: u32| {
        let n = d.name(id);
        n.rsplit("::").next().unwrap_or(&n).to_string()
    };
    let (odd, even) = (JOBS / 2, JOBS - JOBS / 2);
    let counts: BTreeMap<String, u64> = d
        .method_count
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (name(e.method), e.count))
        .collect();
    let want: BTreeMap<String, u64> =
        [("job".into(), JOBS), ("leaf".into(), even + 2 * odd)].into();
    assert_eq!(counts, want, "{at}: method counts");

    let edges: BTreeMap<(String, String), u64> = d
        .call_graph
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| ((name(e.caller), name(e.callee)), e.count))
        .collect();
    let want: BTreeMap<(String, String), u64> = [
        (("root".into(), "job".into()), JOBS),
        (("job".into(), "leaf".into()), even + 2 * odd),
    ]
    .into();
    assert_eq!(edges, want, "{at}: call graph");

    let ct = d.call_tree.as_ref().unwrap();
    assert!(!ct.approximate, "{at}: exact modes are exact");
    let patterns: BTreeMap<(String, Vec<String>), u64> = ct
        .patterns
        .iter()
        .map(|p| {
            (
                (name(p.method), p.callees.iter().map(|&c| name(c)).collect()),
                p.count,
            )
        })
        .collect();
    let want: BTreeMap<(String, Vec<String>), u64> = [
        (("job".into(), vec!["leaf".into()]), even),
        (("job".into(), vec!["leaf".into(), "leaf".into()]), odd),
        (("leaf".into(), vec![]), even + 2 * odd),
    ]
    .into();
    assert_eq!(patterns, want, "{at}: call-tree patterns");

    let contexts: BTreeMap<Vec<String>, u64> = ct
        .stacks()
        .into_iter()
        .map(|(stack, count)| (stack.iter().map(|&m| name(m)).collect(), count))
        .collect();
    let want: BTreeMap<Vec<String>, u64> = [
        (vec!["job".into()], JOBS),
        (vec!["job".into(), "leaf".into()], even + 2 * odd),
    ]
    .into();
    assert_eq!(contexts, want, "{at}: calling contexts");

    // Two paths of `job`: the `if` false (even) and true (odd).
    let mut paths: Vec<u64> = d
        .paths
        .as_ref()
        .unwrap()
        .iter()
        .filter(|p| name(p.method) == "job")
        .map(|p| p.count)
        .collect();
    paths.sort();
    assert_eq!(paths, [odd.min(even), odd.max(even)], "{at}: paths");
    assert_eq!(d.totals.dropped, 0, "{at}");
    assert_eq!(d.unmerged_threads, 0, "{at}");
}

/// A thread set-up: runs `JOBS` jobs in a session of the given mode.
type Setup = fn(RunMode) -> Report;

#[test]
fn every_analysis_is_exact_on_pools_and_runtimes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let setups: [(&str, Setup); 5] = [
        ("thread::scope", scope_threads),
        ("rayon pool", rayon_pool),
        ("tokio multi-thread", tokio_multi),
        ("tokio current-thread", tokio_current),
        ("16 threads churning", churn),
    ];
    for mode in [RunMode::Exhaustive, RunMode::Sequential] {
        for (setup, run) in setups {
            check(setup, mode, &run(mode));
        }
    }
}
