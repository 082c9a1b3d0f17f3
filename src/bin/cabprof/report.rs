//! `cabprof report`: render a saved JSON report (`cabprof::ReportData`).

use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cabprof::report::{ReportData, ReportError};
use clap::{Args, ValueEnum};

use crate::CliError;

const EXAMPLES: &str = "\
Examples:
  cabprof report profile.json                       text tables, 10 rows each
  cabprof report profile.json --top 25
  cabprof report profile.json --format svg -o flame.svg
  cabprof report profile.json --format folded | inferno-flamegraph > flame.svg
  cabprof report profile.json --format dot | dot -Tpng -o calls.png
  cat profile.json | cabprof report -

The JSON is what a session writes (Session::finish_and_write, CABPROF_OUTPUT) or
Report::json() returns; its schema is documented in cabprof::report.";

/// How to render the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReportFormat {
    /// Text tables for people.
    #[value(alias = "text")]
    Table,
    /// The JSON report again, pretty-printed (checks and normalizes a file).
    Json,
    /// Folded stacks of the calling-context tree (`root;a;b count`), for flame-graph tools.
    Folded,
    /// The call graph in Graphviz DOT.
    Dot,
    /// A flame graph of the calling-context tree, as SVG.
    Svg,
}

/// Arguments of `cabprof report`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct ReportArgs {
    /// The JSON report: a file, or '-' for standard input.
    #[arg(value_name = "FILE.json")]
    pub(crate) file: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
    pub(crate) format: ReportFormat,
    /// Rows per table (table format only).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) top: usize,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "OUT")]
    pub(crate) output: Option<PathBuf>,
}

/// Why `cabprof report` failed.
#[derive(Debug)]
pub(crate) enum ReportCommandError {
    /// The input could not be read.
    Read {
        /// The file's path, or `standard input`.
        input: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The input is not a report this cabprof reads.
    Parse {
        /// The file's path, or `standard input`.
        input: String,
        /// What is wrong with it.
        source: ReportError,
    },
    /// The rendering could not be written.
    Write {
        /// The output file, or `None` for standard output.
        output: Option<PathBuf>,
        /// The I/O error.
        source: io::Error,
    },
}

impl fmt::Display for ReportCommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportCommandError::Read { input, source } => {
                write!(f, "cannot read {input}: {source}")
            }
            ReportCommandError::Parse { input, source } => write!(f, "{input}: {source}"),
            ReportCommandError::Write {
                output: Some(path),
                source,
            } => write!(f, "cannot write {}: {source}", path.display()),
            ReportCommandError::Write {
                output: None,
                source,
            } => write!(f, "cannot write the report: {source}"),
        }
    }
}

impl std::error::Error for ReportCommandError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportCommandError::Read { source, .. } | ReportCommandError::Write { source, .. } => {
                Some(source)
            }
            ReportCommandError::Parse { source, .. } => Some(source),
        }
    }
}

/// Run `cabprof report`.
pub(crate) fn run(args: &ReportArgs) -> Result<ExitCode, CliError> {
    render(args).map_err(|e| CliError::new(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// Read, render and write the report.
fn render(args: &ReportArgs) -> Result<(), ReportCommandError> {
    let (text, input) = if args.file.as_os_str() == "-" {
        let input = "standard input".to_string();
        let mut text = String::new();
        match io::stdin().read_to_string(&mut text) {
            Ok(_) => (text, input),
            Err(source) => return Err(ReportCommandError::Read { input, source }),
        }
    } else {
        let input = args.file.display().to_string();
        match fs::read_to_string(&args.file) {
            Ok(text) => (text, input),
            Err(source) => return Err(ReportCommandError::Read { input, source }),
        }
    };
    let data = match ReportData::from_json(&text) {
        Ok(data) => data,
        Err(source) => return Err(ReportCommandError::Parse { input, source }),
    };
    let rendered = match args.format {
        ReportFormat::Table => data.text(args.top),
        ReportFormat::Json => {
            let mut json = data.json();
            json.push('\n');
            json
        }
        ReportFormat::Folded => data.folded(),
        ReportFormat::Dot => data.dot(),
        ReportFormat::Svg => data.svg(),
    };
    match &args.output {
        Some(path) => fs::write(path, rendered).map_err(|source| ReportCommandError::Write {
            output: Some(path.clone()),
            source,
        }),
        None => {
            let mut out = io::stdout().lock();
            match out
                .write_all(rendered.as_bytes())
                .and_then(|()| out.flush())
            {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(ReportCommandError::Write {
                    output: None,
                    source: e,
                }),
                _ => Ok(()),
            }
        }
    }
}
