//! The facade's integration tests, one binary: each file is a module (`cargo test -p cabprof
//! --test it -- time::` runs one). Every test that starts a session or runs instrumented code
//! holds `support::serial()` meanwhile: one session per process, and a session counts the
//! calls of every thread. The tests that need a process of their own (a global allocator
//! whose counters are process-wide, the `CABPROF=1` session, `test_profile`, the kept rings,
//! no test harness) are the other files of `tests/`, each saying why at its top.

mod analysis_names;
mod async_tasks;
mod async_wall;
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    clippy::all
)]
pub mod compile_pass;
mod examples;
mod modes_agree;
mod path_loop_heads;
mod pools_and_runtimes;
mod profile_async;
mod profile_calls;
mod profile_early_exit;
mod profile_formats;
mod profile_items;
mod profile_memory;
mod profile_paths;
mod profile_paths_exits;
mod report_json;
mod report_reads_right;
mod sampling_error;
#[cfg(feature = "serve")]
mod serve_clients;
mod session_inside_profiled;
mod time;
mod time_compensation;
mod time_long;
mod timeline;
mod timeline_recorder;
mod waits;
#[cfg(feature = "crossbeam")]
mod waits_crossbeam;
#[cfg(feature = "tokio")]
mod waits_tokio;
mod xray_recovers_simulator;

#[cfg(feature = "pprof")]
#[path = "../go_pprof/mod.rs"]
mod go_pprof;
#[cfg(feature = "serve")]
#[path = "../serve_support/mod.rs"]
mod serve_support;
#[path = "../support/mod.rs"]
mod support;
