//! `#[profile]` on `impl` blocks (every method), traits (default bodies), inline modules (every
//! fn, recursively) and methods; `#[profile(skip)]` opts an item out. The registry names each
//! function with its type and reports file and line.

mod support;

use cabprof::cab::registry;
use cabprof::profile;
use support::{assert_balanced, calls, record, serial};

struct Stack<T> {
    items: Vec<T>,
}

#[profile]
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

#[profile]
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

#[profile]
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
    assert!(c[0].ends_with("as profile_items::Shape>::area"), "{c:?}");
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
    assert_eq!(twice.module_path, "profile_items::geometry::helpers");
    assert!(twice.file.ends_with("profile_items.rs"));
    assert_eq!(
        twice.qualified_name(),
        "profile_items::geometry::helpers::twice"
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
