//! Workload 1, recursive and call-heavy: a tree-walking interpreter for a small expression
//! language (integers, arithmetic, comparisons, `let`, `if`, first-order functions).
//!
//! A generated script (a fixed library — `fib`, `tak`, `gcd`, `collatz`, `powmod`, `isqrt` —
//! plus generated functions and a list of top-level `eval` items) is lexed, parsed by recursive
//! descent and evaluated. Every AST node evaluated is one call of `eval`, so the call rate is
//! very high, and the call tree is deep and varied.
//!
//! Instrumentation: `eval`, `call` and the parser's functions `#[profile]`; the lexer's
//! `next_token` and the operator dispatch `binop` `#[profile(paths)]`.

use crate::rng::Rng;
use crate::Size;
use std::fmt::Write as _;

/// The fixed library every script starts with.
const LIBRARY: &str = "
fn fib(n) = if n < 2 then n else fib(n - 1) + fib(n - 2);
fn tak(x, y, z) = if y < x then tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y)) else z;
fn gcd(a, b) = if b == 0 then a else gcd(b, a % b);
fn collatz(n, steps) =
    if n <= 1 then steps
    else if n % 2 == 0 then collatz(n / 2, steps + 1)
    else collatz(3 * n + 1, steps + 1);
fn powmod(b, e, m) =
    if e == 0 then 1 % m
    else let h = powmod(b, e / 2, m) in
         let h2 = h * h % m in
         if e % 2 == 0 then h2 else h2 * (b % m) % m;
fn isqrt_iter(n, x) = let y = (x + n / x) / 2 in if x <= y then x else isqrt_iter(n, y);
fn isqrt(n) = if n < 2 then n else isqrt_iter(n, n);
fn main(i) =
    let a = fib(10 + i % 7) in
    let b = tak(6 + i % 4, 4, i % 3) in
    let c = gcd(i * 7919 + 13, 1000003 % (i + 2) + i) in
    let d = collatz(i % 300 + 1, 0) in
    let e = powmod(i + 2, 1000 + i, 1000000007) in
    let f = isqrt(i * i * 31 + 7) in
    a + 3 * b + 5 * c + 7 * d + 11 * e + 13 * f;
";

/// `(generated functions, top-level eval items)` for each size.
fn shape(size: Size) -> (usize, usize) {
    size.pick((12, 10), (60, 500), (200, 5_000))
}

/// The script for `size`: the library, then `g0..gN` and `eval` items from a fixed seed.
pub fn script(size: Size) -> String {
    let (nfuns, nevals) = shape(size);
    let mut rng = Rng::new(0x1A7E_5C21);
    let mut s = String::from(LIBRARY);
    for k in 0..nfuns {
        let _ = write!(s, "fn g{k}(x, y) = ");
        let mut vars = vec!["x", "y"];
        gen_expr(&mut rng, &mut s, &mut vars, 4);
        s.push_str(";\n");
    }
    for i in 0..nevals {
        if i % 2 == 0 {
            let _ = writeln!(s, "eval main({});", i / 2);
        } else {
            s.push_str("eval ");
            let mut vars = Vec::new();
            let k = rng.below(nfuns as u64);
            let _ = write!(s, "g{k}({}, ", rng.below(1000));
            gen_expr(&mut rng, &mut s, &mut vars, 3);
            s.push_str(") + ");
            gen_expr(&mut rng, &mut s, &mut vars, 3);
            s.push_str(";\n");
        }
    }
    s
}

/// Let-bound names, by nesting depth.
const LET_NAMES: [&str; 6] = ["t0", "t1", "t2", "t3", "t4", "t5"];

fn gen_expr(rng: &mut Rng, s: &mut String, vars: &mut Vec<&'static str>, depth: u32) {
    let leaf = depth == 0 || rng.chance(1, 5);
    if leaf {
        if !vars.is_empty() && rng.chance(2, 3) {
            s.push_str(rng.pick(vars));
        } else {
            let _ = write!(s, "{}", rng.below(100));
        }
        return;
    }
    match rng.below(10) {
        0..=3 => {
            s.push('(');
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(rng.pick(&[" + ", " - ", " * ", " / ", " % ", " + ", " * "]));
            gen_expr(rng, s, vars, depth - 1);
            s.push(')');
        }
        4..=5 => {
            s.push_str("(if ");
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(rng.pick(&[" < ", " <= ", " == "]));
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(" then ");
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(" else ");
            gen_expr(rng, s, vars, depth - 1);
            s.push(')');
        }
        6 | 7 if vars.len() < LET_NAMES.len() + 2 => {
            let name = LET_NAMES[vars.len().saturating_sub(2).min(LET_NAMES.len() - 1)];
            let _ = write!(s, "(let {name} = ");
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(" in ");
            vars.push(name);
            gen_expr(rng, s, vars, depth - 1);
            vars.pop();
            s.push(')');
        }
        8 => {
            s.push_str("gcd(");
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(", ");
            gen_expr(rng, s, vars, depth - 1);
            s.push(')');
        }
        _ => {
            let _ = write!(s, "fib({} + ", rng.below(6));
            gen_expr(rng, s, vars, depth - 1);
            s.push_str(" % 8)");
        }
    }
}

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use crate::rng::mix;
        use crate::Size;
        use std::collections::HashMap;

        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Tok {
            Num(i64),
            /// Byte range of the name in the source.
            Ident(u32, u32),
            Fn,
            Let,
            In,
            If,
            Then,
            Else,
            Eval,
            LParen,
            RParen,
            Comma,
            Assign,
            Semi,
            Plus,
            Minus,
            Star,
            Slash,
            Percent,
            Lt,
            Le,
            EqEq,
            Eof,
        }

        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Op {
            Add,
            Sub,
            Mul,
            Div,
            Rem,
            Lt,
            Le,
            Eq,
        }

        #[derive(Debug)]
        enum Expr {
            Num(i64),
            /// Slot relative to the frame base: parameters, then `let`s by depth.
            Var(u32),
            Neg(Box<Expr>),
            Bin(Op, Box<Expr>, Box<Expr>),
            If(Box<Expr>, Box<Expr>, Box<Expr>),
            /// `let x = init in body`.
            Let(Box<Expr>, Box<Expr>),
            /// Function index, arguments.
            Call(u32, Vec<Expr>),
        }

        struct Func {
            arity: usize,
            body: Expr,
        }

        struct Lexer<'s> {
            src: &'s [u8],
            pos: usize,
        }

        impl<'s> Lexer<'s> {
            $(#[$paths])?
            fn next_token(&mut self) -> Tok {
                let src = self.src;
                while self.pos < src.len() && src[self.pos].is_ascii_whitespace() {
                    self.pos += 1;
                }
                if self.pos >= src.len() {
                    return Tok::Eof;
                }
                let start = self.pos;
                let c = src[start];
                self.pos += 1;
                if c.is_ascii_digit() {
                    let mut v = (c - b'0') as i64;
                    while self.pos < src.len() && src[self.pos].is_ascii_digit() {
                        v = v * 10 + (src[self.pos] - b'0') as i64;
                        self.pos += 1;
                    }
                    return Tok::Num(v);
                }
                if c.is_ascii_alphabetic() || c == b'_' {
                    while self.pos < src.len()
                        && (src[self.pos].is_ascii_alphanumeric() || src[self.pos] == b'_')
                    {
                        self.pos += 1;
                    }
                    return match &src[start..self.pos] {
                        b"fn" => Tok::Fn,
                        b"let" => Tok::Let,
                        b"in" => Tok::In,
                        b"if" => Tok::If,
                        b"then" => Tok::Then,
                        b"else" => Tok::Else,
                        b"eval" => Tok::Eval,
                        _ => Tok::Ident(start as u32, self.pos as u32),
                    };
                }
                match c {
                    b'(' => Tok::LParen,
                    b')' => Tok::RParen,
                    b',' => Tok::Comma,
                    b';' => Tok::Semi,
                    b'+' => Tok::Plus,
                    b'-' => Tok::Minus,
                    b'*' => Tok::Star,
                    b'/' => Tok::Slash,
                    b'%' => Tok::Percent,
                    b'<' if src.get(self.pos) == Some(&b'=') => {
                        self.pos += 1;
                        Tok::Le
                    }
                    b'<' => Tok::Lt,
                    b'=' if src.get(self.pos) == Some(&b'=') => {
                        self.pos += 1;
                        Tok::EqEq
                    }
                    b'=' => Tok::Assign,
                    _ => panic!("unexpected byte {:?} at {}", c as char, start),
                }
            }
        }

        struct Parser<'s> {
            lex: Lexer<'s>,
            tok: Tok,
            src: &'s str,
            /// Names in scope in the current function: parameters, then `let`s.
            scope: Vec<&'s str>,
            fn_index: HashMap<&'s str, u32>,
            funcs: Vec<Option<Func>>,
            evals: Vec<Expr>,
        }

        impl<'s> Parser<'s> {
            fn new(src: &'s str) -> Self {
                let mut lex = Lexer { src: src.as_bytes(), pos: 0 };
                let tok = lex.next_token();
                Parser {
                    lex,
                    tok,
                    src,
                    scope: Vec::new(),
                    fn_index: HashMap::new(),
                    funcs: Vec::new(),
                    evals: Vec::new(),
                }
            }

            fn bump(&mut self) -> Tok {
                let t = self.tok;
                self.tok = self.lex.next_token();
                t
            }

            fn expect(&mut self, want: Tok) {
                let got = self.bump();
                assert_eq!(got, want, "parse error at byte {}", self.lex.pos);
            }

            fn ident(&mut self) -> &'s str {
                match self.bump() {
                    Tok::Ident(a, b) => &self.src[a as usize..b as usize],
                    t => panic!("expected a name, found {t:?} at byte {}", self.lex.pos),
                }
            }

            /// The index of function `name`, declared on first mention.
            fn func_index(&mut self, name: &'s str) -> u32 {
                let next = self.funcs.len() as u32;
                let idx = *self.fn_index.entry(name).or_insert(next);
                if idx == next {
                    self.funcs.push(None);
                }
                idx
            }

            $(#[$call])?
            fn program(&mut self) {
                loop {
                    match self.tok {
                        Tok::Fn => self.function(),
                        Tok::Eval => {
                            self.bump();
                            self.scope.clear();
                            let e = self.expr();
                            self.expect(Tok::Semi);
                            self.evals.push(e);
                        }
                        Tok::Eof => break,
                        t => panic!("expected `fn` or `eval`, found {t:?}"),
                    }
                }
                for (name, &i) in &self.fn_index {
                    assert!(self.funcs[i as usize].is_some(), "undefined function {name}");
                }
            }

            $(#[$call])?
            fn function(&mut self) {
                self.expect(Tok::Fn);
                let name = self.ident();
                let idx = self.func_index(name);
                self.expect(Tok::LParen);
                self.scope.clear();
                while self.tok != Tok::RParen {
                    let p = self.ident();
                    self.scope.push(p);
                    if self.tok == Tok::Comma {
                        self.bump();
                    }
                }
                self.bump();
                self.expect(Tok::Assign);
                let body = self.expr();
                self.expect(Tok::Semi);
                let arity = self.scope.len();
                self.funcs[idx as usize] = Some(Func { arity, body });
            }

            $(#[$call])?
            fn expr(&mut self) -> Expr {
                match self.tok {
                    Tok::Let => {
                        self.bump();
                        let name = self.ident();
                        self.expect(Tok::Assign);
                        let init = self.expr();
                        self.expect(Tok::In);
                        self.scope.push(name);
                        let body = self.expr();
                        self.scope.pop();
                        Expr::Let(Box::new(init), Box::new(body))
                    }
                    Tok::If => {
                        self.bump();
                        let c = self.expr();
                        self.expect(Tok::Then);
                        let t = self.expr();
                        self.expect(Tok::Else);
                        let f = self.expr();
                        Expr::If(Box::new(c), Box::new(t), Box::new(f))
                    }
                    _ => self.comparison(),
                }
            }

            $(#[$call])?
            fn comparison(&mut self) -> Expr {
                let lhs = self.sum();
                let op = match self.tok {
                    Tok::Lt => Op::Lt,
                    Tok::Le => Op::Le,
                    Tok::EqEq => Op::Eq,
                    _ => return lhs,
                };
                self.bump();
                let rhs = self.sum();
                Expr::Bin(op, Box::new(lhs), Box::new(rhs))
            }

            $(#[$call])?
            fn sum(&mut self) -> Expr {
                let mut lhs = self.term();
                loop {
                    let op = match self.tok {
                        Tok::Plus => Op::Add,
                        Tok::Minus => Op::Sub,
                        _ => return lhs,
                    };
                    self.bump();
                    let rhs = self.term();
                    lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
                }
            }

            $(#[$call])?
            fn term(&mut self) -> Expr {
                let mut lhs = self.unary();
                loop {
                    let op = match self.tok {
                        Tok::Star => Op::Mul,
                        Tok::Slash => Op::Div,
                        Tok::Percent => Op::Rem,
                        _ => return lhs,
                    };
                    self.bump();
                    let rhs = self.unary();
                    lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
                }
            }

            $(#[$call])?
            fn unary(&mut self) -> Expr {
                match self.bump() {
                    Tok::Minus => Expr::Neg(Box::new(self.unary())),
                    Tok::Num(v) => Expr::Num(v),
                    Tok::LParen => {
                        let e = self.expr();
                        self.expect(Tok::RParen);
                        e
                    }
                    Tok::Ident(a, b) => {
                        let name = &self.src[a as usize..b as usize];
                        if self.tok == Tok::LParen {
                            self.bump();
                            let f = self.func_index(name);
                            let mut args = Vec::new();
                            while self.tok != Tok::RParen {
                                args.push(self.expr());
                                if self.tok == Tok::Comma {
                                    self.bump();
                                }
                            }
                            self.bump();
                            Expr::Call(f, args)
                        } else {
                            let slot = self
                                .scope
                                .iter()
                                .rposition(|&v| v == name)
                                .unwrap_or_else(|| panic!("unbound variable {name}"));
                            Expr::Var(slot as u32)
                        }
                    }
                    t => panic!("unexpected {t:?} at byte {}", self.lex.pos),
                }
            }
        }

        $(#[$paths])?
        fn binop(op: Op, x: i64, y: i64) -> i64 {
            match op {
                Op::Add => x.wrapping_add(y),
                Op::Sub => x.wrapping_sub(y),
                Op::Mul => x.wrapping_mul(y),
                Op::Div => {
                    if y == 0 {
                        0
                    } else {
                        x.wrapping_div(y)
                    }
                }
                Op::Rem => {
                    if y == 0 {
                        0
                    } else {
                        x.wrapping_rem(y)
                    }
                }
                Op::Lt => (x < y) as i64,
                Op::Le => (x <= y) as i64,
                Op::Eq => (x == y) as i64,
            }
        }

        struct Machine<'p> {
            funcs: &'p [Func],
            /// Values of parameters and `let`s; a frame is a suffix starting at its base.
            env: Vec<i64>,
            calls: u64,
        }

        impl<'p> Machine<'p> {
            $(#[$call])?
            fn eval(&mut self, e: &Expr, base: usize) -> i64 {
                match e {
                    Expr::Num(v) => *v,
                    Expr::Var(i) => self.env[base + *i as usize],
                    Expr::Neg(a) => self.eval(a, base).wrapping_neg(),
                    Expr::Bin(op, a, b) => {
                        let x = self.eval(a, base);
                        let y = self.eval(b, base);
                        binop(*op, x, y)
                    }
                    Expr::If(c, t, f) => {
                        if self.eval(c, base) != 0 {
                            self.eval(t, base)
                        } else {
                            self.eval(f, base)
                        }
                    }
                    Expr::Let(init, body) => {
                        let v = self.eval(init, base);
                        self.env.push(v);
                        let r = self.eval(body, base);
                        self.env.pop();
                        r
                    }
                    Expr::Call(f, args) => self.call(*f, args, base),
                }
            }

            $(#[$call])?
            fn call(&mut self, f: u32, args: &[Expr], base: usize) -> i64 {
                let funcs = self.funcs;
                let func = &funcs[f as usize];
                assert_eq!(func.arity, args.len(), "arity mismatch");
                let frame = self.env.len();
                for a in args {
                    let v = self.eval(a, base);
                    self.env.push(v);
                }
                self.calls += 1;
                let r = self.eval(&func.body, frame);
                self.env.truncate(frame);
                r
            }
        }

        /// Lex, parse and evaluate the script for `size`; the checksum of every `eval` item's
        /// value and of the number of calls made.
        pub fn run(size: Size) -> u64 {
            let src = super::script(std::hint::black_box(size));
            let mut parser = Parser::new(&src);
            parser.program();
            let funcs: Vec<Func> = parser.funcs.into_iter().map(|f| f.expect("defined")).collect();
            let mut m = Machine { funcs: &funcs, env: Vec::with_capacity(256), calls: 0 };
            let mut h = 0;
            for e in &parser.evals {
                h = mix(h, m.eval(e, 0) as u64);
            }
            mix(h, m.calls)
        }
    };
}

twins!(code);
