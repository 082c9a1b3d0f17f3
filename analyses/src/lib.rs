//! cabprof's analyses: plain, single-threaded consumers of CAB event words.
//!
//! Contract, shared by every analysis here (each implements [`EventAnalysis`]):
//! - [`EventAnalysis::consume`] takes any slice of raw ring words, decodes each with
//!   [`cabprof_cab::event::decode`] and skips the kinds it does not use (and words that are not events at
//!   all). Results never depend on where the stream is cut: consuming `a` then `b` equals
//!   consuming `a ++ b`, because the ring hands over chunks of any size.
//! - One instance per stream. An analyzer thread serving several rings keeps one instance per
//!   ring, so per-thread state (a shadow stack, a simulated cache) lives in the instance; when a
//!   ring multiplexes threads, `Thread { id }` words switch the per-thread state.
//! - At the end the instances are combined with [`EventAnalysis::merge`], which combines *results*
//!   (counts, trees, histograms) and drops the other instance's in-flight state.
//! - The same code runs inline in the application thread (sequential mode) or on an analyzer
//!   thread (concurrent mode); nothing here spawns, blocks or synchronises.
//! - Sampled streams (sampling mode) are accepted: stack-based analyses resynchronise instead of
//!   panicking and say so (`is_approximate`); [`sampling`] measures the error of a sampled
//!   profile the way the CAB paper does.
//!
//! ```
//! use cabprof_analyses::{EventAnalysis, CallGraph, CallingContextTree, MethodCount};
//! use cabprof_cab::event::{Event, MethodId};
//!
//! let main = MethodId::new(1).unwrap();
//! let work = MethodId::new(2).unwrap();
//! let words: Vec<u64> = [
//!     Event::call(MethodId::ROOT, main),
//!     Event::call(main, work),
//!     Event::ret(work),
//!     Event::call(main, work),
//!     Event::ret(work),
//!     Event::ret(main),
//! ]
//! .iter()
//! .map(|e| e.word())
//! .collect();
//!
//! let mut counts = MethodCount::new();
//! let mut graph = CallGraph::new();
//! let mut tree = CallingContextTree::new();
//! for chunk in words.chunks(4) {
//!     counts.consume(chunk);
//!     graph.consume(chunk);
//!     tree.consume(chunk);
//! }
//! assert_eq!(counts.count(work), 2);
//! assert_eq!(graph.count(main, work), 2);
//! let names = |m: MethodId| ["root", "main", "work"][m.get() as usize].to_string();
//! assert_eq!(tree.folded(&names), "root;main 1\nroot;main;work 2\n");
//! ```
//!
//! Modules (types re-exported here):
//! - [`method_count`]: calls per method.
//! - [`call_graph`]: caller → callee edge counts.
//! - [`call_tree`]: depth-two call-tree patterns and the full calling context tree.
//! - [`path_profile`]: counts per Ball-Larus path, with a [`PathDecoder`] hook for reports.
//! - [`cache_sim`]: multi-level inclusive set-associative cache simulation, FIFO or LRU.
//! - [`reuse_distance`]: LRU stack distances; exact miss counts for every fully-associative size.
//! - [`allocations`]: heap allocations per function and calling context (`Alloc`/`Dealloc`/
//!   `Realloc` words from an allocation-tracking global allocator).
//! - [`sampling`]: the CAB paper's sampling error rate.
//! - [`time_profile`]: inclusive and exclusive time per function, edge and calling context.
//! - [`waits`]: lock waits and holds, blocked channel operations, per context and site.

#![forbid(unsafe_code)]

pub mod allocations;
pub mod cache_sim;
pub mod call_graph;
pub mod call_tree;
mod frame_tracker;
pub mod method_count;
pub mod path_profile;
pub mod reuse_distance;
pub mod sampling;
mod thread_stacks;
pub mod time_profile;
pub mod timeline;
pub mod waits;

pub use allocations::{
    AllocContext, AllocCounts, Allocations, ContextAllocs, FunctionAllocs, LiveCounts,
    MAX_LIVE_BLOCKS,
};
pub use cabprof_cab::event::MethodId;
pub use cache_sim::{
    CacheConfigError, CacheSim, Counting, LevelConfig, LevelStats, MissCounts, Policy,
};
pub use call_graph::CallGraph;
pub use call_tree::{CallTreeProfile, CallingContextTree};
pub use method_count::MethodCount;
pub use path_profile::{HotPath, PathDecoder, PathProfile};
pub use reuse_distance::{ReuseBin, ReuseConfigError, ReuseDistance};
pub use time_profile::{Calibrations, Compensation, TimeContext, TimeProfile};
pub use timeline::{Slice, ThreadTimeline, Timeline};
pub use waits::{
    ChannelLatency, Delay, WaitBuckets, WaitContext, WaitCounts, Waits, WAIT_BUCKETS_NS,
};

/// The trait every analysis here implements; defined in `cabprof_cab`, where the runtime
/// that runs it lives, so that both crates name the same trait.
pub use cabprof_cab::EventAnalysis;
