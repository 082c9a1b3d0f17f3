//! Phase 3: emitting the instrumented code.
//!
//! Two kinds of code come out of this module. Inside the body, at the sites the
//! [`builder`](super::builder) chose while walking it: `__cabprof_frame.add(V)` at the start of
//! a block, `branch(c, &mut *frame, T, F)` around a boolean operand, `try_branch(e, &mut *frame,
//! OK, ERR)` inside a `?`, and `frame.back_edge(END, RESTART)` at a back edge or split point.
//! Each `V`, `T`, `F`, ... is `__CABPROF_EDGES[k]`, a constant index into one array. Beside the
//! body, once the [`numbering`](super::numbering) is known: that `const __CABPROF_EDGES` array
//! with every site's edge value, and the `static __CABPROF_PATHS` (a `PathNumbering`) with the
//! graph's nodes, edges and steps, so that the runtime can decode a path number back into the
//! choices it stands for (left empty when events carry a hash of the register).

use super::graph::{Graph, Kind, Step, ENTRY};
use super::numbering::Numbering;
use super::PathsOutput;
use crate::source::line_of;
use proc_macro2::TokenStream;
use quote::quote;
use syn::{parse_quote, Block, Expr, Stmt};

/// The value of the edge at `site`: `__CABPROF_EDGES[site]`.
pub(super) fn edge_value(site: usize) -> Expr {
    let k = proc_macro2::Literal::usize_unsuffixed(site);
    parse_quote!(__CABPROF_EDGES[#k])
}

/// `__cabprof_frame.add(V);`, the statement that takes the edge at `site`.
pub(super) fn add_stmt(site: usize) -> Stmt {
    let v = edge_value(site);
    parse_quote!(__cabprof_frame.add(#v);)
}

/// A boolean operand `inner` that adds the value at `on_true` or at `on_false`.
pub(super) fn branch(inner: Expr, on_true: usize, on_false: usize) -> Expr {
    let (vt, vf) = (edge_value(on_true), edge_value(on_false));
    parse_quote!(::cabprof::__private::branch(#inner, &mut *__cabprof_frame, #vt, #vf))
}

/// The operand `inner` of a `?`, adding the value at `ok` or at `err` (the `?` stays outside).
pub(super) fn try_branch(inner: &Expr, ok: usize, err: usize) -> Expr {
    let (ok_v, err_v) = (edge_value(ok), edge_value(err));
    parse_quote!(::cabprof::__private::try_branch(
        #inner, &mut *__cabprof_frame, #ok_v, #err_v
    ))
}

/// The statement at a back edge (or split point): end the path with the value at `end`, start
/// the next one with the value at `restart`.
pub(super) fn back_edge(end: usize, restart: usize) -> Stmt {
    let (a, b) = (edge_value(end), edge_value(restart));
    parse_quote!(#[allow(unreachable_code)] __cabprof_frame.back_edge(#a, #b);)
}

/// Put `stmt` first in the block `e` (wrapping `e` in a block if it is not a plain one).
pub(super) fn prepend(e: &mut Expr, stmt: Stmt) {
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
pub(super) fn append(b: &mut Block, stmt: Stmt) {
    if let Some(Stmt::Expr(_, semi @ None)) = b.stmts.last_mut() {
        *semi = Some(Default::default());
    }
    b.stmts.push(stmt);
}

/// The items beside the body: the edge values of `graph`'s sites and its decoding tables.
/// `split` says whether the graph was built with split points; the numbering is hashed when it
/// still has more than `limit` paths.
pub(super) fn output(graph: &Graph, numbering: &Numbering, split: bool, limit: u64) -> PathsOutput {
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
            .map(|s| line_of(s.span));
        quote!(::cabprof::__private::PathMode::Split { lines: &[#(#lines),*] })
    } else {
        quote!(::cabprof::__private::PathMode::Exact)
    };
    let num_paths = u64::try_from(total).unwrap_or(u64::MAX);
    let (nodes, edges) = if hashed {
        (Vec::new(), Vec::new())
    } else {
        tables(graph, numbering)
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
    PathsOutput {
        items,
        num_paths,
        hashed,
    }
}

/// A step as a `PathStep` expression (or `None`).
fn step_tokens(s: &Option<Step>) -> TokenStream {
    let Some(s) = s else {
        return quote!(::cabprof::__private::Option::None);
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
    let (ln, text) = (line_of(s.span), &s.text);
    quote!(::cabprof::__private::Option::Some(::cabprof::__private::PathStep::new(#ln, #kind, #text)))
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
