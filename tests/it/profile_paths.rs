//! Ball-Larus path numbering, checked by brute force: functions with branches, `&&`/`||`,
//! matches with guards, loops with `continue`/`break` (labelled too), early returns, `?` and
//! `let .. else` are driven with every input combination. Each function records the branch
//! choices it makes through a side channel; the `Path` events of each call must decode to
//! exactly those choices, in order, so every distinct executed path has its own number. Every
//! number is in range and every number in range decodes.

use crate::support;

use cabprof::profile;
use cabprof_cab::registry::{self, PathMode, PathStep, StepKind};
use cabprof_cab::{EventKind, MethodId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Debug;
use support::{record, serial};

thread_local! {
    static TRACE: RefCell<Vec<(u32, StepKind)>> = const { RefCell::new(Vec::new()) };
}

fn rec(line: u32, kind: StepKind) {
    TRACE.with(|t| t.borrow_mut().push((line, kind)));
}

/// A condition operand: records its value.
fn c(line: u32, v: bool) -> bool {
    rec(line, StepKind::Condition(v));
    v
}

/// A match guard of arm `arm` (whose pattern just matched): records both.
fn g(line: u32, arm: u32, v: bool) -> bool {
    rec(line, StepKind::Arm(arm));
    rec(line, StepKind::Guard(v));
    v
}

/// An unguarded match arm `i` was taken.
fn arm(line: u32, i: u32) -> u32 {
    rec(line, StepKind::Arm(i));
    i
}

/// The operand of `?` on a `Result`.
fn t<T, E>(line: u32, r: Result<T, E>) -> Result<T, E> {
    rec(line, StepKind::TryError(r.is_err()));
    r
}

/// The scrutinee of `if let Some(..)` / `let Some(..) = .. else`.
fn p<T>(line: u32, o: Option<T>) -> Option<T> {
    rec(line, StepKind::Pattern(o.is_some()));
    o
}

/// A `for` loop took another item (or ended).
fn next(line: u32, more: bool) {
    rec(line, StepKind::Next(more));
}

#[profile(paths)]
fn conditions(a: bool, b: bool, d: bool, e: bool) -> u32 {
    let mut s = 0;
    if c(line!(), a) && c(line!(), b) {
        s += 1;
    } else if c(line!(), d) || !c(line!(), e) {
        s += 2;
    }
    if c(line!(), e) && c(line!(), s > 1) {
        return s + 10;
    }
    let f = c(line!(), a) || c(line!(), d);
    s + f as u32
}

#[profile(paths)]
fn matches(v: Option<u8>, flag: bool) -> u32 {
    match v {
        Some(x) if g(line!(), 0, x > 4) => 1,
        Some(0) => arm(line!(), 1),
        Some(_) if g(line!(), 2, flag) => 3,
        Some(x) => {
            let a = arm(line!() - 1, 3);
            if c(line!(), x == 2) {
                a + 10
            } else {
                a
            }
        }
        None => arm(line!(), 4),
    }
}

#[profile(paths)]
fn loops(n: u32, skip: u32, stop: u32) -> u32 {
    let mut i = 0;
    let mut s = 0;
    while c(line!(), i < n) {
        i += 1;
        if c(line!(), i == skip) {
            continue;
        }
        if c(line!(), i == stop) {
            break;
        }
        s += i;
    }
    s
}

#[profile(paths)]
fn labelled(rows: u32, cols: u32, k: u32) -> u32 {
    let mut s = 0;
    let mut r = 0;
    'outer: loop {
        if c(line!(), r == rows) {
            break;
        }
        r += 1;
        let mut col = 0;
        while c(line!(), col < cols) {
            col += 1;
            if c(line!(), r * col == k) {
                continue 'outer;
            }
            if c(line!(), r + col > 4) {
                break 'outer;
            }
            s += 1;
        }
    }
    let bonus = 'block: {
        if c(line!(), s > 2) {
            break 'block 100;
        }
        1
    };
    s + bonus
}

#[profile(paths)]
fn tries(a: Result<u8, u8>, b: Option<u8>, d: Option<u8>) -> Result<u32, u8> {
    let x = t(line!(), a)?;
    let Some(y) = p(line!(), b) else {
        return Err(0);
    };
    let mut s = x as u32 + y as u32;
    if let Some(z) = p(line!(), x.checked_sub(y)) {
        s += z as u32;
    }
    // A closure is its own body: its `?` is straight-line code here.
    let w = (|| Some(d? + 1))();
    Ok(s + w.unwrap_or(0) as u32)
}

#[profile(paths)]
fn fors(xs: &[u8], stop_at: u8) -> u32 {
    let mut s = 0;
    let for_line = line!() + 1;
    for &x in xs {
        next(line!() - 1, true);
        if c(line!(), x == stop_at) {
            return s;
        }
        if c(line!(), x.is_multiple_of(2)) {
            s += 1;
        }
    }
    next(for_line, false);
    s
}

/// Six independent `if`s (64 paths) with a budget of 16: paths are split.
#[profile(paths, max_paths = 16)]
fn split(bits: u32) -> u32 {
    let mut s = 0;
    if c(line!(), bits & 1 != 0) {
        s += 1;
    }
    if c(line!(), bits & 2 != 0) {
        s += 2;
    }
    if c(line!(), bits & 4 != 0) {
        s += 4;
    }
    if c(line!(), bits & 8 != 0) {
        s += 8;
    }
    if c(line!(), bits & 16 != 0) {
        s += 16;
    }
    if c(line!(), bits & 32 != 0) {
        s += 32;
    }
    s
}

/// Nine paths in one statement and a budget of 2: nothing to split at, so numbers are hashed.
#[profile(paths, max_paths = 2)]
fn hashed(a: bool, b: bool, d: bool, e: bool) -> u32 {
    (c(line!(), a) || c(line!(), b)) as u32 + (c(line!(), d) || c(line!(), e)) as u32
}

/// The Path events of each call of `method`, in call order.
fn paths_per_call(events: &[EventKind], method: MethodId) -> Vec<Vec<u32>> {
    let mut calls = Vec::new();
    let mut cur = Vec::new();
    for e in events {
        match *e {
            EventKind::Path { method: m, path } if m == method => cur.push(path),
            EventKind::Return { callee }
            | EventKind::TimedReturn { callee, .. }
            | EventKind::LongReturn { callee, .. }
                if callee == method =>
            {
                calls.push(std::mem::take(&mut cur))
            }
            _ => {}
        }
    }
    calls
}

fn decisions(steps: &[PathStep]) -> Vec<(u32, StepKind)> {
    steps
        .iter()
        .filter(|s| s.kind.is_decision())
        .map(|s| (s.line, s.kind))
        .collect()
}

/// Run `f` on every input in one session and check every call's paths against its trace.
/// Returns the number of distinct paths seen.
fn brute_force<I: Debug>(inputs: &[I], f: impl Fn(&I)) -> usize {
    let (traces, events) = record(|| {
        inputs
            .iter()
            .map(|i| {
                TRACE.with(|t| t.borrow_mut().clear());
                f(i);
                TRACE.with(|t| t.take())
            })
            .collect::<Vec<_>>()
    });
    let method = match events.first() {
        Some(EventKind::Call { callee, .. }) => *callee,
        other => panic!("expected a call first, got {other:?}"),
    };
    let info = registry::lookup(method).expect("registered");
    let numbering = info.paths.expect("instrumented with paths");
    assert_ne!(numbering.mode(), PathMode::Hashed);
    let n = numbering.num_paths();
    let per_call = paths_per_call(&events, method);
    assert_eq!(per_call.len(), inputs.len());
    let mut seen: HashMap<u32, Vec<(u32, StepKind)>> = HashMap::new();
    for ((input, trace), paths) in inputs.iter().zip(&traces).zip(&per_call) {
        let mut decoded = Vec::new();
        for &path in paths {
            assert!(
                (path as u64) < n,
                "{}: path {path} >= {n} for {input:?}",
                info.name
            );
            let steps = numbering.decode(path).expect("decodes");
            let d = decisions(&steps);
            if let Some(prev) = seen.insert(path, d.clone()) {
                assert_eq!(prev, d, "path {path} decoded two ways");
            }
            decoded.extend(d);
        }
        assert_eq!(
            &decoded, trace,
            "{}: paths {paths:?} for input {input:?}",
            info.name
        );
    }
    // Every number in range decodes, to distinct step sequences.
    if n <= 4096 {
        let mut all = HashMap::new();
        for path in 0..n as u32 {
            let steps = numbering
                .decode(path)
                .unwrap_or_else(|| panic!("{}: {path} < {n} does not decode", info.name));
            assert!(
                all.insert(steps.clone(), path).is_none(),
                "{}: two numbers decode to {steps:?}",
                info.name
            );
        }
        assert!(numbering.decode(n as u32 * 2).is_none());
    }
    seen.len()
}

fn bools() -> [bool; 2] {
    [false, true]
}

#[test]
fn conditions_and_short_circuits() {
    let _g = serial();
    let mut inputs = Vec::new();
    for a in bools() {
        for b in bools() {
            for d in bools() {
                for e in bools() {
                    inputs.push((a, b, d, e));
                }
            }
        }
    }
    let distinct = brute_force(&inputs, |&(a, b, d, e)| {
        conditions(a, b, d, e);
    });
    assert!(distinct >= 10, "{distinct}");
}

#[test]
fn match_arms_and_guards() {
    let _g = serial();
    let mut inputs = vec![(None, false), (None, true)];
    for x in 0..=6 {
        for f in bools() {
            inputs.push((Some(x), f));
        }
    }
    let distinct = brute_force(&inputs, |&(v, f)| {
        matches(v, f);
    });
    // None; Some(0); guard 0 true; guard 0 false then guard 2 true; then arm 3 with x == 2
    // true or false.
    assert_eq!(distinct, 6);
}

#[test]
fn loops_continue_and_break() {
    let _g = serial();
    let mut inputs = Vec::new();
    for n in 0..5 {
        for skip in 0..5 {
            for stop in 0..5 {
                inputs.push((n, skip, stop));
            }
        }
    }
    brute_force(&inputs, |&(n, skip, stop)| {
        loops(n, skip, stop);
    });
}

#[test]
fn labelled_loops_and_blocks() {
    let _g = serial();
    let mut inputs = Vec::new();
    for rows in 0..4 {
        for cols in 0..4 {
            for k in 0..7 {
                inputs.push((rows, cols, k));
            }
        }
    }
    brute_force(&inputs, |&(r, c, k)| {
        labelled(r, c, k);
    });
}

#[test]
fn question_marks_let_else_and_if_let() {
    let _g = serial();
    let mut inputs = Vec::new();
    for a in [Ok(3), Ok(1), Err(9)] {
        for b in [None, Some(2)] {
            for d in [None, Some(5)] {
                inputs.push((a, b, d));
            }
        }
    }
    let distinct = brute_force(&inputs, |&(a, b, d)| {
        let _ = tries(a, b, d);
    });
    // Err; Ok + no y; Ok + y with/without z (the closure's `?` is its own body).
    assert_eq!(distinct, 4);
}

#[test]
fn for_loops_with_early_return() {
    let _g = serial();
    let mut inputs = Vec::new();
    for len in 0..4 {
        for stop in 0..4u8 {
            inputs.push(((0..len).map(|i| i as u8 + 1).collect::<Vec<u8>>(), stop));
        }
    }
    brute_force(&inputs, |(xs, stop)| {
        fors(xs, *stop);
    });
}

#[test]
fn too_many_paths_are_split_and_still_decode() {
    let _g = serial();
    let inputs: Vec<u32> = (0..64).collect();
    brute_force(&inputs, |&b| {
        split(b);
    });
    let (_, ev) = record(|| split(0));
    let EventKind::Call { callee, .. } = ev[0] else {
        panic!("{ev:?}")
    };
    let numbering = registry::lookup(callee).unwrap().paths.unwrap();
    assert!(numbering.num_paths() <= 16, "{}", numbering.num_paths());
    assert!(matches!(numbering.mode(), PathMode::Split { lines } if !lines.is_empty()));
    let paths = paths_per_call(&ev, callee);
    assert!(paths[0].len() > 1, "a split call emits several paths");
}

#[test]
fn unsplittable_numbers_are_hashed() {
    let _g = serial();
    let mut inputs = Vec::new();
    for a in bools() {
        for b in bools() {
            for d in bools() {
                for e in bools() {
                    inputs.push((a, b, d, e));
                }
            }
        }
    }
    let (traces, ev) = record(|| {
        inputs
            .iter()
            .map(|&(a, b, d, e)| {
                TRACE.with(|t| t.borrow_mut().clear());
                hashed(a, b, d, e);
                TRACE.with(|t| t.take())
            })
            .collect::<Vec<_>>()
    });
    let EventKind::Call { callee, .. } = ev[0] else {
        panic!("{ev:?}")
    };
    let numbering = registry::lookup(callee).unwrap().paths.unwrap();
    assert_eq!(numbering.mode(), PathMode::Hashed);
    assert!(numbering.decode(0).is_none());
    // Same trace, same number; different traces, different numbers (9 paths: no collision).
    let mut by_trace = HashMap::new();
    let mut by_number = HashMap::new();
    for (trace, paths) in traces.iter().zip(paths_per_call(&ev, callee)) {
        assert_eq!(paths.len(), 1);
        by_trace.entry(trace.clone()).or_insert(paths[0]);
        assert_eq!(by_trace[trace], paths[0]);
        by_number.entry(paths[0]).or_insert(trace.clone());
        assert_eq!(&by_number[&paths[0]], trace);
    }
    assert_eq!(by_trace.len(), 9);
}
