//! A profiled function's new body.
//!
//! A profiled function keeps its signature and attributes. Most bodies become:
//!
//! ```text
//! {
//!     fn __cabprof_here() {}                      // its type name is the function's path
//!     static __CABPROF_SITE: Site = Site::new(..., module_path!(), file!(), line!(), None,
//!                                             ::cabprof::__private::first_event);  // see Site
//!     ::cabprof::__private::run(&__CABPROF_SITE,
//!         #[cfg_attr(not(debug_assertions), inline(always))] move || -> Ret { <statements> })
//! }
//! ```
//!
//! `run` checks for a session (one load, one branch) and calls the closure either bare or
//! inside a recorded frame out of line, so the compiler makes an idle copy of the body that
//! needs no guard; without debug assertions the closure is always inlined, so that the idle
//! copy is the body itself and not a call of it (see `as_closure` for the functions that keep
//! one body, and `__private::run` for why).
//! The closure's return type is the function's, which `?` in the body needs.
//!
//! The others (`paths`, `memory`, `unsafe fn`, `#[track_caller]`, `#[target_feature]`, `-> !`,
//! `-> impl Trait`) keep one body behind a guard:
//!
//! ```text
//! {
//!     fn __cabprof_here() {}
//!     static __CABPROF_SITE: Site = Site::new(..., paths, ::cabprof::__private::first_event);
//!     // with `paths`: const __CABPROF_EDGES: [u64; K] = [...]; static __CABPROF_PATHS: ...
//!     match ::cabprof::__private::enter(&__CABPROF_SITE) {   // enter_paths with `paths`
//!         ref mut __cabprof_frame => { <the original statements, instrumented for paths / memory> }
//!     }
//! }
//! ```
//!
//! The guard is a temporary of the function's tail, so it is dropped last, after the
//! temporaries of the body's own tail expression (see `function`). A function whose return type
//! mentions an `impl Trait` and that ends in a tail expression gets
//! `let __cabprof_frame = &mut enter(..); return { <statements> };` instead, so that the tail is
//! still checked against the return type (see `tail_needs_return`); the guard, an extended
//! temporary, is again dropped after the `return` statement's temporaries.
//!
//! An `async fn` keeps its signature too; its body becomes
//! `instrument::<Ret, _>(&__CABPROF_SITE, async move { <statements> }).await`, so the frame is
//! the inner future's lifetime (first poll to completion) and `return`/`?` in the body still
//! leave the body.

use crate::attr::Options;
use crate::{memory, paths};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::visit_mut::VisitMut;
use syn::{Attribute, Block, Expr, ReturnType, Signature, Stmt, Type};

/// What a return type mentions that decides the body's form.
#[derive(Default)]
struct Mentions {
    /// `impl Trait`: a closure's return type cannot name it, nor can a turbofish.
    impl_trait: bool,
    /// A macro (`-> my_iter!()`), whose expansion the attribute cannot see (it may be an
    /// `impl Trait`).
    macro_type: bool,
}

impl VisitMut for Mentions {
    fn visit_type_impl_trait_mut(&mut self, _: &mut syn::TypeImplTrait) {
        self.impl_trait = true;
    }
    fn visit_type_macro_mut(&mut self, _: &mut syn::TypeMacro) {
        self.macro_type = true;
    }
}

fn mentions(ty: &Type) -> Mentions {
    let mut m = Mentions::default();
    m.visit_type_mut(&mut ty.clone());
    m
}

/// Whether the body's value must be checked against the return type as a `return` operand,
/// not as a `match` arm: the return type mentions an `impl Trait` (in the body an inference
/// variable, which a `match` does not pass on to its arms, so a closure `|s| s.len()` returned
/// as `impl Fn(&str) -> usize` would lose its parameter types, E0282), and the body ends in a
/// tail expression that can be that value. Tails that diverge as written (a macro such as
/// `todo!()`, `return`, `loop`) keep the `match`: after them, the `return` would be unreachable
/// code, a warning in the user's crate.
fn tail_needs_return(sig: &Signature, block: &Block) -> bool {
    matches!(&sig.output, ReturnType::Type(_, ty) if mentions(ty).impl_trait)
        && matches!(
            block.stmts.last(),
            Some(Stmt::Expr(e, None)) if !matches!(
                e,
                Expr::Macro(_) | Expr::Return(_) | Expr::Loop(_) | Expr::Break(_) | Expr::Continue(_)
            )
        )
}

/// Whether the body becomes a closure run by `__private::run` (see the module docs): a plain
/// `#[profile]` (paths and memory instrument the body itself, so they keep one body), not
/// `async` (a future of its own), `unsafe` or variadic (the body's context would change),
/// `#[track_caller]` (a closure would be the caller `Location::caller` sees),
/// `#[target_feature]` (an `#[inline(always)]` closure does not inherit the function's target
/// features, so `asm!` on their registers would not compile and the recorded copy would lose
/// them), nor returning `!` (a function that never returns gains nothing from an idle copy),
/// an `impl Trait` (which a closure's return type cannot name) or a macro's type (which may
/// be one).
fn as_closure(opts: &Options, attrs: &[Attribute], sig: &Signature) -> bool {
    !opts.paths
        && !opts.memory
        && sig.asyncness.is_none()
        && sig.unsafety.is_none()
        && sig.variadic.is_none()
        && !has_attr(attrs, "track_caller")
        && !has_attr(attrs, "target_feature")
        && match &sig.output {
            ReturnType::Default => true,
            ReturnType::Type(_, ty) => {
                let m = mentions(ty);
                !matches!(**ty, Type::Never(_)) && !m.impl_trait && !m.macro_type
            }
        }
}

/// Whether `attrs` has `#[name...]`, or a `#[cfg_attr(...)]` that may add it.
fn has_attr(attrs: &[Attribute], name: &str) -> bool {
    fn names(tokens: TokenStream, name: &str) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == name,
            proc_macro2::TokenTree::Group(g) => names(g.stream(), name),
            _ => false,
        })
    }
    attrs.iter().any(|a| {
        a.path().is_ident(name)
            || (a.path().is_ident("cfg_attr") && names(a.meta.to_token_stream(), name))
    })
}

/// Instrument one function body in place.
pub(crate) fn function(
    opts: &Options,
    attrs: &[Attribute],
    sig: &mut Signature,
    block: &mut Block,
) -> syn::Result<()> {
    let is_async = sig.asyncness.is_some();
    let by_return = tail_needs_return(sig, block);
    let mut items = TokenStream::new();
    let mut paths_arg = quote!(::cabprof::__private::Option::None);
    let mut frame_args = None;
    if opts.paths {
        let out = paths::instrument(block, opts.path_limit())?;
        items = out.items;
        paths_arg = quote!(::cabprof::__private::Option::Some(&__CABPROF_PATHS));
        frame_args = Some((out.num_paths, out.hashed));
    }
    if opts.memory {
        memory::instrument(block);
    }
    // `line!()` spanned at the name: the line of the fn's name.
    let line = quote_spanned!(sig.ident.span()=> ::cabprof::__private::line!());
    let site = quote! {
        fn __cabprof_here() {}
        static __CABPROF_SITE: ::cabprof::__private::Site = ::cabprof::__private::Site::new(
            || ::cabprof::__private::type_name_of(&__cabprof_here),
            ::cabprof::__private::module_path!(),
            ::cabprof::__private::file!(),
            #line,
            #paths_arg,
            ::cabprof::__private::first_event,
        );
        #items
    };
    let stmts = std::mem::take(&mut block.stmts);
    let body = if as_closure(opts, attrs, sig) {
        // The return type is written out for the closure: a `?` in the body needs it, and the
        // closure given straight to `run` (which takes an `FnOnce`) may then return borrows of
        // what it captured, `&mut self.field` included.
        let ret = match &sig.output {
            ReturnType::Default => TokenStream::new(),
            ReturnType::Type(arrow, ty) => quote!(#arrow #ty),
        };
        let closure = user_closure(block, ret, &stmts);
        quote! {
            #site
            ::cabprof::__private::run(&__CABPROF_SITE, #closure)
        }
    } else if is_async {
        let ret = match &sig.output {
            ReturnType::Default => quote!(()),
            ReturnType::Type(_, ty) if mentions(ty).impl_trait => quote!(_),
            ReturnType::Type(_, ty) => ty.to_token_stream(),
        };
        let body = match frame_args {
            Some((n, hashed)) => user_match(
                block,
                quote!(::cabprof::__private::async_paths(&__CABPROF_SITE, #n, #hashed)),
                &stmts,
            ),
            None => quote!(#(#stmts)*),
        };
        quote! {
            #site
            ::cabprof::__private::instrument::<#ret, _>(&__CABPROF_SITE, async move { #body })
            .await
        }
    } else {
        guarded(sig, block, stmts, site, frame_args, by_return)?
    };
    // The user's braces stay: the fn item's span ends at its closing brace, and a
    // macro-generated brace there would make the whole item look expanded, so that lints on
    // the fn (`new_without_default`, `result_large_err`, ...) would skip it.
    block.stmts = syn::parse::Parser::parse2(Block::parse_within, body)?;
    Ok(())
}

/// The body of a function that keeps one body behind a guard (see the module docs).
fn guarded(
    sig: &Signature,
    block: &Block,
    stmts: Vec<Stmt>,
    site: TokenStream,
    frame_args: Option<(u64, bool)>,
    by_return: bool,
) -> syn::Result<TokenStream> {
    // The guard is the scrutinee of the body's `match`, not a `let`: a temporary of the
    // function's tail, it is dropped after everything the body makes, the temporaries of its
    // own tail expression included (which edition 2021 drops after the locals). A `let`
    // guard closed the frame first, and the profiler's exit ran while the tail still held,
    // say, a lock guard, and the drops that ran after it were attributed to the caller.
    // When the arm would lose the expected type (see `tail_needs_return`), the statements
    // are a `return` operand instead, checked like a tail: their temporaries belong to that
    // statement and are dropped before the locals, the guard (an extended temporary) last.
    let guard = match frame_args {
        Some((n, hashed)) => quote! {
            ::cabprof::__private::enter_paths(&__CABPROF_SITE, #n, #hashed)
        },
        None => quote!(::cabprof::__private::enter(&__CABPROF_SITE)),
    };
    // The body between the stamps, as `run_recorded` keeps the closure form's: the inputs
    // pass a barrier after the entry, the tail's value one before the exit.
    let mut stmts = stmts;
    settle_tail(sig, &mut stmts);
    let hold = hold_inputs(sig);
    if by_return {
        return Ok(quote! {
            #site
            let __cabprof_frame = &mut #guard;
            #hold
            return { #(#stmts)* };
        });
    }
    let stmts: Vec<Stmt> = match hold.is_empty() {
        true => stmts,
        false => std::iter::once(syn::parse2(hold)?).chain(stmts).collect(),
    };
    let wrapped = user_match(block, guard, &stmts);
    Ok(quote! {
        #site
        #wrapped
    })
}

/// `::cabprof::__private::hold(&(&a, &b, ..));` over the function's parameters (the names its
/// patterns bind, and `self`), or nothing when it binds none.
fn hold_inputs(sig: &Signature) -> TokenStream {
    struct Names(Vec<syn::Ident>);
    impl<'a> syn::visit::Visit<'a> for Names {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.clone());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut names = Names(Vec::new());
    let mut receiver = None;
    for input in &sig.inputs {
        match input {
            syn::FnArg::Receiver(r) => receiver = Some(r.self_token),
            syn::FnArg::Typed(t) => syn::visit::Visit::visit_pat(&mut names, &t.pat),
        }
    }
    let refs = receiver
        .map(|s| quote!(&#s))
        .into_iter()
        .chain(names.0.iter().map(|n| quote!(&#n)));
    let refs: Vec<TokenStream> = refs.collect();
    if refs.is_empty() {
        return TokenStream::new();
    }
    quote!(::cabprof::__private::hold(&(#(#refs,)*));)
}

/// Wrap the body's tail in `::cabprof::__private::settle::<Ret>(..)` where the return type can
/// be named and the tail is a value: not `()` (nothing to wait for), `!`, an `impl Trait` or a
/// macro's type, nor a tail that diverges as written. A tail that diverges through a call (a
/// function returning `!`) makes `settle` an unreachable call, which the generated
/// `#[allow(unreachable_code)]` keeps from becoming a warning in the user's crate (it also
/// covers the tail's own subexpressions). A `return` before the tail leaves without the
/// barrier.
fn settle_tail(sig: &Signature, stmts: &mut [Stmt]) {
    let ReturnType::Type(_, ty) = &sig.output else {
        return;
    };
    let m = mentions(ty);
    if matches!(**ty, Type::Never(_)) || m.impl_trait || m.macro_type {
        return;
    }
    if let Some(Stmt::Expr(e, None)) = stmts.last_mut() {
        if matches!(
            e,
            Expr::Macro(_) | Expr::Return(_) | Expr::Loop(_) | Expr::Break(_) | Expr::Continue(_)
        ) {
            return;
        }
        let tail = e.clone();
        *e = syn::parse_quote! {
            #[allow(unreachable_code)]
            ::cabprof::__private::settle::<#ty>(#tail)
        };
    }
}

/// `#[inline(always)] move || -> Ret { stmts }` (inline only without debug assertions),
/// spanned at the user's body as [`user_match`] spans its `match`: clippy skips a closure from
/// another expansion, and with it lints on the user's body (`needless_return`) and on the
/// tail's value flowing out (`needless_borrow`).
fn user_closure(block: &Block, ret: TokenStream, stmts: &[Stmt]) -> TokenStream {
    use proc_macro2::{Delimiter, Group};
    let at = block.brace_token.span.join();
    let mut body = Group::new(Delimiter::Brace, quote!(#(#stmts)*));
    body.set_span(at);
    // Not forced inline where debug assertions are on (a debug build): unoptimised, the
    // inlined body's frame would be both in the function and in `run_recorded`, about twice
    // the stack per recursion level under a session.
    let head = quote_spanned!(at=> #[cfg_attr(not(debug_assertions), inline(always))] move ||);
    quote!(#head #ret #body)
}

/// `match guard { ref mut __cabprof_frame => { stmts } }`, its `match`, arm and braces spanned
/// at the user's body (`block`'s braces), the guard and the binding's name at the call site.
///
/// Clippy decides much from the expressions around the user's: whether a `&x` at the tail is
/// needless depends on where its value goes, and the walk up to there gives up at a parent from
/// another expansion than the expression's. With the match and its arm in the user's context,
/// the tail's value flows out as it did in the plain body. The match itself is not linted as
/// the user's: clippy's `match` lints check that the source text at its span starts with
/// `match`, and the user's body starts with `{`.
fn user_match(block: &Block, guard: TokenStream, stmts: &[Stmt]) -> TokenStream {
    use proc_macro2::{Delimiter, Group};
    let at = block.brace_token.span.join();
    let mut arm = Group::new(Delimiter::Brace, quote!(#(#stmts)*));
    arm.set_span(at);
    let by_ref = quote_spanned!(at=> ref mut);
    let mut arms = Group::new(Delimiter::Brace, quote!(#by_ref __cabprof_frame => #arm));
    arms.set_span(at);
    let kw = quote_spanned!(at=> match);
    quote!(#kw #guard #arms)
}
