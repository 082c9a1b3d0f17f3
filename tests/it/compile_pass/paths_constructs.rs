//! Control flow `paths` must number without changing meaning or adding warnings.
#![deny(warnings)]

use cabprof::profile;

#[profile(paths)]
fn everything(v: &[i32], o: Option<i32>, r: Result<i32, String>) -> Result<i32, String> {
    let mut s = 0;
    if v.is_empty() {
        s += 1;
    }
    if let Some(x) = o {
        s += x;
    } else if s > 3 && !v.is_empty() || o.is_none() {
        s -= 1;
    }
    let Some(first) = v.first() else {
        return Err("empty".into());
    };
    let x = r?;
    s += match x {
        0 => 1,
        n if n < 0 => {
            if n < -10 {
                return Ok(-1);
            }
            2
        }
        n if n > 100 && s > 0 => n,
        _ => 3,
    };
    for (i, y) in v.iter().enumerate() {
        if *y == 0 {
            continue;
        }
        if i > 5 {
            break;
        }
        s += y;
    }
    let mut i = 0;
    while i < v.len() {
        i += 1;
    }
    let mut it = v.iter();
    while let Some(y) = it.next() {
        s += y;
    }
    'outer: loop {
        loop {
            if s > 1000 {
                break 'outer;
            }
            s += 100;
            continue 'outer;
        }
    }
    let tag = 'b: {
        if s % 2 == 0 {
            break 'b "even";
        }
        "odd"
    };
    let flag = s > 0 || tag == "even";
    let closure = |z: i32| if z > 0 { z } else { -z };
    println!("{first} {flag} {}", closure(s));
    assert!(s != 7 || flag, "message");
    Ok(s)
}

#[profile(paths)]
fn body_ends_in_divergence(v: &[u8]) -> u8 {
    for &x in v {
        if x == 0 {
            return 0;
        }
        return x;
    }
    loop {
        if v.len() > 1 {
            break;
        }
        panic!("no");
    }
    while v.is_empty() {
        unreachable!();
    }
    1
}

#[profile(paths)]
fn empty_loop_bodies(n: u32) -> u32 {
    let mut i = 0;
    while {
        i += 1;
        i < n
    } {}
    for _ in 0..n {}
    i
}

#[profile(paths)]
fn value_expressions(a: bool, b: bool) -> (bool, u32) {
    let t = (a && b, if a { 1 } else { 2 });
    t
}

#[profile(paths)]
async fn async_paths(x: Option<u32>) -> Option<u32> {
    let y = x?;
    if y > 1 {
        Some(y)
    } else {
        None
    }
}

#[profile(paths, max_paths = 4)]
fn split_paths(a: u8) -> u8 {
    let mut s = 0;
    if a & 1 != 0 {
        s += 1;
    }
    if a & 2 != 0 {
        s += 1;
    }
    if a & 4 != 0 {
        s += 1;
    }
    s
}

pub(crate) fn main() {
    let _ = everything(&[1, 0, 2], Some(1), Ok(3));
    let _ = body_ends_in_divergence(&[1, 2]);
    let _ = empty_loop_bodies(3);
    let _ = value_expressions(true, false);
    let _ = async_paths(Some(1));
    let _ = split_paths(3);
}
