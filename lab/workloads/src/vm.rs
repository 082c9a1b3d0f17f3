//! Workload 2, branch-heavy: a stack bytecode VM running a generated program.
//!
//! A fixed-seed generator builds a structured program (assignments of random expressions,
//! `if`/`else` on computed conditions, counted loops nested up to three deep, calls of
//! generated subroutines) and a compiler lowers it to bytecode with jumps. The VM's dispatch
//! loop executes it: one `match` per instruction, with data-dependent branches on every
//! conditional jump, division and call.
//!
//! Instrumentation: the dispatch loop `execute` is `#[profile(paths)]` — one Ball-Larus path
//! per instruction executed, the path-profiling stress case; the compiler's functions and the
//! arithmetic helper `arith` are `#[profile]`.

use crate::rng::Rng;
use crate::Size;

/// Global variable slots the generated code assigns to.
pub const DATA_VARS: u8 = 8;
/// Subroutines in a program.
pub const SUBROUTINES: usize = 6;
/// Deepest nesting of generated `if`s and loops.
pub const MAX_DEPTH: usize = 3;
/// Loop counters: one slot per (routine, compiled nesting depth), after the data slots; main's
/// body sits one level deeper, inside the outer loop.
pub const COUNTERS_PER_ROUTINE: usize = MAX_DEPTH + 1;
/// Every slot.
pub const SLOTS: usize = DATA_VARS as usize + (SUBROUTINES + 1) * COUNTERS_PER_ROUTINE;

/// Binary operators of the source language (and of the bytecode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+` (wrapping).
    Add,
    /// `-` (wrapping).
    Sub,
    /// `*` (wrapping).
    Mul,
    /// `/` (wrapping); dividing by zero gives 0.
    Div,
    /// `%` (wrapping); a zero divisor gives 0.
    Rem,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise exclusive or.
    Xor,
    /// Shift left by the low 4 bits of the right operand.
    Shl,
    /// Shift right by the low 4 bits of the right operand.
    Shr,
    /// `<`, 1 or 0.
    Lt,
    /// `==`, 1 or 0.
    Eq,
}

const OPS: [BinOp; 12] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Rem,
    BinOp::And,
    BinOp::Or,
    BinOp::Xor,
    BinOp::Shl,
    BinOp::Shr,
    BinOp::Lt,
    BinOp::Eq,
];

/// Source expressions.
#[derive(Clone, Debug)]
pub enum Ex {
    /// A literal.
    Const(i64),
    /// The value of data variable `n`.
    Var(u8),
    /// `lhs op rhs`.
    Bin(BinOp, Box<Ex>, Box<Ex>),
}

/// Source statements.
#[derive(Clone, Debug)]
pub enum St {
    /// Data variable `n` = the expression.
    Assign(u8, Ex),
    /// `if a < b { .. } else { .. }` (or `==` with `eq`).
    If {
        /// Compare with `==` instead of `<`.
        eq: bool,
        /// Left operand of the comparison.
        a: Ex,
        /// Right operand of the comparison.
        b: Ex,
        /// Statements run when the comparison holds.
        then: Vec<St>,
        /// Statements run otherwise.
        els: Vec<St>,
    },
    /// Counted loop: `for _ in 0..count { body }`.
    Loop {
        /// Iterations.
        count: i64,
        /// Statements of one iteration.
        body: Vec<St>,
    },
    /// Call subroutine `n`.
    Call(usize),
}

/// A generated program: `main` runs `outer` iterations of its body.
#[derive(Clone, Debug)]
pub struct Program {
    /// The body of `main`, run `outer` times.
    pub main: Vec<St>,
    /// Iterations of `main`'s body.
    pub outer: i64,
    /// Subroutine bodies, called by index.
    pub subs: Vec<Vec<St>>,
}

fn gen_ex(rng: &mut Rng, depth: u32) -> Ex {
    if depth == 0 || rng.chance(1, 3) {
        return if rng.chance(1, 2) {
            Ex::Var(rng.below(DATA_VARS as u64) as u8)
        } else {
            Ex::Const(rng.below(64) as i64)
        };
    }
    let op = rng.pick(&OPS);
    Ex::Bin(
        op,
        Box::new(gen_ex(rng, depth - 1)),
        Box::new(gen_ex(rng, depth - 1)),
    )
}

/// A block; `routine` is 0 for main, `1 + k` for subroutine `k` (only main calls
/// subroutines, so the work per outer iteration stays bounded).
fn gen_block(rng: &mut Rng, routine: usize, depth: usize, len: u64) -> Vec<St> {
    let mut out = Vec::new();
    for _ in 0..rng.range(len / 2 + 1, len + 2) {
        let r = rng.below(100);
        let st = if r < 45 {
            St::Assign(rng.below(DATA_VARS as u64) as u8, gen_ex(rng, 3))
        } else if r < 75 && depth < MAX_DEPTH {
            St::If {
                eq: rng.chance(1, 4),
                a: gen_ex(rng, 2),
                b: gen_ex(rng, 2),
                then: gen_block(rng, routine, depth + 1, len / 2),
                els: if rng.chance(2, 3) {
                    gen_block(rng, routine, depth + 1, len / 2)
                } else {
                    Vec::new()
                },
            }
        } else if r < 90 && depth < MAX_DEPTH {
            St::Loop {
                count: rng.range(2, 7) as i64,
                body: gen_block(rng, routine, depth + 1, len / 2),
            }
        } else if routine == 0 {
            St::Call(rng.below(SUBROUTINES as u64) as usize)
        } else {
            St::Assign(rng.below(DATA_VARS as u64) as u8, gen_ex(rng, 2))
        };
        out.push(st);
    }
    out
}

/// The program for `size` (a fixed seed; only the outer iteration count depends on the size).
pub fn program(size: Size) -> Program {
    let mut rng = Rng::new(0xB17E_C0DE);
    let subs = (0..SUBROUTINES)
        .map(|k| gen_block(&mut rng, k + 1, 0, 6))
        .collect();
    let main = gen_block(&mut rng, 0, 0, 10);
    Program {
        main,
        outer: size.pick(50, 1_200, 12_000),
        subs,
    }
}

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use super::{BinOp, Ex, Program, St, COUNTERS_PER_ROUTINE, SLOTS};
        use crate::rng::mix;
        use crate::Size;

        /// Bytecode.
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Op {
            Push(i64),
            Load(u8),
            Store(u8),
            Bin(BinOp),
            Dup,
            Jmp(u32),
            /// Pop; jump if zero.
            Jz(u32),
            Call(u32),
            Ret,
            /// Add the top of the stack into the output hash.
            Out,
            Halt,
        }

        #[derive(Default)]
        struct Compiler {
            code: Vec<Op>,
            /// `(code index of a Call, subroutine)` to patch once entries are known.
            calls: Vec<(usize, usize)>,
        }

        impl Compiler {
            $(#[$call])?
            fn expr(&mut self, e: &Ex) {
                match e {
                    Ex::Const(v) => self.code.push(Op::Push(*v)),
                    Ex::Var(v) => self.code.push(Op::Load(*v)),
                    Ex::Bin(op, a, b) => {
                        self.expr(a);
                        self.expr(b);
                        self.code.push(Op::Bin(*op));
                    }
                }
            }

            fn here(&self) -> u32 {
                self.code.len() as u32
            }

            $(#[$call])?
            fn block(&mut self, stmts: &[St], routine: usize, depth: usize) {
                for s in stmts {
                    match s {
                        St::Assign(v, e) => {
                            self.expr(e);
                            self.code.push(Op::Dup);
                            self.code.push(Op::Out);
                            self.code.push(Op::Store(*v));
                        }
                        St::If { eq, a, b, then, els } => {
                            self.expr(a);
                            self.expr(b);
                            self.code.push(Op::Bin(if *eq { BinOp::Eq } else { BinOp::Lt }));
                            let jz = self.code.len();
                            self.code.push(Op::Jz(0));
                            self.block(then, routine, depth + 1);
                            if els.is_empty() {
                                self.code[jz] = Op::Jz(self.here());
                            } else {
                                let jmp = self.code.len();
                                self.code.push(Op::Jmp(0));
                                self.code[jz] = Op::Jz(self.here());
                                self.block(els, routine, depth + 1);
                                self.code[jmp] = Op::Jmp(self.here());
                            }
                        }
                        St::Loop { count, body } => {
                            let slot = super::DATA_VARS as usize + routine * COUNTERS_PER_ROUTINE + depth;
                            assert!(depth < COUNTERS_PER_ROUTINE);
                            let slot = slot as u8;
                            self.code.push(Op::Push(0));
                            self.code.push(Op::Store(slot));
                            let top = self.here();
                            self.code.push(Op::Load(slot));
                            self.code.push(Op::Push(*count));
                            self.code.push(Op::Bin(BinOp::Lt));
                            let jz = self.code.len();
                            self.code.push(Op::Jz(0));
                            self.block(body, routine, depth + 1);
                            self.code.push(Op::Load(slot));
                            self.code.push(Op::Push(1));
                            self.code.push(Op::Bin(BinOp::Add));
                            self.code.push(Op::Store(slot));
                            self.code.push(Op::Jmp(top));
                            self.code[jz] = Op::Jz(self.here());
                        }
                        St::Call(k) => {
                            self.calls.push((self.code.len(), *k));
                            self.code.push(Op::Call(0));
                        }
                    }
                }
            }

            /// `main` is an outer counted loop around its body, then `Halt`; subroutines
            /// follow, each ending in `Ret`.
            $(#[$call])?
            fn program(mut self, p: &Program) -> Vec<Op> {
                self.block(&[St::Loop { count: p.outer, body: p.main.clone() }], 0, 0);
                self.code.push(Op::Halt);
                let mut entries = Vec::new();
                for (k, sub) in p.subs.iter().enumerate() {
                    entries.push(self.here());
                    self.block(sub, k + 1, 0);
                    self.code.push(Op::Ret);
                }
                for &(at, k) in &self.calls {
                    self.code[at] = Op::Call(entries[k]);
                }
                self.code
            }
        }

        $(#[$call])?
        fn arith(op: BinOp, a: i64, b: i64) -> i64 {
            match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => if b == 0 { 0 } else { a.wrapping_div(b) },
                BinOp::Rem => if b == 0 { 0 } else { a.wrapping_rem(b) },
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                BinOp::Shl => a.wrapping_shl((b & 15) as u32),
                BinOp::Shr => a.wrapping_shr((b & 15) as u32),
                BinOp::Lt => (a < b) as i64,
                BinOp::Eq => (a == b) as i64,
            }
        }

        /// Run `code` from 0 to `Halt`; returns `(output hash, instructions executed)`.
        $(#[$paths])?
        fn execute(code: &[Op], vars: &mut [i64; SLOTS]) -> (u64, u64) {
            let mut stack: Vec<i64> = Vec::with_capacity(64);
            let mut frames: Vec<u32> = Vec::with_capacity(16);
            let mut pc = 0usize;
            let mut out = 0u64;
            let mut steps = 0u64;
            loop {
                let op = code[pc];
                pc += 1;
                steps += 1;
                match op {
                    Op::Push(v) => stack.push(v),
                    Op::Load(s) => stack.push(vars[s as usize]),
                    Op::Store(s) => vars[s as usize] = stack.pop().expect("stack underflow"),
                    Op::Bin(o) => {
                        let b = stack.pop().expect("stack underflow");
                        let a = stack.pop().expect("stack underflow");
                        // Comparisons and the cheap bitwise operators inline; the rest
                        // through the helper.
                        let r = match o {
                            BinOp::Lt => (a < b) as i64,
                            BinOp::Eq => (a == b) as i64,
                            BinOp::Add => a.wrapping_add(b),
                            BinOp::Xor => a ^ b,
                            _ => arith(o, a, b),
                        };
                        stack.push(r);
                    }
                    Op::Dup => {
                        let v = *stack.last().expect("stack underflow");
                        stack.push(v);
                    }
                    Op::Jmp(t) => pc = t as usize,
                    Op::Jz(t) => {
                        if stack.pop().expect("stack underflow") == 0 {
                            pc = t as usize;
                        }
                    }
                    Op::Call(t) => {
                        frames.push(pc as u32);
                        pc = t as usize;
                    }
                    Op::Ret => pc = frames.pop().expect("return with no frame") as usize,
                    Op::Out => {
                        let v = stack.pop().expect("stack underflow");
                        out = (out ^ v as u64).wrapping_mul(0x100_0000_01B3);
                    }
                    Op::Halt => break,
                }
            }
            (out, steps)
        }

        /// Generate, compile and run the program for `size`; the checksum of its output, its
        /// final variables and the instruction count.
        pub fn run(size: Size) -> u64 {
            let p = super::program(std::hint::black_box(size));
            let code = Compiler::default().program(&p);
            let mut vars = [0i64; SLOTS];
            for (i, v) in vars.iter_mut().enumerate() {
                *v = i as i64 * 7 + 1;
            }
            let (out, steps) = execute(&code, &mut vars);
            let mut h = mix(out, steps);
            for v in vars {
                h = mix(h, v as u64);
            }
            h
        }
    };
}

twins!(code);
