//! Ball-Larus path numbering of a function body (`#[profile(paths)]`).
//!
//! Ball & Larus, "Efficient Path Profiling" (MICRO 1996). The body's structured control flow
//! becomes a graph whose nodes are program points and whose edges are the choices made at
//! branches: each boolean operand of an `if`/`while` condition or of `&&`/`||` (its true and
//! false edges, following short-circuit evaluation), `if let`/`while let`/`let .. else`
//! (matched or not), each `match` arm (tested in order, guards as conditions), `for` (another
//! item or done), `?` (continue or return the error), plus the joins after them and the jumps
//! (`return`, `break`, labelled `break`/`continue`). Every loop back edge `v -> head` (the end
//! of a loop body and each `continue`) is replaced by `v -> EXIT` and `ENTRY -> head`, which
//! makes the graph acyclic. Then, visiting nodes in reverse topological order, `paths(EXIT) =
//! 1`, `paths(v) = Σ paths(w)` over `v`'s out-edges, and the i-th out-edge of `v` gets the value
//! `Σ_{j<i} paths(w_j)`: the sum of the values along every ENTRY-to-EXIT path is a distinct
//! number in `0..paths(ENTRY)`.
//!
//! # Where the constants go
//!
//! Only edges leaving a node with several out-edges carry code; at each such node at most one
//! edge has no syntactic home (a `match` arm's pattern failing, a `for` loop ending, a
//! `while let` or `let .. else` pattern matching) and it is put first, so its value is 0. The
//! others are written where the choice is visible:
//! - a boolean operand `c` becomes `branch(c, &mut frame, T, F)` (both values, one add);
//! - `e?` becomes `try_branch(e, &mut frame, OK, ERR)?`;
//! - `if let`, `while let`, `for`, match arms and `let .. else` add their value at the start of
//!   the block they enter (a missing `else` is added), a guarded arm at the start of its guard;
//! - at a back edge, `frame.back_edge(END, RESTART)` emits the path and restarts the register.
//!
//! The values live in one `const` array the generated code indexes with constants.
//!
//! # Too many paths
//!
//! When `paths(ENTRY)` exceeds the budget (2^29 by default, so that `paths + register` still
//! fits the 30-bit event field for paths cut short by a panic), paths are *split*: a split point
//! before a statement works like a back edge (the path ends there, a new one starts there).
//! Points are chosen greedily, each time the statement boundary whose cut removes the most
//! paths, until the count fits. Split numbers stay exact and decodable. If no split can make it
//! fit (branches crammed into one statement), events carry a hash of the 64-bit register
//! instead, and the numbering says so.
//!
//! # Limits
//!
//! - Macro invocations, closures and `async` blocks in the body are straight-line code: control
//!   flow inside them is not numbered (an early exit hidden in a macro's arguments, such as
//!   `format!("{}", x?)`, ends a path the numbering does not know: it decodes as the choices
//!   before it followed by default choices).
//! - `if let` chains (`if let P = e && c`) are one two-way decision.
//! - Operands are numbered in Rust's evaluation order, except that compound assignments are
//!   taken right operand first (right for primitive types, which is the common case).
//! - A panic ends the path where it happens; the guard emits `num_paths + register`, which
//!   decodes to the choices made before the panic, then default choices, then "unwound".

use crate::source::{first_span, snippet};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use std::collections::{BTreeMap, HashMap, HashSet};
use syn::{parse_quote, Block, Expr, Stmt};

const ENTRY: usize = 0;
const EXIT: usize = 1;

/// What a decoded step says (mirrors `cab::registry::StepKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Condition(bool),
    Pattern(bool),
    Arm(u32),
    Guard(bool),
    Next(bool),
    TryError(bool),
    LoopHead,
    BackEdge,
    SplitStart,
    SplitEnd,
    Return,
    End,
}

#[derive(Clone, Debug)]
struct Step {
    /// Where the step is in the source; the generated `line!()` spanned here gives its line.
    span: Span,
    kind: Kind,
    text: String,
}

fn step(span: Span, kind: Kind, text: impl Into<String>) -> Option<Step> {
    Some(Step {
        span,
        kind,
        text: text.into(),
    })
}

#[derive(Clone, Debug)]
struct Edge {
    from: usize,
    to: usize,
    /// Index into the generated constant array holding this edge's value, if code adds it.
    site: Option<usize>,
    step: Option<Step>,
}

/// An edge whose source is known and whose target is not yet (the exits of a condition).
struct Pending {
    from: usize,
    site: usize,
    step: Option<Step>,
}

/// A `break`/`continue` target.
struct Target {
    label: Option<String>,
    is_loop: bool,
    head: usize,
    after: usize,
    keyword: &'static str,
    span: Span,
}

/// A back edge (or split) `from -> head`, replaced by `from -> EXIT` and `ENTRY -> head` (the
/// latter kept in `Builder::restart`, once per head).
struct Back {
    from: usize,
    end_site: usize,
    split: bool,
    span: Span,
    text: String,
}

/// Builds the graph of a body while writing the instrumentation into it.
struct Builder<'a> {
    /// Statement boundaries (by visiting order) where paths are split.
    cuts: &'a HashSet<usize>,
    in_degree: Vec<u32>,
    edges: Vec<Edge>,
    sites: usize,
    targets: Vec<Target>,
    back: Vec<Back>,
    /// Loop heads (and split heads) with their `ENTRY -> head` restart site and step.
    restart: BTreeMap<usize, (usize, Step)>,
    heads: HashSet<usize>,
    /// Statement boundary `i` is at node `candidates[i]`, or `None` if it cannot be split.
    candidates: Vec<Option<usize>>,
}

fn edge_value(site: usize) -> Expr {
    let k = proc_macro2::Literal::usize_unsuffixed(site);
    parse_quote!(__CABPROF_EDGES[#k])
}

fn add_stmt(site: usize) -> Stmt {
    let v = edge_value(site);
    parse_quote!(__cabprof_frame.add(#v);)
}

fn label_name(l: &Option<syn::Lifetime>) -> Option<String> {
    l.as_ref().map(|l| l.ident.to_string())
}

/// Put `stmt` first in the block `e` (wrapping `e` in a block if it is not a plain one).
fn prepend(e: &mut Expr, stmt: Stmt) {
    if let Expr::Block(b) = e {
        if b.label.is_none() && b.attrs.is_empty() {
            b.block.stmts.insert(0, stmt);
            return;
        }
    }
    let inner = std::mem::replace(e, Expr::Verbatim(TokenStream::new()));
    *e = parse_quote!({ #stmt #inner });
}

/// Append `stmt` after everything in `b`, turning a tail expression into a statement.
fn append(b: &mut Block, stmt: Stmt) {
    if let Some(Stmt::Expr(_, semi @ None)) = b.stmts.last_mut() {
        *semi = Some(Default::default());
    }
    b.stmts.push(stmt);
}

/// Whether a condition contains a `let` (a plain `if let` or a let chain).
fn contains_let(e: &Expr) -> bool {
    match e {
        Expr::Let(_) => true,
        Expr::Paren(p) => contains_let(&p.expr),
        Expr::Group(g) => contains_let(&g.expr),
        Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_) | syn::BinOp::Or(_)) => {
            contains_let(&b.left) || contains_let(&b.right)
        }
        _ => false,
    }
}

impl<'a> Builder<'a> {
    fn new(cuts: &'a HashSet<usize>) -> Self {
        let mut b = Builder {
            cuts,
            in_degree: vec![0, 0],
            edges: Vec::new(),
            sites: 0,
            targets: Vec::new(),
            back: Vec::new(),
            restart: BTreeMap::new(),
            heads: HashSet::new(),
            candidates: Vec::new(),
        };
        let start = b.node();
        b.edge(ENTRY, start, None, None);
        b
    }

    fn node(&mut self) -> usize {
        self.in_degree.push(0);
        self.in_degree.len() - 1
    }

    fn site(&mut self) -> usize {
        self.sites += 1;
        self.sites - 1
    }

    fn live(&self, n: usize) -> bool {
        n == ENTRY || self.in_degree[n] > 0
    }

    fn edge(&mut self, from: usize, to: usize, site: Option<usize>, step: Option<Step>) {
        self.in_degree[to] += 1;
        self.edges.push(Edge {
            from,
            to,
            site,
            step,
        });
    }

    /// Control falls from `from` to `to` (if `from` is reachable at all).
    fn flow(&mut self, from: usize, to: usize) {
        if self.live(from) {
            self.edge(from, to, None, None);
        }
    }

    fn connect(&mut self, pending: Vec<Pending>, to: usize) {
        for p in pending {
            self.edge(p.from, to, Some(p.site), p.step);
        }
    }

    /// A back edge (or split) from `from` to `head`; returns the statement that takes it.
    fn back_edge(&mut self, from: usize, head: usize, split: bool, span: Span, text: &str) -> Stmt {
        let end_site = self.site();
        let restart = match self.restart.get(&head) {
            Some((s, _)) => *s,
            None => {
                let s = self.site();
                let kind = if split {
                    Kind::SplitStart
                } else {
                    Kind::LoopHead
                };
                let st = Step {
                    span,
                    kind,
                    text: text.to_string(),
                };
                self.restart.insert(head, (s, st));
                s
            }
        };
        self.back.push(Back {
            from,
            end_site,
            split,
            span,
            text: text.to_string(),
        });
        let (a, b) = (edge_value(end_site), edge_value(restart));
        parse_quote!(#[allow(unreachable_code)] __cabprof_frame.back_edge(#a, #b);)
    }

    // -----------------------------------------------------------------------------------------
    // Statements

    fn block(&mut self, b: &mut Block, mut cur: usize) -> usize {
        let stmts = std::mem::take(&mut b.stmts);
        let mut out = Vec::with_capacity(stmts.len());
        for mut s in stmts {
            if !matches!(s, Stmt::Item(_)) {
                let id = self.candidates.len();
                let ok = self.live(cur) && !self.heads.contains(&cur);
                self.candidates.push(ok.then_some(cur));
                if ok && self.cuts.contains(&id) {
                    let head = self.node();
                    self.heads.insert(head);
                    out.push(self.back_edge(cur, head, true, first_span(&s), "split"));
                    cur = head;
                }
            }
            cur = self.stmt(&mut s, cur);
            out.push(s);
        }
        b.stmts = out;
        cur
    }

    fn stmt(&mut self, s: &mut Stmt, cur: usize) -> usize {
        match s {
            Stmt::Local(l) => self.local(l, cur),
            Stmt::Expr(e, _) => self.expr(e, cur),
            Stmt::Item(_) | Stmt::Macro(_) => cur,
        }
    }

    fn local(&mut self, l: &mut syn::Local, mut cur: usize) -> usize {
        let Some(init) = &mut l.init else {
            return cur;
        };
        cur = self.expr(&mut init.expr, cur);
        let Some((_, diverge)) = &mut init.diverge else {
            return cur;
        };
        let (ln, text) = (first_span(&l.pat), snippet(&l.pat));
        let ok = self.node();
        self.edge(cur, ok, None, step(ln, Kind::Pattern(true), text.clone()));
        let s = self.site();
        let el = self.node();
        self.edge(cur, el, Some(s), step(ln, Kind::Pattern(false), text));
        let end = self.expr(diverge, el);
        // The `else` block diverges; if it seems to fall through, it ends in a call that never
        // returns (`panic!`, `process::exit`): an exit.
        self.flow(end, EXIT);
        prepend(diverge, add_stmt(s));
        ok
    }

    // -----------------------------------------------------------------------------------------
    // Expressions

    fn exprs<'e>(&mut self, es: impl IntoIterator<Item = &'e mut Expr>, mut cur: usize) -> usize {
        for e in es {
            cur = self.expr(e, cur);
        }
        cur
    }

    /// Number `e`, evaluated starting at `cur`; returns the point after it.
    fn expr(&mut self, e: &mut Expr, cur: usize) -> usize {
        match e {
            Expr::Array(a) => self.exprs(a.elems.iter_mut(), cur),
            Expr::Tuple(t) => self.exprs(t.elems.iter_mut(), cur),
            Expr::Assign(a) => {
                let c = self.expr(&mut a.right, cur);
                self.expr(&mut a.left, c)
            }
            Expr::Binary(b) => {
                use syn::BinOp::*;
                match b.op {
                    And(_) | Or(_) => {
                        let (t, f) = self.cond(e, cur, Kind::Condition);
                        let join = self.node();
                        self.connect(t, join);
                        self.connect(f, join);
                        join
                    }
                    AddAssign(_) | SubAssign(_) | MulAssign(_) | DivAssign(_) | RemAssign(_)
                    | BitXorAssign(_) | BitAndAssign(_) | BitOrAssign(_) | ShlAssign(_)
                    | ShrAssign(_) => {
                        let c = self.expr(&mut b.right, cur);
                        self.expr(&mut b.left, c)
                    }
                    _ => {
                        let c = self.expr(&mut b.left, cur);
                        self.expr(&mut b.right, c)
                    }
                }
            }
            Expr::Unary(u) => self.expr(&mut u.expr, cur),
            Expr::Call(c) => {
                let n = self.expr(&mut c.func, cur);
                self.exprs(c.args.iter_mut(), n)
            }
            Expr::MethodCall(m) => {
                let n = self.expr(&mut m.receiver, cur);
                self.exprs(m.args.iter_mut(), n)
            }
            Expr::Cast(c) => self.expr(&mut c.expr, cur),
            Expr::Field(f) => self.expr(&mut f.base, cur),
            Expr::Paren(p) => self.expr(&mut p.expr, cur),
            Expr::Group(g) => self.expr(&mut g.expr, cur),
            Expr::Reference(r) => self.expr(&mut r.expr, cur),
            Expr::RawAddr(r) => self.expr(&mut r.expr, cur),
            Expr::Await(a) => self.expr(&mut a.base, cur),
            Expr::Index(i) => {
                let n = self.expr(&mut i.expr, cur);
                self.expr(&mut i.index, n)
            }
            Expr::Range(r) => {
                let mut n = cur;
                if let Some(s) = &mut r.start {
                    n = self.expr(s, n);
                }
                if let Some(s) = &mut r.end {
                    n = self.expr(s, n);
                }
                n
            }
            Expr::Repeat(r) => self.expr(&mut r.expr, cur),
            Expr::Struct(s) => {
                let mut n = self.exprs(s.fields.iter_mut().map(|f| &mut f.expr), cur);
                if let Some(rest) = &mut s.rest {
                    n = self.expr(rest, n);
                }
                n
            }
            Expr::Let(l) => self.expr(&mut l.expr, cur),
            Expr::Unsafe(u) => self.block(&mut u.block, cur),
            Expr::Block(b) => match &b.label {
                None => self.block(&mut b.block, cur),
                Some(label) => {
                    let after = self.node();
                    self.targets.push(Target {
                        label: Some(label.name.ident.to_string()),
                        is_loop: false,
                        head: usize::MAX,
                        after,
                        keyword: "block",
                        span: label.name.apostrophe,
                    });
                    let end = self.block(&mut b.block, cur);
                    self.flow(end, after);
                    self.targets.pop();
                    after
                }
            },
            Expr::If(i) => self.if_expr(i, cur),
            Expr::Match(m) => self.match_expr(m, cur),
            Expr::Loop(l) => {
                let head = self.node();
                self.edge(cur, head, None, None);
                self.heads.insert(head);
                let after = self.node();
                self.targets.push(Target {
                    label: l.label.as_ref().map(|l| l.name.ident.to_string()),
                    is_loop: true,
                    head,
                    after,
                    keyword: "loop",
                    span: l.loop_token.span,
                });
                let end = self.block(&mut l.body, head);
                self.close_loop(end, &mut l.body);
                after
            }
            Expr::While(w) => self.while_expr(w, cur),
            Expr::ForLoop(f) => {
                let n = self.expr(&mut f.expr, cur);
                let head = self.node();
                self.edge(n, head, None, None);
                self.heads.insert(head);
                let after = self.node();
                let ln = f.for_token.span;
                let text = format!("for {}", snippet(&f.pat));
                self.edge(head, after, None, step(ln, Kind::Next(false), text.clone()));
                let s = self.site();
                let body = self.node();
                self.edge(head, body, Some(s), step(ln, Kind::Next(true), text));
                self.targets.push(Target {
                    label: f.label.as_ref().map(|l| l.name.ident.to_string()),
                    is_loop: true,
                    head,
                    after,
                    keyword: "for",
                    span: ln,
                });
                let end = self.block(&mut f.body, body);
                self.close_loop(end, &mut f.body);
                f.body.stmts.insert(0, add_stmt(s));
                after
            }
            Expr::Break(b) => {
                let mut n = cur;
                if let Some(v) = &mut b.expr {
                    n = self.expr(v, n);
                }
                if let Some(t) = self.target(&label_name(&b.label), false) {
                    let after = self.targets[t].after;
                    self.flow(n, after);
                }
                self.node()
            }
            Expr::Continue(c) => {
                if let Some(t) = self.target(&label_name(&c.label), true) {
                    if self.live(cur) {
                        let head = self.targets[t].head;
                        let text = self.targets[t].keyword;
                        let stmt = self.back_edge(cur, head, false, c.continue_token.span, text);
                        let inner = std::mem::replace(e, Expr::Verbatim(TokenStream::new()));
                        *e = parse_quote!({ #stmt #inner });
                    }
                }
                self.node()
            }
            Expr::Return(r) => {
                let mut n = cur;
                if let Some(v) = &mut r.expr {
                    n = self.expr(v, n);
                }
                if self.live(n) {
                    let ln = r.return_token.span;
                    self.edge(n, EXIT, None, step(ln, Kind::Return, "return"));
                }
                self.node()
            }
            Expr::Try(t) => {
                let text = snippet(&t.expr);
                let ln = t.question_token.span;
                let n = self.expr(&mut t.expr, cur);
                let (ok_site, err_site) = (self.site(), self.site());
                let ok = self.node();
                self.edge(
                    n,
                    ok,
                    Some(ok_site),
                    step(ln, Kind::TryError(false), text.clone()),
                );
                self.edge(
                    n,
                    EXIT,
                    Some(err_site),
                    step(ln, Kind::TryError(true), text),
                );
                let (ok_v, err_v) = (edge_value(ok_site), edge_value(err_site));
                let inner = &t.expr;
                *t.expr = parse_quote!(::cabprof::__private::try_branch(
                    #inner, &mut __cabprof_frame, #ok_v, #err_v
                ));
                ok
            }
            // Straight-line: their insides are separate bodies or opaque tokens.
            Expr::Closure(_)
            | Expr::Async(_)
            | Expr::Const(_)
            | Expr::Macro(_)
            | Expr::TryBlock(_)
            | Expr::Yield(_)
            | Expr::Lit(_)
            | Expr::Path(_)
            | Expr::Infer(_)
            | Expr::Verbatim(_) => cur,
            _ => cur,
        }
    }

    /// The innermost target named `label` (or the innermost loop if unlabelled).
    fn target(&self, label: &Option<String>, need_loop: bool) -> Option<usize> {
        self.targets.iter().rposition(|t| match label {
            Some(l) => t.label.as_deref() == Some(l.as_str()) && (t.is_loop || !need_loop),
            None => t.is_loop,
        })
    }

    /// End of a loop body: the back edge, if the end is reachable.
    fn close_loop(&mut self, end: usize, body: &mut Block) {
        let t = self.targets.pop().expect("a loop pushed its target");
        if self.live(end) {
            let stmt = self.back_edge(end, t.head, false, t.span, t.keyword);
            append(body, stmt);
        }
    }

    /// A boolean condition evaluated at `cur`; returns the pending true and false exits.
    /// Leaves (operands that are not `&&`, `||`, `!` or parentheses) get a `branch` wrapper.
    fn cond(
        &mut self,
        e: &mut Expr,
        cur: usize,
        leaf: fn(bool) -> Kind,
    ) -> (Vec<Pending>, Vec<Pending>) {
        match e {
            Expr::Paren(p) => return self.cond(&mut p.expr, cur, leaf),
            Expr::Group(g) => return self.cond(&mut g.expr, cur, leaf),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => {
                let (t, f) = self.cond(&mut u.expr, cur, leaf);
                return (f, t);
            }
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
                let (ta, mut fa) = self.cond(&mut b.left, cur, leaf);
                let nb = self.node();
                self.connect(ta, nb);
                let (tb, fb) = self.cond(&mut b.right, nb, leaf);
                fa.extend(fb);
                return (tb, fa);
            }
            Expr::Binary(b) if matches!(b.op, syn::BinOp::Or(_)) => {
                let (mut ta, fa) = self.cond(&mut b.left, cur, leaf);
                let nb = self.node();
                self.connect(fa, nb);
                let (tb, fb) = self.cond(&mut b.right, nb, leaf);
                ta.extend(tb);
                return (ta, fb);
            }
            _ => {}
        }
        let (ln, text) = (first_span(e), snippet(e));
        let n = self.expr(e, cur);
        let (st, sf) = (self.site(), self.site());
        let (vt, vf) = (edge_value(st), edge_value(sf));
        let inner = std::mem::replace(e, Expr::Verbatim(TokenStream::new()));
        *e = parse_quote!(::cabprof::__private::branch(#inner, &mut __cabprof_frame, #vt, #vf));
        (
            vec![Pending {
                from: n,
                site: st,
                step: step(ln, leaf(true), text.clone()),
            }],
            vec![Pending {
                from: n,
                site: sf,
                step: step(ln, leaf(false), text),
            }],
        )
    }

    fn if_expr(&mut self, i: &mut syn::ExprIf, cur: usize) -> usize {
        let join = self.node();
        let (nt, ne) = (self.node(), self.node());
        // `if let` (and let chains): a two-way decision with its values at the block starts.
        let mut adds = None;
        if contains_let(&i.cond) {
            let (n, ln, text) = match &mut *i.cond {
                Expr::Let(l) => {
                    let (ln, text) = (first_span(&l.pat), snippet(&l.pat));
                    (self.expr(&mut l.expr, cur), ln, text)
                }
                c => (cur, first_span(c), snippet(c)),
            };
            let (st, se) = (self.site(), self.site());
            self.edge(n, nt, Some(st), step(ln, Kind::Pattern(true), text.clone()));
            self.edge(n, ne, Some(se), step(ln, Kind::Pattern(false), text));
            adds = Some((st, se));
        } else {
            let (t, f) = self.cond(&mut i.cond, cur, Kind::Condition);
            self.connect(t, nt);
            self.connect(f, ne);
        }
        let end_t = self.block(&mut i.then_branch, nt);
        self.flow(end_t, join);
        let end_e = match &mut i.else_branch {
            Some((_, e)) => self.expr(e, ne),
            None => ne,
        };
        self.flow(end_e, join);
        if let Some((st, se)) = adds {
            i.then_branch.stmts.insert(0, add_stmt(st));
            match &mut i.else_branch {
                Some((_, e)) => prepend(e, add_stmt(se)),
                None => {
                    let s = add_stmt(se);
                    i.else_branch = Some((Default::default(), parse_quote!({ #s })));
                }
            }
        }
        join
    }

    fn match_expr(&mut self, m: &mut syn::ExprMatch, cur: usize) -> usize {
        let mut test = self.expr(&mut m.expr, cur);
        let join = self.node();
        let n = m.arms.len();
        for (i, arm) in m.arms.iter_mut().enumerate() {
            let (ln, text) = (first_span(&arm.pat), snippet(&arm.pat));
            // Arms are tried in order: "this arm's pattern fails" has no code, so it goes first.
            let next = self.node();
            if i + 1 < n {
                self.edge(test, next, None, None);
            }
            let s = self.site();
            let kind = Kind::Arm(i as u32);
            let body = self.node();
            match &mut arm.guard {
                Some((_, g)) => {
                    let ng = self.node();
                    self.edge(test, ng, Some(s), step(ln, kind, text));
                    let (t, f) = self.cond(g, ng, Kind::Guard);
                    self.connect(t, body);
                    self.connect(f, next);
                    prepend(g, add_stmt(s));
                }
                None => {
                    self.edge(test, body, Some(s), step(ln, kind, text));
                }
            }
            let end = self.expr(&mut arm.body, body);
            self.flow(end, join);
            if arm.guard.is_none() {
                prepend(&mut arm.body, add_stmt(s));
            }
            test = next;
        }
        join
    }

    fn while_expr(&mut self, w: &mut syn::ExprWhile, cur: usize) -> usize {
        let head = self.node();
        self.edge(cur, head, None, None);
        self.heads.insert(head);
        let after = self.node();
        let ln = w.while_token.span;
        let body = self.node();
        let mut add = None;
        if contains_let(&w.cond) {
            let (n, pl, text) = match &mut *w.cond {
                Expr::Let(l) => {
                    let (pl, text) = (first_span(&l.pat), snippet(&l.pat));
                    (self.expr(&mut l.expr, head), pl, text)
                }
                c => (head, first_span(c), snippet(c)),
            };
            self.edge(n, after, None, step(pl, Kind::Pattern(false), text.clone()));
            let s = self.site();
            self.edge(n, body, Some(s), step(pl, Kind::Pattern(true), text));
            add = Some(s);
        } else {
            let (t, f) = self.cond(&mut w.cond, head, Kind::Condition);
            self.connect(t, body);
            self.connect(f, after);
        }
        self.targets.push(Target {
            label: w.label.as_ref().map(|l| l.name.ident.to_string()),
            is_loop: true,
            head,
            after,
            keyword: "while",
            span: ln,
        });
        let end = self.block(&mut w.body, body);
        self.close_loop(end, &mut w.body);
        if let Some(s) = add {
            w.body.stmts.insert(0, add_stmt(s));
        }
        after
    }

    /// Close the graph: the end of the body exits, back edges become `v -> EXIT` plus
    /// `ENTRY -> head`.
    fn finish(mut self, end: usize, end_span: Span) -> Graph {
        if self.live(end) {
            self.edge(end, EXIT, None, step(end_span, Kind::End, "end"));
        }
        for b in std::mem::take(&mut self.back) {
            let kind = if b.split {
                Kind::SplitEnd
            } else {
                Kind::BackEdge
            };
            self.edge(b.from, EXIT, Some(b.end_site), step(b.span, kind, b.text));
        }
        for (head, (site, st)) in std::mem::take(&mut self.restart) {
            self.edge(ENTRY, head, Some(site), Some(st));
        }
        Graph {
            nodes: self.in_degree.len(),
            edges: self.edges,
            sites: self.sites,
            candidates: self.candidates,
        }
    }
}

/// The finished, acyclic graph of a body.
struct Graph {
    nodes: usize,
    edges: Vec<Edge>,
    sites: usize,
    candidates: Vec<Option<usize>>,
}

/// Edge values of a [`Graph`].
struct Numbering {
    /// Out-edges of each node, in value order (the edge without code first).
    out: Vec<Vec<usize>>,
    /// Paths from each node to EXIT, exact (saturating).
    paths: Vec<u128>,
    /// Value of each edge, modulo 2^64 (exact when `paths[ENTRY]` fits).
    value: Vec<u64>,
}

impl Graph {
    /// Nodes in postorder of a depth-first search (every edge goes from a later node to an
    /// earlier one), or an error if the graph has a cycle (an internal error).
    fn postorder(&self, out: &[Vec<usize>]) -> Result<Vec<usize>, String> {
        let mut state = vec![0u8; self.nodes]; // 0 new, 1 on stack, 2 done
        let mut order = Vec::with_capacity(self.nodes);
        for root in 0..self.nodes {
            if state[root] != 0 {
                continue;
            }
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some((v, i)) = stack.pop() {
                if let Some(&e) = out[v].get(i) {
                    stack.push((v, i + 1));
                    let w = self.edges[e].to;
                    match state[w] {
                        0 => {
                            state[w] = 1;
                            stack.push((w, 0));
                        }
                        1 => return Err("cycle in the path graph".into()),
                        _ => {}
                    }
                } else {
                    state[v] = 2;
                    order.push(v);
                }
            }
        }
        Ok(order)
    }

    fn number(&self) -> Result<Numbering, String> {
        let mut out = vec![Vec::new(); self.nodes];
        for (i, e) in self.edges.iter().enumerate() {
            out[e.from].push(i);
        }
        for list in &mut out {
            // Stable: edges with code keep their creation order.
            list.sort_by_key(|&e| self.edges[e].site.is_some());
            if list.len() > 1
                && list
                    .iter()
                    .filter(|&&e| self.edges[e].site.is_none())
                    .count()
                    > 1
            {
                return Err("two edges without code leave one node".into());
            }
        }
        let order = self.postorder(&out)?;
        let mut paths = vec![0u128; self.nodes];
        let mut wrap = vec![0u64; self.nodes];
        let mut value = vec![0u64; self.edges.len()];
        for &v in &order {
            if v == EXIT {
                paths[v] = 1;
                wrap[v] = 1;
                continue;
            }
            let (mut p, mut w) = (0u128, 0u64);
            for &e in &out[v] {
                let to = self.edges[e].to;
                value[e] = w;
                p = p.saturating_add(paths[to]);
                w = w.wrapping_add(wrap[to]);
            }
            paths[v] = p;
            wrap[v] = w;
        }
        Ok(Numbering { out, paths, value })
    }

    /// Greedy split points: repeatedly cut the statement boundary that removes the most
    /// paths (cutting node `c` turns `to(c) * from(c)` paths into `to(c) + from(c)`), until
    /// at most `limit` remain. `None` if no boundary helps enough.
    fn choose_cuts(&self, limit: u64) -> Option<HashSet<usize>> {
        // Adjacency by target node, which cuts rewrite.
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); self.nodes];
        for e in &self.edges {
            out[e.from].push(e.to);
        }
        let mut first_candidate: HashMap<usize, usize> = HashMap::new();
        for (id, c) in self.candidates.iter().enumerate() {
            if let Some(c) = c {
                first_candidate.entry(*c).or_insert(id);
            }
        }
        let mut chosen = HashSet::new();
        let mut cut = HashSet::new();
        loop {
            let n = out.len();
            // Postorder over the rewritten adjacency.
            let mut state = vec![0u8; n];
            let mut order = Vec::with_capacity(n);
            for root in 0..n {
                if state[root] != 0 {
                    continue;
                }
                let mut stack = vec![(root, 0usize)];
                state[root] = 1;
                while let Some((v, i)) = stack.pop() {
                    if let Some(&w) = out[v].get(i) {
                        stack.push((v, i + 1));
                        if state[w] == 0 {
                            state[w] = 1;
                            stack.push((w, 0));
                        }
                    } else {
                        state[v] = 2;
                        order.push(v);
                    }
                }
            }
            let mut from = vec![0u128; n];
            for &v in &order {
                from[v] = if v == EXIT {
                    1
                } else {
                    out[v].iter().fold(0u128, |a, &w| a.saturating_add(from[w]))
                };
            }
            if from[ENTRY] <= limit as u128 {
                return Some(chosen);
            }
            let mut to = vec![0u128; n];
            to[ENTRY] = 1;
            for &v in order.iter().rev() {
                for &w in &out[v] {
                    to[w] = to[w].saturating_add(to[v]);
                }
            }
            let best = first_candidate
                .iter()
                .filter(|(c, _)| !cut.contains(*c))
                .map(|(&c, &id)| {
                    let gain = to[c]
                        .saturating_mul(from[c])
                        .saturating_sub(to[c].saturating_add(from[c]));
                    (gain, std::cmp::Reverse(id), c)
                })
                .max()?;
            if best.0 == 0 {
                return None;
            }
            let c = best.2;
            let c2 = out.len();
            let moved = std::mem::replace(&mut out[c], vec![EXIT]);
            out.push(moved);
            out[ENTRY].push(c2);
            cut.insert(c);
            chosen.insert(first_candidate[&c]);
        }
    }
}

/// What `#[profile(paths)]` adds beside the instrumented body.
pub struct PathsOutput {
    /// `const __CABPROF_EDGES` and `static __CABPROF_PATHS`, to place in the function's block.
    pub items: TokenStream,
    /// `num_paths` (the unwound offset) for the guard.
    pub num_paths: u64,
    /// Whether events carry a hash of the register.
    pub hashed: bool,
}

fn build(block: &mut Block, cuts: &HashSet<usize>) -> Graph {
    let mut b = Builder::new(cuts);
    let end = b.block(block, 2);
    b.finish(end, block.brace_token.span.close())
}

/// Instrument `block` for path profiling with at most `limit` paths (before hashing).
pub fn instrument(block: &mut Block, limit: u64) -> syn::Result<PathsOutput> {
    let internal =
        |msg: String| syn::Error::new(Span::call_site(), format!("cabprof internal error: {msg}"));
    let mut first = block.clone();
    let g1 = build(&mut first, &HashSet::new());
    let n1 = g1.number().map_err(internal)?;
    let (graph, numbering, split) = if n1.paths[ENTRY] <= limit as u128 {
        *block = first;
        (g1, n1, false)
    } else {
        let cuts = g1.choose_cuts(limit).unwrap_or_default();
        let g2 = build(block, &cuts);
        let n2 = g2.number().map_err(internal)?;
        (g2, n2, true)
    };
    let total = numbering.paths[ENTRY];
    let hashed = total > limit as u128;

    let mut site_values = vec![0u64; graph.sites];
    for (i, e) in graph.edges.iter().enumerate() {
        if let Some(s) = e.site {
            site_values[s] = numbering.value[i];
        }
    }
    let k = graph.sites;
    let values = site_values
        .iter()
        .map(|v| proc_macro2::Literal::u64_unsuffixed(*v));

    let mode = if hashed {
        quote!(::cabprof::__private::PathMode::Hashed)
    } else if split {
        let lines = graph
            .edges
            .iter()
            .filter_map(|e| e.step.as_ref())
            .filter(|s| s.kind == Kind::SplitEnd)
            .map(|s| quote_spanned!(s.span=> ::core::line!()));
        quote!(::cabprof::__private::PathMode::Split { lines: &[#(#lines),*] })
    } else {
        quote!(::cabprof::__private::PathMode::Exact)
    };
    let num_paths = u64::try_from(total).unwrap_or(u64::MAX);
    let (nodes, edges) = if hashed {
        (Vec::new(), Vec::new())
    } else {
        tables(&graph, &numbering)
    };
    let items = quote! {
        #[allow(non_upper_case_globals, dead_code)]
        const __CABPROF_EDGES: [u64; #k] = [#(#values),*];
        static __CABPROF_PATHS: ::cabprof::__private::PathNumbering =
            ::cabprof::__private::PathNumbering::new(
                #num_paths,
                #mode,
                &[#(#nodes),*],
                &[#(#edges),*],
            );
    };
    Ok(PathsOutput {
        items,
        num_paths,
        hashed,
    })
}

fn step_tokens(s: &Option<Step>) -> TokenStream {
    let Some(s) = s else {
        return quote!(::core::option::Option::None);
    };
    let k = quote!(::cabprof::__private::StepKind);
    let kind = match s.kind {
        Kind::Condition(b) => quote!(#k::Condition(#b)),
        Kind::Pattern(b) => quote!(#k::Pattern(#b)),
        Kind::Arm(n) => quote!(#k::Arm(#n)),
        Kind::Guard(b) => quote!(#k::Guard(#b)),
        Kind::Next(b) => quote!(#k::Next(#b)),
        Kind::TryError(b) => quote!(#k::TryError(#b)),
        Kind::LoopHead => quote!(#k::LoopHead),
        Kind::BackEdge => quote!(#k::BackEdge),
        Kind::SplitStart => quote!(#k::SplitStart),
        Kind::SplitEnd => quote!(#k::SplitEnd),
        Kind::Return => quote!(#k::Return),
        Kind::End => quote!(#k::End),
    };
    let (ln, text) = (quote_spanned!(s.span=> ::core::line!()), &s.text);
    quote!(::core::option::Option::Some(::cabprof::__private::PathStep::new(#ln, #kind, #text)))
}

/// `PathNode`s and `PathEdge`s for decoding, node by node in value order.
fn tables(g: &Graph, n: &Numbering) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let mut nodes = Vec::with_capacity(g.nodes);
    let mut edges = Vec::with_capacity(g.edges.len());
    for v in 0..g.nodes {
        let first = edges.len() as u32;
        let count = n.out[v].len() as u32;
        let paths = u64::try_from(n.paths[v]).unwrap_or(u64::MAX);
        nodes.push(quote!(::cabprof::__private::PathNode::new(#first, #count, #paths)));
        for &e in &n.out[v] {
            let to = g.edges[e].to as u32;
            let value = n.value[e];
            let st = step_tokens(&g.edges[e].step);
            edges.push(quote!(::cabprof::__private::PathEdge::new(#to, #value, #st)));
        }
    }
    (nodes, edges)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
