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

/// The signals the handler takes.
#[cfg(unix)]
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// What each of [`SIGNALS`] did before the handler was installed (a zeroed action for a
/// signal that had its default), for the child of a `fork`.
#[cfg(unix)]
static BEFORE: std::sync::OnceLock<[libc::sigaction; 3]> = std::sync::OnceLock::new();

/// The handler takes a signal only where it had its default action: a signal the program
/// ignores (`nohup` ignores SIGHUP, a shell's background job SIGINT) or handles already stays
/// as it was. `ctrlc` installs all three at once, so the others are put back right after.
#[cfg(unix)]
fn set_handler_where_default(handler: impl FnMut() + Send + 'static) -> Result<(), String> {
    let mut before: [libc::sigaction; 3] =
        // SAFETY: `sigaction` is plain old data; all zeroes is a valid (default) action.
        unsafe { std::mem::zeroed() };
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: a query (no new action) into a valid, writable `sigaction`.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut before[i]) } != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    if before.iter().all(|a| a.sa_sigaction != libc::SIG_DFL) {
        return Err("SIGINT, SIGTERM and SIGHUP are all ignored or handled already".into());
    }
    ctrlc::set_handler(handler).map_err(|e| e.to_string())?;
    for (i, &sig) in SIGNALS.iter().enumerate() {
        if before[i].sa_sigaction != libc::SIG_DFL {
            // SAFETY: restores the action read above, unchanged.
            unsafe { libc::sigaction(sig, &before[i], std::ptr::null_mut()) };
        }
    }
    let _ = BEFORE.set(before);
    // ctrlc's handler only wakes a thread of this process; a child forked without exec has
    // no such thread, and would ignore the signals for good.
    // SAFETY: registers a plain `extern "C"` function with no arguments.
    unsafe { libc::pthread_atfork(None, None, Some(restore_in_child)) };
    Ok(())
}

/// In the child of a `fork`: every signal the handler took gets back what it did before.
#[cfg(unix)]
extern "C" fn restore_in_child() {
    if let Some(before) = BEFORE.get() {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: `sigaction` is async-signal-safe, as a fork's child handler needs; the
            // action is one read from the kernel before.
            unsafe { libc::sigaction(sig, &before[i], std::ptr::null_mut()) };
        }
    }
}

#[cfg(not(unix))]
fn set_handler_where_default(handler: impl FnMut() + Send + 'static) -> Result<(), String> {
    ctrlc::set_handler(handler).map_err(|e| e.to_string())
}

/// Install the process-wide handler once; later calls report how the first went.
fn install() -> Result<(), SessionError> {
    let installed = CTRLC_INSTALLED.get_or_init(|| {
        set_handler_where_default(|| {
            super::work::mark_runtime_thread();
            let job = INTERRUPT.lock().take();
            tracing::info!("cabprof: interrupted, writing the final report");
            if let Some(job) = job {
                job();
            }
            std::process::exit(INTERRUPTED_EXIT_CODE);
        })
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
