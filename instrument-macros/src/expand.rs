//! Expanding the attribute: parsing its options, finding the functions of the item it is on
//! (directly, or inside an `impl`, trait or inline module, where small functions are left
//! alone), and handing each to [`body::function`](crate::body::function), which writes its new
//! body. A profiled function keeps its signature and attributes.
//!
//! On a misuse, the original item is emitted unchanged next to a `compile_error!` pointing at
//! the offending tokens, so the user sees one error.

use crate::attr::Options;
use crate::source::first_span;
use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::visit_mut::VisitMut;
use syn::{Attribute, Block, Expr, ImplItem, Item, Signature, TraitItem};

/// The attribute: parse `attr`, then instrument `item`, or (not `enabled`) hand it back
/// unchanged. A misuse of the attribute is the same error next to the unchanged item, enabled
/// or not: a bad option, or the attribute on something it cannot instrument. Compiled out,
/// only where it is put is checked (the item's kind), not its functions' bodies, so a
/// production build pays one parse of the item and none of the instrumenting work.
pub(crate) fn entry(enabled: bool, attr: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse2::<Options>(attr) {
        Ok(opts) if opts.skip => item,
        Ok(opts) => match expand_item(&opts, item.clone(), enabled) {
            Ok(out) if enabled => match &opts.krate {
                Some(krate) => retarget(out, krate),
                None => out,
            },
            Ok(_) => item,
            Err(misuse) => misuse,
        },
        Err(e) => with_error(e, item),
    }
}

/// `crate = path`: the generated code's `::cabprof::__private` becomes `path::__private`.
/// Only generated code names `__private` (it is hidden and not a public API), so the user's
/// own tokens are left as they are.
fn retarget(tokens: TokenStream, krate: &syn::Path) -> TokenStream {
    use proc_macro2::{Group, TokenTree};
    let tts: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = TokenStream::new();
    let mut i = 0;
    while i < tts.len() {
        let is_colon = |t: &TokenTree| matches!(t, TokenTree::Punct(p) if p.as_char() == ':');
        let is_ident = |t: &TokenTree, name: &str| matches!(t, TokenTree::Ident(id) if id == name);
        if i + 5 < tts.len()
            && is_colon(&tts[i])
            && is_colon(&tts[i + 1])
            && is_ident(&tts[i + 2], "cabprof")
            && is_colon(&tts[i + 3])
            && is_colon(&tts[i + 4])
            && is_ident(&tts[i + 5], "__private")
        {
            krate.to_tokens(&mut out);
            i += 3;
            continue;
        }
        match &tts[i] {
            TokenTree::Group(g) => {
                let mut inner = Group::new(g.delimiter(), retarget(g.stream(), krate));
                inner.set_span(g.span());
                out.extend([TokenTree::Group(inner)]);
            }
            t => out.extend([t.clone()]),
        }
        i += 1;
    }
    out
}

/// The instrumented item (`instrument`; otherwise the item as parsed, its kind checked), or,
/// on a misuse, the unchanged item with the error.
fn expand_item(
    opts: &Options,
    item: TokenStream,
    instrument: bool,
) -> Result<TokenStream, TokenStream> {
    match syn::parse2::<Item>(item.clone()) {
        Ok(mut parsed) => {
            let mut errors = Vec::new();
            if let Err(e) = top_item(opts, &mut parsed, &mut errors, instrument) {
                return Err(with_error(e, item));
            }
            match errors.into_iter().reduce(|mut a, b| {
                a.combine(b);
                a
            }) {
                Some(e) => Err(with_error(e, item)),
                None => Ok(parsed.into_token_stream()),
            }
        }
        Err(parse_error) => {
            let e = misuse(&item).unwrap_or(parse_error);
            if syn::parse2::<Expr>(item.clone()).is_ok() {
                // In expression position the output must stay one expression.
                let err = e.to_compile_error();
                Err(quote!({ #err #item }))
            } else {
                Err(with_error(e, item))
            }
        }
    }
}

fn with_error(e: syn::Error, item: TokenStream) -> TokenStream {
    let err = e.to_compile_error();
    quote!(#err #item)
}

const WHAT: &str = "#[cabprof::profile] goes on a fn, an impl block, a trait or an inline module";

/// Explain input that is not an item.
fn misuse(item: &TokenStream) -> Option<syn::Error> {
    if let Ok(f) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
        if f.default.is_none() {
            return Some(syn::Error::new_spanned(
                &f.sig,
                "#[cabprof::profile] needs a function body: put it on the implementations of \
                 this trait method (or give it a default body)",
            ));
        }
    }
    let mut e = syn::parse2::<Expr>(item.clone()).ok()?;
    // The compiler may hand an expression over wrapped in an invisible group.
    while let Expr::Group(g) = e {
        e = *g.expr;
    }
    match e {
        Expr::Closure(c) => Some(closure_error(&c)),
        _ => None,
    }
}

fn closure_error(c: &syn::ExprClosure) -> syn::Error {
    syn::Error::new_spanned(
        c,
        "#[cabprof::profile] cannot instrument a closure: move its body into a fn and profile \
         that fn",
    )
}

/// `#[profile]` directly on an item: check where it is put, then, if `instrument`, instrument
/// the item's functions. The misuses are all found by the checks here; instrumenting adds only
/// errors of the attribute's own (internal ones).
fn top_item(
    opts: &Options,
    item: &mut Item,
    errors: &mut Vec<syn::Error>,
    instrument: bool,
) -> syn::Result<()> {
    match item {
        Item::Fn(f) => {
            if let Some(c) = &f.sig.constness {
                return Err(syn::Error::new_spanned(
                    c,
                    "#[cabprof::profile] cannot instrument a `const fn`: it may run at compile \
                     time, where there is no session to record to",
                ));
            }
            if !instrument {
                return Ok(());
            }
            crate::body::function(opts, &f.attrs, &mut f.sig, &mut f.block)
        }
        Item::Const(syn::ItemConst { expr, .. }) | Item::Static(syn::ItemStatic { expr, .. }) => {
            match &**expr {
                Expr::Closure(c) => Err(closure_error(c)),
                _ => Err(syn::Error::new_spanned(&*expr, WHAT)),
            }
        }
        Item::Mod(m) if m.content.is_none() => Err(syn::Error::new_spanned(
            &m.ident,
            "#[cabprof::profile] needs the module's items: use it on an inline `mod name { ... }`",
        )),
        Item::Impl(_) | Item::Mod(_) | Item::Trait(_) => {
            if instrument {
                nested_item(opts, item, errors);
            }
            Ok(())
        }
        // A fn without a body (in a trait) parses as a verbatim item.
        Item::Verbatim(tokens) => {
            Err(misuse(tokens).unwrap_or_else(|| syn::Error::new(first_span(tokens), WHAT)))
        }
        other => Err(syn::Error::new(first_span(other), WHAT)),
    }
}

/// An item inside a profiled `impl`, trait or module. Functions that cannot be instrumented
/// (`const fn`, methods without a body), small ones (see [`left_alone_as_small`]) and items
/// with their own `#[profile]` are left alone.
fn nested_item(opts: &Options, item: &mut Item, errors: &mut Vec<syn::Error>) {
    match item {
        Item::Fn(f)
            if f.sig.constness.is_none()
                && !has_profile(&f.attrs)
                && !left_alone_as_small(opts, &f.sig, &f.block) =>
        {
            collect(
                crate::body::function(opts, &f.attrs, &mut f.sig, &mut f.block),
                errors,
            );
        }
        Item::Impl(i) if !has_profile(&i.attrs) => {
            for it in &mut i.items {
                if let ImplItem::Fn(f) = it {
                    if f.sig.constness.is_none()
                        && !has_profile(&f.attrs)
                        && !left_alone_as_small(opts, &f.sig, &f.block)
                    {
                        collect(
                            crate::body::function(opts, &f.attrs, &mut f.sig, &mut f.block),
                            errors,
                        );
                    }
                }
            }
        }
        Item::Trait(t) if !has_profile(&t.attrs) => {
            for it in &mut t.items {
                if let TraitItem::Fn(f) = it {
                    let instrument = match &f.default {
                        Some(block) => {
                            f.sig.constness.is_none()
                                && !has_profile(&f.attrs)
                                && !left_alone_as_small(opts, &f.sig, block)
                        }
                        None => false,
                    };
                    if let (true, Some(block)) = (instrument, &mut f.default) {
                        collect(
                            crate::body::function(opts, &f.attrs, &mut f.sig, block),
                            errors,
                        );
                    }
                }
            }
        }
        Item::Mod(m) if !has_profile(&m.attrs) => {
            if let Some((_, items)) = &mut m.content {
                for it in items {
                    nested_item(opts, it, errors);
                }
            }
        }
        _ => {}
    }
}

/// Bodies of fewer tokens than this, without a loop or a macro call, are "small" (see
/// [`left_alone_as_small`]). An accessor such as `fn is_eof(&self) -> bool { self.pos >=
/// self.src.len() }` has 10 (`>=` is two, delimiters are none); in regex-syntax's parser,
/// `char`, `peek`, `offset` and `is_eof` are below the limit, `bump` (which moves the
/// position, line and column) and `bump_space` (a loop) are not.
pub(crate) const SMALL_TOKENS: usize = 48;

/// Whether a function met inside a profiled `impl`, trait or module is left alone because it
/// is small: no `all` option, plain `#[profile]` (with `paths` or `memory` every function
/// counts: an accessor's loads are the cache simulator's input), not `async`, a body of fewer
/// than [`SMALL_TOKENS`] tokens that does no work beyond an accessor's (see [`does_work`]:
/// no loop, closure, recursion or macro call but the checks that only panic). Such functions are the accessors that the
/// compiler inlines into their callers; instrumented, each call would pay a session check at
/// entry and exit, in the caller's inner loops, however cheap the check (a parser of small
/// accessors ran several times slower with no session running; `cargo bench -p
/// cabprof-checks --bench idle_cost`). `#[profile]` on the function itself, or `#[profile(all)]` on the
/// block, instruments them.
fn left_alone_as_small(opts: &Options, sig: &Signature, block: &Block) -> bool {
    !opts.all
        && !opts.paths
        && !opts.memory
        && sig.asyncness.is_none()
        && token_count(block.to_token_stream()) < SMALL_TOKENS
        && !does_work(block, &sig.ident)
}

/// Leaf tokens in `tokens`, groups' delimiters not counted.
fn token_count(tokens: TokenStream) -> usize {
    tokens
        .into_iter()
        .map(|t| match t {
            proc_macro2::TokenTree::Group(g) => token_count(g.stream()),
            _ => 1,
        })
        .sum()
}

/// Macros that only check or give up (`panic!`, `assert!`, ...): on the path an accessor
/// normally takes they do nothing, so they do not make a body more than an accessor.
const CHECKS: [&str; 10] = [
    "panic",
    "unreachable",
    "todo",
    "unimplemented",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
];

/// Whether `block` does more than an accessor: it holds a `loop`, `while` or `for`, a macro
/// call other than [`CHECKS`], a closure (an iterator chain such as `.map(|x| ..).sum()`
/// loops) other than one that only runs a check (`unwrap_or_else(|| panic!(..))`), or a call
/// of `name` (recursion), anywhere in it.
fn does_work(block: &Block, name: &syn::Ident) -> bool {
    fn is_check(m: &syn::Macro) -> bool {
        m.path
            .segments
            .last()
            .is_some_and(|s| CHECKS.iter().any(|c| s.ident == c))
    }
    struct Find<'a> {
        name: &'a syn::Ident,
        found: bool,
    }
    impl VisitMut for Find<'_> {
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            match e {
                Expr::Loop(_) | Expr::While(_) | Expr::ForLoop(_) => self.found = true,
                Expr::Macro(m) if !is_check(&m.mac) => self.found = true,
                Expr::Closure(c) if !matches!(&*c.body, Expr::Macro(m) if is_check(&m.mac)) => {
                    self.found = true
                }
                Expr::MethodCall(m) if m.method == *self.name => self.found = true,
                Expr::Call(c)
                    if matches!(&*c.func, Expr::Path(p)
                        if p.path.segments.last().is_some_and(|s| s.ident == *self.name)) =>
                {
                    self.found = true
                }
                _ => syn::visit_mut::visit_expr_mut(self, e),
            }
        }
        fn visit_stmt_macro_mut(&mut self, m: &mut syn::StmtMacro) {
            if !is_check(&m.mac) {
                self.found = true;
            }
        }
    }
    let mut f = Find { name, found: false };
    f.visit_block_mut(&mut block.clone());
    f.found
}

fn collect(r: syn::Result<()>, errors: &mut Vec<syn::Error>) {
    if let Err(e) = r {
        errors.push(e);
    }
}

/// Carries its own `#[profile]` (or `#[cabprof::profile]`), which will expand by itself.
fn has_profile(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "profile")
    })
}

#[cfg(test)]
mod tests {
    use super::entry;
    use quote::{quote, ToTokens};

    /// Not `enabled`: the output is the input, token for token.
    #[test]
    fn disabled_expansion_is_the_item_unchanged() {
        let items = [
            quote! { #[inline] pub fn f(x: u32) -> u32 { if x > 1 { x } else { 0 } } },
            quote! { impl S { fn a(&self) {} const fn b() {} async fn c() -> u8 { 1 } } },
            quote! { mod m { pub fn g<T: Clone>(t: &T) -> T { for _ in 0..1 {} t.clone() } } },
        ];
        for attr in [
            quote!(),
            quote!(paths, memory),
            quote!(crate = other::cabprof),
        ] {
            for item in &items {
                let out = entry(false, attr.clone(), item.clone());
                assert_eq!(out.to_string(), item.to_string(), "#[profile({attr})]");
                // The same item does change when enabled, so the comparison can fail.
                let on = entry(true, attr.clone(), item.clone());
                assert_ne!(on.to_string(), item.to_string(), "#[profile({attr})]");
            }
        }
        // A bad option is still an error.
        let out = entry(false, quote!(pathz), items[0].clone());
        assert!(out.to_string().contains("compile_error"), "{out}");
    }

    /// A misuse is the same error compiled out as instrumenting (the compile-fail cases of
    /// `compile-tests` check the messages and spans in a real build): otherwise a crate would
    /// build with profiling off and fail the first time someone turns it on.
    #[test]
    fn a_misuse_is_the_same_error_compiled_out() {
        let cases = [
            (quote!(), quote! { const fn c() -> u8 { 1 } }),
            (quote!(), quote! { struct S; }),
            (quote!(), quote! { static F: fn(u8) -> u8 = |x| x + 1; }),
            (quote!(), quote! { |x: u8| x + 1 }),
            (quote!(), quote! { fn no_body(&self); }),
            (quote!(), quote! { mod file_module; }),
            (quote!(max_paths = 8), quote! { fn f() {} }),
            (quote!(paths, paths), quote! { fn f() {} }),
        ];
        for (attr, item) in cases {
            let on = entry(true, attr.clone(), item.clone()).to_string();
            let off = entry(false, attr.clone(), item.clone()).to_string();
            assert!(
                on.contains("compile_error"),
                "#[profile({attr})] {item}: {on}"
            );
            assert_eq!(off, on, "#[profile({attr})] {item}");
        }
    }

    /// Inside a profiled block, small bodies without loops or macro calls are left alone,
    /// unless `all`, `paths` or `memory` is asked for, or the fn is `async`.
    #[test]
    fn small_functions_in_a_block_are_left_alone() {
        use super::{left_alone_as_small, token_count, SMALL_TOKENS};
        use crate::attr::Options;
        let f = |tokens: proc_macro2::TokenStream| syn::parse2::<syn::ItemFn>(tokens).unwrap();
        let is_eof = f(quote! { fn is_eof(&self) -> bool { self.pos >= self.src.len() } });
        assert_eq!(token_count(quote! { self.pos >= self.src.len() }), 10);
        let plain = Options::default();
        assert!(left_alone_as_small(&plain, &is_eof.sig, &is_eof.block));
        for opts in ["all", "paths", "memory"] {
            let o: Options = syn::parse_str(opts).unwrap();
            assert!(
                !left_alone_as_small(&o, &is_eof.sig, &is_eof.block),
                "{opts}"
            );
        }
        let asynch = f(quote! { async fn get(&self) -> u8 { self.0 } });
        assert!(!left_alone_as_small(&plain, &asynch.sig, &asynch.block));
        let looped =
            f(quote! { fn skip(&mut self) { while self.peek() == b' ' { self.bump(); } } });
        assert!(!left_alone_as_small(&plain, &looped.sig, &looped.block));
        let macroed = f(quote! { fn greet(&self) -> String { format!("hi {}", self.0) } });
        assert!(!left_alone_as_small(&plain, &macroed.sig, &macroed.block));
        // Checks that only panic do not count: regex-syntax's `char_at`.
        let checked = f(quote! {
            fn char_at(&self, i: usize) -> char {
                debug_assert!(i <= self.pattern().len());
                self.pattern()[i..]
                    .chars()
                    .next()
                    .unwrap_or_else(|| panic!("expected char at offset {i}"))
            }
        });
        assert!(left_alone_as_small(&plain, &checked.sig, &checked.block));
        // An iterator chain's closure loops; recursion repeats.
        let chain = f(quote! { fn total(&self) -> u64 { self.v.iter().map(|x| x * 2).sum() } });
        assert!(!left_alone_as_small(&plain, &chain.sig, &chain.block));
        let rec =
            f(quote! { fn fib(n: u64) -> u64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } } });
        assert!(!left_alone_as_small(&plain, &rec.sig, &rec.block));
        let rec =
            f(quote! { fn len(&self) -> usize { self.tail.as_ref().map_or(0, |t| t.len()) + 1 } });
        assert!(!left_alone_as_small(&plain, &rec.sig, &rec.block));
        let stmt_macro = f(quote! { fn log(&self) { eprintln!("{}", self.0); } });
        assert!(!left_alone_as_small(
            &plain,
            &stmt_macro.sig,
            &stmt_macro.block
        ));
        // One token short of the limit is small; at the limit it is not.
        let body = |n: usize| {
            let adds = std::iter::repeat_n(quote!(+ 1), (n - 1) / 2);
            f(quote! { fn sum() -> u32 { 1 #(#adds)* } })
        };
        let under = body(SMALL_TOKENS - 1);
        assert_eq!(token_count(under.block.to_token_stream()), SMALL_TOKENS - 1);
        assert!(left_alone_as_small(&plain, &under.sig, &under.block));
        // `-1 + 1 + ... + 1`: the leading minus makes an even count reachable.
        let adds = std::iter::repeat_n(quote!(+ 1), (SMALL_TOKENS - 2) / 2);
        let at = f(quote! { fn sum() -> i32 { -1 #(#adds)* } });
        assert_eq!(token_count(at.block.to_token_stream()), SMALL_TOKENS);
        assert!(!left_alone_as_small(&plain, &at.sig, &at.block));
    }

    /// The closure form for plain functions; one body behind a guard where a closure would
    /// change what the function is or means. One case per form, as a table.
    #[test]
    fn the_closure_form_where_it_keeps_the_function() {
        use proc_macro2::TokenStream;
        let form = |attr: TokenStream, item: TokenStream| {
            let out = entry(true, attr, item).to_string();
            match (
                out.contains("__private :: run"),
                out.contains("__private :: enter"),
            ) {
                (true, false) => "closure",
                (false, true) => "guard",
                _ => panic!("one form: {out}"),
            }
        };
        let plain = || TokenStream::new();
        assert_eq!(
            form(
                plain(),
                quote!(
                    fn f(x: &mut Vec<u8>) -> Option<&mut u8> {
                        x.iter_mut().next()
                    }
                )
            ),
            "closure"
        );
        assert_eq!(
            form(
                plain(),
                quote!(
                    fn f() {
                        g()
                    }
                )
            ),
            "closure"
        );
        assert_eq!(
            form(
                plain(),
                quote!(
                    unsafe fn f() -> u8 {
                        0
                    }
                )
            ),
            "guard"
        );
        assert_eq!(
            form(
                plain(),
                quote!(
                    #[track_caller]
                    fn f() -> u8 {
                        0
                    }
                )
            ),
            "guard"
        );
        assert_eq!(
            form(
                plain(),
                quote!(
                    fn f() -> ! {
                        loop {}
                    }
                )
            ),
            "guard"
        );
        assert_eq!(
            form(
                plain(),
                quote!(
                    fn f() -> Box<impl Fn()> {
                        Box::new(|| ())
                    }
                )
            ),
            "guard"
        );
        assert_eq!(
            form(
                plain(),
                quote!(
                    fn f() -> iter_of!(u8) {
                        [0].into_iter()
                    }
                )
            ),
            "guard"
        );
        assert_eq!(
            form(
                quote!(paths),
                quote!(
                    fn f(x: u8) -> u8 {
                        if x > 1 {
                            1
                        } else {
                            2
                        }
                    }
                )
            ),
            "guard"
        );
        assert_eq!(
            form(
                quote!(memory),
                quote!(
                    fn f(v: &[u8]) -> u8 {
                        v[0]
                    }
                )
            ),
            "guard"
        );
        assert!(entry(
            true,
            plain(),
            quote!(
                async fn f() -> u8 {
                    0
                }
            )
        )
        .to_string()
        .contains("__private :: instrument"));
    }

    /// `crate = path` sends every generated call to that path, and nothing else changes.
    #[test]
    fn crate_option_retargets_generated_paths_only() {
        let item = quote! { fn f(v: &[u8]) -> u8 { ::cabprof::mem::load(&v[0]); v[0] } };
        let out = entry(true, quote!(crate = renamed), item).to_string();
        assert!(!out.contains(":: cabprof :: __private"), "{out}");
        assert!(out.contains("renamed :: __private :: run"), "{out}");
        assert!(out.contains(":: cabprof :: mem :: load"), "{out}");
        let string_form = entry(
            true,
            quote!(crate = "renamed"),
            quote!(
                fn g() {}
            ),
        )
        .to_string();
        assert!(
            string_form.contains("renamed :: __private :: run"),
            "{string_form}"
        );
    }
}
