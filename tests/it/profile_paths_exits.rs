//! Paths at the edges: a panic ends the running path with a number marked "unwound" (decoding
//! to the choices made before the panic), `Path` always comes before the frame's `Return`,
//! `async fn` bodies and `while let` loops are numbered too, and a function without branches
//! has exactly one path.

use crate::support;

use cabprof::profile;
use cabprof_cab::registry::{self, StepKind};
use cabprof_cab::{EventKind, MethodId};
use support::{assert_balanced, record, serial};

#[profile(paths)]
fn may_panic(a: bool, b: bool) -> u32 {
    let mut s = 0;
    if a {
        s += 1;
    }
    if b {
        panic!("boom");
    }
    s
}

#[profile(paths)]
fn drain(mut v: Vec<u32>) -> u32 {
    let mut s = 0;
    while let Some(x) = v.pop() {
        if x.is_multiple_of(2) {
            continue;
        }
        s += x;
    }
    s
}

#[profile(paths)]
fn straight(x: u32) -> u32 {
    x + 1
}

#[profile(paths)]
async fn async_branch(x: u32) -> Result<u32, String> {
    let y: u32 = format!("{x}").parse().map_err(|_| String::new())?;
    if y > 3 {
        Ok(y)
    } else {
        Err("small".into())
    }
}

fn method_of(events: &[EventKind]) -> MethodId {
    match events.first() {
        Some(EventKind::Call { callee, .. }) => *callee,
        other => panic!("expected a call first, got {other:?}"),
    }
}

fn path_events(events: &[EventKind]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            EventKind::Path { path, .. } => Some(*path),
            _ => None,
        })
        .collect()
}

#[test]
fn a_panic_ends_the_path_as_unwound() {
    let _g = serial();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (r, ev) = record(|| std::panic::catch_unwind(|| may_panic(true, true)));
    std::panic::set_hook(hook);
    assert!(r.is_err());
    assert_balanced(&ev);
    let m = method_of(&ev);
    let numbering = registry::lookup(m).unwrap().paths.unwrap();
    let paths = path_events(&ev);
    assert_eq!(paths.len(), 1);
    assert!(numbering.is_unwound(paths[0]));
    let steps = numbering.decode(paths[0]).unwrap();
    assert_eq!(steps.last().unwrap().kind, StepKind::Unwound);
    // The choices before the panic: `a` true, `b` true.
    let kinds: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        &kinds[..2],
        [StepKind::Condition(true), StepKind::Condition(true)]
    );
    // The path comes before the return.
    assert!(matches!(ev[1], EventKind::Path { .. }));
    assert!(matches!(ev[2], EventKind::Return { .. }));
}

#[test]
fn while_let_iterations_are_paths() {
    let _g = serial();
    let (r, ev) = record(|| drain(vec![1, 2, 3]));
    assert_eq!(r, 4);
    let m = method_of(&ev);
    let numbering = registry::lookup(m).unwrap().paths.unwrap();
    let decoded: Vec<Vec<StepKind>> = path_events(&ev)
        .into_iter()
        .map(|p| {
            numbering
                .decode(p)
                .unwrap()
                .into_iter()
                .map(|s| s.kind)
                .collect()
        })
        .collect();
    use StepKind::*;
    assert_eq!(
        decoded,
        [
            // First iteration (x = 3, odd) starts at entry and ends at the back edge.
            vec![Pattern(true), Condition(false), BackEdge],
            // x = 2: `continue` is a back edge too.
            vec![LoopHead, Pattern(true), Condition(true), BackEdge],
            vec![LoopHead, Pattern(true), Condition(false), BackEdge],
            // The pattern fails: the loop ends and so does the function.
            vec![LoopHead, Pattern(false), End],
        ]
    );
}

#[test]
fn straight_line_code_has_one_path() {
    let _g = serial();
    let (_, ev) = record(|| straight(1));
    let numbering = registry::lookup(method_of(&ev)).unwrap().paths.unwrap();
    assert_eq!(numbering.num_paths(), 1);
    assert_eq!(path_events(&ev), [0]);
}

#[test]
fn async_bodies_are_numbered() {
    let _g = serial();
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
    let (r, ev) = record(|| (block_on(async_branch(5)), block_on(async_branch(1))));
    assert_eq!(r, (Ok(5), Err("small".into())));
    assert_balanced(&ev);
    let numbering = registry::lookup(method_of(&ev)).unwrap().paths.unwrap();
    let paths = path_events(&ev);
    assert_eq!(paths.len(), 2);
    assert_ne!(paths[0], paths[1]);
    for p in paths {
        let steps = numbering.decode(p).unwrap();
        assert_eq!(steps[0].kind, StepKind::TryError(false), "{steps:?}");
    }
}
