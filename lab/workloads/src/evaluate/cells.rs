//! What is measured: the ring constants, the buffer designs, and the *cells* (one
//! configuration each) that make up every figure, in the order they run.

use super::Options;
use crate::{Variant, Workload};
use cabprof::{Analysis, BufferDesign};
use std::collections::HashSet;

/// The ring of every experiment but Figure 10: the paper's default, 2 MB of 128 KB chunks
/// (powers of two, as FastForward and N-way buffering need).
pub const BUFFER_BYTES: usize = 2 << 20;
/// See [`BUFFER_BYTES`].
pub const CHUNK_BYTES: usize = 128 << 10;
/// Figure 10's fixed chunk: small enough for the 16 KB ring to hold the runtime's minimum of
/// four chunks.
pub const FIG10_CHUNK_BYTES: usize = 4 << 10;
/// Figure 10's buffer sizes: 16 KB to 32 MB.
pub const FIG10_BUFFERS: [usize; 12] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
    32 << 20,
];
/// Figure 11's sampling rates.
pub const RATES: [f64; 7] = [0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0];
/// The cost model records at most this many event words per variant (512 MB) and scales the
/// replay time of the recorded prefix up to the whole stream beyond that.
pub const RECORD_CAP_WORDS: usize = 1 << 26;

/// One cell's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cfg {
    /// The uninstrumented twin, no session: `A`.
    Plain,
    /// `RunMode::InstrumentOnly`: each event appended to the thread's sequential-mode buffer,
    /// which is emptied unread.
    Instrument(Variant),
    /// `RunMode::EnqueueOnly`: events into a ring nobody reads.
    Enqueue(Variant),
    /// A concurrent session with no analysis: the analyzer dequeues and clears.
    Communication(Variant),
    /// Exhaustive concurrent analysis.
    Concurrent {
        /// The workload variant run.
        variant: Variant,
        /// The analysis.
        analysis: Analysis,
        /// The buffer design.
        design: BufferDesign,
        /// Ring bytes per thread.
        buffer: usize,
        /// Chunk bytes.
        chunk: usize,
        /// Application and analyzer both unpinned.
        unpinned: bool,
    },
    /// Sequential (inline) analysis.
    Sequential(Variant, Analysis),
    /// Sampling at `basis_points / 10 000`.
    Sampling {
        /// The workload variant run.
        variant: Variant,
        /// The analysis.
        analysis: Analysis,
        /// The sampling rate in 1/10 000.
        basis_points: u32,
    },
    /// Replay of the recorded event stream through the analysis, one thread: `P`.
    Replay(Variant, Analysis),
}

impl Cfg {
    /// The default concurrent cell of `analysis`.
    pub fn concurrent(analysis: Analysis) -> Cfg {
        Cfg::Concurrent {
            variant: Variant::for_analysis(analysis),
            analysis,
            design: BufferDesign::Cab,
            buffer: BUFFER_BYTES,
            chunk: CHUNK_BYTES,
            unpinned: false,
        }
    }

    /// The sequential cell of `analysis`.
    pub fn sequential(analysis: Analysis) -> Cfg {
        Cfg::Sequential(Variant::for_analysis(analysis), analysis)
    }

    pub(crate) fn keeps_report(&self) -> bool {
        matches!(
            self,
            Cfg::Concurrent { .. } | Cfg::Sequential(..) | Cfg::Sampling { .. }
        )
    }
}

/// The analyses of Figure 8 that `w` has events for: method count, call graph and call tree
/// always, path profiling with path events, cache simulation with memory events.
pub fn fig8_analyses(w: &Workload) -> Vec<Analysis> {
    let mut v = vec![
        Analysis::MethodCount,
        Analysis::CallGraph,
        Analysis::CallTree,
    ];
    if w.paths {
        v.push(Analysis::Paths);
    }
    if w.memory {
        v.push(Analysis::Cache);
    }
    v
}

/// The streams of Figure 7: call graph always, paths where the workload has path events.
pub fn fig7_analyses(w: &Workload) -> Vec<Analysis> {
    let mut v = vec![Analysis::CallGraph];
    if w.paths {
        v.push(Analysis::Paths);
    }
    v
}

/// The analysis of Figure 10 / perturbation: path profiling (the paper's choice), or cache
/// simulation for a workload without path events but with memory events, else call graph.
pub fn fig10_analysis(w: &Workload) -> Analysis {
    if w.paths {
        Analysis::Paths
    } else if w.memory {
        Analysis::Cache
    } else {
        Analysis::CallGraph
    }
}

/// Figure 11's analyses (the paper's): call graph, and paths where the workload has them.
pub fn fig11_analyses(w: &Workload) -> Vec<Analysis> {
    fig7_analyses(w)
}

pub(crate) fn basis_points(rate: f64) -> u32 {
    (rate * 10_000.0).round() as u32
}

/// Every cell of workload `w`, in run order.
pub fn cells(w: &Workload, o: &Options) -> Vec<Cfg> {
    let mut v = vec![Cfg::Plain];
    let f8 = fig8_analyses(w);
    let mut variants: Vec<Variant> = Vec::new();
    for a in &f8 {
        let var = Variant::for_analysis(*a);
        if !variants.contains(&var) {
            variants.push(var);
        }
    }
    for &var in &variants {
        v.push(Cfg::Instrument(var));
        v.push(Cfg::Enqueue(var));
        v.push(Cfg::Communication(var));
    }
    for &a in &f8 {
        v.push(Cfg::concurrent(a));
        v.push(Cfg::sequential(a));
        v.push(Cfg::Replay(Variant::for_analysis(a), a));
    }
    for a in fig7_analyses(w) {
        for design in BufferDesign::ALL {
            v.push(
                ConcurrentFields {
                    design,
                    ..cfg_fields(Cfg::concurrent(a))
                }
                .into(),
            );
        }
    }
    let a10 = fig10_analysis(w);
    for &b in &o.buffers {
        v.push(Cfg::Concurrent {
            variant: Variant::for_analysis(a10),
            analysis: a10,
            design: BufferDesign::Cab,
            buffer: b,
            chunk: FIG10_CHUNK_BYTES,
            unpinned: false,
        });
    }
    for a in fig11_analyses(w) {
        for &r in &o.rates {
            v.push(Cfg::Sampling {
                variant: Variant::for_analysis(a),
                analysis: a,
                basis_points: basis_points(r),
            });
        }
    }
    if o.pin {
        v.push(
            ConcurrentFields {
                unpinned: true,
                ..cfg_fields(Cfg::concurrent(a10))
            }
            .into(),
        );
    }
    let mut seen = HashSet::new();
    v.retain(|c| seen.insert(*c));
    v
}

/// `Cfg::Concurrent` as a value to update with struct-update syntax.
pub(crate) fn cfg_fields(c: Cfg) -> ConcurrentFields {
    match c {
        Cfg::Concurrent {
            variant,
            analysis,
            design,
            buffer,
            chunk,
            unpinned,
        } => ConcurrentFields {
            variant,
            analysis,
            design,
            buffer,
            chunk,
            unpinned,
        },
        other => panic!("not a concurrent cell: {other:?}"),
    }
}

#[derive(Clone, Copy)]
pub(crate) struct ConcurrentFields {
    pub(crate) variant: Variant,
    pub(crate) analysis: Analysis,
    pub(crate) design: BufferDesign,
    pub(crate) buffer: usize,
    pub(crate) chunk: usize,
    pub(crate) unpinned: bool,
}

impl From<ConcurrentFields> for Cfg {
    fn from(f: ConcurrentFields) -> Cfg {
        Cfg::Concurrent {
            variant: f.variant,
            analysis: f.analysis,
            design: f.design,
            buffer: f.buffer,
            chunk: f.chunk,
            unpinned: f.unpinned,
        }
    }
}
