//! `#[profile]` on `impl` blocks (every method), traits (default bodies), inline modules (every
//! fn, recursively) and methods; `#[profile(skip)]` opts an item out; small functions are left
//! alone unless `#[profile(all)]` asks for them. The registry names each function with its type
//! and reports file and line.

use crate::support;

use cabprof::cab::registry;
use cabprof::profile;
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
    assert!(registry::lookup(cabprof::MethodId::ROOT).is_none());
    assert_eq!(registry::overflowed(), 0);
}
