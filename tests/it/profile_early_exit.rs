//! Frames close however a function leaves: early `return`, `?`, and unwinding panics (caught by
//! `catch_unwind`) all emit the `Return`, so Call/Return stay balanced.

use crate::support;

use cabprof::profile;
use support::{assert_balanced, calls, record, serial};

#[profile]
fn early(x: u32) -> u32 {
    if x > 10 {
        return 1;
    }
    inner(x)
}

#[profile]
fn inner(x: u32) -> u32 {
    x * 2
}

#[profile]
fn parse_sum(a: &str, b: &str) -> Result<u32, std::num::ParseIntError> {
    let a: u32 = a.parse()?;
    let b: u32 = b.parse()?;
    Ok(a + inner(b))
}

#[profile]
fn first_even(v: &[u32]) -> Option<u32> {
    let x = v.iter().find(|x| x.is_multiple_of(2))?;
    Some(inner(*x))
}

#[profile]
fn explode(depth: u32) -> u32 {
    if depth == 0 {
        panic!("boom");
    }
    explode(depth - 1) + 1
}

#[profile]
fn catcher() -> bool {
    std::panic::catch_unwind(|| explode(3)).is_err()
}

#[test]
fn early_return_closes_the_frame() {
    let _g = serial();
    let (r, ev) = record(|| (early(11), early(2)));
    assert_eq!(r, (1, 4));
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>early",
            "-early",
            "+root>early",
            "+early>inner",
            "-inner",
            "-early"
        ]
    );
}

#[test]
fn question_mark_closes_the_frame() {
    let _g = serial();
    let (r, ev) = record(|| {
        (
            parse_sum("1", "2"),
            parse_sum("x", "2").is_err(),
            parse_sum("1", "y").is_err(),
            first_even(&[1, 3]),
            first_even(&[1, 4]),
        )
    });
    assert_eq!(r, (Ok(5), true, true, None, Some(8)));
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>parse_sum",
            "+parse_sum>inner",
            "-inner",
            "-parse_sum",
            "+root>parse_sum",
            "-parse_sum",
            "+root>parse_sum",
            "-parse_sum",
            "+root>first_even",
            "-first_even",
            "+root>first_even",
            "+first_even>inner",
            "-inner",
            "-first_even",
        ]
    );
}

#[test]
fn unwinding_panics_close_every_frame() {
    let _g = serial();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (caught, ev) = record(catcher);
    std::panic::set_hook(hook);
    assert!(caught);
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>catcher",
            "+catcher>explode",
            "+explode>explode",
            "+explode>explode",
            "+explode>explode",
            "-explode",
            "-explode",
            "-explode",
            "-explode",
            "-catcher"
        ]
    );
    // After the panic the shadow stack is back at the root.
    let (_, ev) = record(|| inner(1));
    assert_eq!(calls(&ev), ["+root>inner", "-inner"]);
}

/// A value whose drop calls an instrumented function: it shows in the event stream where the
/// drop ran, inside or outside the frame of the function that made it.
struct Noisy(u32);

impl Noisy {
    fn get(&self) -> u32 {
        self.0
    }
}

impl Drop for Noisy {
    fn drop(&mut self) {
        cleanup();
    }
}

#[profile]
fn cleanup() {}

/// A temporary in the tail expression: in edition 2021 (this crate's) it is dropped after
/// the function's locals, so a frame guard that is a plain local would close first.
#[profile]
fn tail_temporary() -> u32 {
    Noisy(3).get()
}

/// The same in a tail `match` on a temporary, and in a `return` with one.
#[profile]
fn tail_match(x: u32) -> u32 {
    if x == 0 {
        return Noisy(1).get();
    }
    match Noisy(x).get() {
        0 => 0,
        n => n + 1,
    }
}

#[test]
fn tail_temporaries_drop_inside_the_frame() {
    let _g = serial();
    let (r, ev) = record(|| (tail_temporary(), tail_match(0), tail_match(4)));
    assert_eq!(r, (3, 1, 5));
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>tail_temporary",
            "+tail_temporary>cleanup",
            "-cleanup",
            "-tail_temporary",
            "+root>tail_match",
            "+tail_match>cleanup",
            "-cleanup",
            "-tail_match",
            "+root>tail_match",
            "+tail_match>cleanup",
            "-cleanup",
            "-tail_match",
        ]
    );
}

impl Noisy {
    fn nonzero(&self) -> Option<u32> {
        (self.0 != 0).then_some(self.0)
    }

    fn explode(&self) -> u32 {
        panic!("boom {}", self.0)
    }
}

/// A tail temporary when the function returns an `impl Trait` directly (the body is then a
/// `return` operand, not a `match` arm: see the expansion's `tail_needs_return`).
#[profile]
fn tail_opaque() -> impl Into<u64> {
    Noisy(3).get()
}

/// The same with the path frame.
#[profile(paths)]
fn tail_opaque_paths(x: u32) -> impl Into<u64> {
    if x > 1 {
        Noisy(x).get()
    } else {
        Noisy(0).get()
    }
}

/// A temporary of a `?` that leaves early, and one of the tail when it does not.
#[profile]
fn tried(x: u32) -> Option<u32> {
    let v = Noisy(x).nonzero()?;
    Some(Noisy(v).get())
}

/// A tail temporary dropped by unwinding.
#[profile]
fn tail_panics() -> u32 {
    Noisy(2).explode()
}

#[test]
fn every_way_out_drops_temporaries_inside_the_frame() {
    let _g = serial();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (r, ev) = record(|| {
        (
            tail_opaque().into(),
            tail_opaque_paths(5).into(),
            tail_opaque_paths(0).into(),
            tried(0),
            tried(4),
            std::panic::catch_unwind(tail_panics).is_err(),
        )
    });
    std::panic::set_hook(hook);
    assert_eq!(r, (3u64, 5u64, 0u64, None, Some(4), true));
    assert_balanced(&ev);
    let once = |f: &str| {
        [
            format!("+root>{f}"),
            format!("+{f}>cleanup"),
            "-cleanup".into(),
            format!("-{f}"),
        ]
    };
    let mut want = Vec::new();
    for f in [
        "tail_opaque",
        "tail_opaque_paths",
        "tail_opaque_paths",
        "tried",
    ] {
        want.extend(once(f));
    }
    // `tried(4)`: the `?`'s temporary, then the tail's, both inside.
    want.extend([
        "+root>tried".into(),
        "+tried>cleanup".into(),
        "-cleanup".into(),
        "+tried>cleanup".into(),
        "-cleanup".into(),
        "-tried".into(),
    ]);
    want.extend(once("tail_panics"));
    assert_eq!(calls(&ev), want);
}
