//! Code with the crate's own lint warnings in everything `#[cabprof::profile]` rewrites: a
//! free fn, an `impl` block, an `async fn`, a `paths` fn and a `memory` fn. The warnings are
//! the point; `tests/it/user_lints.rs` checks that instrumenting keeps exactly these.

#![allow(dead_code)]

/// 256 bytes: `Result<_, Big>` is `clippy::result_large_err`.
pub struct Big(pub [u8; 256]);

fn takes(s: &str) -> usize {
    s.len()
}

#[cabprof::profile]
pub fn free(s: String) -> Result<usize, Big> {
    let n = takes(&&s); // needless_borrow
    let mut unused = 0; // unused_variables, unused_mut (rustc)
    if s.len() == 0 {
        // len_zero
        return Err(Big([0; 256]));
    }
    let total = n + 1;
    Ok(total) // fine
}

/// A private function with a large `Err`, beside the public ones.
#[cabprof::profile]
fn private_result(s: &str) -> Result<u32, Big> {
    s.parse::<u32>().map_err(|_| Big([3; 256]))
}

#[cabprof::profile]
pub fn let_and_return(v: &[u32]) -> u32 {
    let x = v.iter().sum::<u32>() * 2;
    x // let_and_return
}

#[cabprof::profile]
pub fn needless_return(x: u32) -> u32 {
    let y = x + 1;
    return y; // needless_return
}

pub struct Parser {
    depth: u32,
    name: &'static str,
}

#[cabprof::profile(all)] // `all`: the small methods too, so their lints are checked under instrumentation
impl Parser {
    pub fn new() -> Parser {
        // new_without_default
        Parser {
            depth: 0,
            name: "p",
        }
    }

    pub fn parse(&self, s: &str) -> Result<u32, Big> {
        // result_large_err
        match s.parse::<u32>() {
            Ok(v) => Ok(v + self.depth),
            Err(_) => Err(Big([1; 256])),
        }
    }

    fn name(&self) -> &str {
        &self.name // needless_borrow, in tail position
    }

    pub fn single(&self, o: Option<u32>) {
        match o {
            // single_match
            Some(v) => println!("{v}"),
            _ => {}
        }
    }
}

#[cabprof::profile]
pub async fn fetch(s: String) -> Result<usize, Big> {
    let n = takes(&&s); // needless_borrow
    if s.len() == 0 {
        // len_zero
        return Err(Big([2; 256]));
    }
    let m = n * 2;
    Ok(m)
}

#[cabprof::profile(paths)]
pub fn classify(v: &[i32], s: &str) -> Result<i32, Big> {
    let n = takes(&&s.to_owned()) as i32; // needless_borrow
    if v.len() == 0 {
        // len_zero
        return Err(Big([3; 256]));
    }
    let mut acc = 0;
    for x in v {
        if *x < 0 {
            acc -= x;
        } else {
            acc += x;
        }
    }
    match v.first() {
        // single_match
        Some(f) => {
            acc += f;
        }
        _ => {}
    }
    // Literal patterns: an arm's step carries its line, and a line number spanned at `0`
    // read as a zero-prefixed literal to clippy.
    let r = match acc + n {
        0 => 1,
        7 => 0,
        r => r,
    };
    Ok(r)
}

#[cabprof::profile(memory)]
pub fn sum(v: &[u64], s: &str) -> Result<u64, Big> {
    let mut total = takes(&&s) as u64; // needless_borrow
    for i in 0..v.len() {
        // needless_range_loop
        total += v[i];
    }
    if v.len() == 0 {
        // len_zero
        return Err(Big([4; 256]));
    }
    Ok(total)
}
