//! What a session builds for each stream: the chosen analyses and their settings.

use super::{Analysis, AnalysisSet, TimelineTrigger};
use cabprof_analyses::LevelConfig;
use cabprof_cab::ConfigError;

/// The analyses to run and their settings; [`build`](Self::build) makes one [`AnalysisSet`]
/// per stream (per ring, or per thread in sequential mode).
#[derive(Clone, Debug, PartialEq)]
pub struct AnalysisPlan {
    /// The analyses to run.
    pub kinds: Vec<Analysis>,
    /// Cache levels of the simulator, L1 first ([`Analysis::Cache`]).
    pub cache_levels: Vec<LevelConfig>,
    /// Line size of the reuse-distance analysis, in bytes ([`Analysis::ReuseDistance`]).
    pub reuse_line_bytes: u32,
    /// Time one call in this many per function and thread ([`Analysis::Time`]; 1: every
    /// call).
    pub time_sample: u32,
    /// Show the raw times (before overhead compensation) beside the compensated ones in the
    /// text report ([`Analysis::Time`]; the JSON report always has both).
    pub time_raw: bool,
    /// Slices the timeline keeps per thread, the latest ([`Analysis::Timeline`]; its flight
    /// recorder bound).
    pub timeline_slices: usize,
    /// The flight recorder's trigger: a call of this function at least this long writes the
    /// timeline around it ([`Analysis::Timeline`]; `CABPROF_TIMELINE_TRIGGER`).
    pub timeline_trigger: Option<TimelineTrigger>,
    /// Mark stack-based results approximate (set for sampled streams).
    pub approximate: bool,
}

impl Default for AnalysisPlan {
    /// The session defaults: [`Analysis::defaults`], the paper's two cache levels (32 KB
    /// 4-way + 512 KB 8-way, 64 B lines, FIFO), 64-byte reuse lines, every call timed,
    /// exact.
    fn default() -> Self {
        AnalysisPlan {
            kinds: Analysis::defaults(),
            cache_levels: vec![LevelConfig::PAPER_L1, LevelConfig::PAPER_L2],
            reuse_line_bytes: 64,
            time_sample: 1,
            time_raw: false,
            timeline_slices: cabprof_analyses::timeline::DEFAULT_SLICES,
            timeline_trigger: None,
            approximate: false,
        }
    }
}

impl AnalysisPlan {
    /// The default settings running only `kinds`.
    pub fn with_analyses(kinds: &[Analysis]) -> AnalysisPlan {
        AnalysisPlan {
            kinds: kinds.to_vec(),
            ..AnalysisPlan::default()
        }
    }

    /// Check the settings of every chosen analysis (in report order; the first error wins).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(t) = &self.timeline_trigger {
            if !self.kinds.contains(&Analysis::Timeline) {
                return Err(ConfigError::new(
                    "timeline_trigger (CABPROF_TIMELINE_TRIGGER)",
                    format!("{}:{:?}", t.function, t.min),
                    "set only with the timeline analysis (CABPROF_ANALYSES=...,timeline)",
                ));
            }
        }
        Analysis::ALL
            .into_iter()
            .filter(|a| self.kinds.contains(a))
            .try_for_each(|a| a.validate(self))
    }

    /// Read `CABPROF_ANALYSES` (a comma-separated list of analysis names, see
    /// [`Analysis::parse`]) through `get`, replacing the chosen analyses if it is set, and
    /// `CABPROF_TIME_SAMPLE` (time one call in K), `CABPROF_TIME_RAW` (`1`: show raw times
    /// too), `CABPROF_TIMELINE_SLICES` (slices the timeline keeps per thread) and
    /// `CABPROF_TIMELINE_TRIGGER` (`NAME:DURATION`: see [`TimelineTrigger`]).
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        const VAR: &str = "CABPROF_ANALYSES";
        let Some(value) = get(VAR) else {
            return self.apply_time_sample(&get);
        };
        let kinds = value
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|name| {
                Analysis::parse(name).ok_or_else(|| {
                    ConfigError::new(
                        VAR,
                        &value,
                        format!("a comma-separated list of {}", Analysis::name_list()),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if kinds.is_empty() {
            // Set but empty would run nothing and report nothing, without a word.
            return Err(ConfigError::new(
                VAR,
                format!("{value:?}"),
                format!(
                    "a comma-separated list of at least one of {} (unset it for the defaults)",
                    Analysis::name_list()
                ),
            ));
        }
        self.kinds = kinds;
        self.apply_time_sample(&get)
    }

    fn apply_time_sample(
        &mut self,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        const SAMPLE: &str = "CABPROF_TIME_SAMPLE";
        if let Some(v) = get(SAMPLE) {
            self.time_sample = v.trim().parse().map_err(|_| {
                ConfigError::new(SAMPLE, &v, "an integer K >= 1 (time one call in K)")
            })?;
        }
        const SLICES: &str = "CABPROF_TIMELINE_SLICES";
        if let Some(v) = get(SLICES) {
            let max = cabprof_analyses::timeline::MAX_SLICES;
            self.timeline_slices = v
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    ConfigError::new(
                        SLICES,
                        &v,
                        format!("an integer in 1..={max} (slices the timeline keeps per thread)"),
                    )
                })?;
        }
        const TRIGGER: &str = "CABPROF_TIMELINE_TRIGGER";
        if let Some(v) = get(TRIGGER) {
            self.timeline_trigger = if v.trim().is_empty() {
                None
            } else {
                Some(
                    TimelineTrigger::parse(&v)
                        .ok_or_else(|| ConfigError::new(TRIGGER, &v, TimelineTrigger::FORM))?,
                )
            };
        }
        const RAW: &str = "CABPROF_TIME_RAW";
        if let Some(v) = get(RAW) {
            self.time_raw = match v.trim() {
                "1" | "true" => true,
                "0" | "false" | "" => false,
                _ => return Err(ConfigError::new(RAW, &v, "0 or 1 (1: show raw times too)")),
            };
        }
        Ok(())
    }

    /// One stream's analyses. Panics if the plan does not pass [`validate`](Self::validate).
    pub fn build(&self) -> AnalysisSet {
        AnalysisSet::build(self)
    }
}
