//! A session started inside an instrumented `async fn` (`#[tokio::main] #[profile] async fn
//! main` that starts it in its body): the function is counted from its next poll on, and
//! what it calls after that names it as the caller, not the root.

use cabprof::{profile, Analysis, Session};

#[profile]
fn work(x: u64) -> u64 {
    x + 1
}

#[profile]
async fn served(x: u64) -> u64 {
    tokio::task::yield_now().await;
    work(x)
}

/// Stands for `#[tokio::main] #[profile] async fn main`: it starts the session itself.
#[profile]
async fn app_main() -> cabprof::report::Report {
    let session = Session::builder()
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::CallTree,
        ])
        .pin(false)
        .start()
        .expect("session starts");
    // A suspension point: the next poll finds the session running.
    tokio::task::yield_now().await;
    let mut acc = 0;
    for i in 0..3 {
        acc += served(i).await;
    }
    acc += work(acc);
    assert!(acc > 0);
    session.finish()
}

#[test]
fn a_main_that_starts_the_session_is_counted_and_is_the_caller() {
    let _g = crate::support::serial();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(app_main());
    let d = &report.data;
    let name = |id: u32| {
        let n = d.name(id);
        n.rsplit("::").next().unwrap_or(&n).to_string()
    };
    let mut edges: Vec<(String, String, u64)> = d
        .call_graph
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (name(e.caller), name(e.callee), e.count))
        .collect();
    edges.sort();
    let e = |a: &str, b: &str, n: u64| (a.to_string(), b.to_string(), n);
    assert_eq!(
        edges,
        [
            e("app_main", "served", 3),
            e("app_main", "work", 1),
            e("root", "app_main", 1),
            e("served", "work", 3),
        ]
    );
    let contexts: Vec<(Vec<String>, u64)> = d
        .call_tree
        .as_ref()
        .unwrap()
        .stacks()
        .into_iter()
        .map(|(stack, count)| (stack.iter().map(|&m| name(m)).collect(), count))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(
        contexts.contains(&(s(&["app_main", "served", "work"]), 3)),
        "{contexts:?}"
    );
}
