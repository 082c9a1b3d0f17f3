//! Async tasks get the call tree, calling-context tree and flame graph they would have if each
//! ran alone, however a runtime interleaves them on a thread or moves them between threads.
//! The expected results are written down from the program's structure.

use cabprof::{profile, Analysis, RunMode, Session};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::SERIAL;

const TASKS: u64 = 6;
const STEPS: u64 = 3;

#[profile]
fn compute(x: u64) -> u64 {
    x.wrapping_mul(31).wrapping_add(7)
}

#[profile]
async fn step(i: u64, tx: &tokio::sync::mpsc::UnboundedSender<u64>) -> u64 {
    let a = compute(i);
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(1 + i % 3)).await;
    let b = compute(a);
    tx.send(b).expect("receiver alive");
    tokio::task::yield_now().await;
    a ^ b
}

#[profile]
async fn handle(id: u64) -> u64 {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut acc = 0;
    for s in 0..STEPS {
        acc ^= step(id * 10 + s, &tx).await;
        // Waiting on the channel is a suspension point too.
        acc ^= rx.recv().await.expect("sent");
    }
    acc ^ compute(acc)
}

/// Run `TASKS` interleaved `handle` tasks on `rt` inside a session of `mode`.
fn run(rt: tokio::runtime::Runtime, mode: RunMode) -> cabprof::report::Report {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = Session::builder()
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::CallTree,
        ])
        .mode(mode)
        .pin(false)
        .start()
        .expect("session starts");
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS).map(|i| tokio::spawn(handle(i))).collect();
        for t in tasks {
            t.await.expect("task ran");
        }
    });
    // Worker threads exit (and hand over their results) before the session ends.
    drop(rt);
    session.finish()
}

fn by_name(report: &cabprof::report::Report) -> impl Fn(u32) -> String + '_ {
    move |id| {
        let n = report.data.name(id);
        n.rsplit("::").next().unwrap_or(&n).to_string()
    }
}

/// The expected results, from the program's structure: each `handle` calls `step` `STEPS`
/// times then `compute` once; each `step` calls `compute` twice.
fn check(report: &cabprof::report::Report) {
    let name = by_name(report);
    let d = &report.data;

    let counts: BTreeMap<String, u64> = d
        .method_count
        .as_ref()
        .expect("method counts")
        .iter()
        .map(|e| (name(e.method), e.count))
        .collect();
    let want: BTreeMap<String, u64> = [
        ("handle".to_string(), TASKS),
        ("step".to_string(), TASKS * STEPS),
        ("compute".to_string(), TASKS * (2 * STEPS + 1)),
    ]
    .into();
    assert_eq!(counts, want, "method counts");

    let edges: BTreeMap<(String, String), u64> = d
        .call_graph
        .as_ref()
        .expect("call graph")
        .iter()
        .map(|e| {
            let caller = if e.caller == 0 {
                "root".to_string()
            } else {
                name(e.caller)
            };
            ((caller, name(e.callee)), e.count)
        })
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    let want: BTreeMap<(String, String), u64> = [
        (pair("root", "handle"), TASKS),
        (pair("handle", "step"), TASKS * STEPS),
        (pair("handle", "compute"), TASKS),
        (pair("step", "compute"), TASKS * STEPS * 2),
    ]
    .into();
    assert_eq!(edges, want, "call graph");

    let ct = d.call_tree.as_ref().expect("call tree");
    assert!(!ct.approximate, "an exhaustive run is exact");
    let patterns: BTreeMap<(String, Vec<String>), u64> = ct
        .patterns
        .iter()
        .map(|p| {
            let callees = p.callees.iter().map(|&c| name(c)).collect();
            ((name(p.method), callees), p.count)
        })
        .collect();
    let mut handle_callees = vec!["step".to_string(); STEPS as usize];
    handle_callees.push("compute".to_string());
    let want: BTreeMap<(String, Vec<String>), u64> = [
        (("handle".to_string(), handle_callees), TASKS),
        (
            ("step".to_string(), vec!["compute".to_string(); 2]),
            TASKS * STEPS,
        ),
        (("compute".to_string(), vec![]), TASKS * (2 * STEPS + 1)),
    ]
    .into();
    assert_eq!(patterns, want, "call-tree patterns");

    let contexts: BTreeMap<Vec<String>, u64> = ct
        .stacks()
        .into_iter()
        .map(|(stack, count)| (stack.iter().map(|&m| name(m)).collect(), count))
        .collect();
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let want: BTreeMap<Vec<String>, u64> = [
        (path(&["handle"]), TASKS),
        (path(&["handle", "compute"]), TASKS),
        (path(&["handle", "step"]), TASKS * STEPS),
        (path(&["handle", "step", "compute"]), TASKS * STEPS * 2),
    ]
    .into();
    assert_eq!(contexts, want, "calling contexts");

    // The flame graph's input: one line per context, each with the calls that reached it.
    let folded: Vec<String> = report
        .folded()
        .lines()
        .filter(|l| !l.contains("path#"))
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("count");
            let frames: Vec<String> = stack
                .split(';')
                .map(|f| f.rsplit("::").next().unwrap_or(f).to_string())
                .collect();
            format!("{} {n}", frames.join(";"))
        })
        .collect();
    let want = [
        format!("root;handle {TASKS}"),
        format!("root;handle;compute {TASKS}"),
        format!("root;handle;step {}", TASKS * STEPS),
        format!("root;handle;step;compute {}", TASKS * STEPS * 2),
    ];
    let mut folded_sorted = folded.clone();
    folded_sorted.sort();
    assert_eq!(folded_sorted, want, "folded stacks:\n{}", report.folded());
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .expect("runtime")
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn current_thread_exhaustive() {
    check(&run(current_thread(), RunMode::Exhaustive));
}

#[test]
fn current_thread_sequential() {
    check(&run(current_thread(), RunMode::Sequential));
}

#[test]
fn multi_thread_exhaustive() {
    for _ in 0..3 {
        check(&run(multi_thread(), RunMode::Exhaustive));
    }
}

#[test]
fn multi_thread_sequential() {
    for _ in 0..3 {
        check(&run(multi_thread(), RunMode::Sequential));
    }
}
