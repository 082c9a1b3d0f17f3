//! The evaluation's workload suite: seven realistic Rust programs chosen to span the event rates
//! of the CAB paper's benchmarks (Ha et al., OOPSLA 2009, §6), each with a fixed-seed input
//! generator, a size knob ([`Size`]) and a checksum result.
//!
//! # The workloads
//!
//! | name | program (at [`Size::Full`]) | `profile` | `profile(paths)` | `profile(memory)` | threads |
//! |---|---|---|---|---|---|
//! | `interp` | tree-walking interpreter: lexer, recursive-descent parser, evaluator; 5 000 `eval` items | parser fns, `eval`, `call` | `next_token`, `binop` | | 1 |
//! | `vm` | stack bytecode VM running a generated program, 12 000 outer iterations | compiler fns, `arith` | `execute` (the dispatch loop) | | 1 |
//! | `sort` | merge sort and quicksort of 1.2 M `u64` | `merge_sort`, `quick_sort` | `median_of_three` | `merge`, `partition`, `insertion_sort` | 1 |
//! | `text` | word and bigram counts, inverted index, AND queries over 3 000 documents | `index_doc`, `intern`, `count_bigram`, `post`, `query`, `top_words` | `next_word`, `intersect` | | 1 |
//! | `matrix` | `f64` matrix multiply 448², naive and blocked | `blocked` | | `naive`, `tile` | 1 |
//! | `lz77` | LZ77 (hash chains) of a 12 MB log, and back | `compress`, `insert`, `match_len`, `literal`, `copy` | `longest_match`, `decompress` | | 1 |
//! | `pool` | worker pool: 2 000 jobs (generate, heap sort, histogram, digest) | `worker`, `take`, `process`, `fill`, `heap_sort`, `sift_down`, `digest`, `submit` | `histogram` | | 1 + 3 workers |
//!
//! Their event rates span five orders of magnitude, from the matrix kernels' handful of calls to
//! the interpreters' hundreds of millions of calls or paths per second and the kernels' billions
//! of memory accesses; `cargo run --profile eval -p cabprof-workloads --example rates` measures them.
//!
//! # Twins (and variants)
//!
//! Every workload is compiled several times from one copy of its source, into modules that
//! differ only in their attributes:
//!
//! | module | attributes | events | for the analyses |
//! |---|---|---|---|
//! | `plain` | none | none | the uninstrumented baseline `A` |
//! | `instrumented` | `profile`, `profile(paths)`, `profile(memory)` as marked | all | everything at once |
//! | `calls` | `profile` on every marked fn | Call/Return | method count, call graph, call tree |
//! | `paths` | as marked, but `memory` → `profile` | Call/Return, Path | path profiling |
//! | `memory` | as marked, but `paths` → `profile` | Call/Return, Mem | cache simulation, reuse distance |
//!
//! The paper's clients each insert only their own instrumentation (call-graph profiling emits
//! no memory events); the variants ([`Variant`]) reproduce that, so a call-graph figure does not
//! carry the sorting kernels' memory accesses. [`Variant::for_analysis`] picks the one to run.
//!
//! All of them live in the same binary, so a ratio can be measured in one process run. The
//! source of each workload is the body of a `macro_rules!` macro taking one attribute list per
//! instrumentation class, and `twins!` expands it once per variant:
//!
//! ```text
//! macro_rules! code {
//!     (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
//!         $(#[$call])?
//!         fn eval(...) { ... }
//!     };
//! }
//! twins!(code);   // pub mod instrumented { code!(call: [cabprof::profile], ...); }
//!                 // pub mod plain        { code!(call: [], paths: [], memory: []); }
//!                 // pub mod calls, paths, memory { ... }
//! ```
//!
//! (A module-level `#[cabprof::profile] mod instrumented { include!("src.rs"); }` does not
//! work: an attribute macro sees its item before inner macros are expanded, so it would see
//! only the `include!` call and instrument nothing.)
//!
//! Input generation lives outside the macros: it is shared, uninstrumented and cheap next to
//! the work. Every variant of a workload returns the same checksum for the same [`Size`], with
//! or without a session running.
//!
//! ```no_run
//! for w in cabprof_workloads::all() {
//!     let a = (w.run_plain)(cabprof_workloads::Size::Smoke);
//!     let b = (w.run_instrumented)(cabprof_workloads::Size::Smoke);
//!     assert_eq!(a, b, "{}", w.name);
//! }
//! ```

pub mod evaluate;
pub mod rng;

use cabprof::Analysis;

/// Expand a workload's source macro `$code` once per [`Variant`]: `pub mod plain` without
/// attributes, `pub mod instrumented` with all of them, `calls`, `paths` and `memory` with one
/// kind each (on top of `profile`).
macro_rules! twins {
    ($code:ident) => {
        /// This workload with `#[cabprof::profile]` attributes on its hot functions: calls,
        /// paths and memory accesses.
        pub mod instrumented {
            $code!(
                call: [cabprof::profile],
                paths: [cabprof::profile(paths)],
                memory: [cabprof::profile(memory)]
            );
        }
        /// The same source with no attribute: the uninstrumented baseline.
        pub mod plain {
            $code!(call: [], paths: [], memory: []);
        }
        /// Call/Return events only (plain `#[profile]` on every marked function).
        pub mod calls {
            $code!(
                call: [cabprof::profile],
                paths: [cabprof::profile],
                memory: [cabprof::profile]
            );
        }
        /// Call/Return and Ball-Larus path events (no memory events).
        pub mod paths {
            $code!(
                call: [cabprof::profile],
                paths: [cabprof::profile(paths)],
                memory: [cabprof::profile]
            );
        }
        /// Call/Return and memory events (no path events).
        pub mod memory {
            $code!(
                call: [cabprof::profile],
                paths: [cabprof::profile],
                memory: [cabprof::profile(memory)]
            );
        }
    };
}

pub mod interp;
pub mod lz77;
pub mod matrix;
pub mod pool;
pub mod sort;
pub mod text;
pub mod vm;

/// How much work a run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// For tests and CI: well under 50 ms uninstrumented (release).
    Smoke,
    /// About a tenth of [`Full`](Size::Full).
    Small,
    /// For measurements: roughly 0.3–1 s uninstrumented in release on this machine.
    Full,
}

impl Size {
    /// Every size, smallest first.
    pub const ALL: [Size; 3] = [Size::Smoke, Size::Small, Size::Full];

    /// `smoke`, `small` or `full` (case-insensitive).
    pub fn parse(s: &str) -> Option<Size> {
        match s.trim().to_ascii_lowercase().as_str() {
            "smoke" => Some(Size::Smoke),
            "small" => Some(Size::Small),
            "full" => Some(Size::Full),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Size::Smoke => "smoke",
            Size::Small => "small",
            Size::Full => "full",
        }
    }

    /// Pick the value for this size.
    pub(crate) fn pick<T>(self, smoke: T, small: T, full: T) -> T {
        match self {
            Size::Smoke => smoke,
            Size::Small => small,
            Size::Full => full,
        }
    }
}

/// Which build of a workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// No instrumentation: the baseline `A`.
    Plain,
    /// Every attribute: Call/Return, Path and Mem events.
    Instrumented,
    /// Call/Return events only.
    Calls,
    /// Call/Return and Path events.
    Paths,
    /// Call/Return and Mem events.
    Memory,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 5] = [
        Variant::Plain,
        Variant::Instrumented,
        Variant::Calls,
        Variant::Paths,
        Variant::Memory,
    ];

    /// The variant that emits what `analysis` reads and nothing more (the paper's per-client
    /// instrumentation).
    pub fn for_analysis(analysis: Analysis) -> Variant {
        match analysis {
            Analysis::MethodCount
            | Analysis::CallGraph
            | Analysis::CallTree
            | Analysis::Time
            | Analysis::Timeline => Variant::Calls,
            // Allocation words come from the global allocator; the calls place them.
            Analysis::Allocations => Variant::Calls,
            // Wait words come from `cabprof::sync`'s wrappers (the workloads take no lock);
            // the calls place them.
            Analysis::Waits => Variant::Calls,
            Analysis::Paths => Variant::Paths,
            Analysis::Cache | Analysis::ReuseDistance => Variant::Memory,
        }
    }

    /// The module name (`plain`, `instrumented`, `calls`, `paths`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Instrumented => "instrumented",
            Variant::Calls => "calls",
            Variant::Paths => "paths",
            Variant::Memory => "memory",
        }
    }

    /// Parse a [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::str::FromStr for Size {
    type Err = String;

    /// [`Size::parse`], with an error that says what is accepted (for argument parsers).
    fn from_str(s: &str) -> Result<Size, String> {
        Size::parse(s).ok_or_else(|| format!("{s:?} is not a size: expected smoke, small or full"))
    }
}

/// What sort of program a workload is: the behaviour it brings to the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Recursive, call-heavy: a tree-walking interpreter.
    CallHeavy,
    /// A bytecode interpreter: branch-heavy, path-profiling stress.
    Interpreter,
    /// Merge sort and quicksort: recursive, memory.
    Sorting,
    /// Hash-table-heavy text indexing.
    HashTable,
    /// Dense matrix multiply, naive and blocked: memory stress.
    Matrix,
    /// LZ77 compression and decompression.
    Compressor,
    /// A worker pool: several application threads, each with its own ring.
    MultiThreaded,
}

/// One program of the suite.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Short name (`interp`, `vm`, `sort`, `text`, `matrix`, `lz77`, `pool`).
    pub name: &'static str,
    /// One line on what it does.
    pub description: &'static str,
    /// What sort of program it is.
    pub kind: Kind,
    /// Has `#[profile(paths)]` functions (Ball-Larus path events).
    pub paths: bool,
    /// Has `#[profile(memory)]` functions (memory access events: cache simulation).
    pub memory: bool,
    /// Application threads that emit events (the calling thread included).
    pub threads: usize,
    /// Run the instrumented twin; returns the checksum.
    pub run_instrumented: fn(Size) -> u64,
    /// Run the uninstrumented twin; returns the same checksum.
    pub run_plain: fn(Size) -> u64,
    /// Run the Call/Return-only variant.
    pub run_calls: fn(Size) -> u64,
    /// Run the Call/Return + Path variant (the same as `run_calls` without `paths`).
    pub run_paths: fn(Size) -> u64,
    /// Run the Call/Return + Mem variant (the same as `run_calls` without `memory`).
    pub run_memory: fn(Size) -> u64,
}

impl Workload {
    /// Run one twin: instrumented (every attribute) or plain.
    pub fn run(&self, instrumented: bool, size: Size) -> u64 {
        self.run_variant(
            if instrumented {
                Variant::Instrumented
            } else {
                Variant::Plain
            },
            size,
        )
    }

    /// Run one variant.
    pub fn run_variant(&self, variant: Variant, size: Size) -> u64 {
        self.variant(variant)(size)
    }

    /// The entry point of one variant.
    pub fn variant(&self, variant: Variant) -> fn(Size) -> u64 {
        match variant {
            Variant::Plain => self.run_plain,
            Variant::Instrumented => self.run_instrumented,
            Variant::Calls => self.run_calls,
            Variant::Paths => self.run_paths,
            Variant::Memory => self.run_memory,
        }
    }
}

/// The [`Workload`] entry of module `$m`.
macro_rules! workload {
    ($m:ident { $($field:ident: $value:expr),* $(,)? }) => {
        Workload {
            $($field: $value,)*
            run_instrumented: $m::instrumented::run,
            run_plain: $m::plain::run,
            run_calls: $m::calls::run,
            run_paths: $m::paths::run,
            run_memory: $m::memory::run,
        }
    };
}

/// The suite, in a fixed order.
pub fn all() -> Vec<Workload> {
    vec![
        workload!(interp {
            name: "interp",
            description: "tree-walking interpreter: lexer, recursive-descent parser, evaluator",
            kind: Kind::CallHeavy,
            paths: true,
            memory: false,
            threads: 1,
        }),
        workload!(vm {
            name: "vm",
            description: "stack bytecode VM running a generated program with loops and branches",
            kind: Kind::Interpreter,
            paths: true,
            memory: false,
            threads: 1,
        }),
        workload!(sort {
            name: "sort",
            description: "merge sort and quicksort of fixed-seed u64 arrays",
            kind: Kind::Sorting,
            paths: true,
            memory: true,
            threads: 1,
        }),
        workload!(text {
            name: "text",
            description: "text indexer: word and bigram counts, inverted index, queries (HashMap)",
            kind: Kind::HashTable,
            paths: true,
            memory: false,
            threads: 1,
        }),
        workload!(matrix {
            name: "matrix",
            description: "dense f64 matrix multiply, naive and blocked",
            kind: Kind::Matrix,
            paths: false,
            memory: true,
            threads: 1,
        }),
        workload!(lz77 {
            name: "lz77",
            description: "LZ77 compressor (hash chains) and decompressor, round trip",
            kind: Kind::Compressor,
            paths: true,
            memory: false,
            threads: 1,
        }),
        workload!(pool {
            name: "pool",
            description:
                "worker pool: 3 threads take jobs (generate, sort, histogram, hash) from a queue",
            kind: Kind::MultiThreaded,
            paths: true,
            memory: false,
            threads: 1 + pool::WORKERS,
        }),
    ]
}

/// The workload called `name`.
pub fn by_name(name: &str) -> Option<Workload> {
    all().into_iter().find(|w| w.name == name)
}
