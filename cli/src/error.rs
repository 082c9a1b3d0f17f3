//! Why a command failed, as a type: one variant per kind of failure, each naming what was
//! wrong. The message (`Display`) is what `cabprof: error: ` is followed by on stderr, and
//! [`CliError::exit_code`] is the process's exit status.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use cabprof::trace::TraceError;

/// A failed command.
#[derive(Debug)]
pub enum CliError {
    /// Arguments that parse but make no sense together, or a value out of its range
    /// (status 2, like clap's own errors).
    InvalidArguments(String),
    /// A configuration the library refused (a cache level, a reuse-distance line, a ring):
    /// the library's error names the field (status 2).
    InvalidConfig(Box<dyn Error + Send + Sync>),
    /// A file could not be opened.
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file could not be created.
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// An input could not be read.
    Read {
        /// The input: a path, or "standard input".
        what: String,
        /// Why.
        source: io::Error,
    },
    /// An output could not be written.
    Write {
        /// The output: a path, "the report", "the results".
        what: String,
        /// Why.
        source: io::Error,
    },
    /// A saved report could not be understood.
    BadReport {
        /// The input: a path, or "standard input".
        input: String,
        /// What is wrong with it.
        source: Box<dyn Error + Send + Sync>,
    },
    /// A trace could not be read (an I/O error while reading it).
    Trace {
        /// The input: a path, or "standard input".
        input: String,
        /// Why.
        source: TraceError,
    },
    /// A worker thread could not be started.
    Spawn {
        /// The thread's name.
        thread: String,
        /// Why.
        source: io::Error,
    },
    /// An analyzer thread panicked.
    AnalyzerPanicked,
}

impl CliError {
    /// The process's exit status: 2 for the user's arguments, 1 for everything else.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::InvalidArguments(_) | CliError::InvalidConfig(_) => 2,
            _ => 1,
        })
    }

    /// A configuration error from the library.
    pub fn config(e: impl Error + Send + Sync + 'static) -> CliError {
        CliError::InvalidConfig(Box::new(e))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::InvalidArguments(message) => f.write_str(message),
            CliError::InvalidConfig(e) => write!(f, "{e}"),
            CliError::Open { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
            CliError::Create { path, source } => {
                write!(f, "cannot create {}: {source}", path.display())
            }
            CliError::Read { what, source } => write!(f, "cannot read {what}: {source}"),
            CliError::Write { what, source } => write!(f, "cannot write {what}: {source}"),
            CliError::BadReport { input, source } => write!(f, "{input}: {source}"),
            CliError::Trace { input, source } => write!(f, "{input}: {source}"),
            CliError::Spawn { thread, source } => {
                write!(f, "cannot start the {thread} thread: {source}")
            }
            CliError::AnalyzerPanicked => f.write_str("an analyzer thread panicked"),
        }
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CliError::InvalidArguments(_) | CliError::AnalyzerPanicked => None,
            CliError::InvalidConfig(e) | CliError::BadReport { source: e, .. } => Some(&**e),
            CliError::Open { source, .. }
            | CliError::Create { source, .. }
            | CliError::Read { source, .. }
            | CliError::Write { source, .. }
            | CliError::Spawn { source, .. } => Some(source),
            CliError::Trace { source, .. } => Some(source),
        }
    }
}
