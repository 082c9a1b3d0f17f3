//! Places `memory` must rewrite without changing meaning or adding warnings.
#![deny(warnings)]

use cabprof::profile;
use std::collections::HashMap;

struct Grid {
    cells: Vec<Vec<u8>>,
    names: HashMap<String, u32>,
}

#[profile(memory)]
impl Grid {
    fn get(&self, r: usize, c: usize) -> u8 {
        self.cells[r][c]
    }

    fn set(&mut self, r: usize, c: usize, v: u8) {
        self.cells[r][c] = v;
        self.cells[r][c] |= 1;
        let row = &mut self.cells[r];
        row[0] = v;
        self.cells[r].push(v);
        let n = self.cells[r].len();
        self.cells[r][n - 1] = 0;
    }

    fn lookup(&self, k: &str) -> u32 {
        self.names[k] + self.names.len() as u32
    }

    fn swap(&mut self) {
        let t = self.cells[0][0];
        (self.cells[0][0], self.cells[1][0]) = (self.cells[1][0], t);
        self.cells.swap(0, 1);
    }

    fn slices(&self) -> usize {
        self.cells[0][1..].len() + self.cells[..1].len()
    }

    fn matching(&self, i: usize) -> u8 {
        match self.cells[i][0] {
            0 => 1,
            x => x,
        }
    }

    fn iflet(&self, i: usize) -> u8 {
        if let Some(x) = self.cells[i].first() {
            *x
        } else {
            0
        }
    }
}

#[profile(memory)]
fn pointers(p: &mut u32, q: &u32, b: Box<(u8, String)>, r: *mut u64) -> String {
    *p += *q;
    *p = *q * 2;
    let x: &u32 = &*q;
    let _ = *x == *q;
    // SAFETY: the caller passes a valid pointer.
    unsafe {
        *r = (*r).wrapping_add(1);
        let raw = &raw const *r;
        let _ = raw;
    }
    let (n, s) = *b;
    let _ = n;
    s
}

#[profile(memory)]
fn strings(v: &[String], w: &mut [String]) -> bool {
    w[0].push('x');
    w[1] = v[0].clone();
    v[0] == v[1] && v[0].len() == 1 && &v[0] == "x"
}

#[profile(memory)]
fn refs(v: &mut Vec<(u8, u8)>) -> u8 {
    let ref a = 3u8;
    v[0].0 = *a;
    v[0].1 += 1;
    let pair = v[0];
    pair.0 + v[0].1
}

pub(crate) fn main() {
    let mut g = Grid {
        cells: vec![vec![1, 2], vec![3]],
        names: HashMap::from([("a".to_string(), 1)]),
    };
    g.set(0, 1, 5);
    let _ = g.get(0, 1) + g.matching(0) + g.iflet(1);
    let _ = g.lookup("a");
    g.swap();
    let _ = g.slices();
    let mut a = 1;
    let mut z = 0u64;
    let _ = pointers(&mut a, &2, Box::new((1, "s".into())), &mut z);
    let _ = strings(&["x".into(), "x".into()], &mut ["a".into(), "b".into()]);
    let _ = refs(&mut vec![(1, 2)]);
}
