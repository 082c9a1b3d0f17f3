//! Unit tests of the path graph, its numbering and splitting.

use super::builder::build;
use super::graph::{Graph, ENTRY, EXIT};
use super::instrument;
use super::numbering::Numbering;
use std::collections::HashSet;
use syn::Block;

fn count(src: &str) -> u128 {
    let mut b: Block = syn::parse_str(src).unwrap();
    let g = build(&mut b, &HashSet::new());
    g.number().unwrap().paths[ENTRY]
}

#[test]
fn counts_of_small_bodies() {
    assert_eq!(count("{ f(); }"), 1);
    assert_eq!(count("{ if a { x() } else { y() } }"), 2);
    assert_eq!(count("{ if a { x() } if b { y() } }"), 4);
    assert_eq!(count("{ if a && b { x() } }"), 3);
    assert_eq!(count("{ if a || b || c { x() } }"), 4);
    assert_eq!(count("{ match v { 1 => a(), 2 => b(), _ => c() } }"), 3);
    // Guard on arm 0: fail -> arms 1, 2 (2 paths), match -> guard true (1), guard false
    // -> arms 1, 2 (2); plus pattern 0 fails -> arms 1, 2 (2).
    assert_eq!(
        count("{ match v { 1 if g => a(), 2 => b(), _ => c() } }"),
        5
    );
    assert_eq!(count("{ let x = f()?; g(x)?; }"), 3);
    assert_eq!(count("{ if a { return 1; } 2 }"), 2);
    assert_eq!(count("{ let Some(x) = o else { return; }; }"), 2);
    assert_eq!(count("{ if let Some(x) = o { a() } }"), 2);
}

#[test]
fn loops_cut_paths_at_back_edges() {
    // ENTRY->cond; cond true -> body -> back edge; cond false -> exit.
    // Paths: from entry: (true, back) (false); from head: (true, back) (false) = 4.
    assert_eq!(count("{ while c { f(); } }"), 4);
    assert_eq!(count("{ for x in it { f(x); } }"), 4);
    // A loop with one `if` in the body and a break.
    assert_eq!(count("{ loop { if d { break; } f(); } }"), 4);
    assert_eq!(count("{ while a { if b { continue; } f(); } }"), 6);
}

#[test]
fn too_many_paths_are_split() {
    let mut src = String::from("{");
    for i in 0..40 {
        src += &format!("if c{i} {{ f(); }} ");
    }
    src += "}";
    let mut b: Block = syn::parse_str(&src).unwrap();
    let out = instrument(&mut b, 1 << 20).unwrap();
    assert!(!out.hashed);
    assert!(out.num_paths <= 1 << 20, "{}", out.num_paths);
    assert!(out.items.to_string().contains("Split"));
}

#[test]
fn unsplittable_bodies_fall_back_to_hashing() {
    let terms: Vec<String> = (0..30)
        .map(|i| format!("((a{i} || b{i}) as u32)"))
        .collect();
    let src = format!("{{ let x = {}; }}", terms.join(" + "));
    let mut b: Block = syn::parse_str(&src).unwrap();
    let out = instrument(&mut b, 1 << 29).unwrap();
    assert!(out.hashed);
}

/// A tiny generator of structured bodies (no external crates in a proc-macro's tests).
struct Gen(u64);

impl Gen {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }

    fn block(&mut self, depth: u32, in_loop: bool) -> String {
        let n = 1 + self.next(3);
        let mut s = String::from("{ ");
        for _ in 0..n {
            s += &self.stmt(depth, in_loop);
        }
        s + "}"
    }

    fn cond(&mut self) -> String {
        match self.next(4) {
            0 => "a && b".into(),
            1 => "a || !b".into(),
            2 => "f(x?)".into(),
            _ => "c".into(),
        }
    }

    fn stmt(&mut self, depth: u32, in_loop: bool) -> String {
        if depth == 0 {
            return "g(); ".into();
        }
        let d = depth - 1;
        match self.next(if in_loop { 10 } else { 8 }) {
            0 => format!("if {} {} ", self.cond(), self.block(d, in_loop)),
            1 => format!(
                "if {} {} else {} ",
                self.cond(),
                self.block(d, in_loop),
                self.block(d, in_loop)
            ),
            2 => format!(
                "match v {{ 1 => {}, 2 if {} => {}, _ => {} }} ",
                self.block(d, in_loop),
                self.cond(),
                self.block(d, in_loop),
                self.block(d, in_loop)
            ),
            3 => format!("while {} {} ", self.cond(), self.block(d, true)),
            4 => format!("for i in it {} ", self.block(d, true)),
            5 => format!(
                "'l: loop {{ if c {{ break 'l; }} {} }} ",
                self.block(d, true)
            ),
            6 => "if c { return; } ".into(),
            7 => "let Some(y) = o else { return; }; ".into(),
            8 => "if c { continue; } ".into(),
            _ => "if c { break; } ".into(),
        }
    }
}

/// Every ENTRY-to-EXIT path of the DAG, as its sum of edge values.
fn all_sums(g: &Graph, n: &Numbering) -> Vec<u64> {
    let mut sums = Vec::new();
    let mut stack = vec![(ENTRY, 0u64)];
    while let Some((v, sum)) = stack.pop() {
        if v == EXIT {
            sums.push(sum);
            continue;
        }
        for &e in &n.out[v] {
            stack.push((g.edges[e].to, sum + n.value[e]));
        }
    }
    sums
}

#[test]
fn random_bodies_number_every_path_once() {
    let mut gen = Gen(7);
    let mut checked = 0;
    for round in 0..200 {
        let src = gen.block(3, false);
        let parsed: Block = syn::parse_str(&src).unwrap();
        // Without splits, then split at a random third of the statement boundaries.
        let g0 = build(&mut parsed.clone(), &HashSet::new());
        let cuts: HashSet<usize> = (0..g0.candidates.len())
            .filter(|_| gen.next(3) == 0)
            .collect();
        for cuts in [HashSet::new(), cuts] {
            let g = build(&mut parsed.clone(), &cuts);
            let n = g.number().unwrap();
            let total = n.paths[ENTRY];
            if total > 20_000 {
                continue;
            }
            let mut sums = all_sums(&g, &n);
            sums.sort_unstable();
            let expected: Vec<u64> = (0..total as u64).collect();
            assert_eq!(sums, expected, "round {round}, cuts {cuts:?}: {src}");
            checked += 1;
        }
    }
    assert!(checked > 300, "{checked}");
}
