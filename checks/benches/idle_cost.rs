//! What `#[profile]` on a whole `impl` costs when no session runs, on code shaped like a real
//! crate's: a recursive-descent parser whose methods are mostly small accessors (`is_eof`,
//! `char`, `peek`, `bump`) that the compiler inlines into their callers when they are plain.
//!
//! One source, three builds of it in one binary (a `macro_rules!` stamps the module out):
//!
//! - `plain`: no attribute;
//! - `annotated, idle`: `#[cabprof::profile]` on the `impl`, no session running (what a crate
//!   pays for leaving its attributes in);
//! - `compiled out`: `#[cabprof::profile(skip)]`, which expands to the item unchanged, exactly
//!   what the attribute does without the `enabled` feature (a macro unit test checks the two
//!   outputs token for token);
//!
//! - `floor: check only`: no attribute; each method the attribute instruments (`skip_spaces`,
//!   `number`, `factor`, `term`, `expr`; it leaves the accessors alone) written by hand as
//!   `if session_key() == 0 { body } else { record(); body }`: the least any per-call
//!   instrumentation that can be switched on at run time adds with no session running (one
//!   load and one branch, the body twice so that the idle copy needs no guard at all). Where
//!   this row already misses the target, no expansion of the attribute can meet it: the methods
//!   are too small for any check;
//!
//! and, for scale, `annotated, profiled`: the annotated build under an exhaustive session
//! counting calls and the call graph (every accessor call is then two events).
//!
//! Each round runs every variant once, in a shuffled order, each timing `PARSES` parses of the
//! same input; the table gives each variant's median time per parse and its ratio to `plain`
//! within the round (median of the per-round ratios, 95 % bootstrap interval over rounds, as
//! `cabprof_bench_support::stats` describes). Target: annotated-idle within 5 % of plain.
//!
//! `cargo bench -p cabprof-checks --bench idle_cost` (fat LTO, the bench profile) and
//! `cargo bench -p cabprof-checks --bench idle_cost --profile release` (what a crate that
//! depends on cabprof builds with `cargo build --release`). `IDLE_COST_ROUNDS` sets the rounds
//! (9 to 1000, default 17).

use cabprof::{Analysis, Session};
use cabprof_bench_support::rounds::interleaved;
use cabprof_bench_support::stats::{
    median, median_interval, min_max, paired_ratios, RESAMPLES, SEED,
};
use std::hint::black_box;
use std::time::Instant;

/// Parses per timed run.
const PARSES: usize = 200;

/// The body of a method the attribute instruments, as written in each build: unchanged, or
/// behind the one-load-one-branch check of the floor build.
macro_rules! as_is {
    ($($body:tt)*) => { $($body)* };
}

macro_rules! check_only {
    ($($body:tt)*) => {
        if ::cabprof::cab::runtime::session_key() == 0 {
            $($body)*
        } else {
            crate::record();
            $($body)*
        }
    };
}

/// Stands for the out-of-line recording call of the floor build's profiled copy; never
/// reached (no session runs while that build is timed).
#[cold]
#[inline(never)]
fn record() {
    black_box(());
}

macro_rules! parser {
    ($name:ident, $body:ident $(, #[$attr:meta])?) => {
        mod $name {
            /// An arithmetic-expression parser over bytes: `expr := term (('+'|'-') term)*`,
            /// `term := factor (('*'|'/') factor)*`, `factor := number | '(' expr ')' | '-' factor`.
            pub(crate) struct Parser<'a> {
                src: &'a [u8],
                pos: usize,
            }

            $(#[$attr])?
            impl<'a> Parser<'a> {
                pub(crate) fn new(src: &'a [u8]) -> Self {
                    Parser { src, pos: 0 }
                }

                fn is_eof(&self) -> bool {
                    self.pos >= self.src.len()
                }

                fn char(&self) -> u8 {
                    self.src[self.pos]
                }

                fn peek(&self) -> Option<u8> {
                    self.src.get(self.pos).copied()
                }

                fn bump(&mut self) -> bool {
                    self.pos += 1;
                    !self.is_eof()
                }

                fn skip_spaces(&mut self) {
 $body! {
                    while !self.is_eof() && self.char() == b' ' {
                        self.bump();
                    }
                }
}

                fn number(&mut self) -> i64 {
 $body! {
                    let mut n = 0i64;
                    while let Some(c @ b'0'..=b'9') = self.peek() {
                        n = n.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
                        self.bump();
                    }
                    n
                }
}

                fn factor(&mut self) -> i64 {
 $body! {
                    self.skip_spaces();
                    match self.peek() {
                        Some(b'(') => {
                            self.bump();
                            let v = self.expr();
                            self.skip_spaces();
                            if self.peek() == Some(b')') {
                                self.bump();
                            }
                            v
                        }
                        Some(b'-') => {
                            self.bump();
                            self.factor().wrapping_neg()
                        }
                        _ => self.number(),
                    }
                }
}

                fn term(&mut self) -> i64 {
 $body! {
                    let mut v = self.factor();
                    loop {
                        self.skip_spaces();
                        match self.peek() {
                            Some(b'*') => {
                                self.bump();
                                v = v.wrapping_mul(self.factor());
                            }
                            Some(b'/') => {
                                self.bump();
                                let d = self.factor();
                                v = if d == 0 { v } else { v.wrapping_div(d) };
                            }
                            _ => return v,
                        }
                    }
                }
}

                pub(crate) fn expr(&mut self) -> i64 {
 $body! {
                    let mut v = self.term();
                    loop {
                        self.skip_spaces();
                        match self.peek() {
                            Some(b'+') => {
                                self.bump();
                                v = v.wrapping_add(self.term());
                            }
                            Some(b'-') => {
                                self.bump();
                                v = v.wrapping_sub(self.term());
                            }
                            _ => return v,
                        }
                    }
                }
}
            }
        }
    };
}

parser!(plain, as_is);
parser!(annotated, as_is, #[cabprof::profile]);
parser!(compiled_out, as_is, #[cabprof::profile(skip)]);
parser!(floor, check_only);

/// A deterministic expression of about 4 KB: nested parentheses, all four operators, spaces.
fn input() -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut s = String::new();
    let mut depth = 0;
    while s.len() < 4000 {
        if rng.u8(..4) == 0 && depth < 6 {
            s.push('(');
            depth += 1;
        }
        if rng.bool() {
            s.push('-');
        }
        s.push_str(&rng.u32(1..100_000).to_string());
        if depth > 0 && rng.u8(..3) == 0 {
            s.push(')');
            depth -= 1;
        }
        s.push(' ');
        s.push(['+', '-', '*', '/'][rng.usize(..4)]);
        s.push(' ');
    }
    s.push('1');
    s.extend(std::iter::repeat_n(')', depth));
    s.into_bytes()
}

/// Nanoseconds per parse of `parse` over `PARSES` parses (after one warm-up parse).
fn time(src: &[u8], parse: fn(&[u8]) -> i64) -> f64 {
    black_box(parse(black_box(src)));
    let t = Instant::now();
    let mut acc = 0i64;
    for _ in 0..PARSES {
        acc = acc.wrapping_add(parse(black_box(src)));
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / PARSES as f64
}

fn parse_plain(src: &[u8]) -> i64 {
    plain::Parser::new(src).expr()
}

fn parse_annotated(src: &[u8]) -> i64 {
    annotated::Parser::new(src).expr()
}

fn parse_compiled_out(src: &[u8]) -> i64 {
    compiled_out::Parser::new(src).expr()
}

fn parse_floor(src: &[u8]) -> i64 {
    floor::Parser::new(src).expr()
}

/// The annotated parser under an exhaustive method count + call graph session.
fn profiled(src: &[u8]) -> f64 {
    let s = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallGraph])
        .start()
        .expect("no other session runs in this bench");
    let ns = time(src, parse_annotated);
    let r = s.finish();
    assert_eq!(r.totals.dropped, 0, "an exhaustive session drops nothing");
    ns
}

/// `IDLE_COST_ROUNDS`, checked: 9 to 1000, default 17.
fn rounds() -> usize {
    cabprof_bench_support::rounds::rounds(
        "IDLE_COST_ROUNDS",
        cabprof_bench_support::stats::MIN_ROUNDS,
        1000,
        cabprof_bench_support::stats::ROUNDS,
    )
}

fn main() {
    let src = input();
    let want = parse_plain(&src);
    assert_eq!(
        parse_annotated(&src),
        want,
        "the annotated parser parses alike"
    );
    assert_eq!(
        parse_compiled_out(&src),
        want,
        "the compiled-out parser parses alike"
    );
    assert_eq!(parse_floor(&src), want, "the floor parser parses alike");

    let rounds = rounds();
    let names = [
        "plain",
        "annotated, idle",
        "compiled out",
        "floor: check only",
        "annotated, profiled",
    ];
    let ns = interleaved(rounds, names.len(), SEED, |v| match v {
        0 => time(&src, parse_plain),
        1 => time(&src, parse_annotated),
        2 => time(&src, parse_compiled_out),
        3 => time(&src, parse_floor),
        _ => profiled(&src),
    });

    println!(
        "idle_cost: a {}-byte expression, {PARSES} parses per run, {rounds} rounds alternated; \
         ratios are per round over plain, median [95 % bootstrap interval]",
        src.len()
    );
    println!(
        "{:<22} {:>12} {:>21} {:>26}",
        "", "us/parse", "spread", "x plain"
    );
    for (i, name) in names.iter().enumerate() {
        let (lo, hi) = min_max(&ns[i]);
        let ratio = median_interval(&paired_ratios(&ns[i], &ns[0]), 0.95, RESAMPLES, SEED);
        println!(
            "{:<22} {:>12.2} {:>21} {:>26}",
            name,
            median(&ns[i]) / 1e3,
            format!("{:.2}-{:.2}", lo / 1e3, hi / 1e3),
            format!("{:.3} [{:.3}, {:.3}]", ratio.median, ratio.lo, ratio.hi),
        );
    }
    let idle = median_interval(&paired_ratios(&ns[1], &ns[0]), 0.95, RESAMPLES, SEED);
    let verdict = if idle.hi <= 1.05 {
        "met"
    } else if idle.lo > 1.05 {
        "missed"
    } else {
        "not resolved (the interval straddles 1.05)"
    };
    println!(
        "\nannotated, idle / plain: {:.3} [{:.3}, {:.3}] (target <= 1.05): {verdict}",
        idle.median, idle.lo, idle.hi
    );
    let floor = median_interval(&paired_ratios(&ns[3], &ns[0]), 0.95, RESAMPLES, SEED);
    let against = median_interval(&paired_ratios(&ns[1], &ns[3]), 0.95, RESAMPLES, SEED);
    println!(
        "floor (one load and branch per call) / plain: {:.3} [{:.3}, {:.3}]; annotated, idle / \
         floor: {:.3} [{:.3}, {:.3}]",
        floor.median, floor.lo, floor.hi, against.median, against.lo, against.hi
    );
    if floor.lo > 1.05 {
        println!(
            "the floor misses the target itself: these methods are too small for any run-time \
             check; the attribute's own part is the second ratio"
        );
    }
}
