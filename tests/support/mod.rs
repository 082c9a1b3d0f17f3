//! Shared by `tests/it/` (its `support` module) and the separate binaries that use it: a
//! session that records every event word, the lock that keeps one session at a time per
//! test binary, and what a test that runs its binary again in a child process needs.

#![allow(dead_code)]

use cabprof_cab::event::decode;
use cabprof_cab::runtime::{EventAnalysis, RunMode, RuntimeConfig, Session};
use cabprof_cab::{EventKind, MethodId};
use std::sync::{Mutex, MutexGuard};

pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

/// One session per process: every test that starts one holds this.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps every word, in order.
#[derive(Default)]
pub(crate) struct Recorder {
    pub words: Vec<u64>,
}

impl EventAnalysis for Recorder {
    fn consume(&mut self, words: &[u64]) {
        self.words.extend_from_slice(words);
    }
    fn merge(&mut self, other: Self) {
        self.words.extend(other.words);
    }
}

/// Run `f` in an exhaustive session (this thread only) and return its events.
pub(crate) fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<EventKind>) {
    record_in(RunMode::Exhaustive, f)
}

/// Run `f` in a session of the given mode and return its events.
pub(crate) fn record_in<R>(mode: RunMode, f: impl FnOnce() -> R) -> (R, Vec<EventKind>) {
    let config = RuntimeConfig {
        mode,
        buffer_bytes: Some(64 << 10),
        chunk_bytes: Some(4 << 10),
        pin: false,
        ..RuntimeConfig::default()
    };
    let session = Session::start(config, Recorder::default).expect("session starts");
    let r = f();
    let report = session.finish();
    let events = report
        .analysis
        .words
        .iter()
        .map(|&w| decode(w).expect("valid event word"))
        .collect();
    (r, events)
}

/// The registered name of a method id.
pub(crate) fn name(id: MethodId) -> String {
    cabprof_cab::registry::lookup(id)
        .map(|m| m.name.to_string())
        .unwrap_or_else(|| format!("#{id}"))
}

/// Calls and returns as `"+caller>callee"` / `"-callee"` strings, for readable assertions.
pub(crate) fn calls(events: &[EventKind]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match *e {
            EventKind::Call { caller, callee } => {
                let c = if caller == MethodId::ROOT {
                    "root".to_string()
                } else {
                    name(caller)
                };
                Some(format!("+{c}>{}", name(callee)))
            }
            EventKind::Return { callee }
            | EventKind::TimedReturn { callee, .. }
            | EventKind::LongReturn { callee, .. } => Some(format!("-{}", name(callee))),
            _ => None,
        })
        .collect()
}

/// Every `Return` matches the innermost open `Call`, and nothing is left open.
pub(crate) fn assert_balanced(events: &[EventKind]) {
    let mut stack: Vec<MethodId> = Vec::new();
    for e in events {
        match *e {
            EventKind::Call { caller, callee } => {
                assert_eq!(
                    caller,
                    stack.last().copied().unwrap_or(MethodId::ROOT),
                    "caller of {callee} in {events:?}"
                );
                stack.push(callee);
            }
            EventKind::Return { callee }
            | EventKind::TimedReturn { callee, .. }
            | EventKind::LongReturn { callee, .. } => {
                assert_eq!(stack.pop(), Some(callee), "unbalanced return in {events:?}");
            }
            _ => {}
        }
    }
    assert!(stack.is_empty(), "frames left open: {stack:?}");
}

/// Run `cmd` (a child process: a scenario of the test binary, the CLI) to its end, checking it
/// passed; its output otherwise.
pub(crate) fn passed(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The value of `var` in a child role: an `#[ignore]`d test that the parent test `parent` (one
/// of them, if several) runs in a child process, this binary again with `--ignored --exact
/// <role>` and `var` set. Run any other way, without `var`, the role fails rather than pass
/// having done nothing.
#[track_caller]
pub(crate) fn child_role(var: &str, parent: &str) -> String {
    match std::env::var(var) {
        Ok(value) => value,
        Err(_) => {
            panic!("a child role, run only by `{parent}` (which sets {var}): run that test instead")
        }
    }
}

/// A child's standard error, as text.
pub(crate) fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
