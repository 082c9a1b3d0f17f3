//! `cabprof simulate`: trace-driven cache simulation through a CAB ring.
//!
//! The calling thread is the application side: it reads the trace ([`cabprof::trace`]) and pushes
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
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use cabprof_analyses::cache_sim::IFETCH_MARKER;
use cabprof_analyses::{CacheSim, Counting, EventAnalysis, LevelConfig, Policy, ReuseDistance};
use cabprof_cab::event::{decode, Event, EventKind};
use cabprof_cab::ring::Consumer;
use cabprof_cab::{ConsumerStats, ProducerStats, RingConfig};

use crate::units::show_bytes;
use crate::CliError;
use cabprof::trace::{TraceError, TraceReader};

mod args;
mod output;

pub(crate) use args::*;
use output::{Progress, Summary};

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
    let (sim, reuse, l1_line) = simulators(args)?;
    let cachegrind = args.count_as == CountAs::Cachegrind;
    let ring = ring_config(args)?;
    let (mut reader, total_bytes, name) = open_trace(args, cachegrind, l1_line)?;
    let started = Instant::now();
    let reader_before = ThreadTimes::current();
    let show_progress = !args.no_progress && io::stderr().is_terminal();
    let mut progress = Progress::new(show_progress, total_bytes, started);
    let (outcome, analyzed) = analyze(
        args.analyzers,
        &ring,
        sim,
        reuse,
        &mut reader,
        &mut progress,
    )?;
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
    trace_outcome(
        outcome,
        name,
        "the results above cover the trace up to that point",
    )
}

/// The cache simulator and the reuse-distance analysis the arguments ask for, and the L1 line
/// size; or which argument is wrong.
fn simulators(args: &SimulateArgs) -> Result<(CacheSim, ReuseDistance, u32), CliError> {
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
    let (sim, counting) = if cachegrind {
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
    let reuse = ReuseDistance::new(line)
        .map_err(CliError::config)?
        .with_counting(counting);
    Ok((sim, reuse, l1.line))
}

/// The ring between the trace reader and the analyzers.
fn ring_config(args: &SimulateArgs) -> Result<RingConfig, CliError> {
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
    Ok(RingConfig::new(buffer, chunk))
}

/// A trace being read, from a file or standard input.
type Trace = TraceReader<io::Chain<io::Cursor<Vec<u8>>, Box<dyn Read>>>;

/// The trace to read (standard input for `-`), its size if a file, and its name for messages.
fn open_trace(
    args: &SimulateArgs,
    cachegrind: bool,
    l1_line: u32,
) -> Result<(Trace, Option<u64>, String), CliError> {
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
            TraceReader::Lackey(r) => r.count_as_cachegrind(l1_line),
            TraceReader::Binary(_) => {
                return Err(CliError::InvalidArguments(format!(
                    "{name} is a binary trace: --count-as cachegrind needs the Lackey text \
                     (binary traces hold an M record as a load and a store, and sizes rounded \
                     up, so cachegrind's counts cannot be recovered from them)"
                )))
            }
        }
    }
    Ok((reader, total_bytes, name))
}

/// Feed the trace through rings to the analyses: one analyzer thread for both, or one each.
fn analyze(
    analyzers: u8,
    ring: &RingConfig,
    mut sim: CacheSim,
    mut reuse: ReuseDistance,
    reader: &mut Trace,
    progress: &mut Progress,
) -> Result<(Result<(), TraceError>, Analyzed), CliError> {
    let channel = || cabprof_cab::ring::channel(ring).map_err(CliError::config);
    Ok(if analyzers == 1 {
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
        let outcome = pump(reader, progress, |e| tx.push(e));
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
        let outcome = pump(reader, progress, |e| {
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
    })
}

/// How a command that read a trace to its end (or to a bad record) exits: an I/O failure is an
/// error; a malformed record is reported with `kept` (what the output holds of the trace
/// before it) and exits [`EXIT_MALFORMED`], the output before it kept.
pub(crate) fn trace_outcome(
    outcome: Result<(), TraceError>,
    name: String,
    kept: &str,
) -> Result<ExitCode, CliError> {
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(source @ TraceError::Io(_)) => Err(CliError::Trace {
            input: name,
            source,
        }),
        Err(e) => {
            eprintln!("cabprof: error: {name}: {e}");
            eprintln!("cabprof: {kept}");
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
