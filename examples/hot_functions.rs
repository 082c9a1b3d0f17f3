//! Annotating hot functions: a small expression evaluator, profiled.
//!
//! It generates arithmetic expressions (fixed seed), tokenizes, parses (recursive descent) and
//! evaluates them, then bins the results into a histogram. `#[profile]` marks the parser,
//! `#[profile(paths)]` the tokenizer and evaluator (Ball-Larus paths), `#[profile(memory)]` the
//! histogram and a table scan (cache simulation), and `cabprof::alloc::Tracked` counts the
//! allocations. The program prints method counts, the call graph, the call tree, the hottest
//! paths decoded to source lines, the cache simulation and the allocations, and writes `target/cabprof/hot_functions.json`, `.folded` and, with the `flamegraph` feature
//! (`--features flamegraph`), the flame graph `target/cabprof/hot_functions.svg`.
//!
//! ```text
//! cargo run --release --example hot_functions             # 2,000 expressions, well under a second
//! cargo run --release --example hot_functions -- --full    # 200,000 expressions
//! CABPROF_MODE=sequential cargo run --release --example hot_functions   # inline analyses
//! ```

use cabprof::{profile, Session};
use std::path::Path;

/// The allocation analysis needs the allocator wrapper; without a session it only forwards.
#[global_allocator]
static ALLOC: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();

#[derive(Clone, Copy, Debug, PartialEq)]
enum Token {
    Num(i64),
    Plus,
    Minus,
    Star,
    Slash,
    Open,
    Close,
}

#[derive(Debug)]
enum Expr {
    Num(i64),
    Neg(Box<Expr>),
    Bin(Token, Box<Expr>, Box<Expr>),
}

/// Split an expression into tokens.
#[profile(paths)]
fn tokenize(src: &str) -> Vec<Token> {
    let bytes = src.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 2);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_digit() {
            let mut n = 0i64;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                n = n * 10 + (bytes[i] - b'0') as i64;
                i += 1;
            }
            out.push(Token::Num(n));
            continue;
        }
        match b {
            b'+' => out.push(Token::Plus),
            b'-' => out.push(Token::Minus),
            b'*' => out.push(Token::Star),
            b'/' => out.push(Token::Slash),
            b'(' => out.push(Token::Open),
            b')' => out.push(Token::Close),
            _ => {}
        }
        i += 1;
    }
    out
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
}

#[profile(all)] // `all`: also `peek`, an accessor that a plain block attribute leaves alone
impl Parser<'_> {
    fn peek(&self) -> Option<Token> {
        self.tokens.get(self.at).copied()
    }

    fn expr(&mut self) -> Expr {
        let mut left = self.term();
        while let Some(op @ (Token::Plus | Token::Minus)) = self.peek() {
            self.at += 1;
            let right = self.term();
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        left
    }

    fn term(&mut self) -> Expr {
        let mut left = self.factor();
        while let Some(op @ (Token::Star | Token::Slash)) = self.peek() {
            self.at += 1;
            let right = self.factor();
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        left
    }

    fn factor(&mut self) -> Expr {
        let t = self.peek();
        self.at += 1;
        match t {
            Some(Token::Num(n)) => Expr::Num(n),
            Some(Token::Minus) => Expr::Neg(Box::new(self.factor())),
            Some(Token::Open) => {
                let e = self.expr();
                self.at += 1; // ')'
                e
            }
            _ => Expr::Num(0),
        }
    }
}

/// Evaluate, with wrapping arithmetic and division by zero giving 0.
#[profile(paths)]
fn eval(e: &Expr) -> i64 {
    match e {
        Expr::Num(n) => *n,
        Expr::Neg(inner) => eval(inner).wrapping_neg(),
        Expr::Bin(op, l, r) => {
            let (a, b) = (eval(l), eval(r));
            match op {
                Token::Plus => a.wrapping_add(b),
                Token::Minus => a.wrapping_sub(b),
                Token::Star => a.wrapping_mul(b),
                Token::Slash if b != 0 => a.wrapping_div(b),
                _ => 0,
            }
        }
    }
}

/// Count results into 4096 bins (the memory accesses are simulated). The loop indexes on
/// purpose: `#[profile(memory)]` records index expressions.
#[allow(clippy::needless_range_loop)]
#[profile(memory)]
fn histogram(values: &[i64], bins: &mut [u64]) {
    for i in 0..values.len() {
        let b = (values[i].unsigned_abs() % bins.len() as u64) as usize;
        bins[b] += 1;
    }
}

/// Sum every 16th entry of a large table, column by column (a cache-unfriendly scan).
#[profile(memory)]
fn strided_sum(table: &[u64], stride: usize) -> u64 {
    let mut s = 0u64;
    for col in 0..stride {
        let mut i = col;
        while i < table.len() {
            s = s.wrapping_add(table[i]);
            i += stride;
        }
    }
    s
}

/// A random expression of `depth` levels (xorshift, fixed seed).
fn generate(rng: &mut u64, depth: u32, out: &mut String) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let r = *rng;
    if depth == 0 || r.is_multiple_of(5) {
        out.push_str(&(r % 1000).to_string());
        return;
    }
    if r.is_multiple_of(7) {
        out.push('-');
    }
    out.push('(');
    generate(rng, depth - 1, out);
    out.push(['+', '-', '*', '/'][(r >> 8) as usize % 4]);
    generate(rng, depth - 1, out);
    out.push(')');
}

#[profile]
fn run(expressions: usize) -> (u64, usize) {
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut results = Vec::with_capacity(expressions);
    let mut src = String::new();
    for _ in 0..expressions {
        src.clear();
        generate(&mut rng, 6, &mut src);
        let tokens = tokenize(&src);
        let mut p = Parser {
            tokens: &tokens,
            at: 0,
        };
        let e = p.expr();
        results.push(eval(&e));
    }
    let mut bins = vec![0u64; 4096];
    histogram(&results, &mut bins);
    let table: Vec<u64> = (0..(1u64 << 16)).collect();
    let s = strided_sum(&table, 16);
    let distinct = bins.iter().filter(|&&b| b > 0).count();
    (
        s ^ results.iter().fold(0u64, |a, &v| a.wrapping_add(v as u64)),
        distinct,
    )
}

/// Command-line options.
#[derive(clap::Parser, Debug)]
struct Args {
    /// The full run: 200,000 expressions instead of 2,000.
    #[arg(long)]
    full: bool,
}

fn main() {
    let full = <Args as clap::Parser>::parse().full;
    let expressions = if full { 200_000 } else { 2_000 };
    let session = Session::builder()
        .all_analyses()
        .from_env()
        .unwrap_or_else(|e| {
            eprintln!("hot_functions: {e}");
            std::process::exit(2)
        })
        .start()
        .expect("start profiling");
    let (checksum, distinct) = run(expressions);
    let report = session.finish();
    println!(
        "evaluated {expressions} expressions: checksum {checksum:#x}, {distinct} distinct bins\n"
    );
    print!("{}", report.text(8));
    let dir = Path::new("target/cabprof");
    std::fs::create_dir_all(dir).expect("create target/cabprof");
    std::fs::write(dir.join("hot_functions.json"), report.json()).expect("write JSON report");
    std::fs::write(dir.join("hot_functions.folded"), report.folded()).expect("write folded");
    println!(
        "\nwrote {0}/hot_functions.json and {0}/hot_functions.folded",
        dir.display()
    );
    // The SVG needs the `flamegraph` feature (`--features flamegraph`).
    #[cfg(feature = "flamegraph")]
    {
        std::fs::write(dir.join("hot_functions.svg"), report.svg()).expect("write flame graph");
        println!("wrote {}/hot_functions.svg", dir.display());
    }
}
