//! Source positions and snippets for decoded paths.
//!
//! Lines are not computed here: the generated code writes `::core::line!()` with the span of the
//! token it describes, which the compiler turns into that token's line on any Rust version.

use proc_macro2::Span;
use quote::ToTokens;

/// The span of the first token of `node` (where a step "is" in the source).
pub(crate) fn first_span(node: &impl ToTokens) -> Span {
    node.to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}

/// A short, one-line rendering of `node` for labels (`x > 0`, `Some(v)`).
pub(crate) fn snippet(node: &impl ToTokens) -> String {
    const MAX: usize = 48;
    let mut s = node.to_token_stream().to_string();
    for (from, to) in [
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        (" [", "["),
        ("[ ", "["),
        (" ]", "]"),
        (" ,", ","),
        (" .", "."),
        (". ", "."),
        (" ::", "::"),
        (":: ", "::"),
        ("& ", "&"),
        ("! (", "!("),
        (" ?", "?"),
        ("  ", " "),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    if s.chars().count() > MAX {
        s = s.chars().take(MAX - 1).collect::<String>() + "…";
    }
    s
}
