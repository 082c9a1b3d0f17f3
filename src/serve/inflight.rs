//! `/debug/pprof/inflight`: what the program is doing now, as Go's goroutine dump says it.
//! Each thread inside instrumented calls, with the calling context of its innermost open call,
//! and each future polled and not finished, from the call-tree analysis' shadow stacks (no
//! other record is kept).
//!
//! The analyses count calls, they do not time them, so a call's age is what this view has
//! seen: how long, over the snapshots it was asked for, the same frame (the same context, the
//! k-th thread in it) has stayed open. It is at least that old; the first request shows every
//! call at 0 s, and a call that returns and is entered again between two requests reads as one.
//! In sampling mode the stacks are those of the sample (a thread's last chunk waits for its
//! `flush_thread`).

use super::http::Response;
use crate::model::MethodNames;
use crate::report::Report;
use cabprof_analyses::MethodId;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

/// When each open frame and pending future was first seen, by the snapshot that saw it.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// By the frame's context (method ids, outermost first) and which of the threads in that
    /// context it is.
    frames: HashMap<(Vec<u32>, usize), Instant>,
    /// By `async fn` and task id.
    futures: HashMap<(u32, u32), Instant>,
}

/// One open call.
struct Frame {
    method: u32,
    open_s: f64,
}

/// The view of `report`, a snapshot taken at `taken`: text, or JSON with `json`. `None`
/// without the call-tree analysis.
pub(crate) fn render(
    report: &Report,
    taken: Instant,
    seen: &mut Seen,
    service: &str,
    json: bool,
) -> Option<Response> {
    let trees = report.runtime.analysis.call_tree.as_ref()?;
    let now = Instant::now();
    let age = |first: Instant| now.saturating_duration_since(first).as_secs_f64();

    let stacks = trees.contexts.open_stacks();
    let mut frames_seen = HashMap::new();
    let mut threads_in: HashMap<Vec<u32>, usize> = HashMap::new();
    let stacks: Vec<Vec<Frame>> = stacks
        .iter()
        .map(|stack| {
            let ids: Vec<u32> = stack.iter().map(|m| m.get()).collect();
            (1..=ids.len())
                .map(|depth| {
                    let context = ids[..depth].to_vec();
                    let k = threads_in.entry(context.clone()).or_default();
                    let key = (context, *k);
                    *k += 1;
                    let first = *seen.frames.get(&key).unwrap_or(&taken);
                    frames_seen.insert(key, first);
                    Frame {
                        method: ids[depth - 1],
                        open_s: age(first),
                    }
                })
                .collect()
        })
        .collect();
    seen.frames = frames_seen;

    let mut futures_seen = HashMap::new();
    let futures: Vec<(u32, u32, Vec<u32>, f64)> = trees
        .contexts
        .pending_futures()
        .into_iter()
        .map(|(method, task, context)| {
            let key = (method.get(), task);
            let first = *seen.futures.get(&key).unwrap_or(&taken);
            futures_seen.insert(key, first);
            let context = context.into_iter().map(MethodId::get).collect();
            (method.get(), task, context, age(first))
        })
        .collect();
    seen.futures = futures_seen;

    let names = report.data.method_names();
    let snapshot_ms = age(taken) * 1e3;
    Some(if json {
        Response::new(
            200,
            "application/json",
            to_json(&names, &stacks, &futures, snapshot_ms),
        )
    } else {
        Response::text(
            200,
            to_text(&names, &stacks, &futures, snapshot_ms, service),
        )
    })
}

/// `name (file:line)` of a method.
fn described(names: &MethodNames<'_>, method: u32) -> (String, String) {
    let location = names
        .entry(method)
        .map_or(String::new(), |m| format!("{}:{}", m.file, m.line));
    (names.name(method), location)
}

fn to_text(
    names: &MethodNames<'_>,
    stacks: &[Vec<Frame>],
    futures: &[(u32, u32, Vec<u32>, f64)],
    snapshot_ms: f64,
    service: &str,
) -> String {
    let mut o = format!(
        "cabprof in-flight calls of {service}: {} threads inside instrumented calls, {} futures \
         pending (a snapshot {snapshot_ms:.0} ms old; \"open\" is how long this view has seen a \
         call open, at least)\n",
        stacks.len(),
        futures.len()
    );
    for (i, stack) in stacks.iter().enumerate() {
        let _ = writeln!(o, "\nthread {}:", i + 1);
        for (depth, f) in stack.iter().enumerate() {
            let (name, location) = described(names, f.method);
            let _ = writeln!(
                o,
                "  open {:>8.1} s  {:indent$}{name}  ({location})",
                f.open_s,
                "",
                indent = 2 * depth
            );
        }
    }
    if !futures.is_empty() {
        o.push_str("\nfutures pending:\n");
    }
    for (method, task, context, pending_s) in futures {
        let (name, location) = described(names, *method);
        let path: Vec<String> = context.iter().map(|&m| names.name(m)).collect();
        let _ = writeln!(
            o,
            "  pending {pending_s:>8.1} s  {name}, task {task}  ({location}), in {}",
            path.join(" > ")
        );
    }
    o
}

/// The JSON of the view.
#[derive(miniserde::Serialize)]
struct View {
    snapshot_ms: f64,
    threads: Vec<ThreadView>,
    futures: Vec<FutureView>,
}

#[derive(miniserde::Serialize)]
struct ThreadView {
    /// Outermost first.
    calls: Vec<CallView>,
}

#[derive(miniserde::Serialize)]
struct CallView {
    function: String,
    location: String,
    open_s: f64,
}

#[derive(miniserde::Serialize)]
struct FutureView {
    function: String,
    location: String,
    task: u32,
    pending_s: f64,
    /// Its calling context, outermost first, ending with itself.
    context: Vec<String>,
}

fn to_json(
    names: &MethodNames<'_>,
    stacks: &[Vec<Frame>],
    futures: &[(u32, u32, Vec<u32>, f64)],
    snapshot_ms: f64,
) -> String {
    let view = View {
        snapshot_ms,
        threads: stacks
            .iter()
            .map(|stack| ThreadView {
                calls: stack
                    .iter()
                    .map(|f| {
                        let (function, location) = described(names, f.method);
                        CallView {
                            function,
                            location,
                            open_s: f.open_s,
                        }
                    })
                    .collect(),
            })
            .collect(),
        futures: futures
            .iter()
            .map(|(method, task, context, pending_s)| {
                let (function, location) = described(names, *method);
                FutureView {
                    function,
                    location,
                    task: *task,
                    pending_s: *pending_s,
                    context: context.iter().map(|&m| names.name(m)).collect(),
                }
            })
            .collect(),
    };
    miniserde::json::to_string(&view)
}
