//! Every kind of item the attribute accepts, under `deny(warnings)`.
#![deny(warnings)]

use cabprof::profile;
use cabprof::profile as measure;
use std::fmt::Display;

#[profile]
pub fn free(x: u32) -> u32 {
    x
}

#[profile]
fn generic<T: Display + ?Sized, const N: usize>(t: &T) -> String
where
    T: Send,
{
    format!("{t}{N}")
}

#[profile]
unsafe fn unsafe_fn(p: *const u8) -> u8 {
    // SAFETY: caller's promise.
    unsafe { *p }
}

#[profile]
fn returns_impl(n: u32) -> impl Iterator<Item = u32> + Clone {
    0..n
}

#[profile]
fn with_question_mark(s: &str) -> Result<u32, std::num::ParseIntError> {
    let v: u32 = s.parse()?;
    Ok(v)
}

#[profile]
fn never_returns() -> ! {
    loop {
        std::thread::park();
    }
}

#[profile]
fn lifetimes<'a>(a: &'a str, _b: &str) -> &'a str {
    a
}

#[profile]
async fn async_fn(x: &str) -> Result<usize, Box<dyn std::error::Error>> {
    let n: usize = x.parse()?;
    Ok(n)
}

#[profile]
async fn async_impl_trait(n: u32) -> impl Display {
    n
}

#[profile(paths, memory)]
async fn async_mutates(mut v: Vec<u8>, _: u8) -> usize {
    v.push(1);
    if v.len() > 2 {
        v[0] = 3;
    }
    v.len()
}

#[measure]
fn renamed_import() {}

pub trait Store {
    fn get(&self, i: usize) -> u8;
    fn first(&self) -> u8 {
        self.get(0)
    }
    #[allow(async_fn_in_trait)]
    async fn fetch(&self, i: usize) -> Option<u8>;
}

pub struct Bytes(Vec<u8>);

#[profile(paths, memory)]
impl Store for Bytes {
    fn get(&self, i: usize) -> u8 {
        if i < self.0.len() {
            self.0[i]
        } else {
            0
        }
    }
    async fn fetch(&self, i: usize) -> Option<u8> {
        let x = self.0.get(i)?;
        Some(*x + self.0[0])
    }
}

pub struct Point {
    x: i32,
}

#[profile]
impl Point {
    pub fn new(x: i32) -> Self {
        Point { x }
    }
    pub const fn origin() -> Self {
        Point { x: 0 }
    }
    pub async fn later(&self) -> i32 {
        self.x
    }
    pub fn by_value(self) -> i32 {
        self.x
    }
}

impl Display for Point {
    #[profile]
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({})", self.x)
    }
}

#[profile]
pub trait Describe {
    fn name(&self) -> String;
    fn describe(&self) -> String {
        format!("<{}>", self.name())
    }
}

#[profile(paths, memory)]
mod nested {
    pub fn f(v: &mut [u8]) -> u8 {
        if v.is_empty() {
            return 0;
        }
        v[0] += 1;
        inner::g(v[0])
    }

    pub mod inner {
        pub fn g(x: u8) -> u8 {
            x
        }
    }

    #[cabprof::profile(skip)]
    pub fn skipped() {}
}

pub(crate) fn main() {
    let _ = free(1);
    let _ = generic::<str, 3>("a");
    // SAFETY: a valid pointer.
    let _ = unsafe { unsafe_fn(&1) };
    let _ = returns_impl(3).count();
    let _ = with_question_mark("1");
    let _ = lifetimes("a", "b");
    let _ = async_fn("1");
    let _ = async_impl_trait(1);
    let _ = async_mutates(vec![], 0);
    renamed_import();
    let p = Point::new(1);
    let _ = Point::origin();
    let _ = p.later();
    let _ = p.to_string();
    let _ = p.by_value();
    let _ = nested::f(&mut [1]);
    nested::skipped();
    let b = Bytes(vec![1]);
    let _ = b.first() + b.get(0);
    let _ = b.fetch(0);
    if free(0) == 1 {
        never_returns();
    }
}
