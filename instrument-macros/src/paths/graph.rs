//! The path graph of a function body: nodes are program points, edges are the choices made at
//! branches and the jumps between points.
//!
//! This module owns the data the three phases pass along: [`builder`](super::builder) fills a
//! [`Graph`] while walking the body, [`numbering`](super::numbering) gives its edges their
//! values, and [`emit`](super::emit) turns both into the tables the runtime decodes paths with.
//! Node [`ENTRY`] and node [`EXIT`] are fixed; the finished graph is acyclic (loop back edges
//! have been replaced by an edge to `EXIT` and an edge from `ENTRY`, see the builder).

use proc_macro2::Span;

/// The node every path starts from.
pub(super) const ENTRY: usize = 0;
/// The node every path ends at.
pub(super) const EXIT: usize = 1;

/// What a decoded step says (mirrors the runtime's `StepKind`, which the generated code names
/// as `::cabprof::__private::StepKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
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

/// One decodable choice: what an edge means in the source.
#[derive(Clone, Debug)]
pub(super) struct Step {
    /// Where the step is in the source; its line is the step's (`source::line_of`).
    pub(super) span: Span,
    pub(super) kind: Kind,
    pub(super) text: String,
}

/// A [`Step`], in the `Option` an [`Edge`] holds it in.
pub(super) fn step(span: Span, kind: Kind, text: impl Into<String>) -> Option<Step> {
    Some(Step {
        span,
        kind,
        text: text.into(),
    })
}

/// An edge of the graph.
#[derive(Clone, Debug)]
pub(super) struct Edge {
    pub(super) from: usize,
    pub(super) to: usize,
    /// Index into the generated constant array holding this edge's value, if code adds it.
    pub(super) site: Option<usize>,
    pub(super) step: Option<Step>,
}

/// The finished, acyclic graph of a body.
#[derive(Debug)]
pub(super) struct Graph {
    pub(super) nodes: usize,
    pub(super) edges: Vec<Edge>,
    /// How many sites (entries of the generated constant array) the instrumented body uses.
    pub(super) sites: usize,
    /// Statement boundary `i` is at node `candidates[i]`, or `None` if it cannot be split.
    pub(super) candidates: Vec<Option<usize>>,
}
