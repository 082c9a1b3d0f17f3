//! `cabprof report`: render a saved JSON report (`cabprof::ReportData`).

use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cabprof::report::Weight;
use cabprof::ReportData;
use clap::{Args, ValueEnum};

use crate::CliError;

const EXAMPLES: &str = "\
Examples:
  cabprof report profile.json                       text tables, 10 rows each
  cabprof report profile.json --top 25
  cabprof report profile.json --format svg -o flame.svg
  cabprof report profile.json --format svg --weight time -o time.svg
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

/// What flame-graph widths measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum WeightArg {
    /// Calls (the call-tree analysis).
    Calls,
    /// Nanoseconds (the time analysis).
    Time,
}

/// Arguments of `cabprof report`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct ReportArgs {
    /// The JSON report: a file, or '-' for standard input.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// What the folded stacks and the SVG flame graph are weighted by.
    #[arg(long, value_enum, default_value_t = WeightArg::Calls)]
    pub weight: WeightArg,
    /// Rows per table (table format only).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// Run `cabprof report`.
pub(crate) fn run(args: &ReportArgs) -> Result<ExitCode, CliError> {
    let (text, name) = if args.file.as_os_str() == "-" {
        let mut text = String::new();
        io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| CliError::Read {
                what: "standard input".into(),
                source,
            })?;
        (text, "standard input".to_string())
    } else {
        let text = fs::read_to_string(&args.file).map_err(|source| CliError::Read {
            what: args.file.display().to_string(),
            source,
        })?;
        (text, args.file.display().to_string())
    };
    let data = ReportData::from_json(&text).map_err(|e| CliError::BadReport {
        input: name.clone(),
        source: Box::new(e),
    })?;
    let weight = match args.weight {
        WeightArg::Calls => Weight::Calls,
        WeightArg::Time => Weight::Time,
    };
    let rendered = match args.format {
        ReportFormat::Table => data.text(args.top),
        ReportFormat::Json => {
            let mut json = data.json();
            json.push('\n');
            json
        }
        ReportFormat::Folded => data.folded_by(weight),
        ReportFormat::Dot => data.dot(),
        ReportFormat::Svg => data.svg_by(weight),
    };
    match &args.output {
        Some(path) => fs::write(path, rendered).map_err(|source| CliError::Write {
            what: path.display().to_string(),
            source,
        })?,
        None => {
            let mut out = io::stdout().lock();
            if let Err(e) = out
                .write_all(rendered.as_bytes())
                .and_then(|()| out.flush())
            {
                if e.kind() != io::ErrorKind::BrokenPipe {
                    return Err(CliError::Write {
                        what: "the report".into(),
                        source: e,
                    });
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
