//! A path that restarts at a loop head names the loop's own line (the `for`, `while` or
//! `loop` keyword), not the line of the first `continue` the macro met in its body.

use cabprof::{profile, Analysis, Session};
use std::sync::atomic::{AtomicU32, Ordering};

static FOR_LINE: AtomicU32 = AtomicU32::new(0);
static WHILE_LINE: AtomicU32 = AtomicU32::new(0);

#[profile(paths)]
#[rustfmt::skip] // `line!()` must stay on the loop's line
fn skip_odd(n: u32) -> u32 {
    let mut s = 0;
    for i in { FOR_LINE.store(line!(), Ordering::Relaxed); 0..n } {
        if i % 2 == 1 {
            continue;
        }
        s += i;
    }
    s
}

#[profile(paths)]
#[rustfmt::skip] // `line!()` must stay on the loop's line
fn count_down(mut n: u32) -> u32 {
    let mut s = 0;
    while { WHILE_LINE.store(line!(), Ordering::Relaxed); n > 0 } {
        n -= 1;
        if n.is_multiple_of(3) {
            continue;
        }
        s += n;
    }
    s
}

#[test]
fn restarted_paths_name_the_loop_line() {
    let _g = crate::support::serial();
    let session = Session::builder()
        .analyses(&[Analysis::Paths])
        .pin(false)
        .start()
        .expect("session starts");
    assert_eq!(skip_odd(6), 6);
    assert_eq!(count_down(7), 12);
    let report = session.finish();
    let paths = report.data.paths.as_ref().expect("paths ran");
    let mut heads = Vec::new();
    for p in paths {
        for step in p.steps.iter().flatten() {
            if step.contains("path starts at loop head") {
                heads.push((report.data.name(p.method), step.clone()));
            }
        }
    }
    assert!(heads.len() >= 2, "restarted paths were profiled: {heads:?}");
    for (name, step) in &heads {
        let line = if name.ends_with("skip_odd") {
            FOR_LINE.load(Ordering::Relaxed)
        } else {
            WHILE_LINE.load(Ordering::Relaxed)
        };
        assert!(
            step.starts_with(&format!("line {line}: ")),
            "{name}: {step} (the loop is on line {line})"
        );
    }
}
