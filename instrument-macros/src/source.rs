//! Source positions and snippets for decoded paths.
//!
//! The line of a path's step is the line of its first token ([`line_of`]).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};

/// The line of `at`: `line!()` spanned there, so that code written inside a
/// `macro_rules!` gets the line of the macro's use, in the file `file!()` names. Where `at`
/// is a number (a match arm's `0`), that `line!()` becomes a literal with the number's span,
/// which clippy takes for the literal written there (`zero_prefixed_literal` on `0`); there the
/// macro writes the line itself, from the compiler's span (Rust 1.88), as generated code. (Such
/// a step inside a `macro_rules!` defined in another file gets a line of that file.)
pub(crate) fn line_of(at: Span) -> TokenStream {
    let number = at
        .source_text()
        .is_some_and(|t| t.starts_with(|c: char| c.is_ascii_digit()));
    if number && proc_macro::is_available() {
        let line = u32::try_from(at.unwrap().line()).unwrap_or(u32::MAX);
        let line = proc_macro2::Literal::u32_unsuffixed(line);
        return quote!(#line);
    }
    quote_spanned!(at=> ::cabprof::__private::line!())
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
