//! Profiling sessions: choose analyses and a mode, run the program, get a [`Report`].
//!
//! The same analyses run in every mode: concurrently on analyzer threads behind CAB rings
//! (exhaustive or sampling), or inline in the application threads (sequential), chosen by the
//! builder or by `CABPROF_MODE` at run time.
//!
//! [`SessionBuilder`] is the one builder users see. It owns the runtime's settings (a plain
//! [`RuntimeConfig`]), the analyses to run and the report's output path; the generic
//! `cabprof_cab::runtime::Session` underneath is for programs that bring their own analysis.

use crate::analysis::{Analysis, AnalysisPlan, AnalysisSet};
use crate::report::Report;
use cabprof_analyses::LevelConfig;
use cabprof_cab::runtime::{self, BufferDesign, RunMode, RuntimeConfig, SessionError};
use cabprof_cab::ConfigError;
use std::path::PathBuf;
use std::time::Duration;

/// Chooses the analyses, the mode, the ring and where the report goes; every setting can also
/// come from `CABPROF_*` variables ([`from_env`](Self::from_env)): [`SETTINGS`](crate::SETTINGS)
/// lists each variable with the function here that sets the same thing.
#[derive(Clone, Debug, Default)]
pub struct SessionBuilder {
    /// How the runtime runs: mode, buffer design, sizes, analyzers, pinning.
    runtime: RuntimeConfig,
    /// What to build for each event stream.
    plan: AnalysisPlan,
    /// Where [`Session::finish_and_write`] and the Ctrl-C handler write the JSON report.
    output: Option<PathBuf>,
    /// The live endpoint's address and settings (feature `serve`).
    #[cfg(feature = "serve")]
    serve: crate::serve::ServeSettings,
}

impl SessionBuilder {
    /// Defaults: exhaustive, method count + call graph + call tree + paths, one pinned
    /// analyzer, chunk = 4 × L1d, buffer = 16 chunks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The analyses to run (replacing the default set; `CABPROF_ANALYSES`).
    pub fn analyses(mut self, kinds: &[Analysis]) -> Self {
        self.plan.kinds = kinds.to_vec();
        self
    }

    /// Every analysis, cache simulation and reuse distance included, but the timeline
    /// ([`Analysis::Timeline`]), which adds a word to every call and keeps megabytes per
    /// thread: name it to have it.
    pub fn all_analyses(self) -> Self {
        let all: Vec<Analysis> = Analysis::ALL
            .into_iter()
            .filter(|a| *a != Analysis::Timeline)
            .collect();
        self.analyses(&all)
    }

    /// Cache levels for the simulator (default: the paper's 32 KB/4-way + 512 KB/8-way, 64 B,
    /// FIFO).
    pub fn cache_levels(mut self, levels: &[LevelConfig]) -> Self {
        self.plan.cache_levels = levels.to_vec();
        self
    }

    /// Simulate the host's measured L1d (sysfs or the X-Ray probe) in front of the paper's L2.
    pub fn host_cache_geometry(mut self) -> Self {
        let l1 = cabprof_cab::hw::host_l1d();
        let level = LevelConfig::new(
            l1.size_bytes as u64,
            l1.ways as u32,
            l1.line_bytes as u32,
            cabprof_analyses::Policy::Fifo,
        );
        let l2 = LevelConfig {
            line_bytes: level.line_bytes,
            ..LevelConfig::PAPER_L2
        };
        self.plan.cache_levels = vec![level, l2];
        self
    }

    /// Line size of the reuse-distance analysis (default 64).
    pub fn reuse_line_bytes(mut self, bytes: u32) -> Self {
        self.plan.reuse_line_bytes = bytes;
        self
    }

    /// Time one call in `k` per function and thread ([`Analysis::Time`]; default 1, every
    /// call; `CABPROF_TIME_SAMPLE`); the others are counted only and the report's times are
    /// estimates.
    pub fn time_sample(mut self, k: u32) -> Self {
        self.plan.time_sample = k;
        self
    }

    /// Show the raw times, before overhead compensation, beside the compensated ones in the
    /// text report (default off; `CABPROF_TIME_RAW`; the JSON report always has both, as
    /// `raw_` fields).
    pub fn time_raw(mut self, on: bool) -> Self {
        self.plan.time_raw = on;
        self
    }

    /// Slices the timeline keeps per thread ([`Analysis::Timeline`]; default 131,072, 4 MiB):
    /// the latest, older ones overwritten and counted. `CABPROF_TIMELINE_SLICES`.
    pub fn timeline_slices(mut self, n: usize) -> Self {
        self.plan.timeline_slices = n;
        self
    }

    /// With [`Analysis::Timeline`]: when a call of `function` (its name as reports print it,
    /// or its last `::` segments) lasts at least `min`, write the timeline from a second
    /// before it to a second after it beside the report, as a Chrome trace
    /// (`<report>.trigger-<n>.trace.json`), while the program runs. Variable
    /// `CABPROF_TIMELINE_TRIGGER` (`parse:50ms`).
    pub fn timeline_trigger(mut self, function: impl Into<String>, min: Duration) -> Self {
        self.plan.timeline_trigger = Some(crate::TimelineTrigger {
            function: function.into(),
            min,
        });
        self
    }

    /// All runtime settings at once, replacing the current ones.
    pub fn runtime(mut self, config: RuntimeConfig) -> Self {
        self.runtime = config;
        self
    }

    /// Exhaustive, sampling or sequential (`CABPROF_MODE`; a sampling mode's burst and
    /// adaptation: `CABPROF_BURST`, `CABPROF_ADAPTIVE`).
    pub fn mode(mut self, mode: RunMode) -> Self {
        self.runtime.mode = mode;
        self
    }

    /// Sampling at `rate` with one-cache-line bursts (`CABPROF_RATE`).
    pub fn sampling(self, rate: f64) -> Self {
        self.mode(RunMode::sampling(rate))
    }

    /// Sequential: analyses inline in the application threads, no ring.
    pub fn sequential(self) -> Self {
        self.mode(RunMode::Sequential)
    }

    /// The buffer design carrying events (default CAB; FastForward and N-way are the paper's
    /// baselines, exhaustive mode only; `CABPROF_BUFFER_DESIGN`).
    pub fn buffer_design(mut self, design: BufferDesign) -> Self {
        self.runtime.design = design;
        self
    }

    /// Ring size in bytes (`CABPROF_BUFFER`); exhaustive CAB rings grow up to it.
    pub fn buffer_bytes(mut self, bytes: usize) -> Self {
        self.runtime.buffer_bytes = Some(bytes);
        self
    }

    /// The size exhaustive CAB rings start at, outside the ring memory budget (default 16 KiB;
    /// `CABPROF_BUFFER_START`). See [`RuntimeConfig::buffer_start_bytes`].
    pub fn buffer_start_bytes(mut self, bytes: usize) -> Self {
        self.runtime.buffer_start_bytes = Some(bytes);
        self
    }

    /// Chunk size in bytes (`CABPROF_CHUNK`).
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.runtime.chunk_bytes = Some(bytes);
        self
    }

    /// Memory all rings may hold together, in bytes (default 256 MiB or four rings, whichever
    /// is larger; `CABPROF_RING_MEMORY`); a thread whose ring would exceed it waits (exhaustive) or loses and counts
    /// its events. See [`RuntimeConfig::ring_memory`].
    pub fn ring_memory(mut self, bytes: usize) -> Self {
        self.runtime.ring_memory = Some(bytes);
        self
    }

    /// Analyzer threads, 1 to 64 (`CABPROF_ANALYZERS`).
    pub fn analyzers(mut self, n: usize) -> Self {
        self.runtime.analyzers = n;
        self
    }

    /// Pin analyzer threads to cores (default on; `CABPROF_PIN`).
    pub fn pin(mut self, on: bool) -> Self {
        self.runtime.pin = on;
        self
    }

    /// Also pin the thread that starts the session to core 0, as the paper's experiments do
    /// (default off; see [`RuntimeConfig::pin_application`]).
    pub fn pin_application(mut self, on: bool) -> Self {
        self.runtime.pin_application = on;
        self
    }

    /// Back rings of at least 2 MiB with transparent huge pages (Linux; default on;
    /// `CABPROF_HUGE_PAGES`; see [`RuntimeConfig::huge_pages`]): a thread's first lap of its ring takes one page fault
    /// per 2 MiB instead of two per 4 KiB page (1,024), and its first event commits the ring's
    /// first 2 MiB. Off, rings are kept in 4 KiB pages whatever the kernel's THP mode.
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.runtime.huge_pages = on;
        self
    }

    /// Where [`Session::finish_and_write`] and the Ctrl-C handler write the JSON report
    /// (`CABPROF_OUTPUT`).
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.output = Some(path.into());
        self
    }

    /// Serve live profiles over HTTP on `addr` (`HOST:PORT`; port 0 picks a free one, see
    /// [`Session::serve_addr`]) while the session runs: pprof windows at
    /// `/debug/pprof/profile?seconds=N`, Prometheus metrics at `/metrics`, a flame-graph page
    /// at `/` (see [`crate::serve`]). The endpoint has no authentication: an address that is
    /// not loopback is refused unless [`serve_public`](Self::serve_public) allows it, and on
    /// loopback a request must name a loopback host (`localhost`, `127.0.0.1`, `[::1]`; else
    /// 421). Starting fails, naming the address, when it cannot be bound; the endpoint answers
    /// from the moment `start` returns. `CABPROF_SERVE` sets it too.
    #[cfg(feature = "serve")]
    pub fn serve(mut self, addr: impl Into<String>) -> Self {
        self.serve.addr = Some(addr.into());
        self.serve.field = "SessionBuilder::serve";
        self
    }

    /// Allow [`serve`](Self::serve) on an address that is not loopback (default off;
    /// `CABPROF_SERVE_PUBLIC=1`). Anyone who reaches it can read the profiles, whatever the
    /// `Host` they send (including a web page opened on a host that can reach it).
    #[cfg(feature = "serve")]
    pub fn serve_public(mut self, on: bool) -> Self {
        self.serve.public = on;
        self
    }

    /// How long a client of the [`serve`](Self::serve) endpoint may take to send its whole
    /// request head, however slowly it trickles in, before it is answered 408 and dropped
    /// (default [`crate::serve::READ_TIMEOUT`], 5 s; 10 ms to 600 s, else starting fails
    /// naming this setting).
    #[cfg(feature = "serve")]
    pub fn serve_read_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.serve.read_timeout = Some(timeout);
        self
    }

    /// The `service_name` label of served profiles (default: the executable's name;
    /// `CABPROF_SERVICE`).
    #[cfg(feature = "serve")]
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.serve.service = Some(name.into());
        self
    }

    /// The endpoint's settings, for the process-wide session.
    #[cfg(feature = "serve")]
    pub(crate) fn serve_settings(&self) -> &crate::serve::ServeSettings {
        &self.serve
    }

    /// The runtime settings so far.
    pub fn runtime_config(&self) -> &RuntimeConfig {
        &self.runtime
    }

    /// The configured output path, if any.
    pub fn output_path(&self) -> Option<&PathBuf> {
        self.output.as_ref()
    }

    /// Read the `CABPROF_*` variables [`SETTINGS`](crate::SETTINGS) lists (all but `CABPROF`
    /// and `CABPROF_SIGNALS`, the process-wide session's). A bad value is an error naming the
    /// variable and what it allows.
    pub fn from_env(self) -> Result<Self, ConfigError> {
        self.from_vars(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env) with any lookup.
    pub fn from_vars(mut self, get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        self.plan.apply_env(&get)?;
        if let Some(v) = get("CABPROF_OUTPUT") {
            if v.trim().is_empty() {
                return Err(ConfigError::new(
                    "CABPROF_OUTPUT",
                    "\"\"",
                    "a non-empty path",
                ));
            }
            self.output = Some(PathBuf::from(v));
        }
        #[cfg(feature = "serve")]
        self.serve.apply_env(&get)?;
        #[cfg(not(feature = "serve"))]
        if let Some(v) = get("CABPROF_SERVE").filter(|v| !v.trim().is_empty()) {
            return Err(ConfigError::new(
                "CABPROF_SERVE",
                v,
                "unset: this program was built without cabprof's `serve` feature",
            ));
        }
        self.runtime.from_vars(get)?;
        Ok(self)
    }

    /// Check every setting, analyses included.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.runtime.validate()?;
        #[cfg(feature = "serve")]
        self.serve.validate()?;
        self.plan.validate()
    }

    /// The validated runtime configuration, analysis plan and output path, for sessions the
    /// facade runs with an analysis of its own (the process-wide session).
    pub(crate) fn into_parts(
        mut self,
    ) -> Result<(RuntimeConfig, AnalysisPlan, Option<PathBuf>), SessionError> {
        self.validate()?;
        self.plan.approximate = matches!(self.runtime.mode, RunMode::Sampling { .. });
        Ok((self.runtime, self.plan, self.output))
    }

    /// Start profiling.
    pub fn start(mut self) -> Result<Session, SessionError> {
        // Starting, and dropping what the builder held, is the runtime's own work.
        let _work = cabprof_cab::runtime::runtime_work();
        self.validate()?;
        crate::process::give_way_to_program();
        self.plan.approximate = matches!(self.runtime.mode, RunMode::Sampling { .. });
        let plan = self.plan;
        let trigger = plan.timeline_trigger.is_some();
        if !cabprof_cab::runtime::active() {
            // A new session's allocation counters start from zero (with one running, starting
            // fails below and its counters stay).
            crate::alloc::reset();
        }
        // Bound before the session starts: a port in use fails the start, naming it.
        #[cfg(feature = "serve")]
        let listener = self.serve.bind()?;
        let before = crate::analysis::begin_timing(&plan, &self.runtime);
        let inner = runtime::Session::start_snapshotting(self.runtime, move || plan.build())
            .inspect_err(|_| crate::analysis::restore_timing(before))?;
        if trigger {
            let snapshots = inner.snapshotter();
            let (dir, stem) = match &self.output {
                Some(path) => (
                    path.parent().map(PathBuf::from).unwrap_or_default(),
                    path.file_stem()
                        .map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned()),
                ),
                None => (crate::process::report_dir(), crate::process::report_name()),
            };
            crate::analysis::trigger::arm(
                std::sync::Arc::new(move || snapshots.snapshot().map(snapshot_report)),
                dir,
                stem,
            );
        }
        #[cfg(feature = "serve")]
        let endpoint = match listener {
            Some(listener) => {
                let snapshots = inner.snapshotter();
                let snapshot =
                    std::sync::Arc::new(move || snapshots.snapshot().map(snapshot_report));
                Some(
                    crate::serve::start(listener, &self.serve, snapshot)
                        .map_err(SessionError::Spawn)?,
                )
            }
            None => None,
        };
        Ok(Session {
            inner,
            output: self.output,
            trigger,
            #[cfg(feature = "serve")]
            endpoint,
        })
    }
}

/// A snapshot's report. Building it is time inside cabprof, as taking the snapshot is (the
/// runtime tells that part): a `Stall` word takes it out of the caller's open frames.
fn snapshot_report(runtime: runtime::Report<AnalysisSet>) -> Report {
    let started = cabprof_cab::clock::now();
    let report = Report::new(runtime);
    cabprof_cab::runtime::stalled_since(started);
    report
}

/// Takes snapshots of a running session from any thread.
#[derive(Debug)]
pub struct Snapshotter {
    inner: runtime::Snapshotter<AnalysisSet>,
}

impl Snapshotter {
    /// Results so far; `None` once the session has finished.
    pub fn snapshot(&self) -> Option<Report> {
        self.inner.snapshot().map(snapshot_report)
    }
}

/// A running profiling session: one at a time per process.
///
/// ```no_run
/// use cabprof::{Analysis, Session};
///
/// let session = Session::builder()
///     .analyses(&[Analysis::MethodCount, Analysis::CallGraph, Analysis::CallTree])
///     .start()
///     .expect("start profiling");
/// // ... run instrumented code ...
/// let report = session.finish();
/// println!("{}", report.text(10));
/// ```
///
/// The same analyses run in every mode: concurrently on analyzer threads behind CAB rings
/// (exhaustive or sampling), or inline in the application threads (sequential), chosen by the
/// builder or by `CABPROF_MODE` at run time.
#[derive(Debug)]
pub struct Session {
    inner: runtime::Session<AnalysisSet>,
    output: Option<PathBuf>,
    /// It armed the timeline trigger: it disarms it when it finishes.
    trigger: bool,
    /// The live endpoint, stopped with the session (feature `serve`).
    #[cfg(feature = "serve")]
    endpoint: Option<crate::serve::Endpoint>,
}

impl Session {
    /// A builder with defaults.
    pub fn builder() -> SessionBuilder {
        SessionBuilder::new()
    }

    /// Start a session with every setting from `CABPROF_*` variables over the defaults
    /// (`Session::builder().from_env()?.start()`).
    pub fn start_from_env() -> Result<Session, SessionError> {
        SessionBuilder::new().from_env()?.start()
    }

    /// The mode in force.
    pub fn mode(&self) -> RunMode {
        self.inner.mode()
    }

    /// The configured output path, if any.
    pub fn output_path(&self) -> Option<&PathBuf> {
        self.output.as_ref()
    }

    /// The address the live endpoint listens on ([`SessionBuilder::serve`]; the port chosen
    /// when 0 was asked for), if there is one.
    #[cfg(feature = "serve")]
    pub fn serve_addr(&self) -> Option<std::net::SocketAddr> {
        self.endpoint.as_ref().map(|e| e.addr())
    }

    /// Results so far without stopping: what the rings held when it was asked for, not what
    /// producers add while it reads.
    pub fn snapshot(&self) -> Option<Report> {
        self.inner.snapshot().map(snapshot_report)
    }

    /// A handle that takes snapshots from any thread (a periodic reporter); they return
    /// `None` once the session has finished.
    pub fn snapshotter(&self) -> Snapshotter {
        Snapshotter {
            inner: self.inner.snapshotter(),
        }
    }

    /// Write the timeline so far ([`Analysis::Timeline`]: each thread's last slices, as its
    /// flight recorder keeps them) as a Chrome trace to `path`, as the JSON report is written
    /// (whole; only over a timeline cabprof wrote, an empty file or none); the number of
    /// slices written. An error if the timeline analysis does not run.
    pub fn dump_timeline(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<usize> {
        let report = self.snapshot().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "the session has finished")
        })?;
        crate::report::file::write_timeline(path.as_ref(), &report.data)
    }

    /// Stop, drain, merge and report.
    pub fn finish(self) -> Report {
        let _work = cabprof_cab::runtime::runtime_work();
        let runtime = self.inner.finish();
        crate::analysis::finish_timing();
        let report = Report::new(runtime);
        if self.trigger {
            crate::analysis::trigger::disarm(Some(&report));
        }
        report
    }

    /// Finish and write the JSON report to the configured output path (if any): whole, to a
    /// temporary file renamed over the path (a device such as `/dev/stdout` is written in
    /// place). An existing file there that is not a cabprof report (nor empty) is left as it
    /// is, and the error names it. With the timeline, its Chrome trace goes beside the report
    /// (`out/app.json` → `out/app.trace.json`).
    pub fn finish_and_write(self) -> std::io::Result<Report> {
        let output = self.output.clone();
        let report = self.finish();
        if let Some(path) = output {
            write_report(&path, &report)?;
        }
        Ok(report)
    }

    /// For services: on Ctrl-C (SIGINT), SIGTERM or SIGHUP, finish (nothing lost), hand the
    /// report to `on_report`, then exit with status 130. With an output path configured the JSON report is written there
    /// first.
    pub fn on_ctrlc(
        &self,
        on_report: impl FnOnce(&Report) + Send + 'static,
    ) -> Result<(), SessionError> {
        let output = self.output.clone();
        let trigger = self.trigger;
        self.inner.on_ctrlc(move |r| {
            crate::analysis::finish_timing();
            let report = Report::new(r);
            if trigger {
                crate::analysis::trigger::disarm(Some(&report));
            }
            if let Some(path) = output {
                if let Err(e) = write_report(&path, &report) {
                    eprintln!("cabprof: the report was not written: {e}");
                }
            }
            on_report(&report);
        })
    }
}

/// Write `report`'s JSON to `path` as [`Session::finish_and_write`] describes.
fn write_report(path: &std::path::Path, report: &Report) -> std::io::Result<()> {
    use crate::report::file::{trace_path, write, write_timeline, Contents, Written};
    let how = write(path, Contents::Json, |w| report.write_json(w))?;
    if how == Written::Replaced && report.data.timeline.is_some() {
        // The report is written: a timeline that cannot be is said, not an error that would
        // lose the report to the caller.
        if let Err(e) = write_timeline(&trace_path(path), &report.data) {
            eprintln!("cabprof: the timeline was not written: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<SessionBuilder, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SessionBuilder::new().from_vars(move |k| m.get(k).cloned())
    }

    /// Moved from the runtime's variable test when `CABPROF_OUTPUT` moved to the facade.
    #[test]
    fn output_and_analyses_variables_are_validated_by_name() {
        for (var, val, allowed) in [
            ("CABPROF_OUTPUT", "", "non-empty"),
            ("CABPROF_ANALYSES", "method-count,bogus", "comma-separated"),
        ] {
            let err = env(&[(var, val)]).unwrap_err();
            assert_eq!(err.field, var);
            assert!(err.allowed.contains(allowed), "{err}");
            assert!(err.to_string().contains(var), "{err}");
        }
        let b = env(&[
            ("CABPROF_OUTPUT", "profile.json"),
            ("CABPROF_ANALYSES", "paths, cache"),
            ("CABPROF_BUFFER", "2MB"),
        ])
        .unwrap();
        assert_eq!(b.output_path(), Some(&PathBuf::from("profile.json")));
        assert_eq!(b.runtime_config().buffer_bytes, Some(2 << 20));
        // Runtime variables are still checked by name through the facade.
        assert_eq!(
            env(&[("CABPROF_PIN", "maybe")]).unwrap_err().field,
            "CABPROF_PIN"
        );
    }

    #[test]
    fn serve_variables_are_validated_by_name() {
        #[cfg(feature = "serve")]
        {
            let e = env(&[("CABPROF_SERVE_PUBLIC", "maybe")]).unwrap_err();
            assert_eq!(e.field, "CABPROF_SERVE_PUBLIC");
            let b = env(&[
                ("CABPROF_SERVE", " 127.0.0.1:0 "),
                ("CABPROF_SERVICE", "kv"),
            ])
            .unwrap();
            let s = b.serve_settings();
            assert_eq!(s.addr.as_deref(), Some("127.0.0.1:0"));
            assert_eq!(s.service.as_deref(), Some("kv"));
            assert_eq!(s.field, "CABPROF_SERVE");
        }
        #[cfg(not(feature = "serve"))]
        {
            let e = env(&[("CABPROF_SERVE", "127.0.0.1:0")]).unwrap_err();
            assert_eq!(e.field, "CABPROF_SERVE");
            assert!(e.allowed.contains("`serve` feature"), "{e}");
        }
    }
}
