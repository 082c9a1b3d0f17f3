//! What `#[profile]` on a whole `impl` costs when no session runs, on code shaped like a real
//! crate's, two workloads:
//!
//! - `parse`: a recursive-descent parser whose methods are mostly small accessors (`is_eof`,
//!   `char`, `peek`, `bump`) that the compiler inlines into their callers when they are plain;
//! - `lower`: a pass over the parsed tree, a heap-stack walk calling `visit_pre` and
//!   `visit_post` per node, which fold constants or emit operations through methods of some
//!   tens of lines (the shape of regex-syntax's translator).
//!
//! One source per workload, four builds of it in one binary (a `macro_rules!` stamps the
//! module out):
//!
//! - `plain`: no attribute;
//! - `annotated, idle`: `#[cabprof::profile]` on the `impl`, no session running (what a crate
//!   pays for leaving its attributes in);
//! - `compiled out`: `#[cabprof::profile(skip)]`, which expands to the item unchanged, exactly
//!   what the attribute does without the `enabled` feature (a macro unit test checks the two
//!   outputs token for token);
//!
//! - `floor: check only`: no attribute; each method the attribute instruments (in `parse`,
//!   `skip_spaces`, `number`, `factor`, `term`, `expr`, leaving the accessors alone; in
//!   `lower`, `lower`, `visit_pre`, `visit_post`, `binary`, `emit`, leaving `new` and `pop`
//!   alone) written by hand as `if session_key() == 0 { body } else { record(); body }`: the least any
//!   per-call instrumentation that can be switched on at run time adds with no session running
//!   (one load and one branch, the body twice so that the idle copy needs no guard at all).
//!   Where this row already misses the target, no expansion of the attribute can meet it;
//!
//! and, for scale, `annotated, profiled`: the annotated build under an exhaustive session
//! counting calls and the call graph (every accessor call is then two events).
//!
//! Each round runs every variant of both workloads once, in a shuffled order, each timing
//! `PARSES` runs on the same input; each workload's table gives each variant's median time per
//! run and its ratio to `plain` within the round (median of the per-round ratios, 95 %
//! bootstrap interval over rounds, as `cabprof_bench_support::stats` describes). Target:
//! annotated-idle within 5 % of plain.
//!
//! A third table times an uncontended lock and unlock ([`LOCKS`] per timing, in the same
//! rounds): `parking_lot::Mutex`, `cabprof::sync::Mutex` with no session, and the same
//! while an exhaustive session records (uncontended, it records nothing: what it adds is
//! `try_lock` for `lock` and one load and branch at the release); then the same three for a
//! read and a write of `parking_lot::RwLock` and `cabprof::sync::RwLock`.
//!
//! A fourth times an uncontended send and receive on one thread ([`MESSAGES`] per timing, in
//! the same rounds): std's `sync_channel`, crossbeam-channel's `bounded` and tokio's
//! `mpsc::channel` (awaited in a current-thread runtime), each plain, as `cabprof::sync::mpsc`,
//! `cabprof::sync::crossbeam` and `cabprof::sync::tokio_mpsc` with no session, while an exhaustive session without the waits
//! analysis records (messages are not stamped), and while one with it records (the channel
//! never fills or empties, so no wait is recorded, but every message is stamped at its send
//! and its latency written at its receive: the rows' difference is what the latency costs).
//!
//! `cargo bench -p cabprof-checks --bench idle_cost` (fat LTO, the bench profile) and
//! `cargo bench -p cabprof-checks --bench idle_cost --profile release` (what a crate that
//! depends on cabprof builds with `cargo build --release`). `IDLE_COST_ROUNDS` sets the rounds
//! (9 to 1000, default 17); `IDLE_COST_ONLY=channels` times the channel table alone.

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
        if ::cabprof_cab::runtime::session_key() == 0 {
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

/// A node of the tree the lowering pass walks (built once from the parser's input by `tree`).
#[derive(Clone, Copy)]
enum Node {
    Num(i64),
    Neg(usize),
    Group(usize),
    Bin(u8, usize, usize),
}

/// A second workload, shaped like a compiler pass rather than a parser: a heap-stack walk of a
/// tree calling `visit_pre` and `visit_post` per node, which fold constants or emit operations
/// through methods of some tens of lines (regex-syntax's translator has this shape). The
/// compiler inlines a small method called from two places into both, and a larger one into
/// neither, so this is where an idle copy that is a call of the body, not the body, would show.
macro_rules! lowerer {
    ($name:ident, $body:ident $(, #[$attr:meta])?) => {
        mod $name {
            use crate::Node;

            #[derive(Clone, Copy)]
            enum Value {
                Const(i64),
                Reg(u32),
            }

            pub(crate) struct Lowerer<'a> {
                nodes: &'a [Node],
                values: Vec<Value>,
                ops: Vec<(u8, Value, Value)>,
                depth: u32,
                max_depth: u32,
                negs: u32,
                folded: u32,
            }

            $(#[$attr])?
            impl<'a> Lowerer<'a> {
                pub(crate) fn new(nodes: &'a [Node]) -> Self {
                    Lowerer {
                        nodes,
                        values: Vec::new(),
                        ops: Vec::new(),
                        depth: 0,
                        max_depth: 0,
                        negs: 0,
                        folded: 0,
                    }
                }

                /// Lower the tree under `root`; a checksum of what was emitted and folded.
                pub(crate) fn lower(&mut self, root: usize) -> i64 {
 $body! {
                    let mut stack = vec![(root, false)];
                    while let Some((n, done)) = stack.pop() {
                        if done {
                            self.visit_post(n);
                            continue;
                        }
                        self.visit_pre(n);
                        stack.push((n, true));
                        match self.nodes[n] {
                            Node::Num(_) => {}
                            Node::Neg(c) | Node::Group(c) => stack.push((c, false)),
                            Node::Bin(_, l, r) => {
                                stack.push((r, false));
                                stack.push((l, false));
                            }
                        }
                    }
                    let last = match self.pop() {
                        Value::Const(c) => c,
                        Value::Reg(r) => i64::from(r),
                    };
                    last.wrapping_add(self.ops.len() as i64)
                        .wrapping_add(i64::from(self.folded) << 20)
                        .wrapping_add(i64::from(self.max_depth) << 40)
                        .wrapping_add(i64::from(self.negs) << 48)
                }
}

                fn pop(&mut self) -> Value {
                    self.values.pop().unwrap_or(Value::Const(0))
                }

                fn visit_pre(&mut self, n: usize) {
 $body! {
                    match self.nodes[n] {
                        Node::Group(_) => {
                            self.depth += 1;
                            if self.depth > self.max_depth {
                                self.max_depth = self.depth;
                            }
                        }
                        Node::Neg(c) => {
                            if let Node::Neg(_) = self.nodes[c] {
                                self.negs += 1;
                            }
                        }
                        Node::Num(_) | Node::Bin(..) => {}
                    }
                }
}

                fn visit_post(&mut self, n: usize) {
 $body! {
                    match self.nodes[n] {
                        Node::Num(v) => self.values.push(Value::Const(v)),
                        Node::Group(_) => self.depth -= 1,
                        Node::Neg(_) => {
                            let v = match self.pop() {
                                Value::Const(c) => Value::Const(c.wrapping_neg()),
                                r => self.emit(b'n', r, Value::Const(0)),
                            };
                            self.values.push(v);
                        }
                        Node::Bin(op, _, _) => {
                            let r = self.pop();
                            let l = self.pop();
                            let v = self.binary(op, l, r);
                            self.values.push(v);
                        }
                    }
                }
}

                /// Fold two small constants; emit anything else.
                fn binary(&mut self, op: u8, l: Value, r: Value) -> Value {
 $body! {
                    match (l, r) {
                        (Value::Const(a), Value::Const(b))
                            if a.unsigned_abs() < 1 << 20 && b.unsigned_abs() < 1 << 20 =>
                        {
                            self.folded += 1;
                            Value::Const(match op {
                                b'+' => a + b,
                                b'-' => a - b,
                                b'*' => a * b,
                                _ if b == 0 => a,
                                _ => a / b,
                            })
                        }
                        (Value::Const(0), other) | (other, Value::Const(0)) if op == b'+' => {
                            self.folded += 1;
                            other
                        }
                        _ => self.emit(op, l, r),
                    }
                }
}

                fn emit(&mut self, op: u8, l: Value, r: Value) -> Value {
 $body! {
                    let reg = self.ops.len() as u32;
                    if self.ops.len() == self.ops.capacity() {
                        self.ops.reserve(self.ops.len().max(16));
                    }
                    self.ops.push((op, l, r));
                    Value::Reg(reg)
                }
}
            }
        }
    };
}

lowerer!(lower_plain, as_is);
lowerer!(lower_annotated, as_is, #[cabprof::profile]);
lowerer!(lower_compiled_out, as_is, #[cabprof::profile(skip)]);
lowerer!(lower_floor, check_only);

/// The input's tree, for the lowering workload: `nodes` and the root's index.
fn tree(src: &[u8]) -> (Vec<Node>, usize) {
    struct B<'a> {
        src: &'a [u8],
        pos: usize,
        nodes: Vec<Node>,
    }
    impl B<'_> {
        fn peek(&mut self) -> Option<u8> {
            while self.src.get(self.pos) == Some(&b' ') {
                self.pos += 1;
            }
            self.src.get(self.pos).copied()
        }
        fn add(&mut self, n: Node) -> usize {
            self.nodes.push(n);
            self.nodes.len() - 1
        }
        fn factor(&mut self) -> usize {
            match self.peek() {
                Some(b'(') => {
                    self.pos += 1;
                    let e = self.binary(0);
                    if self.peek() == Some(b')') {
                        self.pos += 1;
                    }
                    self.add(Node::Group(e))
                }
                Some(b'-') => {
                    self.pos += 1;
                    let f = self.factor();
                    self.add(Node::Neg(f))
                }
                _ => {
                    let mut n = 0i64;
                    while let Some(c @ b'0'..=b'9') = self.src.get(self.pos).copied() {
                        n = n.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
                        self.pos += 1;
                    }
                    self.add(Node::Num(n))
                }
            }
        }
        /// Level 0: `+ -` over level 1; level 1: `* /` over factors.
        fn binary(&mut self, level: u8) -> usize {
            let next = |b: &mut Self| if level == 0 { b.binary(1) } else { b.factor() };
            let mut l = next(self);
            loop {
                let op = match self.peek() {
                    Some(c @ (b'+' | b'-')) if level == 0 => c,
                    Some(c @ (b'*' | b'/')) if level == 1 => c,
                    _ => return l,
                };
                self.pos += 1;
                let r = next(self);
                l = self.add(Node::Bin(op, l, r));
            }
        }
    }
    let mut b = B {
        src,
        pos: 0,
        nodes: Vec::new(),
    };
    let root = b.binary(0);
    (b.nodes, root)
}

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

/// Nanoseconds per run of `run` over `PARSES` runs on `input` (after one warm-up run).
fn time<T: ?Sized>(input: &T, run: fn(&T) -> i64) -> f64 {
    black_box(run(black_box(input)));
    let t = Instant::now();
    let mut acc = 0i64;
    for _ in 0..PARSES {
        acc = acc.wrapping_add(run(black_box(input)));
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

type Tree = (Vec<Node>, usize);

fn lower_plain(t: &Tree) -> i64 {
    lower_plain::Lowerer::new(&t.0).lower(t.1)
}

fn lower_annotated(t: &Tree) -> i64 {
    lower_annotated::Lowerer::new(&t.0).lower(t.1)
}

fn lower_compiled_out(t: &Tree) -> i64 {
    lower_compiled_out::Lowerer::new(&t.0).lower(t.1)
}

fn lower_floor(t: &Tree) -> i64 {
    lower_floor::Lowerer::new(&t.0).lower(t.1)
}

/// `run` timed under an exhaustive method count + call graph session.
fn profiled<T: ?Sized>(input: &T, run: fn(&T) -> i64) -> f64 {
    let s = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallGraph])
        .start()
        .expect("no other session runs in this bench");
    let ns = time(input, run);
    let r = s.finish();
    assert_eq!(r.totals.dropped, 0, "an exhaustive session drops nothing");
    ns
}

/// Lock and unlock pairs per lock timing.
const LOCKS: u32 = 200_000;

/// The lock variants, in the order of their timings.
const LOCK_NAMES: [&str; 6] = [
    "parking_lot::Mutex",
    "sync::Mutex, idle",
    "sync::Mutex, session",
    "parking_lot::RwLock",
    "sync::RwLock, idle",
    "sync::RwLock, session",
];

/// Rows per lock in [`LOCK_NAMES`], the plain lock first.
const LOCK_ROWS: usize = 3;

/// ns per uncontended lock and unlock of `lock` (through `bump`, kept out of line so each
/// variant's loop is the same shape).
fn time_lock<M>(lock: &M, bump: fn(&M)) -> f64 {
    bump(lock);
    let t = Instant::now();
    for _ in 0..LOCKS {
        bump(black_box(lock));
    }
    t.elapsed().as_nanos() as f64 / LOCKS as f64
}

#[inline(never)]
fn bump_parking_lot(m: &parking_lot::Mutex<u64>) {
    *m.lock() += 1;
}

#[inline(never)]
fn bump_cabprof(m: &cabprof::sync::Mutex<u64>) {
    *m.lock() += 1;
}

/// A read, then a write.
#[inline(never)]
fn bump_parking_lot_rw(m: &parking_lot::RwLock<u64>) {
    black_box(*m.read());
    *m.write() += 1;
}

#[inline(never)]
fn bump_cabprof_rw(m: &cabprof::sync::RwLock<u64>) {
    black_box(*m.read());
    *m.write() += 1;
}

fn lock_profiled<M>(m: &M, bump: fn(&M)) -> f64 {
    let s = Session::builder()
        .analyses(&[Analysis::CallTree, Analysis::Waits])
        .start()
        .expect("no other session runs in this bench");
    let ns = time_lock(m, bump);
    let r = s.finish();
    let waits = r.data.waits.as_ref().expect("the waits analysis ran");
    assert_eq!(waits.totals.block.count, 0, "uncontended: no wait recorded");
    ns
}

/// Send and receive pairs per channel timing.
const MESSAGES: u32 = 200_000;

/// The channel variants, in the order of their timings.
const CHANNEL_NAMES: [&str; 12] = [
    "std sync_channel",
    "sync::mpsc, idle",
    "sync::mpsc, no waits",
    "sync::mpsc, latency",
    "crossbeam_channel",
    "sync::crossbeam, idle",
    "sync::crossbeam, no waits",
    "sync::crossbeam, latency",
    "tokio mpsc",
    "sync::tokio_mpsc, idle",
    "sync::tokio_mpsc, no waits",
    "sync::tokio_mpsc, latency",
];

/// Rows per channel in [`CHANNEL_NAMES`], the plain channel first.
const CHANNEL_ROWS: usize = 4;

/// A channel with room: a send then a receive never waits.
const CHANNEL_CAP: usize = 16;

/// ns per uncontended send and receive through `pass` (kept out of line so each variant's
/// loop is the same shape).
fn time_channel<C>(channel: &C, pass: fn(&C, u64) -> u64) -> f64 {
    pass(channel, 1);
    let t = Instant::now();
    let mut acc = 0u64;
    for i in 0..MESSAGES as u64 {
        acc = acc.wrapping_add(pass(black_box(channel), i));
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / MESSAGES as f64
}

type Std = (
    std::sync::mpsc::SyncSender<u64>,
    std::sync::mpsc::Receiver<u64>,
);
type StdWrapped = (
    cabprof::sync::mpsc::SyncSender<u64>,
    cabprof::sync::mpsc::Receiver<u64>,
);

#[inline(never)]
fn pass_std(c: &Std, v: u64) -> u64 {
    c.0.send(v).unwrap();
    c.1.recv().unwrap()
}

#[inline(never)]
fn pass_std_wrapped(c: &StdWrapped, v: u64) -> u64 {
    c.0.send(v).unwrap();
    c.1.recv().unwrap()
}

type Crossbeam = (
    crossbeam_channel::Sender<u64>,
    crossbeam_channel::Receiver<u64>,
);
type CrossbeamWrapped = (
    cabprof::sync::crossbeam::Sender<u64>,
    cabprof::sync::crossbeam::Receiver<u64>,
);

#[inline(never)]
fn pass_crossbeam(c: &Crossbeam, v: u64) -> u64 {
    c.0.send(v).unwrap();
    c.1.recv().unwrap()
}

#[inline(never)]
fn pass_crossbeam_wrapped(c: &CrossbeamWrapped, v: u64) -> u64 {
    c.0.send(v).unwrap();
    c.1.recv().unwrap()
}

/// ns per uncontended awaited send and receive, `MESSAGES` of them in one `block_on`.
fn time_tokio<S, R>(
    rt: &tokio::runtime::Runtime,
    (tx, rx): &mut (S, R),
    pass: impl AsyncFn(&S, &mut R, u64) -> u64,
) -> f64 {
    rt.block_on(async {
        pass(tx, rx, 1).await;
        let t = Instant::now();
        let mut acc = 0u64;
        for i in 0..MESSAGES as u64 {
            acc = acc.wrapping_add(pass(black_box(&*tx), rx, i).await);
        }
        black_box(acc);
        t.elapsed().as_nanos() as f64 / MESSAGES as f64
    })
}

async fn pass_tokio(
    tx: &tokio::sync::mpsc::Sender<u64>,
    rx: &mut tokio::sync::mpsc::Receiver<u64>,
    v: u64,
) -> u64 {
    tx.send(v).await.unwrap();
    rx.recv().await.unwrap()
}

async fn pass_tokio_wrapped(
    tx: &cabprof::sync::tokio_mpsc::Sender<u64>,
    rx: &mut cabprof::sync::tokio_mpsc::Receiver<u64>,
    v: u64,
) -> u64 {
    tx.send(v).await.unwrap();
    rx.recv().await.unwrap()
}

/// `time` under a waits session, which records no wait (uncontended) but every message's
/// latency (the warm-up's too).
fn waits_session(time: impl FnOnce() -> f64) -> f64 {
    let s = Session::builder()
        .analyses(&[Analysis::CallTree, Analysis::Waits])
        .start()
        .expect("no other session runs in this bench");
    let ns = time();
    let r = s.finish();
    let waits = r.data.waits.as_ref().expect("the waits analysis ran");
    assert_eq!(waits.totals.block.count, 0, "uncontended: no wait recorded");
    let latencies: u64 = waits
        .sites
        .iter()
        .filter_map(|s| s.latency.as_ref())
        .map(|l| l.count)
        .sum();
    assert_eq!(latencies, MESSAGES as u64 + 1, "every message's latency");
    ns
}

/// `time` under a session without the waits analysis: messages are not stamped.
fn other_session(time: impl FnOnce() -> f64) -> f64 {
    let s = Session::builder()
        .analyses(&[Analysis::CallTree])
        .start()
        .expect("no other session runs in this bench");
    let ns = time();
    drop(s.finish());
    ns
}

/// The channels of the channel table, made once.
struct Channels {
    std: Std,
    std_wrapped: StdWrapped,
    crossbeam: Crossbeam,
    crossbeam_wrapped: CrossbeamWrapped,
    rt: tokio::runtime::Runtime,
    tokio: (
        tokio::sync::mpsc::Sender<u64>,
        tokio::sync::mpsc::Receiver<u64>,
    ),
    tokio_wrapped: (
        cabprof::sync::tokio_mpsc::Sender<u64>,
        cabprof::sync::tokio_mpsc::Receiver<u64>,
    ),
}

impl Channels {
    fn new() -> Channels {
        Channels {
            std: std::sync::mpsc::sync_channel(CHANNEL_CAP),
            std_wrapped: cabprof::sync::mpsc::sync_channel(CHANNEL_CAP),
            crossbeam: crossbeam_channel::bounded(CHANNEL_CAP),
            crossbeam_wrapped: cabprof::sync::crossbeam::bounded(CHANNEL_CAP),
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime"),
            tokio: tokio::sync::mpsc::channel(CHANNEL_CAP),
            tokio_wrapped: cabprof::sync::tokio_mpsc::channel(CHANNEL_CAP),
        }
    }

    /// Time the channel variant `v` (the order of [`CHANNEL_NAMES`]).
    fn time(&mut self, v: usize) -> f64 {
        match v {
            0 => time_channel(&self.std, pass_std),
            1 => time_channel(&self.std_wrapped, pass_std_wrapped),
            2 => other_session(|| time_channel(&self.std_wrapped, pass_std_wrapped)),
            3 => waits_session(|| time_channel(&self.std_wrapped, pass_std_wrapped)),
            4 => time_channel(&self.crossbeam, pass_crossbeam),
            5 => time_channel(&self.crossbeam_wrapped, pass_crossbeam_wrapped),
            6 => other_session(|| time_channel(&self.crossbeam_wrapped, pass_crossbeam_wrapped)),
            7 => waits_session(|| time_channel(&self.crossbeam_wrapped, pass_crossbeam_wrapped)),
            8 => time_tokio(&self.rt, &mut self.tokio, pass_tokio),
            9 => time_tokio(&self.rt, &mut self.tokio_wrapped, pass_tokio_wrapped),
            10 => {
                other_session(|| time_tokio(&self.rt, &mut self.tokio_wrapped, pass_tokio_wrapped))
            }
            _ => {
                waits_session(|| time_tokio(&self.rt, &mut self.tokio_wrapped, pass_tokio_wrapped))
            }
        }
    }
}

/// The channel table; `ns` in the order of [`CHANNEL_NAMES`], each wrapper's rows against the
/// plain channel above them.
fn report_channels(ns: &[Vec<f64>]) {
    println!("\nchannel: an uncontended send and receive, {MESSAGES} per timing");
    println!(
        "{:<26} {:>10} {:>17} {:>30}",
        "", "ns/message", "spread", "x plain"
    );
    for (i, name) in CHANNEL_NAMES.iter().enumerate() {
        let plain = &ns[i / CHANNEL_ROWS * CHANNEL_ROWS];
        let (lo, hi) = min_max(&ns[i]);
        let ratio = median_interval(&paired_ratios(&ns[i], plain), 0.95, RESAMPLES, SEED);
        println!(
            "{:<26} {:>10.2} {:>17} {:>30}",
            name,
            median(&ns[i]),
            format!("{lo:.2}-{hi:.2}"),
            format!("{:.3} [{:.3}, {:.3}]", ratio.median, ratio.lo, ratio.hi),
        );
    }
}

/// `IDLE_COST_ONLY`: unset (every table) or `channels` (the channel table alone).
fn channels_only() -> bool {
    match std::env::var("IDLE_COST_ONLY") {
        Err(std::env::VarError::NotPresent) => false,
        Ok(v) if v.trim() == "channels" => true,
        Ok(v) => {
            eprintln!("IDLE_COST_ONLY={v:?}: expected `channels` (unset: every table)");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("IDLE_COST_ONLY: {e}");
            std::process::exit(2);
        }
    }
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

/// The variants of each workload, in the order of its five timings.
const NAMES: [&str; 5] = [
    "plain",
    "annotated, idle",
    "compiled out",
    "floor: check only",
    "annotated, profiled",
];

fn main() {
    let rounds = rounds();
    let mut channels = Channels::new();
    if channels_only() {
        let ns = interleaved(rounds, CHANNEL_NAMES.len(), SEED, |v| channels.time(v));
        println!("idle_cost: the channel table alone, {rounds} rounds alternated");
        report_channels(&ns);
        return;
    }
    let src = input();
    let want = parse_plain(&src);
    for (parse, what) in [
        (parse_annotated as fn(&[u8]) -> i64, "annotated"),
        (parse_compiled_out, "compiled-out"),
        (parse_floor, "floor"),
    ] {
        assert_eq!(parse(&src), want, "the {what} parser parses alike");
    }
    let tree = tree(&src);
    let want = lower_plain(&tree);
    for (lower, what) in [
        (lower_annotated as fn(&Tree) -> i64, "annotated"),
        (lower_compiled_out, "compiled-out"),
        (lower_floor, "floor"),
    ] {
        assert_eq!(lower(&tree), want, "the {what} lowering lowers alike");
    }

    // Every workload in the same rounds, so that they see the same state of the host.
    let (plain_lock, wrapped_lock) = (
        parking_lot::Mutex::new(0u64),
        cabprof::sync::Mutex::new(0u64),
    );
    let (plain_rw, wrapped_rw) = (
        parking_lot::RwLock::new(0u64),
        cabprof::sync::RwLock::new(0u64),
    );
    let ns = interleaved(
        rounds,
        2 * NAMES.len() + LOCK_NAMES.len() + CHANNEL_NAMES.len(),
        SEED,
        |v| match v {
            0 => time(&src[..], parse_plain),
            1 => time(&src[..], parse_annotated),
            2 => time(&src[..], parse_compiled_out),
            3 => time(&src[..], parse_floor),
            4 => profiled(&src[..], parse_annotated),
            5 => time(&tree, lower_plain),
            6 => time(&tree, lower_annotated),
            7 => time(&tree, lower_compiled_out),
            8 => time(&tree, lower_floor),
            9 => profiled(&tree, lower_annotated),
            10 => time_lock(&plain_lock, bump_parking_lot),
            11 => time_lock(&wrapped_lock, bump_cabprof),
            12 => lock_profiled(&wrapped_lock, bump_cabprof),
            13 => time_lock(&plain_rw, bump_parking_lot_rw),
            14 => time_lock(&wrapped_rw, bump_cabprof_rw),
            15 => lock_profiled(&wrapped_rw, bump_cabprof_rw),
            _ => channels.time(v - 2 * NAMES.len() - LOCK_NAMES.len()),
        },
    );

    println!(
        "idle_cost: a {}-byte expression ({} tree nodes), {PARSES} runs per timing, {rounds} \
         rounds alternated; ratios are per round over plain, median [95 % bootstrap interval]",
        src.len(),
        tree.0.len()
    );
    report(
        "parse: a recursive-descent parser of small methods",
        "us/parse",
        &ns[..NAMES.len()],
    );
    report(
        "lower: a tree walk whose methods fold and emit",
        "us/lower",
        &ns[NAMES.len()..2 * NAMES.len()],
    );
    let locks = &ns[2 * NAMES.len()..2 * NAMES.len() + LOCK_NAMES.len()];
    println!(
        "\nlock: an uncontended lock and unlock (RwLock: a read, then a write), {LOCKS} per timing"
    );
    println!(
        "{:<24} {:>10} {:>17} {:>30}",
        "", "ns/lock", "spread", "x parking_lot"
    );
    for (i, name) in LOCK_NAMES.iter().enumerate() {
        let plain = &locks[i / LOCK_ROWS * LOCK_ROWS];
        let (lo, hi) = min_max(&locks[i]);
        let ratio = median_interval(&paired_ratios(&locks[i], plain), 0.95, RESAMPLES, SEED);
        println!(
            "{:<24} {:>10.2} {:>17} {:>30}",
            name,
            median(&locks[i]),
            format!("{lo:.2}-{hi:.2}"),
            format!("{:.3} [{:.3}, {:.3}]", ratio.median, ratio.lo, ratio.hi),
        );
    }
    report_channels(&ns[2 * NAMES.len() + LOCK_NAMES.len()..]);
}

/// One workload's table and verdicts; `ns` in the order of [`NAMES`].
fn report(title: &str, unit: &str, ns: &[Vec<f64>]) {
    println!("\n{title}");
    println!("{:<22} {:>12} {:>21} {:>26}", "", unit, "spread", "x plain");
    for (i, name) in NAMES.iter().enumerate() {
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
        "annotated, idle / plain: {:.3} [{:.3}, {:.3}] (target <= 1.05): {verdict}",
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
            "the floor misses the target itself: no run-time check meets it on this workload; \
             the attribute's own part is the second ratio"
        );
    }
}
