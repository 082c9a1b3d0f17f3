//! `#[cabprof::profile]`: the instrumentation attribute of cabprof (method, call, Ball-Larus
//! path and memory-access instrumentation). Re-exported by the `cabprof` facade, whose
//! `__private` module holds everything the generated code calls.
//!
//! ```ignore
//! #[cabprof::profile]                 // Call/Return events
//! fn parse(input: &str) -> Result<Ast, Error> { ... }
//!
//! #[cabprof::profile(paths)]          // also Ball-Larus path numbers
//! fn classify(x: i32) -> &'static str { if x < 0 { "neg" } else { "non-neg" } }
//!
//! #[cabprof::profile(memory)]         // also Mem events for a[i] and *p
//! fn sum(v: &[u64]) -> u64 { let mut s = 0; for i in 0..v.len() { s += v[i]; } s }
//!
//! #[cabprof::profile]                 // every method (or, on a module, every fn)
//! impl Stack { ... }
//! ```
//!
//! Options: `paths`, `memory`, `max_paths = N` (split paths so a function has at most `N`;
//! default 2^29), `skip` (inside a profiled `impl` or module: leave this item alone).
//!
//! The attribute works on free functions, methods, `impl` blocks, traits (default method
//! bodies), inline modules, generic, `async` and `unsafe` functions. It is a compile error on a
//! `const fn`, a trait method without a body, a closure, or with an unknown option; the item is
//! still emitted, so that error is the only one.
//!
//! What a profiled function emits:
//! - `Call { caller, callee }` at entry and `Return { callee }` when its frame guard drops, so
//!   early `return`, `?` and unwinding panics close the frame; the caller comes from a
//!   thread-local shadow stack. Its id is assigned by the runtime at its first call.
//! - `async fn`: the frame is the body's future, from its first poll to its completion (or to
//!   being dropped unfinished); during each poll it is the innermost frame.
//! - With `paths`: `Path { method, path }` at every loop back edge and at exit (see `paths` for
//!   the numbering and its limits).
//! - With `memory`: `Mem { addr, size, store }` for every `a[i]` and `*p` (see `memory`).
//!
//! Generated code refers to the runtime as `::cabprof::__private`, so the `cabprof` crate must
//! be a dependency under that name (importing the attribute under another name is fine).
//!
//! Modules:
//! - `attr`: the options, parsed with their spans.
//! - `expand`: what each item becomes.
//! - `paths`: the control-flow graph of a body and its Ball-Larus numbering.
//! - `memory`: rewriting index expressions and derefs to record their addresses.
//! - `source`: source lines and snippets for decoded paths.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod attr;
mod expand;
mod memory;
mod paths;
mod source;

use proc_macro::TokenStream;

/// Instrument a function (or every function of an `impl` block, trait or inline module) for
/// cabprof. See the crate documentation for the options and for what is generated.
#[proc_macro_attribute]
pub fn profile(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item2 = proc_macro2::TokenStream::from(item);
    let opts = match syn::parse::<attr::Options>(attr) {
        Ok(o) => o,
        Err(e) => {
            let err = e.to_compile_error();
            return quote::quote!(#err #item2).into();
        }
    };
    expand::expand(opts, item2).into()
}
