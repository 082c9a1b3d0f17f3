//! Source positions and snippets for decoded paths.
//!
//! The line of a path's step is the compiler's line of its first token ([`line_of`]).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};

/// The line of `at`, as a number the macro writes (generated code to lints). A `line!()`
/// spanned at the user's token would give the same number, but as a literal with that
/// token's span: clippy read it as the literal written there (a match arm's `0` became a
/// zero-prefixed literal). Outside a compiler run (the macro's unit tests) it is that
/// `line!()`.
pub(crate) fn line_of(at: Span) -> TokenStream {
    if proc_macro::is_available() {
        let line = u32::try_from(at.unwrap().line()).unwrap_or(u32::MAX);
        let line = proc_macro2::Literal::u32_unsuffixed(line);
        return quote!(#line);
    }
    quote_spanned!(at=> ::core::line!())
}

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
