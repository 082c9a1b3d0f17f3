//! Ctrl-C and termination: one process-wide handler of SIGINT, SIGTERM and SIGHUP (the
//! `ctrlc` crate with its `termination` feature) that finishes the session that asked for it,
//! hands its report over, and exits with [`INTERRUPTED_EXIT_CODE`].

use super::report::Report;
use super::{EventAnalysis, Session, SessionError};
use parking_lot::Mutex;

/// What the process-wide Ctrl-C handler runs: finish the session and report. Replaced by each
/// session that asks for it; taken (run once) by the handler.
static INTERRUPT: Mutex<Option<Box<dyn FnOnce() + Send>>> = Mutex::new(None);
static CTRLC_INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// Exit status after a Ctrl-C report: 128 + SIGINT, as shells report an interrupted program.
pub const INTERRUPTED_EXIT_CODE: i32 = 130;

impl<A: EventAnalysis> Session<A> {
    /// For services: on Ctrl-C (SIGINT), SIGTERM or SIGHUP, finish this session — stop, drain every ring of every
    /// thread (nothing emitted before the signal is lost in exhaustive mode), join the
    /// analyzers — hand the full report to `on_report`, then exit the process with status
    /// [`INTERRUPTED_EXIT_CODE`]. If the session finishes normally first, the handler only
    /// exits.
    pub fn on_ctrlc(
        &self,
        on_report: impl FnOnce(Report<A>) + Send + 'static,
    ) -> Result<(), SessionError> {
        install()?;
        let finisher = self.finisher();
        *INTERRUPT.lock() = Some(Box::new(move || {
            if let Some(report) = finisher.finish() {
                on_report(report);
            }
        }));
        Ok(())
    }
}

/// Install the process-wide handler once; later calls report how the first went.
fn install() -> Result<(), SessionError> {
    let installed = CTRLC_INSTALLED.get_or_init(|| {
        ctrlc::set_handler(|| {
            super::tls::mark_runtime_thread();
            let job = INTERRUPT.lock().take();
            tracing::info!("cabprof: interrupted, writing the final report");
            if let Some(job) = job {
                job();
            }
            std::process::exit(INTERRUPTED_EXIT_CODE);
        })
        .map_err(|e| e.to_string())
    });
    installed
        .as_ref()
        .map(drop)
        .map_err(|e| SessionError::Signal(e.clone()))
}

/// On SIGINT, SIGTERM or SIGHUP, exit the process with [`INTERRUPTED_EXIT_CODE`] through
/// `exit`, so that exit handlers (the process-wide session's report writer) run; a session
/// that asked with [`Session::on_ctrlc`] is finished and reported first. An error when
/// another handler owns the signals.
pub fn exit_on_termination() -> Result<(), SessionError> {
    install()
}
