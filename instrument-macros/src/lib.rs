//! `#[cabprof::profile]`: the instrumentation attribute of cabprof (method, call, Ball-Larus
//! path and memory-access instrumentation). Users reach it through the `cabprof` facade, which
//! re-exports [`macro@profile`]; its documentation (options, what it accepts, what it generates,
//! what it leaves alone) is on the attribute itself. The facade's `__private` module holds
//! everything the generated code calls.
//!
//! How one attribute becomes code:
//! 1. [`profile`] (here) hands the attribute's arguments to `attr`, which parses them into
//!    `Options`, pointing any error at the offending token;
//! 2. `expand` decides what the item is (fn, `impl`, trait, module, or a misuse) and rewrites
//!    each function body: the call site and frame guard, then, if asked, the passes below;
//! 3. `paths` (for `paths`) builds the body's control-flow graph, numbers its paths after
//!    Ball & Larus, "Efficient Path Profiling" (MICRO 1996), and emits the instrumented body and
//!    the tables to decode path numbers; `memory` (for `memory`) rewrites index expressions and
//!    derefs to record their addresses;
//! 4. `source` supplies the source lines and snippets that decoded paths are shown with.
//!
//! Modules:
//! - `attr`: the options, parsed with their spans.
//! - `expand`: what each item becomes.
//! - `paths`: path profiling, one phase per file (graph building, numbering, emission).
//! - `memory`: rewriting index expressions and derefs to record their addresses.
//! - `source`: source lines and snippets for decoded paths.

mod attr;
mod body;
mod expand;
mod memory;
mod paths;
mod source;

use proc_macro::TokenStream;

/// Instrument a function, or every function of an `impl` block, trait or inline module, for
/// cabprof.
///
/// ```ignore
/// #[cabprof::profile]                 // Call/Return events
/// fn parse(input: &str) -> Result<Ast, Error> { ... }
///
/// #[cabprof::profile(paths)]          // also Ball-Larus path numbers
/// fn classify(x: i32) -> &'static str { if x < 0 { "neg" } else { "non-neg" } }
///
/// #[cabprof::profile(memory)]         // also Mem events for a[i] and *p
/// fn sum(v: &[u64]) -> u64 { let mut s = 0; for i in 0..v.len() { s += v[i]; } s }
///
/// #[cabprof::profile]                 // every method (or, on a module, every fn)
/// impl Stack { ... }
/// ```
///
/// # Options
///
/// `paths`, `memory`, `max_paths = N` (with `paths`: split paths so that a function has at most
/// `N`; default 2^29), `skip` (inside a profiled `impl`, trait or module: leave this item alone),
/// `all` (on an `impl`, trait or module: instrument its small functions too, see below),
/// `crate = path` (where the `cabprof` crate is, if not at `::cabprof`).
///
/// # What it accepts
///
/// Free functions, methods, `impl` blocks, traits (default method bodies), inline modules
/// (recursively), generic, `async` and `unsafe` functions. It is a compile error on a
/// `const fn`, a trait method without a body, a closure, a module declared without its body
/// (`mod name;`), or with an unknown option; the item is still emitted, so that error is the
/// only one.
///
/// # What it generates
///
/// - `Call { caller, callee }` at entry and `Return { callee }` when its frame guard drops, so
///   early `return`, `?` and unwinding panics close the frame; the caller comes from a
///   thread-local shadow stack. The function's id is assigned by the runtime at its first call.
/// - `async fn`: the frame is the body's future, from its first poll to its completion (or to
///   being dropped unfinished); during each poll it is the innermost frame. The body runs in
///   an `async` block, which Rust gives no expected type: an `async fn` returning
///   `impl Trait` whose tail is a closure with untyped parameters
///   (`async fn f() -> impl Fn(&str) -> usize { |s| s.len() }`) fails to infer them (E0282);
///   write the parameter types (`|s: &str| s.len()`).
/// - With `paths`: `Path { method, path }` at every loop back edge and at exit, numbered after
///   Ball & Larus, "Efficient Path Profiling" (MICRO 1996). Control flow inside macro
///   invocations, closures and `async` blocks in the body is not numbered.
/// - With `memory`: `Mem { addr, size, store }` for every `a[i]` and `*p` in the body; accesses
///   inside macro arguments are not seen (record those with `cabprof::mem::load`/`store`).
///
/// Generated code refers to the runtime as `::cabprof::__private`, so the `cabprof` crate must
/// be a dependency under that name (importing the attribute under another name is fine). A
/// crate that depends on it under another name says so: `#[profile(crate = my_cabprof)]`
/// (or `crate = "my_cabprof"`, as serde spells it).
///
/// # Turning it off
///
/// Without the `cabprof` crate's `enabled` feature (on by default; `default-features = false`
/// turns it off) the attribute checks its options and where it is put, with the same errors as
/// when it instruments, and returns the item unchanged: the build is the one without the
/// attribute.
///
/// # What it leaves alone
///
/// On an `impl` block, trait or module, these items are skipped **without any warning**; they
/// produce no events and do not appear in the report:
///
/// - **`const fn`s.** A `const fn` may run at compile time, where there is no session to record
///   to, and the calls into the runtime that the attribute adds are not `const`, so an
///   instrumented `const fn` would not compile. It is left as it is. (Put directly on a
///   `const fn`, the attribute is a compile error instead.) To profile one, drop its `const`,
///   or call it from a profiled wrapper.
/// - **Functions and methods generated by a macro invocation** inside the block (such as
///   `impl Stack { my_getters!(len, cap); }`). An attribute sees the block's tokens before the
///   invocation is expanded, so the functions it will generate do not exist yet. To profile
///   them, put `#[cabprof::profile]` on the functions inside the macro's definition.
/// - **Small functions**, under plain `#[profile]` (no `paths`, `memory` or `all`): a body of
///   fewer than 48 tokens, not `async`, with no loop, no closure, no call of the function
///   itself and no macro call other than a check that only panics (`panic!`, `assert!`,
///   `debug_assert!`, `unreachable!`, ... or a closure made of one). These are the accessors
///   (`fn is_eof(&self) -> bool { self.pos >= self.src.len() }`) that the compiler inlines
///   into their callers' loops; instrumented, each call would pay a session check at entry and
///   exit even with no session running, more than the accessor itself costs. `#[profile]` on
///   the function, or `#[profile(all)]` on the block, instruments them; their callers'
///   counts and times include them either way.
/// - Trait methods without a default body (profile their implementations instead).
/// - Items that carry their own `#[profile(...)]`: that attribute decides (`#[profile(skip)]`
///   leaves the item alone).
#[proc_macro_attribute]
pub fn profile(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::entry(cfg!(feature = "enabled"), attr.into(), item.into()).into()
}
