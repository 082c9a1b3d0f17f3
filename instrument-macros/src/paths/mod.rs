//! Ball-Larus path profiling of a function body (`#[profile(paths)]`).
//!
//! Ball & Larus, "Efficient Path Profiling" (MICRO 1996): every acyclic path through a function
//! gets a distinct number in `0..num_paths`, computed at run time by adding constants along the
//! edges taken. Here the function is its body's structured control flow; loops are cut at their
//! back edges, so a path runs from the entry or a loop head to the exit or a back edge.
//!
//! Three phases, one module each, with the graph they share in [`graph`]:
//! - [`builder`]: walk the body, build its path graph and write the code that adds an edge's
//!   value at each place a choice is visible (values still to be known, as array indices);
//! - [`numbering`]: Ball & Larus's numbering of the acyclic graph, giving every edge its value
//!   (and [`split`]: where to cut paths when there are too many);
//! - [`emit`]: the code placed in the body and the constant items beside it: the edge values
//!   and the tables the runtime decodes paths with.
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

mod builder;
mod emit;
mod graph;
mod numbering;
mod split;
#[cfg(test)]
mod tests;

use builder::build;
use graph::ENTRY;
use proc_macro2::{Span, TokenStream};
use std::collections::HashSet;
use syn::Block;

/// What `#[profile(paths)]` adds beside the instrumented body.
#[derive(Debug)]
pub(crate) struct PathsOutput {
    /// `const __CABPROF_EDGES` and `static __CABPROF_PATHS`, to place in the function's block.
    pub(crate) items: TokenStream,
    /// `num_paths` (the unwound offset) for the guard.
    pub(crate) num_paths: u64,
    /// Whether events carry a hash of the register.
    pub(crate) hashed: bool,
}

/// Instrument `block` for path profiling with at most `limit` paths (before hashing).
///
/// The body is walked once without split points; if it has more than `limit` paths, split
/// points are chosen on that graph and the original body is walked again with them.
pub(crate) fn instrument(block: &mut Block, limit: u64) -> syn::Result<PathsOutput> {
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
    Ok(emit::output(&graph, &numbering, split, limit))
}
