//! Phase 1: building the path graph of a function body, and marking the body where its
//! choices are made.
//!
//! One walk over the body's syntax tree does both. The graph's nodes are program points and its
//! edges the choices made at branches: each boolean operand of an `if`/`while` condition or of
//! `&&`/`||` (its true and false edges, following short-circuit evaluation), `if let`/`while
//! let`/`let .. else` (matched or not), each `match` arm (tested in order, guards as
//! conditions), `for` (another item or done), `?` (continue or return the error), plus the joins
//! after them and the jumps (`return`, `break`, labelled `break`/`continue`). Every loop back
//! edge `v -> head` (the end of a loop body and each `continue`) is replaced by `v -> EXIT` and
//! `ENTRY -> head`, as Ball & Larus, "Efficient Path Profiling" (MICRO 1996) do, which makes the
//! graph acyclic; a split point before a statement is handled the same way.
//!
//! Every edge that needs code gets a *site*, an index into the constant array of edge values,
//! and the code that adds it is written into the body right away (with [`emit`]'s helpers),
//! since the values themselves are only known after [numbering](super::numbering). Sites are
//! numbered in the order the walk meets them.
//!
//! Statement boundaries are recorded as split *candidates*; given a set of them to cut (chosen
//! by [`split`](super::split) after a first walk), the walk ends the path before each of those
//! statements and starts a new one.

use super::emit;
use super::graph::{step, Edge, Graph, Kind, Step, ENTRY, EXIT};
use crate::source::{first_span, snippet};
use proc_macro2::{Span, TokenStream};
use std::collections::{BTreeMap, HashSet};
use syn::{parse_quote, Block, Expr, Stmt};

/// Walk `block` (rewriting it) and return its graph; `cuts` are the statement boundaries, by
/// visiting order, where paths are split.
pub(super) fn build(block: &mut Block, cuts: &HashSet<usize>) -> Graph {
    let mut b = Builder::new(cuts);
    let end = b.block(block, 2);
    b.finish(end, block.brace_token.span.close())
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

fn label_name(l: &Option<syn::Lifetime>) -> Option<String> {
    l.as_ref().map(|l| l.ident.to_string())
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

    /// A back edge (or split) from `from` (at `span`) to `head`; returns the statement that
    /// takes it. `head_span` is where the head is in the source (the loop keyword, or the split
    /// point), named by the path that restarts there.
    fn back_edge(
        &mut self,
        from: usize,
        head: usize,
        split: bool,
        span: Span,
        head_span: Span,
        text: &str,
    ) -> Stmt {
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
                    span: head_span,
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
        emit::back_edge(end_site, restart)
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
                    out.push(self.back_edge(
                        cur,
                        head,
                        true,
                        first_span(&s),
                        first_span(&s),
                        "split",
                    ));
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
        emit::prepend(diverge, emit::add_stmt(s));
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
    ///
    /// One arm per kind of expression, in one `match`: its length is the language's, and the
    /// arms read as one table of evaluation orders.
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
                f.body.stmts.insert(0, emit::add_stmt(s));
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
                        let (head, text, at) = (
                            self.targets[t].head,
                            self.targets[t].keyword,
                            self.targets[t].span,
                        );
                        let stmt =
                            self.back_edge(cur, head, false, c.continue_token.span, at, text);
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
                *t.expr = emit::try_branch(&t.expr, ok_site, err_site);
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
            let stmt = self.back_edge(end, t.head, false, t.span, t.span, t.keyword);
            emit::append(body, stmt);
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
        let inner = std::mem::replace(e, Expr::Verbatim(TokenStream::new()));
        *e = emit::branch(inner, st, sf);
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
            i.then_branch.stmts.insert(0, emit::add_stmt(st));
            match &mut i.else_branch {
                Some((_, e)) => emit::prepend(e, emit::add_stmt(se)),
                None => {
                    let s = emit::add_stmt(se);
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
            // The last arm without a guard is its test's only edge (value 0): no code, so an
            // arm such as `_ => {}` stays empty (clippy's `single_match` looks for that).
            let last = i + 1 == n && arm.guard.is_none();
            let s = (!last).then(|| self.site());
            let kind = Kind::Arm(i as u32);
            let body = self.node();
            match &mut arm.guard {
                Some((_, g)) => {
                    let ng = self.node();
                    self.edge(test, ng, s, step(ln, kind, text));
                    let (t, f) = self.cond(g, ng, Kind::Guard);
                    self.connect(t, body);
                    self.connect(f, next);
                    if let Some(s) = s {
                        emit::prepend(g, emit::add_stmt(s));
                    }
                }
                None => {
                    self.edge(test, body, s, step(ln, kind, text));
                }
            }
            let end = self.expr(&mut arm.body, body);
            self.flow(end, join);
            if let (None, Some(s)) = (&arm.guard, s) {
                emit::prepend(&mut arm.body, emit::add_stmt(s));
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
            w.body.stmts.insert(0, emit::add_stmt(s));
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
