//! `cabprof simulate`'s command line: the options, the cache levels they name, and the help
//! text's examples.

use crate::units::parse_bytes;
use cabprof::trace::TraceFormat;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Exit status when the trace is malformed (results up to the bad record are printed).
pub(crate) const EXIT_MALFORMED: u8 = 2;

const EXAMPLES: &str = "\
Examples:
  valgrind --tool=lackey --trace-mem=yes --log-file=app.lackey ./app
  cabprof simulate app.lackey
  cabprof simulate app.lackey --l1 48K:12:64 --l2 2M:16:64 --l3 32M:16:64 --policy lru
  valgrind --tool=lackey --trace-mem=yes --log-fd=3 ./app 3>&1 >/dev/null 2>&1 | cabprof simulate -
  cabprof trace convert app.lackey app.cabtrace && cabprof simulate app.cabtrace

  Valgrind's own messages and the program's output must stay out of the trace: with
  --log-file or --log-fd=3 the trace goes to its own file or descriptor (3>&1 sends it into
  the pipe, >/dev/null 2>&1 sends the program's stdout and stderr elsewhere). '2>&1 |' does
  not work: the program's stdout lines land in the trace and stop the reader there.

Reproducing Valgrind Cachegrind's figures on the same run:
  valgrind --tool=lackey --trace-mem=yes --log-file=app.lackey ./app
  valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 ./app
  cabprof simulate app.lackey --count-as cachegrind --I1 32768,8,64 --D1 32768,8,64 --LL 8388608,16,64
  The I refs, I1/LLi misses, D refs, D1/LLd misses and LL refs/misses lines then equal
  cachegrind's summary exactly.

Trace formats (--format auto tells them apart by the magic):
  Lackey text   'I  0400d7d4,8' (instruction fetch, skipped unless --instructions),
                ' L 04f6b868,8' load, ' S 7ff0001f0,8' store, ' M 0421c7f0,4' modify (a load
                then a store); valgrind's ==pid== lines and blank lines are skipped. Sizes that
                are not a power of two are rounded up to one; sizes above 128 are split into
                128-byte accesses.
  binary        \"CABTRACE\", u32 LE version (1), u32 LE flags (bit 0: instruction fetches
                included), then one u64 LE cabprof Mem event word per access: tag 4 in bits
                60..64, store in bit 59, log2(size) in bits 56..59, address in bits 0..56.

Exit status: 0 on success; 2 if the trace is malformed (the results for everything before the
bad line are printed first, and the error names the line number and its content); 1 on other
errors.";

/// Replacement policy, for every level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PolicyArg {
    /// Evict the line filled longest ago (the CAB paper's simulator).
    Fifo,
    /// Evict the line used longest ago.
    Lru,
}

/// How accesses are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum CountAs {
    /// Every line an access touches is one access, a Lackey M record is a load and a store;
    /// inclusive levels (any number), FIFO or LRU.
    PerLine,
    /// As Valgrind Cachegrind counts: one access per record (an M record once, as a read),
    /// sizes capped at the line size, a line-crossing access missing if either line misses; I1 and
    /// D1 in front of a non-inclusive LL shared with instruction fetches; LRU.
    Cachegrind,
}

/// Trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// Binary if the input starts with "CABTRACE", else Lackey text.
    Auto,
    /// Valgrind Lackey `--trace-mem=yes` text.
    Lackey,
    /// cabprof's binary format.
    Binary,
}

impl FormatArg {
    /// The format forced, or `None` to detect it.
    pub(crate) fn forced(self) -> Option<TraceFormat> {
        match self {
            FormatArg::Auto => None,
            FormatArg::Lackey => Some(TraceFormat::Lackey),
            FormatArg::Binary => Some(TraceFormat::Binary),
        }
    }
}

/// One cache level from the command line, or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelArg(pub Option<LevelSpec>);

/// `SIZE:WAYS:LINE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelSpec {
    /// Capacity in bytes.
    pub size: u64,
    /// Associativity.
    pub ways: u32,
    /// Line size in bytes.
    pub line: u32,
}

/// Parse `SIZE:WAYS:LINE` (`32K:4:64`), cachegrind's `SIZE,WAYS,LINE` (`32768,8,64`) or
/// `none`.
pub(crate) fn parse_level(text: &str) -> Result<LevelArg, String> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(LevelArg(None));
    }
    let bad =
        || format!("{text:?} is not SIZE:WAYS:LINE (example: 32K:4:64 or 32768,4,64) nor 'none'");
    let sep = if text.contains(',') { ',' } else { ':' };
    let mut parts = text.split(sep);
    let (Some(size), Some(ways), Some(line), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let size = parse_bytes(size)?;
    let ways = match ways.trim().parse::<u64>() {
        Ok(w) => u32::try_from(w)
            .map_err(|_| format!("WAYS {w} in {text:?} is too large: at most {}", u32::MAX))?,
        Err(_) => {
            return Err(format!(
                "WAYS {ways:?} in {text:?} is not a whole number of ways (example: 32K:4:64)"
            ))
        }
    };
    let line = parse_bytes(line)?
        .try_into()
        .map_err(|_| format!("line size {line} is too large"))?;
    Ok(LevelArg(Some(LevelSpec { size, ways, line })))
}

fn parse_size_arg(text: &str) -> Result<usize, String> {
    parse_bytes(text)?
        .try_into()
        .map_err(|_| format!("{text} is too large"))
}

/// Arguments of `cabprof simulate`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct SimulateArgs {
    /// The memory trace: a file, or '-' for standard input.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// L1 data cache as SIZE:WAYS:LINE (SIZE takes K, M, G; cachegrind's SIZE,WAYS,LINE is
    /// accepted too, and --D1 is the same option).
    #[arg(long, visible_alias = "D1", value_name = "SIZE:WAYS:LINE", default_value = "32K:4:64", value_parser = parse_level)]
    pub l1: LevelArg,
    /// L2 cache as SIZE:WAYS:LINE, or 'none' (--LL is the same option: cachegrind's last
    /// level).
    #[arg(long, visible_alias = "LL", value_name = "SIZE:WAYS:LINE", default_value = "512K:8:64", value_parser = parse_level)]
    pub l2: LevelArg,
    /// L3 cache as SIZE:WAYS:LINE (none by default; not with --count-as cachegrind).
    #[arg(long, value_name = "SIZE:WAYS:LINE", value_parser = parse_level)]
    pub l3: Option<LevelArg>,
    /// Instruction cache as SIZE:WAYS:LINE, with --count-as cachegrind only (as cachegrind's
    /// --I1; its misses share the LL with the data's) [default: 32K:8:64].
    #[arg(long = "I1", value_name = "SIZE:WAYS:LINE", value_parser = parse_level)]
    pub i1: Option<LevelArg>,
    /// Replacement policy of every level [default: fifo; lru with --count-as cachegrind,
    /// which allows nothing else].
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// How accesses are counted. per-line (the default) counts what a cache looks up: each
    /// line an access touches, and a Lackey M record as the load and the store it performs,
    /// through an inclusive hierarchy; it is the counting of cabprof's sessions too.
    /// cachegrind counts as Valgrind Cachegrind does (one access per record, an M once, sizes
    /// capped at the line size, I1 and D1 in front of a non-inclusive LL, LRU), so that with the
    /// same --I1/--D1/--LL the figures equal cachegrind's exactly; Lackey text traces only.
    #[arg(long, value_enum, default_value_t = CountAs::PerLine)]
    pub count_as: CountAs,
    /// Trace format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub format: FormatArg,
    /// Line size in bytes for the reuse-distance analysis [default: 64; with --count-as
    /// cachegrind, the caches' line size, which it must equal].
    #[arg(long, value_name = "BYTES")]
    pub line: Option<u32>,
    /// Simulate Lackey's instruction fetches ('I' lines) as loads too (with --count-as
    /// cachegrind they always go through I1 instead).
    #[arg(long)]
    pub instructions: bool,
    /// Never show the progress bar (it is shown only on a terminal, for traces that take
    /// more than half a second).
    #[arg(long)]
    pub no_progress: bool,
    /// CAB ring size in bytes [default: 16 chunks].
    #[arg(long, value_name = "BYTES", value_parser = parse_size_arg)]
    pub buffer: Option<usize>,
    /// CAB chunk size in bytes [default: 4 × the host's L1d, as `cabprof hw` shows].
    #[arg(long, value_name = "BYTES", value_parser = parse_size_arg)]
    pub chunk: Option<usize>,
    /// Analyzer threads: 1 runs both analyses over one ring; 2 gives each analysis its own
    /// ring and thread (the reader pushes every access into both).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub analyzers: u8,
}
