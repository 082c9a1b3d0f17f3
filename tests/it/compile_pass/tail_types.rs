//! The body's value is checked against the return type as it was before instrumenting: the
//! expected type reaches the tail (closure parameters, `parse`, `Default`), coercions still
//! apply (unsizing, deref), and bodies that diverge or end in `return` stay free of warnings.
//! A returned closure whose parameter types come only from an `impl Fn(&str) -> usize` return
//! type did not compile when the frame guard was a `match` around the whole body (E0282).
#![deny(warnings)]

use cabprof::profile;
use std::fmt::Debug;
use std::sync::Mutex;

trait Shape {
    fn sides(&self) -> u8;

    #[profile]
    fn twice(&self) -> u8 {
        self.sides() * 2
    }
}

struct Square;

impl Shape for Square {
    #[profile]
    fn sides(&self) -> u8 {
        4
    }
}

impl Square {
    #[profile]
    fn new() -> Self {
        Square
    }
}

#[profile]
fn adder() -> impl Fn(u8) -> u8 {
    |x| x + 1
}

#[profile]
fn measure() -> impl FnOnce(&str) -> usize {
    |s| s.len()
}

#[profile]
fn first() -> impl Fn(&[u8]) -> Option<&u8> {
    let skip = 0;
    move |v| v.get(skip)
}

#[profile(paths)]
fn measure_paths(trim: bool) -> impl Fn(&str) -> usize {
    let offset = if trim { 1 } else { 0 };
    move |s| s.len() - offset
}

#[profile]
fn early_closure(n: usize) -> impl Fn(&str) -> usize {
    if n == 0 {
        return Box::new(|s: &str| s.len()) as Box<dyn Fn(&str) -> usize>;
    }
    Box::new(move |s| s.len() + n)
}

#[profile]
fn boxed() -> Box<dyn Shape> {
    Box::new(Square)
}

#[profile]
fn boxed_closure() -> Box<dyn Fn(&str) -> usize> {
    Box::new(|s| s.len())
}

#[profile]
fn name() -> &'static str {
    "square"
}

#[profile]
fn parsed() -> u64 {
    "5".parse().unwrap()
}

#[profile]
fn defaulted() -> Vec<u8> {
    Default::default()
}

#[profile]
fn deref_coerced(v: &Vec<u8>) -> &[u8] {
    v
}

#[profile]
fn evens<'a>(v: &'a [u8]) -> impl Iterator<Item = &'a u8> + 'a {
    v.iter().filter(|x| **x % 2 == 0)
}

#[profile]
fn unfinished() -> impl Debug {
    todo!()
}

#[profile]
#[allow(clippy::needless_return)]
fn returned() -> impl Debug {
    return 5;
}

#[profile]
fn never(code: i32) -> ! {
    std::process::exit(code)
}

#[profile]
fn spins() -> ! {
    loop {
        std::hint::spin_loop();
    }
}

#[profile]
fn broken_out(m: &Mutex<Vec<u8>>) -> usize {
    loop {
        break m.lock().unwrap().len();
    }
}

#[profile]
fn if_let_temporary(m: &Mutex<Option<u8>>) -> u8 {
    if let Some(x) = *m.lock().unwrap() {
        x
    } else {
        0
    }
}

#[profile]
fn generic<T: Default + Clone + Debug, const N: usize>(x: &T) -> [T; N]
where
    T: Send,
{
    let _ = x.clone();
    std::array::from_fn(|_| T::default())
}

#[profile(paths)]
fn parse_both(a: &str, b: &str, strict: bool) -> Result<u32, std::num::ParseIntError> {
    let x: u32 = a.parse()?;
    if strict && x > 2 || x == 7 {
        return Ok(x);
    }
    let mut i = 0;
    let y = loop {
        i += 1;
        if i > x {
            break i * 2;
        }
    };
    Ok(y + b.parse::<u32>()?)
}

#[profile(paths)]
fn second_or_first(v: &[u8]) -> &u8 {
    if v.len() > 2 {
        return &v[1];
    }
    &v[0]
}

// The forms that keep one body behind a guard pass their inputs and tail through barriers
// (`hold`, `settle`): tails that coerce, diverge through a call, or take their type from the
// return type still compile without warnings, whatever the parameters' patterns.
fn stop() -> ! {
    std::process::exit(3)
}

#[profile]
#[track_caller]
fn fails_by_call() -> u32 {
    stop()
}

#[profile(memory)]
fn boxed_closure_memory(k: usize) -> Box<dyn Fn(&str) -> usize> {
    Box::new(move |s| s.len() + k)
}

#[profile]
unsafe fn deref_coerced_unsafe(v: &Vec<u8>) -> &[u8] {
    v
}

#[profile(paths)]
fn parsed_paths(s: &str, (a, b): (u64, u64), _: u8) -> u64 {
    if a > b {
        s.parse().unwrap()
    } else {
        b
    }
}

#[profile]
#[track_caller]
fn adder_guarded(x: u8) -> impl Fn(u8) -> u8 {
    move |y| x + y
}

#[profile]
#[track_caller]
fn large(mut words: [u64; 64]) -> [u64; 64] {
    words[0] += 1;
    words
}

pub(crate) fn main() {
    assert_eq!(boxed_closure_memory(1)("ab"), 3);
    // SAFETY: no precondition.
    assert_eq!(unsafe { deref_coerced_unsafe(&vec![2]) }, &[2]);
    assert_eq!(
        parsed_paths("9", (2, 1), 0) + parsed_paths("9", (1, 2), 0),
        11
    );
    assert_eq!(adder_guarded(1)(2), 3);
    assert_eq!(large([0; 64])[0], 1);
    if std::env::args().count() > 99 {
        fails_by_call();
    }
    assert_eq!(Square.twice(), 8);
    assert_eq!(Square::new().sides(), 4);
    assert_eq!(adder()(1), 2);
    assert_eq!(measure()("abc"), 3);
    assert_eq!(first()(&[7]), Some(&7));
    assert_eq!(measure_paths(true)("abc"), 2);
    assert_eq!(early_closure(0)("ab") + early_closure(1)("ab"), 5);
    assert_eq!(boxed().sides() + boxed_closure()("ab") as u8, 6);
    assert_eq!(name(), "square");
    assert_eq!(parsed(), 5);
    assert!(defaulted().is_empty());
    assert_eq!(deref_coerced(&vec![1]), &[1]);
    assert_eq!(evens(&[1, 2, 4]).count(), 2);
    assert_eq!(format!("{:?}", returned()), "5");
    assert_eq!(broken_out(&Mutex::new(vec![1])), 1);
    assert_eq!(if_let_temporary(&Mutex::new(Some(3))), 3);
    assert_eq!(generic::<u8, 2>(&1), [0, 0]);
    assert_eq!(parse_both("3", "1", false), Ok(9));
    assert_eq!(second_or_first(&[1, 2, 3]), &2);
    if std::env::args().count() > 99 {
        let _ = unfinished();
        spins();
    }
    let _: fn(i32) -> ! = never;
}
