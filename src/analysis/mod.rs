//! The analyses a session can run, each declared once.
//!
//! Every analysis is one file here holding its descriptor (an [`AnalysisDescriptor`]): its
//! names for `CABPROF_ANALYSES`, whether it runs by default, how it is checked and built from
//! the [`AnalysisPlan`], how its results become report data, how the text report shows them,
//! how their estimated counts are filled and how a file read back is checked. Consuming and
//! merging come from the analysis state itself (the `analyses` crate's
//! `cabprof_analyses::EventAnalysis` trait). The `register!` list at the bottom of this file is
//! the only list of analyses: [`Analysis`], [`Analysis::ALL`], [`Analysis::parse`], the names
//! in help texts and error messages, [`AnalysisSet`] (what each ring runs) and the report's
//! conversion, estimates, checks and text sections are all generated from it.
//!
//! # Adding an analysis
//!
//! 1. Its state, a type implementing `cabprof_analyses::EventAnalysis` (consume event words, merge
//!    results) and `Clone + Debug`; usually a new module of the `analyses` crate.
//! 2. One new file here, `src/analysis/<name>.rs`, with `pub(crate) struct Descriptor;` and
//!    `impl AnalysisDescriptor for Descriptor` (copy `method_count.rs`, the smallest).
//! 3. Its `mod file_name;` line beside the others, and one registration line in `register!`
//!    below: its doc line and `Variant => file_name: StateType,` (the file name is also the
//!    [`AnalysisSet`] field; the compiler checks that `StateType` is the descriptor's
//!    `State`).
//! 4. Its results in the report's typed schema (`src/model/mod.rs`): a
//!    `pub <file_name>: Option<..>` field of `ReportData`, documented with its JSON, and the
//!    entry types it holds (an `Option`, so report files written before it existed still read
//!    back). This is the one touch point of the code outside this folder: the JSON schema
//!    stays a plain, typed struct. The descriptor's `report` fills the field, its `text`
//!    renders it, and its `fill_estimates` and `check` (if it has estimated counts or calling
//!    contexts) fill and check it.
//!
//! Besides, `tests/it/analysis_names.rs` lists the names it expects, the evaluation's
//! `Variant::for_analysis` (`lab/workloads/src/lib.rs`) says which instrumentation feeds it, and
//! the README tells users about it; ARCHITECTURE.md lists every file. Nothing else lists analyses: `CABPROF_ANALYSES`'
//! help text ([`ANALYSES_HELP`]), the estimates and the checks of a file read back are
//! generated from the list too. Renderers other than text (folded stacks, DOT, SVG) and the
//! sampling-error comparison show the analyses their formats are about; a new analysis
//! appears there only if one of them chooses to show it.
//!
//! Consuming is statically dispatched: [`AnalysisSet`] has one typed field per analysis and
//! its `consume` calls each present analysis once per chunk; no trait object, per event or
//! per chunk.

// The analyses' files, declared here rather than by `register!` so that rustfmt visits them.
mod allocations;
mod cache;
mod call_graph;
mod call_tree;
mod contexts;
mod method_count;
mod paths;
mod plan;
mod reuse_distance;
mod time;
mod timeline;
pub(crate) mod trigger;
mod waits;

pub use plan::AnalysisPlan;
pub use trigger::TimelineTrigger;

use crate::model::{NotAReport, ReportData};
use cabprof_cab::runtime::{self, EventAnalysis};
use cabprof_cab::ConfigError;
use std::collections::BTreeSet;

/// Method ids a report mentions; the conversion looks up their names once at the end.
pub(crate) type MethodIds = BTreeSet<u32>;

/// Everything the facade needs to know about one analysis. Implemented by a unit struct
/// `Descriptor` in the analysis' own file and read only through `register!`.
pub(crate) trait AnalysisDescriptor {
    /// The analysis' state for one stream: a ring's, or a thread's in sequential mode.
    type State: cabprof_analyses::EventAnalysis + Clone + std::fmt::Debug;

    /// Names accepted by `CABPROF_ANALYSES` and [`Analysis::parse`] (lower case, `-` between
    /// words); the first is the canonical one, shown in errors and by [`Analysis::name`].
    const NAMES: &'static [&'static str];

    /// Whether a session runs it when no analyses are chosen.
    const ON_BY_DEFAULT: bool;

    /// Check the plan's settings for this analysis (run before [`build`](Self::build)).
    fn validate(_plan: &AnalysisPlan) -> Result<(), ConfigError> {
        Ok(())
    }

    /// A fresh state for one stream. The plan has passed [`validate`](Self::validate).
    fn build(plan: &AnalysisPlan) -> Self::State;

    /// Turn the merged state into its field of `data`, adding every method id it mentions to
    /// `methods`.
    fn report(state: &Self::State, data: &mut ReportData, methods: &mut MethodIds);

    /// Append this analysis' section of the text report (if `data` holds its results), `top`
    /// rows per table.
    fn text(data: &ReportData, top: usize, out: &mut String);

    /// Set the `estimated` field of every count in this analysis' results from the count:
    /// `est(count)` is the estimate in sampling mode and `None` otherwise. Only analyses whose
    /// entries have such a field implement it.
    fn fill_estimates(_data: &mut ReportData, _est: &dyn Fn(u64) -> Option<u64>) {}

    /// Check this analysis' results in a report read from a file (that its calling contexts
    /// form a tree, with [`check_contexts`]). Only analyses with more rules than their types
    /// say implement it.
    fn check(_data: &ReportData) -> Result<(), NotAReport> {
        Ok(())
    }
}

/// The heading words of a "top N" table of `len` rows, which are sorted by count, largest
/// first: `top 10 of 27`, or `all 27` when every row is shown.
pub(crate) fn top_of(top: usize, len: usize) -> String {
    if top >= len {
        format!("all {len}")
    } else {
        format!("top {top} of {len}")
    }
}

/// Generates everything that lists the analyses from the one list at the bottom of this file.
macro_rules! register {
    ($( $(#[doc = $doc:literal])+ $variant:ident => $module:ident: $state:ty, )+) => {
        /// One analysis a session can run.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Analysis {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl Analysis {
            /// Every analysis, in report order.
            pub const ALL: [Analysis; [$(stringify!($variant)),+].len()] =
                [$(Analysis::$variant),+];

            /// Names accepted for this analysis; the first is canonical.
            fn names(self) -> &'static [&'static str] {
                match self {
                    $( Analysis::$variant =>
                        <$module::Descriptor as AnalysisDescriptor>::NAMES, )+
                }
            }

            /// Whether a session runs it when no analyses are chosen.
            fn on_by_default(self) -> bool {
                match self {
                    $( Analysis::$variant =>
                        <$module::Descriptor as AnalysisDescriptor>::ON_BY_DEFAULT, )+
                }
            }

            /// Check `plan`'s settings for this analysis.
            fn validate(self, plan: &AnalysisPlan) -> Result<(), ConfigError> {
                match self {
                    $( Analysis::$variant =>
                        <$module::Descriptor as AnalysisDescriptor>::validate(plan), )+
                }
            }
        }

        /// Every configured analysis over one stream; what the runtime runs per ring (or per
        /// thread in sequential mode). Built by [`AnalysisPlan::build`]; a field is `None`
        /// when its analysis does not run. One exception: with `call-graph` or `time` chosen
        /// too, `method_count` is `None` while events are analyzed (either counts every call,
        /// so each call is not counted twice), and a report's set
        /// ([`Report::runtime`](crate::report::Report)) has it filled in from that analysis'
        /// counts, which are the same numbers; [`complete_counts`](Self::complete_counts)
        /// does it for a set driven by hand.
        #[derive(Clone, Debug, Default)]
        pub struct AnalysisSet {
            $(
                $(#[doc = $doc])+
                pub $module: Option<$state>,
            )+
            /// Method counting was asked for with the call graph or time, which count every
            /// call too: `method_count` is `None` and the counts are taken from theirs.
            counts_elsewhere: bool,
        }

        impl AnalysisSet {
            fn build(plan: &AnalysisPlan) -> AnalysisSet {
                let mut set = AnalysisSet {
                    $( $module: plan.kinds.contains(&Analysis::$variant).then(|| {
                        <$module::Descriptor as AnalysisDescriptor>::build(plan)
                    }), )+
                    counts_elsewhere: false,
                };
                if set.method_count.is_some()
                    && (set.call_graph.is_some() || set.time.is_some())
                {
                    set.method_count = None;
                    set.counts_elsewhere = true;
                }
                set
            }

            /// Fill `data`'s field of every analysis present, collecting the method ids they
            /// mention.
            pub(crate) fn report(&self, data: &mut ReportData, methods: &mut MethodIds) {
                $(
                    if let Some(state) = &self.$module {
                        <$module::Descriptor as AnalysisDescriptor>::report(state, data, methods);
                    }
                )+
            }

            /// Fill in `method_count` from the call graph's or the time analysis' counts if it
            /// was left to them (see the type's docs); the set then reads as if both had run.
            /// A report's set has had this done; call it on a set driven by hand before
            /// reading `method_count`.
            pub fn complete_counts(&mut self) {
                if std::mem::take(&mut self.counts_elsewhere) {
                    self.method_count = match (&self.call_graph, &self.time) {
                        (Some(g), _) => Some(g.call_counts()),
                        (None, Some(t)) => Some(t.call_counts()),
                        (None, None) => None,
                    };
                }
            }
        }

        impl EventAnalysis for AnalysisSet {
            fn consume(&mut self, words: &[u64]) {
                $(
                    if let Some(state) = &mut self.$module {
                        cabprof_analyses::EventAnalysis::consume(state, words);
                    }
                )+
            }

            fn merge(&mut self, other: AnalysisSet) {
                $( runtime::merge_options(
                    &mut self.$module,
                    other.$module,
                    cabprof_analyses::EventAnalysis::merge,
                ); )+
                self.counts_elsewhere |= other.counts_elsewhere;
            }
        }

        /// Each analysis' section of the text report, in report order.
        pub(crate) const TEXT_SECTIONS: &[fn(&ReportData, usize, &mut String)] =
            &[$( <$module::Descriptor as AnalysisDescriptor>::text, )+];

        /// Every analysis' estimate filling (see [`AnalysisDescriptor::fill_estimates`]).
        const FILL_ESTIMATES: &[fn(&mut ReportData, &dyn Fn(u64) -> Option<u64>)] =
            &[$( <$module::Descriptor as AnalysisDescriptor>::fill_estimates, )+];

        /// Every analysis' check of a report read back (see [`AnalysisDescriptor::check`]).
        const CHECKS: &[fn(&ReportData) -> Result<(), NotAReport>] =
            &[$( <$module::Descriptor as AnalysisDescriptor>::check, )+];

        /// Every canonical name, in report order.
        const CANONICAL_NAMES: &[&str] =
            &[$( <$module::Descriptor as AnalysisDescriptor>::NAMES[0], )+];
    };
}

impl Analysis {
    /// Parse a name as used by `CABPROF_ANALYSES`: the [`name`](Self::name) of one of
    /// [`Analysis::ALL`] or a short alias such as `tree`; case and `_` versus `-` do not matter.
    pub fn parse(name: &str) -> Option<Analysis> {
        let name = name.trim().to_ascii_lowercase().replace('_', "-");
        Analysis::ALL
            .into_iter()
            .find(|a| a.names().contains(&name.as_str()))
    }

    /// The canonical name (`method-count`, `call-graph`, ...), as `CABPROF_ANALYSES` takes it.
    pub fn name(self) -> &'static str {
        self.names()[0]
    }

    /// The analyses a session runs when none are chosen.
    pub fn defaults() -> Vec<Analysis> {
        Analysis::ALL
            .into_iter()
            .filter(|a| a.on_by_default())
            .collect()
    }

    /// Every canonical name, comma-separated, for messages.
    pub(crate) fn name_list() -> String {
        CANONICAL_NAMES.join(", ")
    }
}

/// What `CABPROF_ANALYSES` accepts, as [`crate::SETTINGS`] says it: every canonical name,
/// from the registration list. Built at compile time because `SETTINGS` is a constant table.
pub(crate) const ANALYSES_HELP: &str = {
    const PREFIX: &str = "comma-separated: ";
    const SEP: &str = ", ";
    const LEN: usize = {
        let mut len = PREFIX.len() + SEP.len() * (CANONICAL_NAMES.len() - 1);
        let mut i = 0;
        while i < CANONICAL_NAMES.len() {
            len += CANONICAL_NAMES[i].len();
            i += 1;
        }
        len
    };
    /// Copy `part` into `out` at `at`; the position after it.
    const fn put(out: &mut [u8; LEN], at: usize, part: &str) -> usize {
        let bytes = part.as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            out[at + j] = bytes[j];
            j += 1;
        }
        at + bytes.len()
    }
    const BYTES: [u8; LEN] = {
        let mut out = [0u8; LEN];
        let mut at = put(&mut out, 0, PREFIX);
        let mut i = 0;
        while i < CANONICAL_NAMES.len() {
            if i > 0 {
                at = put(&mut out, at, SEP);
            }
            at = put(&mut out, at, CANONICAL_NAMES[i]);
            i += 1;
        }
        out
    };
    match std::str::from_utf8(&BYTES) {
        Ok(s) => s,
        Err(_) => panic!("analysis names are UTF-8"),
    }
};

/// Fill every `estimated` field of `data` from its count (sampling mode), or clear them.
pub(crate) fn fill_estimates(data: &mut ReportData) {
    let (sampled, rate) = (data.is_sampled(), data.estimate_rate());
    let est = |c: u64| sampled.then(|| (c as f64 / rate).round() as u64);
    for fill in FILL_ESTIMATES {
        fill(data, &est);
    }
}

/// Check every analysis' results in a report read from a file; the first fault found.
pub(crate) fn check_report(data: &ReportData) -> Result<(), NotAReport> {
    CHECKS.iter().try_for_each(|check| check(data))
}

impl std::fmt::Display for Analysis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// The one list of analyses, in report order: `Variant => file_name: StateType,` after a doc
// line. Adding one: its file in this folder and one entry here (see the module docs).
register! {
    /// Calls per function.
    MethodCount => method_count: cabprof_analyses::MethodCount,
    /// Caller → callee edge counts.
    CallGraph => call_graph: cabprof_analyses::CallGraph,
    /// The paper's depth-two call-tree profile and the full calling-context tree.
    CallTree => call_tree: call_tree::CallTrees,
    /// Ball-Larus path counts (functions marked `#[profile(paths)]`).
    Paths => paths: cabprof_analyses::PathProfile,
    /// Set-associative cache simulation of `Mem` events (`#[profile(memory)]`).
    Cache => cache: cabprof_analyses::CacheSim,
    /// Reuse-distance histogram of `Mem` events.
    ReuseDistance => reuse_distance: cabprof_analyses::ReuseDistance,
    /// Inclusive and exclusive time per function, edge and context (opt-in).
    Time => time: cabprof_analyses::TimeProfile,
    /// Heap allocations per function and calling context (needs `cabprof::alloc::Tracked` as
    /// the global allocator).
    Allocations => allocations: cabprof_analyses::Allocations,
    /// Per thread, which call ran when: the last slices (opt-in; times calls).
    Timeline => timeline: cabprof_analyses::Timeline,
    /// Lock waits and holds, blocked channel sends and receives, per calling context and
    /// creation site (fed by `cabprof::sync`'s wrappers).
    Waits => waits: cabprof_analyses::Waits,
}

pub(crate) use crate::model::check_contexts;
pub use call_tree::CallTrees;
pub(crate) use time::{begin_timing, finish_timing, restore_timing};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_every_analysis_once() {
        assert_eq!(
            ANALYSES_HELP,
            format!("comma-separated: {}", Analysis::name_list())
        );
        for a in Analysis::ALL {
            // As whole names: `time` is also the start of `timeline`.
            let names = ANALYSES_HELP.trim_start_matches("comma-separated: ");
            assert_eq!(
                names.split(", ").filter(|n| *n == a.name()).count(),
                1,
                "{a}"
            );
        }
    }

    #[test]
    fn function_count_is_the_method_count_under_either_name() {
        for name in [
            "method-count",
            "methods",
            "function-count",
            "functions",
            "Function_Count",
        ] {
            assert_eq!(Analysis::parse(name), Some(Analysis::MethodCount), "{name}");
        }
    }
}
