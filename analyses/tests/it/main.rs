//! The analyses' integration tests, one binary: each file is a module (`cargo test -p
//! cabprof-analyses --test it -- call_graph::` runs one). None needs a process of its own:
//! they feed hand-built event streams to the analyses, with no session and no process-wide
//! state.

mod common;

mod allocations;
mod async_polls;
mod cache_sim_accounting;
mod cache_sim_cachegrind;
mod cache_sim_config;
mod cache_sim_inclusion;
mod cache_sim_reference;
mod cache_sim_replacement;
mod call_graph;
mod call_tree_profile;
mod calling_context_tree;
mod chunk_boundaries;
mod merge;
mod method_count;
mod path_profile;
mod reuse_distance;
mod reuse_distance_brute_force;
mod sampling_error;
