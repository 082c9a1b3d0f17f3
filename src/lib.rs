//! cabprof: concurrent dynamic analysis for Rust, built on CAB (Cache-friendly Asymmetric
//! Buffering, Ha, Arnold, Blackburn and McKinley, OOPSLA 2009).
//!
//! Mark hot functions with [`#[profile]`](profile) (`#[profile(paths)]` for Ball-Larus path
//! profiling, `#[profile(memory)]` for cache simulation), start a [`Session`], run, and read the
//! [`Report`]. Each instrumented thread writes one 64-bit word per event into its own lock-free
//! ring; analyzer threads on other cores run the analyses, exhaustively (nothing lost) or by
//! sampling (the application never blocks). Every analysis also runs sequentially, inline, so
//! the two can be compared.
//!
//! With the attribute alone, `CABPROF=1` profiles a run (a program, or a test binary under
//! `cargo test`) and writes `target/cabprof/<binary>.json` and `.txt` when it exits; the
//! README's *Getting started* says more. In code:
//!
//! ```no_run
//! #[cabprof::profile]
//! fn fib(n: u64) -> u64 {
//!     if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
//! }
//!
//! let session = cabprof::Session::builder().start().unwrap();
//! fib(20);
//! let report = session.finish();
//! print!("{}", report.text(10));
//! ```
//!
//! What a program names, all at the root but the modules below:
//! - [`profile`], the attribute; [`flush_thread`].
//! - [`Session`], [`SessionBuilder`] and [`Snapshotter`]: start, snapshot, finish.
//! - [`test_profile`] and `CABPROF=1`: the process-wide session, which profiles a program or
//!   a test binary without code, and per-test reports within it (`src/process/`).
//! - [`Report`] and [`ReportData`]: what a session produces; [`report`] holds the types of its
//!   fields and the renderings ([`report::Format`] lists them; SVG and pprof are behind
//!   features).
//! - Settings and errors: [`Analysis`] (the analyses a session can run, each declared once in
//!   `src/analysis/`), [`RunMode`], [`BufferDesign`], [`LevelConfig`] and [`Policy`] (the
//!   simulated caches), [`RuntimeConfig`], [`SETTINGS`] (every `CABPROF_*` variable),
//!   [`ConfigError`], [`SessionError`].
//! - [`alloc`]: [`alloc::Tracked`], the global allocator wrapper behind the allocation
//!   analysis.
//! - [`mem`]: explicit memory-access events for what `#[profile(memory)]` cannot see.
//! - `serve` (feature `serve`): live profiles over HTTP from a running program.
//!
//! The ring, the generic runtime and the analyses are crates of their own, `cabprof-cab` and
//! `cabprof-analyses`: a program that drives a ring or runs an analysis of its own by hand
//! depends on them. `tests/public-api/cabprof.txt` lists every public item of this crate.
//!
//! Without the default `enabled` feature only [`profile`], [`flush_thread`], [`mem`] and
//! [`alloc::Tracked`] exist, inert: see *Cargo features*.
//!
//! # Cargo features
//!
//! - `enabled` (default): `#[profile]` instruments, and the runtime is built: sessions,
//!   [`test_profile`], reports. Without it (`default-features =
//!   false`) the crate holds only what production code names, inert: [`profile`] returns the
//!   item unchanged, [`flush_thread`] and [`mem`]'s functions do nothing, and
//!   [`alloc::Tracked`] forwards to its inner allocator. A build then compiles the attribute
//!   (with proc-macro2, quote and syn) and no other crate. To instrument the tests of a crate
//!   whose builds leave cabprof out, turn `enabled` on in its dev-dependency (cargo's feature
//!   resolver 2, the default from edition 2021, keeps it out of `cargo build`):
//!
//!   ```toml
//!   [dependencies]
//!   cabprof = { version = "0.1", default-features = false }
//!
//!   [dev-dependencies]
//!   cabprof = { version = "0.1", features = ["enabled"] }
//!   ```
//!
//!   `cargo test` (and `CABPROF=1 cargo test`) then instruments the crate and its tests can
//!   call [`test_profile`], while `cargo build --release` compiles it out. A program that
//!   starts sessions itself puts that code behind a feature of its own, `profile =
//!   ["cabprof/enabled"]`, with `#[cfg(feature = "profile")]`.
//! - `sync` (turned on by `enabled`): `cabprof::sync`'s locks and channels, which record
//!   where the time waits; `crossbeam` and `tokio` add its wrappers of crossbeam-channel's and
//!   `tokio::sync::mpsc`'s channels (`sync::crossbeam`, `sync::tokio_mpsc`). Without
//!   `enabled`, these are the wrapped crates' own types.
//! - `flamegraph`: `report.svg()` and `report.svg_by(..)`, flame graphs drawn by inferno.
//!   Turns on `enabled`, as `pprof` and `serve` do.
//! - `pprof`: `report.pprof()` and the other [`ReportData`] `pprof` methods (prost, flate2).
//! - `serve`: live profiles over HTTP from a running program (`CABPROF_SERVE`,
//!   `SessionBuilder::serve`): pprof windows, Prometheus metrics (prometheus-client), a
//!   flame-graph page; see the `serve` module. Turns on `flamegraph` and `pprof`.
//!
//! The `cabprof` command-line tool is its own package, `cabprof-cli` (`cargo install --path cli`).

// Compiled out, the crate is the attribute and the inert `flush_thread`, `mem` and
// `alloc::Tracked` that production code names; the docs keep their text, whose links to the
// runtime's items have no target in that build.
#![cfg_attr(not(feature = "enabled"), allow(rustdoc::broken_intra_doc_links))]

pub use cabprof_instrument_macros::profile;

pub mod alloc;
pub mod mem;
#[cfg(feature = "sync")]
pub mod sync;

/// Hand the calling thread's buffered events to the analyzers now. Call it before a thread
/// blocks for long (a worker waiting for its next request) so that what it did so far is in
/// the next snapshot, served window or scrape. Exhaustive mode's snapshots read a partly
/// filled chunk anyway; in sampling mode the analyzer takes only published chunks, and an
/// idle thread's tail waits for this or for its chunk to fill. Cheap; a thread with no
/// events does nothing. Compiled out (without `enabled`) it does nothing.
#[inline]
pub fn flush_thread() {
    #[cfg(feature = "enabled")]
    cabprof_cab::runtime::flush_current_thread();
}

// The runtime and what reads it: built with `enabled` only. Every public name is listed here
// by name (tests/public_api.rs checks the list against tests/public-api/cabprof.txt); the
// inner crates are dependencies, not re-exports: a program that drives a ring or the generic
// runtime by hand depends on `cabprof-cab` itself.
#[cfg(feature = "enabled")]
mod analysis;
#[cfg(feature = "enabled")]
mod model;
#[cfg(feature = "enabled")]
mod names;
#[cfg(feature = "enabled")]
mod process;
#[cfg(feature = "enabled")]
pub mod report;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "enabled")]
mod session;
#[cfg(feature = "enabled")]
mod settings;
// Memory traces, read and written: the `cabprof` command-line tool's, not a public API.
#[cfg(feature = "enabled")]
#[doc(hidden)]
pub mod trace;

// Sessions: what a program that profiles itself writes.
#[cfg(feature = "enabled")]
pub use process::{test_profile, TestProfile};
#[cfg(feature = "enabled")]
pub use session::{Session, SessionBuilder, Snapshotter};
// What they produce.
#[cfg(feature = "enabled")]
pub use report::{Report, ReportData};
// Settings and errors: the builder's arguments, the `CABPROF_*` variables, what fails.
#[cfg(feature = "enabled")]
pub use analysis::{Analysis, TimelineTrigger};
#[cfg(feature = "enabled")]
pub use cabprof_analyses::{LevelConfig, Policy};
#[cfg(feature = "enabled")]
pub use cabprof_cab::runtime::{BufferDesign, RunMode, RuntimeConfig, SessionError};
#[cfg(feature = "enabled")]
pub use cabprof_cab::ConfigError;
#[cfg(feature = "enabled")]
pub use settings::{Setting, SETTINGS};

// The analyses as the runtime runs them, for the lab's probes and the facade's tests, which
// drive `cabprof_cab::runtime::Session` with them. Not a public API.
#[cfg(feature = "enabled")]
#[doc(hidden)]
pub use analysis::{AnalysisPlan, AnalysisSet, CallTrees};

/// Support for the code `#[profile]` generates. Not a public API: it may change at any time.
#[cfg(feature = "enabled")]
#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;

/// The starter the code `#[profile]` generates gives every function's `Site`: the process's
/// first instrumented event runs it to decide whether the `CABPROF=1` session starts. Handed
/// over by the generated code, so that `__private`, which every event runs through, has no
/// path to the process-wide session. Not a public API.
#[cfg(feature = "enabled")]
#[doc(hidden)]
pub fn __first_event() -> bool {
    process::decide()
}
