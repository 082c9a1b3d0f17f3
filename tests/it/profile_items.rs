//! `#[profile]` on `impl` blocks (every method), traits (default bodies), inline modules (every
//! fn, recursively) and methods; `#[profile(skip)]` opts an item out; small functions are left
//! alone unless `#[profile(all)]` asks for them. The registry names each function with its type
//! and reports file and line.

use crate::support;

use cabprof::profile;
use cabprof_cab::registry;
use support::{assert_balanced, calls, record, serial};

struct Stack<T> {
    items: Vec<T>,
}

#[profile(all)]
impl<T: Clone> Stack<T> {
    fn new() -> Self {
        Stack { items: Vec::new() }
    }

    fn push(&mut self, t: T) {
        self.items.push(t);
    }

    fn peek(&self) -> Option<T> {
        self.items.last().cloned()
    }

    const fn capacity_hint() -> usize {
        16
    }

    #[profile(skip)]
    fn len(&self) -> usize {
        self.items.len()
    }
}

trait Shape {
    fn area(&self) -> f64;
    fn describe(&self) -> String;
}

#[profile(all)]
trait Greeter {
    fn name(&self) -> String;

    fn greet(&self) -> String {
        format!("hello, {}", self.name())
    }
}

struct Square(f64);

impl Shape for Square {
    #[profile]
    fn area(&self) -> f64 {
        self.0 * self.0
    }

    fn describe(&self) -> String {
        format!("square of area {}", self.area())
    }
}

impl Greeter for Square {
    fn name(&self) -> String {
        "square".into()
    }
}

#[profile(all)]
mod geometry {
    pub(crate) fn double(x: u32) -> u32 {
        helpers::twice(x)
    }

    pub(crate) mod helpers {
        pub(crate) const TWICE_LINE: u32 = line!() + 1;
        pub(crate) fn twice(x: u32) -> u32 {
            x * 2
        }
    }
}

/// A scanner shaped like a parser's: accessors the compiler inlines, and methods with loops.
struct Scanner<'a> {
    src: &'a [u8],
    pos: usize,
}

#[profile]
impl Scanner<'_> {
    fn is_eof(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos += 1;
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.bump();
        }
    }

    fn word(&mut self) -> usize {
        self.skip_spaces();
        let start = self.pos;
        while !self.is_eof() && self.peek() != Some(b' ') {
            self.bump();
        }
        self.pos - start
    }

    fn describe(&self) -> String {
        format!("at {}", self.pos)
    }
}

/// The same accessors with `all`: every method instrumented.
struct AllScanner<'a>(Scanner<'a>);

#[profile(all)]
impl AllScanner<'_> {
    fn is_eof(&self) -> bool {
        self.0.pos >= self.0.src.len()
    }

    fn bump(&mut self) {
        self.0.pos += 1;
    }
}

#[test]
fn small_functions_are_left_alone_unless_all() {
    let _g = serial();
    let (n, ev) = record(|| {
        let mut s = Scanner {
            src: b"  ab",
            pos: 0,
        };
        (s.word(), s.describe())
    });
    assert_eq!(n, (2, "at 4".to_string()));
    assert_balanced(&ev);
    // `is_eof`, `peek` and `bump` are accessors: left alone. `word` and `skip_spaces` have
    // loops, `describe` a macro call: instrumented.
    assert_eq!(
        calls(&ev),
        [
            "+root>Scanner<'_>::word",
            "+Scanner<'_>::word>Scanner<'_>::skip_spaces",
            "-Scanner<'_>::skip_spaces",
            "-Scanner<'_>::word",
            "+root>Scanner<'_>::describe",
            "-Scanner<'_>::describe",
        ]
    );
    let (eof, ev) = record(|| {
        let mut s = AllScanner(Scanner { src: b"a", pos: 0 });
        s.bump();
        s.is_eof()
    });
    assert!(eof);
    assert_eq!(
        calls(&ev),
        [
            "+root>AllScanner<'_>::bump",
            "-AllScanner<'_>::bump",
            "+root>AllScanner<'_>::is_eof",
            "-AllScanner<'_>::is_eof",
        ]
    );
}

#[test]
fn every_method_of_an_impl_block() {
    let _g = serial();
    let (r, ev) = record(|| {
        let mut s = Stack::new();
        s.push(1);
        s.push(2);
        (s.peek(), s.len(), Stack::<u8>::capacity_hint())
    });
    assert_eq!(r, (Some(2), 2, 16));
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>Stack<_>::new",
            "-Stack<_>::new",
            "+root>Stack<_>::push",
            "-Stack<_>::push",
            "+root>Stack<_>::push",
            "-Stack<_>::push",
            "+root>Stack<_>::peek",
            "-Stack<_>::peek",
        ]
    );
}

#[test]
fn trait_methods_and_default_bodies() {
    let _g = serial();
    let (r, ev) = record(|| (Square(2.0).describe(), Square(1.0).greet()));
    assert_eq!(
        r,
        ("square of area 4".to_string(), "hello, square".to_string())
    );
    assert_balanced(&ev);
    let c = calls(&ev);
    assert_eq!(c.len(), 4, "{c:?}");
    assert!(
        c[0].ends_with("as it::profile_items::Shape>::area"),
        "{c:?}"
    );
    assert!(c[2].ends_with("::greet"), "{c:?}");
}

#[test]
fn every_fn_of_a_module_recursively() {
    let _g = serial();
    let (r, ev) = record(|| geometry::double(4));
    assert_eq!(r, 8);
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        ["+root>double", "+double>twice", "-twice", "-double"]
    );
    let infos = registry::all();
    let twice = infos
        .iter()
        .find(|(_, m)| m.name == "twice")
        .expect("registered")
        .1;
    assert_eq!(twice.module_path, "it::profile_items::geometry::helpers");
    assert!(twice.file.ends_with("profile_items.rs"));
    assert_eq!(
        twice.qualified_name(),
        "it::profile_items::geometry::helpers::twice"
    );
    assert_eq!(
        twice.line,
        geometry::helpers::TWICE_LINE,
        "the line of `fn twice`"
    );
}

#[test]
fn ids_are_assigned_once_and_looked_up() {
    let _g = serial();
    let (_, a) = record(|| geometry::double(1));
    let (_, b) = record(|| geometry::double(2));
    assert_eq!(a, b, "the same ids across sessions");
    let all = registry::all();
    for (i, (id, _)) in all.iter().enumerate() {
        assert_eq!(id.get() as usize, i + 1, "dense ids from 1");
    }
    assert!(registry::lookup(cabprof_cab::MethodId::ROOT).is_none());
    assert_eq!(registry::overflowed(), 0);
}

// What the closure form (`__private::run(&SITE, move || -> Ret { body })`) must keep of a
// function: borrows of its arguments in the return value, `mut` arguments, `self` by value,
// generics, and one instance of a `static` in the body whether the call was recorded or not.

struct Counter {
    hits: u32,
    log: Vec<u32>,
}

#[profile(all)] // `all`: the accessors too, whose returned borrows are the point
impl Counter {
    fn hits_mut(&mut self) -> &mut u32 {
        self.log.push(self.hits);
        &mut self.hits
    }

    fn first_mut(&mut self) -> Option<&mut u32> {
        self.log.push(0);
        self.log.iter_mut().next()
    }

    fn with_hits(mut self, n: u32) -> Self {
        for _ in 0..n {
            self.hits += 1;
        }
        self
    }
}

#[profile]
fn shortest<'a>(a: &'a str, b: &'a str) -> &'a str {
    let mut out = a;
    for s in [a, b] {
        if s.len() < out.len() {
            out = s;
        }
    }
    out
}

#[profile]
fn filled<T: Clone, const N: usize>(mut v: Vec<T>, t: T) -> [T; N] {
    while v.len() < N {
        v.push(t.clone());
    }
    std::array::from_fn(|i| v[i].clone())
}

#[profile]
fn ticket() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Drops by calling an instrumented function, so the drop's place shows in the events.
struct Noisy;

impl Drop for Noisy {
    fn drop(&mut self) {
        dropped();
    }
}

#[profile(all)]
fn dropped() {}

#[profile]
fn consume(n: Noisy) -> u32 {
    let _n = n;
    7
}

#[profile]
#[track_caller]
fn where_called() -> u32 {
    std::panic::Location::caller().line()
}

#[test]
fn the_closure_form_keeps_what_the_function_does() {
    let _g = serial();
    let (r, ev) = record(|| {
        let mut c = Counter {
            hits: 1,
            log: Vec::new(),
        };
        *c.hits_mut() += 10;
        *c.first_mut().unwrap() += 5;
        let c = c.with_hits(3);
        let s = shortest("abc", "de").to_owned();
        let a: [u8; 3] = filled(vec![1], 9);
        (c.hits, c.log, s, a)
    });
    assert_eq!(r, (14, vec![6, 0], "de".to_owned(), [1, 9, 9]));
    assert_balanced(&ev);
    let names: Vec<String> = calls(&ev);
    for f in ["hits_mut", "first_mut", "with_hits", "shortest", "filled"] {
        assert!(
            names.iter().any(|c| c.starts_with('+') && c.ends_with(f)),
            "{f} recorded: {names:?}"
        );
    }
}

#[test]
fn a_static_in_the_body_is_one_whether_recorded_or_not() {
    let _g = serial();
    let first = ticket();
    let (second, ev) = record(ticket);
    let third = ticket();
    assert_eq!((second, third), (first + 1, first + 2));
    assert_eq!(calls(&ev), ["+root>ticket", "-ticket"]);
}

#[test]
fn arguments_are_dropped_inside_the_frame() {
    let _g = serial();
    let (r, ev) = record(|| consume(Noisy));
    assert_eq!(r, 7);
    assert_eq!(
        calls(&ev),
        ["+root>consume", "+consume>dropped", "-dropped", "-consume"]
    );
}

#[test]
fn track_caller_still_sees_its_caller() {
    let _g = serial();
    // `#[track_caller]` keeps the guard form: a closure would be the caller it sees.
    let (seen, ev) = record(|| (where_called(), line!()));
    assert_eq!(seen.0, seen.1);
    assert_eq!(calls(&ev), ["+root>where_called", "-where_called"]);
    let idle = (where_called(), line!());
    assert_eq!(idle.0, idle.1);
}

#[profile]
fn outer_fn(x: u32) -> u32 {
    #[profile]
    fn inner_fn(x: u32) -> u32 {
        x + 1
    }
    inner_fn(x) * 2
}

macro_rules! iter_of {
    ($t:ty) => { impl Iterator<Item = $t> };
}

#[profile]
fn counted_to(n: u8) -> iter_of!(u8) {
    0..n
}

#[test]
fn a_function_inside_a_profiled_one_keeps_its_source_name() {
    let _g = serial();
    let (r, ev) = record(|| (outer_fn(3), counted_to(3).sum::<u8>()));
    assert_eq!(r, (8, 3));
    assert_eq!(
        calls(&ev),
        [
            "+root>outer_fn",
            "+outer_fn>outer_fn::inner_fn",
            "-outer_fn::inner_fn",
            "-outer_fn",
            "+root>counted_to",
            "-counted_to"
        ]
    );
}

/// A safe `#[target_feature]` function keeps one body behind the guard: an `#[inline(always)]`
/// closure would not inherit the feature, and `asm!` on its registers would not compile (this
/// file would not build).
#[cfg(target_arch = "x86_64")]
#[profile]
#[target_feature(enable = "avx2")]
fn with_avx2(x: u64) -> u64 {
    let y: u64;
    // SAFETY: zeroes a ymm register and copies one general register; touches no memory.
    unsafe {
        std::arch::asm!(
            "vpxor {t}, {t}, {t}",
            "mov {y}, {x}",
            t = out(ymm_reg) _,
            x = in(reg) x,
            y = lateout(reg) y,
        )
    };
    y + 1
}

#[cfg(target_arch = "x86_64")]
#[test]
fn target_feature_functions_build_and_record() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!(
            "skipped the call: this CPU has no AVX2 (the function built, which is the point)"
        );
        return;
    }
    let _g = serial();
    // SAFETY: the CPU has AVX2, checked above.
    let (r, ev) = record(|| unsafe { with_avx2(41) });
    assert_eq!(r, 42);
    assert_eq!(calls(&ev), ["+root>with_avx2", "-with_avx2"]);
}
