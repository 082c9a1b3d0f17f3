//! The checks' integration tests but the trybuild one (`compiletest.rs`, its own binary as
//! trybuild expects), one binary: each file is a module (`cargo test -p cabprof-checks --test
//! it -- trace_parser::` runs one). Only `time_fidelity` runs a session, a single test.

mod time_fidelity;
mod trace_parser;
mod user_lints;
