//! `cabprof report`: render a saved JSON report (`cabprof::ReportData`) in any of the formats
//! of `cabprof::report::Format`.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cabprof::report::{Format, WaitProfile, Weight};
use cabprof::trace::is_same_file;
use cabprof::ReportData;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};

use crate::CliError;

const EXAMPLES: &str = "\
Examples:
  cabprof report profile.json                       text tables, 10 rows each
  cabprof report profile.json --top 25
  cabprof report profile.json --format svg -o flame.svg
  cabprof report profile.json --format svg --weight time -o time.svg
  cabprof report profile.json --format svg --weight alloc-bytes -o heap.svg
  cabprof report profile.json --format folded | inferno-flamegraph > flame.svg
  cabprof report profile.json --format dot | dot -Tpng -o calls.png
  cabprof report profile.json --format pprof -o profile.pb.gz && go tool pprof -top profile.pb.gz
  cabprof report profile.json --format pprof --label service=api --label host=$(hostname) -o api.pb.gz
  cabprof report profile.json --format pprof --profile mutex -o mutex.pb.gz
  cabprof report profile.json --format callgrind -o callgrind.out.app && kcachegrind callgrind.out.app
  cat profile.json | cabprof report -

The JSON is what a session writes (Session::finish_and_write, CABPROF_OUTPUT) or
report.json() returns; its schema is documented in cabprof::report.";

/// `--format`'s values, with their help lines, from the library's one list of formats.
fn format_parser() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(Format::ALL.map(|f| {
        PossibleValue::new(f.name())
            .aliases(f.aliases().iter().copied())
            .help(f.description())
    }))
    .map(|name| Format::parse(&name).expect("clap accepts only the listed names"))
}

/// What flame-graph widths measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum WeightArg {
    /// Calls (the call-tree analysis).
    Calls,
    /// Nanoseconds (the time analysis).
    Time,
    /// Heap bytes allocated (the allocations analysis).
    AllocBytes,
}

/// Which of Go's wait profiles `--format pprof` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProfileArg {
    /// Holders' contexts: the time others waited during each contended hold, once per waiter.
    Mutex,
    /// Waiters' contexts: lock waits, blocked channel sends and receives.
    Block,
}

/// Arguments of `cabprof report`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct ReportArgs {
    /// The JSON report: a file, or '-' for standard input.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, short, value_parser = format_parser(), default_value_t = Format::Table)]
    pub format: Format,
    /// What the folded stacks and the SVG flame graph are weighted by.
    #[arg(long, value_enum, default_value_t = WeightArg::Calls)]
    pub weight: WeightArg,
    /// Rows per table (table format only).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// A `KEY=VALUE` label on every sample (pprof format only; repeatable), e.g.
    /// `service=api`, `host=web-3`.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_label)]
    pub label: Vec<(String, String)>,
    /// With `--format pprof`: Go's `mutex` or `block` profile of the waits analysis
    /// (`contentions`, `delay`) instead of the report's profile.
    #[arg(long, value_enum, value_name = "PROFILE")]
    pub profile: Option<ProfileArg>,
    /// Write to this file instead of standard output (not the input file itself).
    #[arg(long, short, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// `KEY=VALUE`, both non-empty.
fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.into(), v.into())),
        _ => Err(format!("{text:?} is not KEY=VALUE with both non-empty")),
    }
}

/// Refuse to write the rendering over the report it is read from: the input would be lost
/// to its own rendering. By identity, not by name (`./x`, a hard link, a symbolic link), and
/// for `-` by what standard input is (`report - -o x < x`).
fn check_output_is_not_input(input: &Path, output: &Path) -> Result<(), CliError> {
    let same = if input.as_os_str() == "-" {
        match (
            same_file::Handle::stdin(),
            same_file::Handle::from_path(output),
        ) {
            (Ok(stdin), Ok(out)) => stdin == out,
            _ => false,
        }
    } else {
        is_same_file(input, output)
    };
    if !same {
        return Ok(());
    }
    let input = if input.as_os_str() == "-" {
        "standard input (FILE.json -)".to_string()
    } else {
        format!("FILE.json ({})", input.display())
    };
    Err(CliError::InvalidArguments(format!(
        "{input} and OUT ({}) are the same file: write the rendering to another file",
        output.display()
    )))
}

/// Read the saved JSON report at `path` (`-`: standard input), naming the input on error.
pub(crate) fn read(path: &Path) -> Result<ReportData, CliError> {
    let (text, name) = if path.as_os_str() == "-" {
        let mut text = String::new();
        io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| CliError::Read {
                what: "standard input".into(),
                source,
            })?;
        (text, "standard input".to_string())
    } else {
        let text = fs::read_to_string(path).map_err(|source| CliError::Read {
            what: path.display().to_string(),
            source,
        })?;
        (text, path.display().to_string())
    };
    ReportData::from_json(&text).map_err(|e| CliError::BadReport {
        input: name,
        source: Box::new(e),
    })
}

/// Run `cabprof report`.
pub(crate) fn run(args: &ReportArgs) -> Result<ExitCode, CliError> {
    if let Some(output) = &args.output {
        check_output_is_not_input(&args.file, output)?;
    }
    let data = read(&args.file)?;
    let weight = match args.weight {
        WeightArg::Calls => Weight::Calls,
        WeightArg::Time => Weight::Time,
        WeightArg::AllocBytes => Weight::AllocBytes,
    };
    if !args.label.is_empty() && args.format != Format::Pprof {
        return Err(CliError::InvalidArguments(
            "--label applies to --format pprof only".into(),
        ));
    }
    if args.profile.is_some() && args.format != Format::Pprof {
        return Err(CliError::InvalidArguments(
            "--profile applies to --format pprof only".into(),
        ));
    }
    // Folded stacks and JSON are written as they are made: the folded text repeats each
    // context's stack and can be many times the report, the JSON is the report's size.
    let rendered = match args.format {
        Format::Table => data.text(args.top).into_bytes(),
        Format::Json => {
            return emit(args, |out| {
                data.write_json(&mut *out)?;
                out.write_all(b"\n")
            })
        }
        Format::Folded => {
            let mut shift = 0;
            let done = emit(args, |out| {
                shift = data.write_folded_by(weight, out)?;
                Ok(())
            });
            if shift > 0 {
                eprintln!(
                    "cabprof report: warning: the weights add up to more than 2^64; every folded count is divided by 2^{shift}"
                );
            }
            return done;
        }
        Format::Dot => data.dot().into_bytes(),
        Format::Svg => data.svg_by(weight).into_bytes(),
        Format::Pprof => {
            let labels: Vec<(&str, &str)> = args
                .label
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            match args.profile {
                None => data.pprof_labeled(&labels),
                Some(p) => {
                    let profile = match p {
                        ProfileArg::Mutex => WaitProfile::Mutex,
                        ProfileArg::Block => WaitProfile::Block,
                    };
                    data.pprof_waits(profile, &labels).ok_or_else(|| {
                        CliError::InvalidArguments(format!(
                            "{} has no waits: record it with CABPROF_ANALYSES=...,waits and cabprof::sync's locks or channels",
                            args.file.display()
                        ))
                    })?
                }
            }
        }
        Format::Callgrind => data.callgrind().into_bytes(),
        Format::ChromeTrace => data
            .chrome_trace()
            .ok_or_else(|| {
                CliError::InvalidArguments(format!(
                    "{} has no timeline: record it with CABPROF_ANALYSES=...,timeline",
                    args.file.display()
                ))
            })?
            .into_bytes(),
        Format::Perfetto => data.perfetto_trace().ok_or_else(|| {
            CliError::InvalidArguments(format!(
                "{} has no timeline: record it with CABPROF_ANALYSES=...,timeline",
                args.file.display()
            ))
        })?,
    };
    drop(data);
    emit(args, |out| out.write_all(&rendered))
}

/// Write the rendering with `write` to `--output`, or to standard output (where a closed pipe,
/// `| head`, is not an error).
fn emit(
    args: &ReportArgs,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<ExitCode, CliError> {
    match &args.output {
        Some(path) => {
            let failed = |source| CliError::Write {
                what: path.display().to_string(),
                source,
            };
            let mut file = io::BufWriter::new(fs::File::create(path).map_err(failed)?);
            write(&mut file)
                .and_then(|()| file.flush())
                .map_err(failed)?;
        }
        None => {
            let mut out = io::stdout().lock();
            if let Err(e) = write(&mut out).and_then(|()| out.flush()) {
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
