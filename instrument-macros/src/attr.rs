//! Parsing `#[profile(...)]`'s options. Every error points at the offending token.

use syn::parse::{Parse, ParseStream};
use syn::{LitInt, LitStr, Token};

mod kw {
    syn::custom_keyword!(paths);
    syn::custom_keyword!(memory);
    syn::custom_keyword!(skip);
    syn::custom_keyword!(max_paths);
    syn::custom_keyword!(all);
}

/// The largest `num_paths` a function may have: completed paths are numbered `0..num_paths` and
/// a path cut short by a panic `num_paths..2 * num_paths`, and both must fit the 30-bit path
/// field of an event.
pub(crate) const PATH_LIMIT: u64 = 1 << 29;

/// What `#[profile(...)]` asked for.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// Ball-Larus path profiling of the body.
    pub(crate) paths: bool,
    /// `Mem` events for index expressions and explicit derefs.
    pub(crate) memory: bool,
    /// Leave this item alone (inside a profiled `impl` or module).
    pub(crate) skip: bool,
    /// On an `impl`, trait or module: instrument small functions too (see
    /// `expand::left_alone_as_small`).
    pub(crate) all: bool,
    /// Split paths so that the function has at most this many (default [`PATH_LIMIT`]).
    pub(crate) max_paths: Option<u64>,
    /// `crate = path`: the path the `cabprof` crate is reachable under, for crates that
    /// depend on it under another name (generated code says `::cabprof` otherwise).
    pub(crate) krate: Option<syn::Path>,
}

impl Options {
    /// The path budget in force.
    pub(crate) fn path_limit(&self) -> u64 {
        self.max_paths.unwrap_or(PATH_LIMIT)
    }
}

impl Parse for Options {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut opts = Options::default();
        let mut seen: Vec<&'static str> = Vec::new();
        let mut max_span = None;
        let mut once = |name: &'static str, span: proc_macro2::Span| {
            if seen.contains(&name) {
                return Err(syn::Error::new(span, format!("duplicate option `{name}`")));
            }
            seen.push(name);
            Ok(())
        };
        while !input.is_empty() {
            let look = input.lookahead1();
            if look.peek(kw::paths) {
                let k: kw::paths = input.parse()?;
                once("paths", k.span)?;
                opts.paths = true;
            } else if look.peek(kw::memory) {
                let k: kw::memory = input.parse()?;
                once("memory", k.span)?;
                opts.memory = true;
            } else if look.peek(kw::skip) {
                let k: kw::skip = input.parse()?;
                once("skip", k.span)?;
                opts.skip = true;
            } else if look.peek(kw::all) {
                let k: kw::all = input.parse()?;
                once("all", k.span)?;
                opts.all = true;
            } else if look.peek(kw::max_paths) {
                let k: kw::max_paths = input.parse()?;
                once("max_paths", k.span)?;
                max_span = Some(k.span);
                input.parse::<Token![=]>()?;
                let n: LitInt = input.parse()?;
                let v: u64 = n.base10_parse()?;
                if !(1..=PATH_LIMIT).contains(&v) {
                    return Err(syn::Error::new(
                        n.span(),
                        format!("`max_paths` must be in 1..={PATH_LIMIT}"),
                    ));
                }
                opts.max_paths = Some(v);
            } else if look.peek(Token![crate]) {
                let k: Token![crate] = input.parse()?;
                once("crate", k.span)?;
                input.parse::<Token![=]>()?;
                // A path, or a path in a string as serde's `crate = "..."` takes it.
                let path = if input.peek(LitStr) {
                    input.parse::<LitStr>()?.parse::<syn::Path>()?
                } else {
                    input.call(syn::Path::parse_mod_style)?
                };
                opts.krate = Some(path);
            } else if input.peek(syn::Ident) {
                let id: syn::Ident = input.parse()?;
                return Err(syn::Error::new(
                    id.span(),
                    format!(
                        "unknown option `{id}`; expected `paths`, `memory`, `max_paths = N`, \
                         `all`, `crate = path` or `skip`"
                    ),
                ));
            } else {
                return Err(look.error());
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        if let (Some(span), false) = (max_span, opts.paths) {
            return Err(syn::Error::new(span, "`max_paths` needs `paths`"));
        }
        Ok(opts)
    }
}
