//! `cabprof trace`: make traces — convert Lackey text to cabprof's binary format (or back), and
//! generate synthetic traces for benchmarks and tests.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cabprof_cab::event::{decode, Event, EventKind};
use clap::{Args, Subcommand, ValueEnum};

use crate::simulate::{trace_outcome, FormatArg};
use crate::units::parse_bytes;
use crate::CliError;
use cabprof::trace::{
    is_same_file, BinaryWriter, OutputFile, TraceFormat, TraceReader, FLAG_INSTRUCTIONS,
};

const EXAMPLES: &str = "\
Examples:
  cabprof trace convert app.lackey app.cabtrace
  valgrind --tool=lackey --trace-mem=yes --log-fd=3 ./app 3>&1 >/dev/null 2>&1 \\
    | cabprof trace convert - app.cabtrace
  cabprof trace convert app.cabtrace app.txt --to lackey
  cabprof trace generate /tmp/t.cabtrace --accesses 100M --working-set 16K

The trace must hold Lackey's lines only: --log-fd=3 with 3>&1 sends it into the pipe while
the program's own stdout and stderr go elsewhere (or use --log-file=app.lackey).";

const CONVERT_EXAMPLES: &str = "\
Examples:
  cabprof trace convert app.lackey app.cabtrace
  cabprof trace convert app.lackey app.cabtrace --instructions   keep instruction fetches
  cabprof trace convert app.cabtrace app.txt --to lackey

A binary trace is \"CABTRACE\", a u32 LE version (1), u32 LE flags (bit 0: instruction
fetches included as loads), then one u64 LE cabprof Mem event word per access (see
`cabprof simulate --help`). It is about half the size of the Lackey text and several times
faster to read. A Lackey M (modify) becomes a load and a store; sizes become powers of two as
in `cabprof simulate`. Converting binary to Lackey writes L and S lines only. A malformed line
stops the conversion with status 2; the output then holds every access before it. The output
is written to a temporary file renamed into place at the end, so a failed write leaves no
partial file; IN and OUT must be different files.";

const GENERATE_EXAMPLES: &str = "\
Examples:
  cabprof trace generate /tmp/l1.cabtrace --accesses 100M --working-set 16K
  cabprof trace generate /tmp/l1.lackey --to lackey --accesses 10M --fetches 1
  cabprof trace generate /tmp/rand.cabtrace --accesses 10M --working-set 4M --pattern random

Sequential: access i is at BASE + (i × STRIDE) mod WORKING_SET. Random: a uniformly chosen
STRIDE-aligned offset in the working set (xorshift64, fixed seed: traces are reproducible).
Every STORE_EVERY-th access is a store.";

/// `cabprof trace` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum TraceCommand {
    /// Convert a trace (Lackey text or binary) to cabprof's binary format, or back to Lackey.
    #[command(after_help = CONVERT_EXAMPLES)]
    Convert(ConvertArgs),
    /// Write a synthetic trace (a sequential or random walk over a working set).
    #[command(after_help = GENERATE_EXAMPLES)]
    Generate(GenerateArgs),
}

/// Arguments of `cabprof trace`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

/// Output format of `cabprof trace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// cabprof's binary format.
    Binary,
    /// Lackey text (L and S lines).
    Lackey,
}

/// Arguments of `cabprof trace convert`.
#[derive(Args, Debug)]
pub(crate) struct ConvertArgs {
    /// The input trace: a file, or '-' for standard input.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The output file.
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub format: FormatArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Binary)]
    pub to: OutputFormat,
    /// Keep Lackey's instruction fetches, as loads (and say so in the binary header).
    #[arg(long)]
    pub instructions: bool,
}

/// Access pattern of `cabprof trace generate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Pattern {
    /// Walk the working set in order, wrapping around.
    Sequential,
    /// Uniformly random offsets in the working set.
    Random,
}

/// Arguments of `cabprof trace generate`.
#[derive(Args, Debug)]
pub(crate) struct GenerateArgs {
    /// The output file.
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Data accesses to write (K, M, G are powers of 1000 here).
    #[arg(long, value_name = "N", default_value = "1M", value_parser = parse_count)]
    pub accesses: u64,
    /// Bytes the accesses range over.
    #[arg(long, value_name = "BYTES", default_value = "16K", value_parser = parse_bytes)]
    pub working_set: u64,
    /// Bytes per access (a power of two up to 128) and the step of the sequential walk.
    #[arg(long, value_name = "BYTES", default_value_t = 8)]
    pub stride: u32,
    /// Every N-th access is a store (0: loads only).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub store_every: u64,
    /// Access pattern.
    #[arg(long, value_enum, default_value_t = Pattern::Sequential)]
    pub pattern: Pattern,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Binary)]
    pub to: OutputFormat,
    /// Lackey output only: instruction-fetch lines before each data access, as in a real
    /// Lackey trace (which has one or more per data access).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub fetches: u32,
}

/// Parse a count: digits with an optional K, M or G (powers of 1000).
fn parse_count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1_000),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 1_000_000),
        Some(b'g' | b'G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (t, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{text:?} is not a count (examples: 1000, 10M)"))
}

/// Run `cabprof trace ...`.
pub(crate) fn run(args: &TraceArgs) -> Result<ExitCode, CliError> {
    match &args.command {
        TraceCommand::Convert(a) => convert(a),
        TraceCommand::Generate(a) => generate(a),
    }
}

/// Where events go: a binary or Lackey writer, into a file that appears only once finished.
enum Sink {
    Binary(BinaryWriter<OutputFile>),
    Lackey(BufWriter<OutputFile>),
}

impl Sink {
    fn create(path: &Path, to: OutputFormat, flags: u32) -> Result<Sink, CliError> {
        let file = OutputFile::create(path).map_err(|source| CliError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(match to {
            OutputFormat::Binary => Sink::Binary(BinaryWriter::new(file, flags).map_err(
                |source| CliError::Write {
                    what: path.display().to_string(),
                    source,
                },
            )?),
            OutputFormat::Lackey => Sink::Lackey(BufWriter::with_capacity(1 << 20, file)),
        })
    }

    #[inline]
    fn write(&mut self, e: Event) -> io::Result<()> {
        match self {
            Sink::Binary(w) => w.write(e),
            Sink::Lackey(w) => match decode(e.word()) {
                Some(EventKind::Mem { addr, size, store }) => {
                    let op = if store { 'S' } else { 'L' };
                    writeln!(w, " {op} {addr:08x},{size}")
                }
                _ => Ok(()),
            },
        }
    }

    /// Flush and move the file into place.
    fn finish(self) -> io::Result<()> {
        let file = match self {
            Sink::Binary(w) => w.finish()?,
            Sink::Lackey(w) => w.into_inner().map_err(|e| e.into_error())?,
        };
        file.commit()
    }
}

fn convert(args: &ConvertArgs) -> Result<ExitCode, CliError> {
    if args.input.as_os_str() != "-" && is_same_file(&args.input, &args.output) {
        return Err(CliError::InvalidArguments(format!(
            "IN ({}) and OUT ({}) are the same file: write the conversion to another file",
            args.input.display(),
            args.output.display()
        )));
    }
    let (input, name): (Box<dyn Read>, String) = if args.input.as_os_str() == "-" {
        (Box::new(io::stdin().lock()), "standard input".into())
    } else {
        let file = File::open(&args.input).map_err(|source| CliError::Open {
            path: args.input.clone(),
            source,
        })?;
        (Box::new(file), args.input.display().to_string())
    };
    let mut reader =
        TraceReader::open(input, args.format.forced(), args.instructions).map_err(|source| {
            CliError::Trace {
                input: name.clone(),
                source,
            }
        })?;
    let flags = if reader.includes_instructions() {
        FLAG_INSTRUCTIONS
    } else {
        0
    };
    let mut sink = Sink::create(&args.output, args.to, flags)?;
    let mut write_error = None;
    let outcome = reader.read_all(&mut |e| {
        if write_error.is_none() {
            if let Err(err) = sink.write(e) {
                write_error = Some(err);
            }
        }
    });
    let out_name = args.output.display();
    if let Some(e) = write_error {
        return Err(CliError::Write {
            what: out_name.to_string(),
            source: e,
        });
    }
    sink.finish().map_err(|source| CliError::Write {
        what: out_name.to_string(),
        source,
    })?;
    let stats = reader.stats();
    let what = match reader.format() {
        TraceFormat::Lackey => format!(
            "{} lines ({} loads, {} stores, {} modifies, {} instruction fetches{})",
            stats.lines,
            stats.loads,
            stats.stores,
            stats.modifies,
            stats.instructions,
            if reader.includes_instructions() {
                " kept"
            } else {
                " dropped"
            }
        ),
        TraceFormat::Binary => format!("{} records", stats.events),
    };
    println!(
        "{name} ({}): {what} -> {} accesses written to {out_name}",
        reader.format(),
        stats.events
    );
    trace_outcome(
        outcome,
        name,
        &format!("{out_name} holds the accesses before that point"),
    )
}

fn generate(args: &GenerateArgs) -> Result<ExitCode, CliError> {
    let stride = args.stride as u64;
    if !stride.is_power_of_two() || stride > 128 {
        return Err(CliError::InvalidArguments(format!(
            "--stride {stride}: must be a power of two up to 128"
        )));
    }
    if args.working_set < stride {
        return Err(CliError::InvalidArguments(format!(
            "--working-set {}: must be at least the stride ({stride})",
            args.working_set
        )));
    }
    if args.to == OutputFormat::Binary && args.fetches > 0 {
        return Err(CliError::InvalidArguments(
            "--fetches applies to Lackey output only (binary traces hold data accesses)".into(),
        ));
    }
    // A typical x86-64 Linux stack-ish address, aligned to 1 MiB.
    const BASE: u64 = 0x7ff0_0000_0000;
    let slots = args.working_set / stride;
    // The highest address written must fit in an event word: say so before creating anything.
    let highest = (slots - 1)
        .checked_mul(stride)
        .and_then(|offset| offset.checked_add(BASE))
        .filter(|&a| Event::mem(a, args.stride, false).is_ok());
    if highest.is_none() {
        return Err(CliError::InvalidArguments(format!(
            "--working-set {}: the trace's addresses start at {BASE:#x} and must stay at most \
             {:#x} (an event word's address); allowed: at most {} bytes",
            args.working_set,
            cabprof_cab::event::MAX_ADDRESS,
            cabprof_cab::event::MAX_ADDRESS - BASE + 1
        )));
    }
    let mut sink = Sink::create(&args.output, args.to, 0)?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let result = (|| -> io::Result<()> {
        for i in 0..args.accesses {
            let slot = match args.pattern {
                Pattern::Sequential => i % slots,
                Pattern::Random => {
                    // xorshift64 (Marsaglia 2003).
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state % slots
                }
            };
            let store = args.store_every != 0 && i % args.store_every == args.store_every - 1;
            let event = Event::mem(BASE + slot * stride, args.stride, store)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            write_fetches(&mut sink, args.fetches, i)?;
            sink.write(event)?;
        }
        Ok(())
    })();
    result
        .and_then(|()| sink.finish())
        .map_err(|source| CliError::Write {
            what: args.output.display().to_string(),
            source,
        })?;
    println!(
        "wrote {} accesses ({:?}, {} B each over {} B) to {}",
        args.accesses,
        args.pattern,
        args.stride,
        args.working_set,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Lackey output only: `n` instruction-fetch lines, as a real Lackey trace interleaves them.
fn write_fetches(sink: &mut Sink, n: u32, i: u64) -> io::Result<()> {
    if let Sink::Lackey(w) = sink {
        for f in 0..n as u64 {
            writeln!(w, "I  {:08x},4", 0x0040_0000 + ((i * 4 + f) % 4096) * 4)?;
        }
    }
    Ok(())
}
