//! `cabprof simulate`: trace-driven cache simulation through a CAB ring.
//!
//! The calling thread is the application side: it reads the trace ([`crate::trace`]) and pushes
//! one `Mem` event word per access into an exhaustive CAB ring (`cabprof_cab::ring::channel`, Ha et
//! al. 2009), sized from the host's L1d (`cabprof_cab::hw`). An analyzer thread takes whole chunks and
//! runs the inclusive cache simulator (`cabprof_analyses::CacheSim`) and the reuse-distance analysis
//! (`cabprof_analyses::ReuseDistance`, Marin & Mellor-Crummey 2004) over each, so parsing and analysis
//! overlap. Nothing is lost: the ring is exhaustive, so a slow analyzer makes the reader wait.
//! With `--analyzers 2` each analysis gets its own ring and thread and the reader pushes every
//! access into both: faster when three threads have the cores for it, slower on a busy
//! two-core machine, hence not the default.
//!
//! On a malformed trace the reader stops at the bad line, the ring is closed and drained, the
//! results for everything before that line are printed, then the error, and the exit status is
//! [`EXIT_MALFORMED`].

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use cabprof_analyses::cache_sim::IFETCH_MARKER;
use cabprof_analyses::{
    CacheSim, Counting, EventAnalysis, LevelConfig, LevelStats, Policy, ReuseDistance,
};
use cabprof_cab::event::{decode, Event, EventKind};
use cabprof_cab::ring::Consumer;
use cabprof_cab::{ConsumerStats, ProducerStats, RingConfig};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::units::{parse_bytes, show_bytes, show_millions};
use crate::CliError;
use cabprof::trace::{Format, ParseStats, TraceError, TraceReader};

/// Exit status when the trace is malformed (results up to the bad record are printed).
pub(crate) const EXIT_MALFORMED: u8 = 2;

/// Progress is shown only for traces that take longer than this.
const PROGRESS_AFTER: Duration = Duration::from_millis(500);

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
    pub(crate) fn forced(self) -> Option<Format> {
        match self {
            FormatArg::Auto => None,
            FormatArg::Lackey => Some(Format::Lackey),
            FormatArg::Binary => Some(Format::Binary),
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

/// What the analyzer threads hand back.
struct Analyzed {
    sim: CacheSim,
    reuse: ReuseDistance,
    /// One entry per ring.
    rings: Vec<RingUse>,
}

/// Counters of one ring.
struct RingUse {
    delivered: u64,
    chunks: u64,
    blocks: u64,
    blocked: Duration,
    /// The analyzer thread's CPU use, where Linux tells it.
    analyzer: Option<ThreadTimes>,
}

impl RingUse {
    fn new(
        consumer: ConsumerStats,
        producer: ProducerStats,
        analyzer: Option<ThreadTimes>,
    ) -> RingUse {
        RingUse {
            delivered: consumer.delivered,
            chunks: consumer.chunks,
            blocks: producer.blocks,
            blocked: producer.blocked,
            analyzer,
        }
    }
}

/// A thread's time on a CPU, and runnable but waiting for one (other processes had the cores).
#[derive(Clone, Copy, Debug)]
struct ThreadTimes {
    on_cpu: Duration,
    waiting: Duration,
}

impl ThreadTimes {
    /// The time from `before` to `self`.
    fn since(self, before: ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            on_cpu: self.on_cpu.saturating_sub(before.on_cpu),
            waiting: self.waiting.saturating_sub(before.waiting),
        }
    }

    /// The calling thread's times so far, from Linux's `/proc/thread-self/schedstat` (its first
    /// two fields, in nanoseconds); `None` elsewhere.
    fn current() -> Option<ThreadTimes> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        Some(ThreadTimes {
            on_cpu: Duration::from_nanos(fields.next()??),
            waiting: Duration::from_nanos(fields.next()??),
        })
    }
}

/// Run `cabprof simulate`.
pub(crate) fn run(args: &SimulateArgs) -> Result<ExitCode, CliError> {
    let cachegrind = args.count_as == CountAs::Cachegrind;
    let policy = match args.policy {
        Some(PolicyArg::Fifo) => Policy::Fifo,
        Some(PolicyArg::Lru) => Policy::Lru,
        None if cachegrind => Policy::Lru,
        None => Policy::Fifo,
    };
    let Some(l1) = args.l1.0 else {
        return Err(CliError::InvalidArguments("--l1 cannot be 'none'".into()));
    };
    let level = |l: LevelSpec| LevelConfig::new(l.size, l.ways, l.line, policy);
    let (mut sim, counting) = if cachegrind {
        let invalid = |what: &str| {
            Err(CliError::InvalidArguments(format!(
                "{what} under --count-as cachegrind"
            )))
        };
        let Some(ll) = args.l2.0 else {
            return invalid("--LL (--l2) cannot be 'none'");
        };
        if args.l3.is_some() {
            return invalid("--l3 is not allowed (cachegrind simulates two levels)");
        }
        if args.instructions {
            return invalid("--instructions is not needed (fetches always go through I1)");
        }
        let i1 = match args.i1 {
            Some(LevelArg(None)) => return invalid("--I1 cannot be 'none'"),
            Some(LevelArg(Some(i1))) => i1,
            None => LevelSpec {
                size: 32 << 10,
                ways: 8,
                line: l1.line,
            },
        };
        let sim =
            CacheSim::cachegrind(level(i1), level(l1), level(ll)).map_err(CliError::config)?;
        (sim, Counting::Cachegrind)
    } else {
        if args.i1.is_some() {
            return Err(CliError::InvalidArguments(
                "--I1 needs --count-as cachegrind (per-line counting simulates data caches; \
                 --instructions adds fetches as loads)"
                    .into(),
            ));
        }
        let named: Vec<(&str, LevelSpec)> = [("--l1", Some(args.l1)), ("--l2", Some(args.l2))]
            .into_iter()
            .chain([("--l3", args.l3)])
            .filter_map(|(name, l)| Some((name, l?.0?)))
            .collect();
        // The simulated hierarchy is inclusive: a level smaller than the one above it could
        // not hold that level's lines.
        for pair in named.windows(2) {
            let ((upper, u), (lower, l)) = (pair[0], pair[1]);
            if l.size < u.size {
                return Err(CliError::InvalidArguments(format!(
                    "{lower} {}: smaller than {upper} ({}); in an inclusive hierarchy each \
                     level holds at least as many bytes as the one above it",
                    show_bytes(l.size),
                    show_bytes(u.size)
                )));
            }
        }
        let levels: Vec<LevelConfig> = named.iter().map(|&(_, l)| level(l)).collect();
        (
            CacheSim::new(&levels).map_err(CliError::config)?,
            Counting::PerLine,
        )
    };
    let line = match args.line {
        Some(line) if cachegrind && line != l1.line => {
            return Err(CliError::InvalidArguments(format!(
                "--line {line} must equal the caches' line size ({}) under --count-as \
                 cachegrind",
                l1.line
            )))
        }
        Some(line) => line,
        None if cachegrind => l1.line,
        None => 64,
    };
    let mut reuse = ReuseDistance::new(line)
        .map_err(CliError::config)?
        .with_counting(counting);
    let chunk = args
        .chunk
        .unwrap_or_else(cabprof_cab::hw::recommended_chunk_bytes);
    let buffer = match args.buffer {
        Some(buffer) => buffer,
        None => chunk.checked_mul(16).ok_or_else(|| {
            CliError::InvalidArguments(format!(
                "--chunk {chunk}: without --buffer the ring is 16 chunks, which must fit in \
                 {} bytes: at most {}",
                usize::MAX,
                usize::MAX / 16
            ))
        })?,
    };
    if let Some(physical) = cabprof_cab::hw::physical_memory().filter(|&p| buffer > p) {
        return Err(CliError::InvalidArguments(format!(
            "--buffer {buffer}: buffer_bytes larger than this machine's memory ({} bytes)",
            physical
        )));
    }
    let ring = RingConfig::new(buffer, chunk);
    let channel = || cabprof_cab::ring::channel(&ring).map_err(CliError::config);

    let (input, total_bytes, name): (Box<dyn Read>, Option<u64>, String) =
        if args.trace.as_os_str() == "-" {
            (Box::new(io::stdin().lock()), None, "standard input".into())
        } else {
            let file = File::open(&args.trace).map_err(|source| CliError::Open {
                path: args.trace.clone(),
                source,
            })?;
            let len = file
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            (Box::new(file), len, args.trace.display().to_string())
        };
    let mut reader =
        TraceReader::open(input, args.format.forced(), args.instructions).map_err(|source| {
            CliError::Trace {
                input: name.clone(),
                source,
            }
        })?;
    if cachegrind {
        match &mut reader {
            TraceReader::Lackey(r) => r.count_as_cachegrind(l1.line),
            TraceReader::Binary(_) => {
                return Err(CliError::InvalidArguments(format!(
                    "{name} is a binary trace: --count-as cachegrind needs the Lackey text \
                     (binary traces hold an M record as a load and a store, and sizes rounded \
                     up, so cachegrind's counts cannot be recovered from them)"
                )))
            }
        }
    }

    let started = Instant::now();
    let reader_before = ThreadTimes::current();
    let show_progress = !args.no_progress && io::stderr().is_terminal();
    let mut progress = Progress::new(show_progress, total_bytes, started);
    let (outcome, analyzed) = if args.analyzers == 1 {
        let (mut tx, mut rx) = channel()?;
        let analyzer = spawn("cabprof-analyzer", move || {
            let mut fetch = false;
            drain(&mut rx, |words| {
                // One decode per word feeds both analyses (each `EventAnalysis::consume` would
                // decode it again); a trace holds only Mem words, and under cachegrind
                // counting the marker before each instruction fetch.
                for &w in words {
                    match decode(w) {
                        Some(EventKind::Mem { addr, size, store }) => {
                            if std::mem::take(&mut fetch) {
                                sim.fetch(addr, size);
                            } else {
                                sim.access(addr, size, store);
                                reuse.access(addr, size);
                            }
                        }
                        Some(EventKind::Marker {
                            value: IFETCH_MARKER,
                        }) => fetch = true,
                        _ => {}
                    }
                }
            });
            (sim, reuse, rx.stats(), ThreadTimes::current())
        })?;
        let outcome = pump(&mut reader, &mut progress, |e| tx.push(e));
        tx.close();
        let (sim, reuse, stats, times) = join(analyzer)?;
        let rings = vec![RingUse::new(stats, tx.stats(), times)];
        (outcome, Analyzed { sim, reuse, rings })
    } else {
        let (mut tx_sim, mut rx_sim) = channel()?;
        let (mut tx_reuse, mut rx_reuse) = channel()?;
        let sim_thread = spawn("cabprof-cache-sim", move || {
            drain(&mut rx_sim, |words| sim.consume(words));
            (sim, rx_sim.stats(), ThreadTimes::current())
        })?;
        let reuse_thread = spawn("cabprof-reuse", move || {
            drain(&mut rx_reuse, |words| reuse.consume(words));
            (reuse, rx_reuse.stats(), ThreadTimes::current())
        })?;
        let outcome = pump(&mut reader, &mut progress, |e| {
            tx_sim.push(e);
            tx_reuse.push(e);
        });
        tx_sim.close();
        tx_reuse.close();
        let (sim, sim_stats, sim_times) = join(sim_thread)?;
        let (reuse, reuse_stats, reuse_times) = join(reuse_thread)?;
        let rings = vec![
            RingUse::new(sim_stats, tx_sim.stats(), sim_times),
            RingUse::new(reuse_stats, tx_reuse.stats(), reuse_times),
        ];
        (outcome, Analyzed { sim, reuse, rings })
    };
    let elapsed = started.elapsed();
    let reader_times = ThreadTimes::current()
        .zip(reader_before)
        .map(|(after, before)| after.since(before));
    progress.finish();

    let summary = Summary {
        name: &name,
        format: reader.format(),
        instructions: reader.includes_instructions(),
        parse: reader.stats(),
        ring,
        analyzed: &analyzed,
        reader: reader_times,
        elapsed,
        error: outcome.as_ref().err(),
    };
    let mut out = io::stdout().lock();
    let write = out
        .write_all(summary.render().as_bytes())
        .and_then(|()| out.flush());
    if let Err(e) = write {
        if e.kind() != io::ErrorKind::BrokenPipe {
            return Err(CliError::Write {
                what: "the results".into(),
                source: e,
            });
        }
    }
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(source @ TraceError::Io(_)) => Err(CliError::Trace {
            input: name,
            source,
        }),
        Err(e) => {
            eprintln!("cabprof: error: {name}: {e}");
            eprintln!("cabprof: the results above cover the trace up to that point");
            Ok(ExitCode::from(EXIT_MALFORMED))
        }
    }
}

/// The application side: read the trace block by block, pushing every event.
fn pump<R: Read>(
    reader: &mut TraceReader<R>,
    progress: &mut Progress,
    mut push: impl FnMut(Event),
) -> Result<(), TraceError> {
    loop {
        match reader.next_block(&mut push) {
            Ok(true) => progress.update(&reader.stats()),
            Ok(false) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<thread::JoinHandle<T>, CliError> {
    thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|source| CliError::Spawn {
            thread: name.to_string(),
            source,
        })
}

fn join<T>(handle: thread::JoinHandle<T>) -> Result<T, CliError> {
    handle.join().map_err(|_| CliError::AnalyzerPanicked)
}

/// An analyzer thread's loop: hand every chunk to `analyze` until the producer closes, backing
/// off as the runtime's analyzers do.
fn drain(consumer: &mut Consumer, analyze: impl FnMut(&[u64])) {
    cabprof_cab::runtime::drain(consumer, analyze);
}

/// The progress bar: hidden unless asked for and the trace takes a while.
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Progress {
    /// A bar over `total_bytes` of input (a spinner when the size is unknown), drawn only if
    /// `enabled`, and only once the trace has taken [`PROGRESS_AFTER`].
    fn new(enabled: bool, total_bytes: Option<u64>, started: Instant) -> Progress {
        let bar = enabled.then(|| {
            let (template, len) = match total_bytes {
                Some(n) => ("{wide_bar} {bytes}/{total_bytes} {msg}, eta {eta}", Some(n)),
                None => ("{spinner} {bytes} {msg}", None),
            };
            ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden())
                .with_style(ProgressStyle::with_template(template).expect("a valid template"))
        });
        Progress { bar, started }
    }

    fn update(&mut self, stats: &ParseStats) {
        let Some(bar) = &self.bar else { return };
        let elapsed = self.started.elapsed();
        if elapsed < PROGRESS_AFTER {
            return;
        }
        if bar.is_hidden() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(stats.bytes);
        bar.set_message(format!(
            "{} M accesses/s",
            show_millions(stats.events as f64 / elapsed.as_secs_f64())
        ));
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Everything printed at the end.
struct Summary<'a> {
    name: &'a str,
    format: Format,
    instructions: bool,
    parse: ParseStats,
    ring: RingConfig,
    analyzed: &'a Analyzed,
    /// The reading thread's CPU use during the run.
    reader: Option<ThreadTimes>,
    elapsed: Duration,
    error: Option<&'a TraceError>,
}

impl Summary<'_> {
    fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let p = &self.parse;
        let a = self.analyzed;
        let partial = if self.error.is_some() {
            " — PARTIAL: the trace was rejected, see the error"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "cabprof simulate: {} ({}){partial}",
            self.name, self.format
        );
        match self.format {
            Format::Lackey => {
                let _ = writeln!(
                    o,
                    "records      {} lines: {} loads, {} stores, {} modifies, {} instruction \
                     fetches ({}), {} valgrind lines and {} blank lines skipped",
                    p.lines,
                    p.loads,
                    p.stores,
                    p.modifies,
                    p.instructions,
                    if a.sim.counting() == Counting::Cachegrind {
                        "through I1, each after a marker word"
                    } else if self.instructions {
                        "simulated as loads"
                    } else {
                        "not simulated"
                    },
                    p.messages,
                    p.blank
                );
                if p.rounded + p.split > 0 {
                    let _ = writeln!(
                        o,
                        "sizes        {} records rounded up to a power of two, {} larger than \
                         128 bytes split",
                        p.rounded, p.split
                    );
                }
            }
            Format::Binary => {
                let _ = writeln!(
                    o,
                    "records      {} words: {} loads, {} stores{}",
                    p.events,
                    p.loads,
                    p.stores,
                    if self.instructions {
                        " (instruction fetches included as loads)"
                    } else {
                        ""
                    }
                );
            }
        }
        let delivered = a.rings[0].delivered;
        let blocks: u64 = a.rings.iter().map(|r| r.blocks).sum();
        let blocked: f64 = a.rings.iter().map(|r| r.blocked.as_secs_f64()).sum();
        let chunks: Vec<String> = a.rings.iter().map(|r| r.chunks.to_string()).collect();
        let layout = if a.rings.len() == 1 {
            "1 CAB ring to 1 analyzer thread running both analyses".to_string()
        } else {
            format!(
                "{} CAB rings to {} analyzer threads, one per analysis,",
                a.rings.len(),
                a.rings.len()
            )
        };
        let _ = writeln!(
            o,
            "ring         {delivered} words through {layout} ({} in {} chunks; {} chunks \
             analyzed); the reader waited {blocks} times, {blocked:.3} s",
            show_bytes(self.ring.buffer_bytes as u64),
            show_bytes(self.ring.chunk_bytes as u64),
            chunks.join(" + "),
        );
        o.push('\n');
        self.render_cache(&mut o);
        o.push('\n');
        self.render_reuse(&mut o);
        o.push('\n');
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let _ = writeln!(
            o,
            "throughput   {} accesses in {:.3} s: {} M accesses/s ({:.1} MB/s of trace)",
            delivered,
            secs,
            show_millions(delivered as f64 / secs),
            p.bytes as f64 / secs / 1e6
        );
        let analyzers: Option<Vec<ThreadTimes>> = a.rings.iter().map(|r| r.analyzer).collect();
        if let (Some(reader), Some(analyzers)) = (self.reader, analyzers) {
            // Time waiting for a core is time other processes had it: on a busy machine the
            // CPU-time rate is what the analysis sustains on a core of its own.
            let names: &[&str] = if analyzers.len() == 1 {
                &["analyzer"]
            } else {
                &["cache sim", "reuse"]
            };
            let _ = writeln!(
                o,
                "cpu time     {:<10} {:>7.3} s on a core, {:>7.3} s waiting for one",
                "reader",
                reader.on_cpu.as_secs_f64(),
                reader.waiting.as_secs_f64()
            );
            for (name, t) in names.iter().zip(&analyzers) {
                let _ = writeln!(
                    o,
                    "             {name:<10} {:>7.3} s on a core, {:>7.3} s waiting for one: \
                     {} M accesses per CPU-second",
                    t.on_cpu.as_secs_f64(),
                    t.waiting.as_secs_f64(),
                    show_millions(delivered as f64 / t.on_cpu.as_secs_f64().max(1e-9))
                );
            }
        }
        o
    }

    fn render_cache(&self, o: &mut String) {
        use std::fmt::Write as _;
        let sim = &self.analyzed.sim;
        let policy = match sim.config()[0].policy {
            Policy::Fifo => "FIFO",
            Policy::Lru => "LRU",
        };
        let cachegrind = sim.counting() == Counting::Cachegrind;
        if cachegrind {
            let _ = writeln!(
                o,
                "cache (counted as cachegrind: one access per record, a Lackey M once as a \
                 read, sizes capped at the line size; D1 and I1 in front of a non-inclusive LL, \
                 {policy}); data accesses:"
            );
        } else {
            let _ = writeln!(
                o,
                "cache (inclusive, write-allocate, {policy}; one access per line touched)"
            );
        }
        let _ = writeln!(
            o,
            "{:<5} {:>9} {:>5} {:>5}  {:>12} {:>12} {:>7}  {:>12} {:>12} {:>7}  {:>7}",
            "level",
            "size",
            "ways",
            "line",
            "loads",
            "load misses",
            "rate",
            "stores",
            "store misses",
            "rate",
            "miss"
        );
        let rate = |m: u64, n: u64| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{:.2}%", 100.0 * m as f64 / n as f64)
            }
        };
        for (i, c) in sim.config().iter().enumerate() {
            let s: LevelStats = sim.stats(i);
            let loads = s.load_hits + s.load_misses;
            let stores = s.store_hits + s.store_misses;
            let _ = writeln!(
                o,
                "L{:<4} {:>9} {:>5} {:>5}  {:>12} {:>12} {:>7}  {:>12} {:>12} {:>7}  {:>7}",
                i + 1,
                show_bytes(c.size_bytes),
                c.ways,
                format!("{} B", c.line_bytes),
                loads,
                s.load_misses,
                rate(s.load_misses, loads),
                stores,
                s.store_misses,
                rate(s.store_misses, stores),
                rate(s.misses(), s.accesses())
            );
        }
        if cachegrind {
            self.render_cachegrind(o);
        }
    }

    /// Cachegrind's summary lines (`valgrind --tool=cachegrind --cache-sim=yes`), same names
    /// and sums, so the two can be compared line by line.
    fn render_cachegrind(&self, o: &mut String) {
        use std::fmt::Write as _;
        let sim = &self.analyzed.sim;
        let (i1, ill) = (sim.fetch_stats(0), sim.fetch_stats(1));
        let (d1, dll) = (sim.stats(0), sim.stats(1));
        let reads = |s: &LevelStats| s.load_hits + s.load_misses;
        let writes = |s: &LevelStats| s.store_hits + s.store_misses;
        let split = |o: &mut String, name: &str, total: u64, rd: u64, wr: u64| {
            let _ = writeln!(o, "{name:<11} {total:>14}  ({rd} rd + {wr} wr)");
        };
        if let Some(c) = sim.i1_config() {
            let _ = writeln!(
                o,
                "as cachegrind prints it (I1 {},{},{}):",
                c.size_bytes, c.ways, c.line_bytes
            );
        }
        let _ = writeln!(o, "{:<11} {:>14}", "I refs:", reads(&i1));
        let _ = writeln!(o, "{:<11} {:>14}", "I1  misses:", i1.load_misses);
        let _ = writeln!(o, "{:<11} {:>14}", "LLi misses:", ill.load_misses);
        split(o, "D refs:", d1.accesses(), reads(&d1), writes(&d1));
        split(
            o,
            "D1  misses:",
            d1.misses(),
            d1.load_misses,
            d1.store_misses,
        );
        split(
            o,
            "LLd misses:",
            dll.misses(),
            dll.load_misses,
            dll.store_misses,
        );
        split(
            o,
            "LL refs:",
            i1.load_misses + d1.misses(),
            i1.load_misses + d1.load_misses,
            d1.store_misses,
        );
        split(
            o,
            "LL misses:",
            ill.load_misses + dll.misses(),
            ill.load_misses + dll.load_misses,
            dll.store_misses,
        );
    }

    fn render_reuse(&self, o: &mut String) {
        use std::fmt::Write as _;
        let r = &self.analyzed.reuse;
        let line = r.line_bytes() as u64;
        let _ = writeln!(
            o,
            "reuse distance ({line} B lines): {} accesses, {} cold, {} distinct lines",
            r.accesses(),
            r.cold(),
            r.distinct_lines()
        );
        let _ = writeln!(
            o,
            "miss curve of a fully-associative LRU cache (Marin & Mellor-Crummey 2004):"
        );
        let _ = writeln!(
            o,
            "  {:>10} {:>10} {:>14} {:>9}",
            "capacity", "lines", "misses", "rate"
        );
        // Powers of two from 1 KiB (at least one line) until every miss left is cold, plus the
        // capacity of each simulated level, marked.
        let levels: Vec<u64> = self
            .analyzed
            .sim
            .config()
            .iter()
            .map(|c| c.size_bytes / line)
            .collect();
        let mut sizes: Vec<u64> = Vec::new();
        let mut lines = (1024 / line).max(1);
        let last_useful = r.distribution().len() as u64;
        while lines <= 1 << 30 {
            sizes.push(lines);
            if lines >= last_useful {
                break;
            }
            lines *= 2;
        }
        sizes.extend(levels.iter().copied().filter(|l| *l > 0));
        sizes.sort_unstable();
        sizes.dedup();
        let misses = r.miss_curve(&sizes);
        let total = r.accesses();
        for (&lines, &m) in sizes.iter().zip(&misses) {
            let mark: Vec<String> = levels
                .iter()
                .enumerate()
                .filter(|(_, &l)| l == lines)
                .map(|(i, _)| format!("L{}", i + 1))
                .collect();
            let mark = if mark.is_empty() {
                String::new()
            } else {
                format!("  <- {} size", mark.join(", "))
            };
            let rate = if total == 0 {
                "-".into()
            } else {
                format!("{:.2}%", 100.0 * m as f64 / total as f64)
            };
            let _ = writeln!(
                o,
                "  {:>10} {:>10} {:>14} {:>9}{mark}",
                show_bytes(lines * line),
                lines,
                m,
                rate
            );
        }
    }
}
