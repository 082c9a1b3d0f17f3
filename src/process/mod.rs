//! Profiling a whole program or test suite without touching its code: one process-wide
//! session, started by the first instrumented event, and per-test reports within it.
//!
//! # `CABPROF=1`
//!
//! With `CABPROF` set (and not `0`), the first instrumented event of the process starts a
//! session configured from the other `CABPROF_*` variables, and when the process exits it
//! writes the JSON report and, next to it, the text tables (`.txt`): to `CABPROF_OUTPUT` if
//! set, else to `target/cabprof/<binary>.json`, `<binary>` being the executable's name without
//! the hash cargo adds to test binaries (`tests/parser.rs` → `target/cabprof/parser.json`; a
//! crate's unit tests are named after the crate). `target` is the directory cargo built the
//! executable in (the ancestor of the executable with cargo's `CACHEDIR.TAG` or
//! `.rustc_info.json`), else `$CARGO_TARGET_DIR`, else the nearest `target` directory cargo made
//! in or above the working directory, else `./target`. A doctest (rustdoc names every doctest
//! binary `rust_out`) writes under `target/cabprof/doctest/<crate>/`: `doctest_<n>.json` for a
//! merged doctest (edition 2024, `<n>` its number), `rust_out.json` otherwise. A program that
//! starts its own [`Session`] first keeps it: the process-wide session only starts when no
//! session runs.
//!
//! A report never replaces another process's of the same run: when the default file exists
//! and was written since the run started, the report goes to `<binary>.<pid>.json` beside it
//! (two processes of one binary, same-named test binaries of two packages, the doctests of
//! a crate), and the exit message names both files. The run is the cargo command that
//! started the process (its parent's start, on Linux, when `CARGO` is in the environment, as
//! cargo sets it for `cargo test`, `cargo run` and doctests), else the process itself. An
//! older file, from an earlier run, is replaced. `CABPROF_OUTPUT` names the file outright.
//!
//! Each file is written whole, to a temporary file renamed over it, and only over a file
//! cabprof wrote (or an empty one): `CABPROF_OUTPUT` naming some other file is an error and
//! that file is kept (see `report::file`). The tables' name is the report's with `.txt` for
//! its extension, or with `.txt` added to a report named `*.txt`. A path that is not a
//! regular file (`/dev/stdout`), or that is where the process's output goes, gets the JSON
//! written in place, after what is there, and no tables.
//!
//! The report is written from an `atexit` handler: after `main` returns or `exit` is called
//! (a test binary ends that way, passing or failing), not when the process is killed or
//! aborts. By then the main thread's thread-locals are gone: its ring was closed and is drained
//! like any other, and events it emits from later exit handlers are not recorded. Threads still
//! running are drained as [`Session::finish`] drains them. A child forked while the session
//! ran writes nothing at its exit: the session, its events and its report are the parent's.
//!
//! # [`test_profile`]
//!
//! Inside a test, `let profile = cabprof::test_profile();` profiles that test alone while
//! other tests run in parallel: it joins the process-wide session (starting it if needed) and
//! marks the start and end of the test in its thread's event stream; its report holds the
//! events the **calling thread** emitted while the guard lived, nothing from other tests and
//! nothing from threads the test spawns. The thread counters are those of the calling thread
//! since its first event.
//!
//! [`Session`]: crate::Session
//! [`Session::finish`]: crate::Session::finish

mod claim;

pub(crate) use claim::claim_report;
use claim::run_start;

use crate::analysis::{AnalysisPlan, AnalysisSet};
use crate::report::file::{self as report_file, Contents, Written};
use crate::report::Report;
use crate::session::SessionBuilder;
use cabprof_cab::event::{Event, EventKind};
use cabprof_cab::runtime::{
    self, activity, emit, flush_current_thread, process_session_requested, settle_idle, with_room,
    Activity, EventAnalysis, SessionError, PROCESS_VAR,
};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

/// The process-wide session, once started.
struct Process {
    session: runtime::Session<Split>,
    /// Where the whole-process report goes at exit (`CABPROF_OUTPUT`, else under `target/`).
    output: PathBuf,
    /// `CABPROF` asked for it: write the whole-process report at exit.
    write_at_exit: bool,
    /// It armed the timeline trigger (`CABPROF_TIMELINE_TRIGGER`).
    trigger: bool,
    /// Started at load for `CABPROF_SERVE`, not by an event: a session the program starts
    /// itself takes its place ([`give_way_to_program`]).
    at_load: bool,
    /// The live endpoint (`CABPROF_SERVE`, feature `serve`), stopped with the session.
    #[cfg(feature = "serve")]
    #[allow(dead_code, reason = "held for its drop, which stops the server")]
    endpoint: Option<crate::serve::Endpoint>,
}

static PROCESS: Mutex<Option<Process>> = Mutex::new(None);

/// The id of the process that started the process-wide session. A child forked while it ran
/// inherits the exit handler, not the session (its events and analyzers are the parent's):
/// it writes no report.
static SESSION_PID: AtomicU32 = AtomicU32::new(0);

fn process() -> MutexGuard<'static, Option<Process>> {
    PROCESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first instrumented event of the process: start the process-wide session if `CABPROF`
/// asks for it, else go idle for good. Whether a session now runs. Every generated `Site`
/// carries it (as `crate::__first_event`), and the hot path calls it through the site.
#[cold]
#[inline(never)]
pub(crate) fn decide() -> bool {
    static DECIDED: Once = Once::new();
    DECIDED.call_once(|| {
        if process_session_requested() {
            // Reading the environment, probing the host and spawning analyzers take more stack
            // than the thread of a first event may have: with little left, a helper starts it.
            match with_room(|| start(true).map_err(|e| e.to_string())) {
                Ok(Ok(())) => {}
                Ok(Err(e)) | Err(e) => not_started(&e),
            }
        }
        settle_idle();
    });
    activity() == Activity::Recording
}

/// With `CABPROF` and `CABPROF_SERVE` set, the process-wide session starts when the program is
/// loaded, before `main`, rather than at its first instrumented event: a service's endpoint
/// answers scrapes from its start, idle or not. A constructor, run by the dynamic loader with
/// the program's others (`.init_array`); it sits in the module of [`decide`], which every
/// instrumented function's site names, so that the linker keeps it wherever there is
/// something to profile.
#[cfg(all(feature = "serve", any(target_os = "linux", target_os = "android")))]
#[used]
#[link_section = ".init_array"]
static START_SERVED_AT_LOAD: extern "C" fn() = start_served_at_load;

#[cfg(all(feature = "serve", any(target_os = "linux", target_os = "android")))]
extern "C" fn start_served_at_load() {
    // Nothing may unwind out of a constructor.
    let _ = std::panic::catch_unwind(|| {
        let serve = std::env::var_os("CABPROF_SERVE").is_some_and(|v| !v.is_empty());
        if !serve || !process_session_requested() {
            return;
        }
        STARTING_AT_LOAD.store(true, Ordering::Relaxed);
        // On a thread of its own, so that nothing is made for `main`'s thread before the
        // runtime has set it up; joined, so that the endpoint answers when `main` starts.
        let started = std::thread::Builder::new()
            .name("cabprof-start".into())
            .spawn(|| {
                decide();
            });
        if let Ok(started) = started {
            let _ = started.join();
        }
        STARTING_AT_LOAD.store(false, Ordering::Relaxed);
    });
}

/// The load-time constructor is starting the session.
static STARTING_AT_LOAD: AtomicBool = AtomicBool::new(false);

/// A program that starts its own [`Session`](crate::Session) keeps it, as when the
/// process-wide session waited for the first event: one started at load is finished, without
/// a report (what it recorded until now is dropped), and its port freed for the program's.
/// Not while a [`test_profile`] reads it: the program's start then fails as it would have.
pub(crate) fn give_way_to_program() {
    let Some(p) = process().take_if(|p| p.at_load && live_tests().is_empty()) else {
        return;
    };
    let _work = cabprof_cab::runtime::runtime_work();
    #[cfg(feature = "serve")]
    drop(p.endpoint);
    drop(p.session.finish());
    crate::analysis::finish_timing();
    if p.trigger {
        crate::analysis::trigger::disarm(None);
    }
}

/// Out of line: formatting takes stack, which the thread of a first event may lack.
#[cold]
#[inline(never)]
fn not_started(e: &str) {
    eprintln!("cabprof: {PROCESS_VAR} is set, but the process-wide session did not start: {e}");
}

/// The process-wide session runs, but without the endpoint `CABPROF_SERVE` asked for.
#[cfg(feature = "serve")]
#[cold]
fn not_served(e: &str) {
    eprintln!("cabprof: error: the live endpoint is not served ({e}); profiling goes on");
}

/// Start the process-wide session if it is not running.
fn start(write_at_exit: bool) -> Result<(), SessionError> {
    // Reading the settings, calibrating and spawning analyzers allocate: the runtime's own.
    let _work = cabprof_cab::runtime::runtime_work();
    let mut slot = process();
    if let Some(p) = slot.as_mut() {
        p.write_at_exit |= write_at_exit;
        return Ok(());
    }
    let builder = SessionBuilder::new().from_env()?;
    let signals = signals_from_env()?;
    // The endpoint's failure is the endpoint's: a port in use leaves the program profiled
    // and its report written, without the endpoint.
    #[cfg(feature = "serve")]
    let (serve, listener) = {
        let serve = builder.serve_settings().clone();
        let listener = serve.bind().unwrap_or_else(|e| {
            not_served(&e.to_string());
            None
        });
        (serve, listener)
    };
    let (config, plan, output) = builder.into_parts()?;
    let output = output.unwrap_or_else(|| report_dir().join(format!("{}.json", report_name())));
    let before = crate::analysis::begin_timing(&plan, &config);
    let trigger = plan.timeline_trigger.is_some();
    let plan = Arc::new(plan);
    let session = runtime::Session::start_snapshotting(config, move || Split::new(plan.clone()))
        .inspect_err(|_| crate::analysis::restore_timing(before))?;
    if trigger {
        let snapshots = session.snapshotter();
        let stem = output
            .file_stem()
            .map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
        crate::analysis::trigger::arm(
            Arc::new(move || snapshots.snapshot().map(process_report)),
            output.parent().map(PathBuf::from).unwrap_or_default(),
            stem,
        );
    }
    #[cfg(feature = "serve")]
    let endpoint = match listener {
        Some(listener) => {
            let snapshots = session.snapshotter();
            let snapshot = Arc::new(move || snapshots.snapshot().map(process_report));
            crate::serve::start(listener, &serve, snapshot)
                .inspect_err(|e| not_served(&format!("its threads did not start: {e}")))
                .ok()
        }
        None => None,
    };
    if write_at_exit && signals {
        finish_on_termination();
    }
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `write_report_at_exit` is a plain `extern "C" fn()` that never unwinds
        // (it catches panics), as `atexit` requires.
        unsafe {
            libc::atexit(write_report_at_exit);
        }
    });
    let _ = run_start();
    SESSION_PID.store(std::process::id(), Ordering::Relaxed);
    *slot = Some(Process {
        session,
        output,
        write_at_exit,
        trigger,
        at_load: STARTING_AT_LOAD.load(Ordering::Relaxed),
        #[cfg(feature = "serve")]
        endpoint,
    });
    Ok(())
}

/// A snapshot's report of the process-wide session. Building it is time inside cabprof: a
/// `Stall` word takes it out of the caller's open frames.
fn process_report(r: runtime::Report<Split>) -> Report {
    let started = cabprof_cab::clock::now();
    let report = Report::new(r.map_analysis(|s| s.all));
    cabprof_cab::runtime::stalled_since(started);
    report
}

/// `CABPROF_SIGNALS`: whether the process-wide session takes SIGINT, SIGTERM and SIGHUP to
/// write its report (1, the default), or leaves them to the program (0): a signal handler is
/// one per process, and a program that installs its own through the `ctrlc` crate after its
/// first instrumented call would otherwise get ctrlc's `MultipleHandlers` error.
fn signals_from_env() -> Result<bool, cabprof_cab::ConfigError> {
    let var = crate::settings::SIGNALS.name;
    match std::env::var(var).ok().as_deref().map(str::trim) {
        None | Some("" | "1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => Err(cabprof_cab::ConfigError::new(
            var,
            other,
            "0 (leave SIGINT, SIGTERM and SIGHUP to the program) or 1 (the default)",
        )),
    }
}

/// SIGINT and SIGTERM end the process through `exit`, so that the exit handler writes the
/// report, as when `main` returns. Not when the program handles them itself: a handler
/// already installed through the `ctrlc` crate keeps them (and the report is written when
/// that handler exits the process).
fn finish_on_termination() {
    if let Err(e) = runtime::exit_on_termination() {
        eprintln!("cabprof: SIGINT, SIGTERM and SIGHUP will not write the report: {e}");
    }
}

/// Rows per table in the text report written next to the JSON one.
const TEXT_ROWS: usize = 20;

/// At exit: finish the process-wide session and write its report, if `CABPROF` asked.
extern "C" fn write_report_at_exit() {
    // Before taking the lock, which a thread that is not in a forked child may have held at
    // the fork.
    if std::process::id() != SESSION_PID.load(Ordering::Relaxed) {
        return;
    }
    let _work = cabprof_cab::runtime::runtime_work();
    let _ = std::panic::catch_unwind(|| {
        let Some(p) = process().take_if(|p| p.write_at_exit) else {
            return;
        };
        let runtime = p.session.finish();
        crate::analysis::finish_timing();
        let report = Report::new(runtime.map_analysis(|s| s.all));
        if p.trigger {
            crate::analysis::trigger::disarm(Some(&report));
        }
        // `CABPROF_OUTPUT` names the file outright; the default name may be another
        // process's of this run.
        let explicit = std::env::var_os("CABPROF_OUTPUT").is_some_and(|v| !v.is_empty());
        let written = claim_report(&p.output, !explicit).and_then(|claim| {
            let how = report_file::write(&claim.path, Contents::Json, |w| report.write_json(w))?;
            Ok((claim, how))
        });
        let (claim, how) = match written {
            Ok(written) => written,
            Err(e) if explicit => {
                return eprintln!("cabprof: the report was not written to CABPROF_OUTPUT: {e}")
            }
            Err(e) => return eprintln!("cabprof: the report was not written: {e}"),
        };
        // Tables and the timeline in a stream would follow the JSON and spoil it for a
        // reader: they go beside a report in a file of its own only.
        let timeline = match how {
            Written::Replaced if report.data.timeline.is_some() => {
                let path = report_file::trace_path(&claim.path);
                match report_file::write_timeline(&path, &report.data) {
                    Ok(_) => format!(" (timeline: {})", path.display()),
                    Err(e) => format!(" (timeline not written: {e})"),
                }
            }
            _ => String::new(),
        };
        let tables = match how {
            Written::InPlace => format!(
                " (no tables: they would follow the JSON in {}; `cabprof report` renders them)",
                claim.path.display()
            ),
            Written::Replaced => {
                let path = report_file::tables_path(&claim.path);
                match report_file::write(&path, Contents::Tables, |w| {
                    w.write_all(report.text(TEXT_ROWS).as_bytes())
                }) {
                    Ok(_) => format!(" (tables: {})", path.display()),
                    Err(e) => format!(" (tables not written: {e})"),
                }
            }
        };
        eprintln!(
            "cabprof: {} events, report written to {}{tables}{timeline}{}",
            report.data.totals.events,
            claim.path.display(),
            claim.note()
        );
    });
}

/// `target/cabprof`: under the directory cargo built this executable in (the ancestor holding
/// one of the files cargo keeps at the top of its target directory). An executable built
/// elsewhere (a doctest is built in a temporary directory) writes under `$CARGO_TARGET_DIR`
/// if set, else under the nearest `target` directory cargo made in or above the working
/// directory (a workspace's, for a member's doctests), else under `./target`.
pub(crate) fn output_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let built_in = exe
        .as_deref()
        .and_then(|e| e.ancestors().find(|d| is_target_dir(d)));
    let target = match built_in {
        Some(dir) => dir.to_path_buf(),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                let cwd = std::env::current_dir().ok()?;
                cwd.ancestors()
                    .map(|d| d.join("target"))
                    .find(|t| is_target_dir(t))
            })
            .unwrap_or_else(|| PathBuf::from("target")),
    };
    target.join("cabprof")
}

/// Whether cargo made `dir` as a target directory: `CACHEDIR.TAG` (newer cargo) or
/// `.rustc_info.json` (every cargo) is at its top.
fn is_target_dir(dir: &Path) -> bool {
    dir.join("CACHEDIR.TAG").is_file() || dir.join(".rustc_info.json").is_file()
}

/// Set by rustdoc (edition 2024's merged doctests) in the environment of each doctest it runs:
/// the test's number within the crate's doctests.
const DOCTEST_NUMBER_VAR: &str = "RUSTDOC_DOCTEST_RUN_NB_TEST";

/// Whether this process is a doctest: rustdoc runs every doctest of an edition before 2024 as
/// `rust_out` in a directory `rustdoctest*`, and a merged one with [`DOCTEST_NUMBER_VAR`] set.
fn is_doctest() -> bool {
    if std::env::var_os(DOCTEST_NUMBER_VAR).is_some() {
        return true;
    }
    let exe = std::env::current_exe().ok();
    exe.as_deref().is_some_and(|e| {
        e.file_stem().is_some_and(|s| s == "rust_out")
            && e.parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d.to_string_lossy().starts_with("rustdoctest"))
    })
}

/// The directory of this process's reports: `target/cabprof`, or for a doctest
/// `target/cabprof/doctest/<crate>` (`CARGO_CRATE_NAME`, which cargo sets for rustdoc and
/// its doctests).
pub(crate) fn report_dir() -> PathBuf {
    let dir = output_dir();
    if !is_doctest() {
        return dir;
    }
    let dir = dir.join("doctest");
    match std::env::var("CARGO_CRATE_NAME") {
        Ok(name) if !name.is_empty() => dir.join(file_name_part(&name)),
        _ => dir,
    }
}

/// The name of this process's report within [`report_dir`]: the binary's name, or for a
/// merged doctest its number. Every doctest of an older edition is `rust_out`: the run rule
/// of [`claim_report`] gives each its own file.
pub(crate) fn report_name() -> String {
    match std::env::var(DOCTEST_NUMBER_VAR) {
        Ok(n) if is_doctest() && !n.is_empty() => format!("doctest_{}", file_name_part(&n)),
        _ => crate::names::binary_name(),
    }
}

/// `s` with every character that is not portable in a file name replaced by `_`.
pub(crate) fn file_name_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Per-test reports

/// Marker values of the test marks: `TEST_MARK | BEGIN | id` and `TEST_MARK | id`.
const TEST_MARK: u64 = 0x0CAB_7E57 << 32;
const BEGIN: u64 = 1 << 31;
const ID_MASK: u64 = BEGIN - 1;

/// `Some((begin, id))` if `word` is a test mark.
#[inline]
fn test_mark(word: u64) -> Option<(bool, u32)> {
    match Event::from_word(word)?.kind() {
        EventKind::Marker { value } if value & !(BEGIN | ID_MASK) == TEST_MARK => {
            Some((value & BEGIN != 0, (value & ID_MASK) as u32))
        }
        _ => None,
    }
}

fn mark(begin: bool, id: u32) {
    let value = TEST_MARK | if begin { BEGIN } else { 0 } | u64::from(id);
    if let Ok(e) = Event::marker(value) {
        emit(e);
    }
}

/// The tests whose guard is open or whose report is not made yet: the only ones whose
/// analyses the streams keep. Without it every finished test's analyses stayed in every
/// stream and were cloned into every later snapshot, so a process of many tests slowed down
/// quadratically.
static LIVE_TESTS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn live_tests() -> MutexGuard<'static, Vec<u32>> {
    LIVE_TESTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The process-wide session's analysis: every event into `all`, and the events between a
/// test's marks also into that test's own set.
#[derive(Debug)]
struct Split {
    plan: Arc<AnalysisPlan>,
    all: AnalysisSet,
    /// The tests whose marks this stream is between, innermost last: a test may open a
    /// profile inside another's (nested guards), and its events belong to both.
    current: Vec<u32>,
    tests: HashMap<u32, AnalysisSet>,
}

impl Clone for Split {
    /// A snapshot's copy: the live tests' analyses only.
    fn clone(&self) -> Split {
        let live = live_tests().clone();
        Split {
            plan: self.plan.clone(),
            all: self.all.clone(),
            current: self.current.clone(),
            tests: self
                .tests
                .iter()
                .filter(|(id, _)| live.contains(id))
                .map(|(&id, set)| (id, set.clone()))
                .collect(),
        }
    }
}

impl Split {
    fn new(plan: Arc<AnalysisPlan>) -> Split {
        Split {
            all: plan.build(),
            plan,
            current: Vec::new(),
            tests: HashMap::new(),
        }
    }

    fn feed(&mut self, words: &[u64]) {
        if words.is_empty() {
            return;
        }
        for id in &self.current {
            if let Some(set) = self.tests.get_mut(id) {
                set.consume(words);
            }
        }
    }

    /// A test begins (`begin`) or ends on this stream. A beginning also drops the analyses of
    /// tests whose reports are made.
    fn on_mark(&mut self, begin: bool, id: u32) {
        if begin {
            let live = live_tests();
            self.tests.retain(|t, _| live.contains(t));
            drop(live);
            self.current.push(id);
            let plan = &self.plan;
            self.tests.entry(id).or_insert_with(|| plan.build());
        } else if let Some(i) = self.current.iter().rposition(|&t| t == id) {
            self.current.remove(i);
        }
    }
}

impl EventAnalysis for Split {
    fn consume(&mut self, words: &[u64]) {
        self.all.consume(words);
        let mut start = 0;
        for (i, &w) in words.iter().enumerate() {
            if let Some((begin, id)) = test_mark(w) {
                self.feed(&words[start..i]);
                start = i + 1;
                self.on_mark(begin, id);
            }
        }
        self.feed(&words[start..]);
    }

    fn merge(&mut self, other: Split) {
        self.all.merge(other.all);
        for (id, set) in other.tests {
            match self.tests.get_mut(&id) {
                Some(mine) => mine.merge(set),
                None => {
                    self.tests.insert(id, set);
                }
            }
        }
    }
}

static NEXT_TEST: AtomicU32 = AtomicU32::new(0);

/// Profile the calling test while other tests run in parallel: see [`TestProfile`].
///
/// ```no_run
/// # fn parse(_: &str) {}
/// #[test]
/// fn parses_a_long_file() {
///     let profile = cabprof::test_profile();
///     parse("...");
///     let report = profile.finish();
///     print!("{}", report.text(10));
/// }
/// ```
///
/// # In a crate that compiles cabprof out
///
/// `test_profile` exists with cabprof's `enabled` feature only. A crate whose builds leave
/// instrumentation out (`default-features = false`) turns it on for its tests alone with a
/// dev-dependency, `cabprof = { version = "0.1", features = ["enabled"] }`: `cargo test`
/// then instruments the crate and its tests, and `cargo build` does not (the README's
/// *Turning it off*).
///
/// # Panics
///
/// If the process-wide session cannot start: a bad `CABPROF_*` variable, or another
/// [`Session`](crate::Session) running in this process.
pub fn test_profile() -> TestProfile {
    let _ = run_start();
    // As in `decide`: a test may run on a thread with a small stack.
    let started = with_room(|| start(process_session_requested()).map_err(|e| e.to_string()));
    if let Ok(Err(e)) | Err(e) = started {
        panic!("cabprof::test_profile: the process-wide session did not start: {e}");
    }
    let id = NEXT_TEST.fetch_add(1, Ordering::Relaxed) & ID_MASK as u32;
    {
        // Growing the list is the runtime's work: an allocation event emitted while the lock
        // is held could wait for an analyzer that waits for the lock.
        let _work = cabprof_cab::runtime::runtime_work();
        live_tests().push(id);
    }
    mark(true, id);
    TestProfile {
        id,
        thread: cabprof_cab::runtime::thread_name(),
        finished: false,
        _not_send: PhantomData,
    }
}

/// The profile of one test, from [`test_profile`] to [`finish`](Self::finish) (or drop).
///
/// It holds the events the thread that called [`test_profile`] emitted in between, and only
/// those: not the events of other tests running in parallel, and not those of threads the test
/// spawns. Its thread counters are that thread's since its first event. Dropped without
/// `finish`, it writes its JSON report to `target/cabprof/<binary>/<thread>.json` (the thread
/// of a `#[test]` is named after the test; a doctest's is `main`, in
/// `target/cabprof/doctest/<crate>/<rust_out or doctest_n>/`), or to `<thread>.<pid>.json`
/// when another process of this run wrote that file, as for the whole-process report. It
/// stays on its thread (`!Send`).
#[derive(Debug)]
#[must_use = "the profile ends when this guard is dropped"]
pub struct TestProfile {
    id: u32,
    /// The calling thread's name: its counters are the report's.
    thread: String,
    finished: bool,
    _not_send: PhantomData<*const ()>,
}

impl TestProfile {
    /// End the profile and return its report.
    pub fn finish(mut self) -> Report {
        self.finished = true;
        self.end();
        let (id, thread) = (self.id, self.thread.clone());
        // Boxed: a report is kilobytes, copied through every frame of a debug build, and the
        // test's thread may have little stack.
        match with_room(move || Box::new(report_of(id, &thread))) {
            Ok(report) => *report,
            Err(e) => panic!("cabprof: the test's report could not be made: {e}"),
        }
    }

    /// Mark the end of the test in this thread's events and hand them over.
    fn end(&self) {
        mark(false, self.id);
        flush_current_thread();
    }
}

/// The report of test `id`, whose thread is `thread`, once its end is marked and flushed.
/// Snapshotting and building a report take more stack than a test's thread may have: run
/// through [`with_room`].
fn report_of(id: u32, thread: &str) -> Report {
    let snapshot = process().as_ref().and_then(|p| p.session.snapshot());
    forget_test(id);
    let mut runtime = snapshot
        .expect("the process-wide session runs until the process exits")
        .map_analysis(|mut split| split.tests.remove(&id).unwrap_or_default());
    runtime.threads.retain(|t| t.thread == thread);
    runtime.finish_totals();
    Report::new(runtime)
}

/// Test `id`'s report is made (or never will be): the streams may drop its analyses.
fn forget_test(id: u32) {
    live_tests().retain(|&t| t != id);
}

impl Drop for TestProfile {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if std::thread::panicking() {
            forget_test(self.id);
            return;
        }
        self.end();
        let (id, thread) = (self.id, self.thread.clone());
        let written = with_room(move || {
            let report = report_of(id, &thread);
            let dir = report_dir().join(report_name());
            let path = dir.join(format!(
                "{}.json",
                file_name_part(&thread.replace("::", "-"))
            ));
            let written = claim_report(&path, true).and_then(|claim| {
                report_file::write(&claim.path, Contents::Json, |w| report.write_json(w))?;
                Ok(claim)
            });
            match written {
                Ok(claim) if claim.displaced.is_some() => Ok(Some(format!(
                    "test profile written to {}{}",
                    claim.path.display(),
                    claim.note()
                ))),
                Ok(_) => Ok(None),
                Err(e) => Err(format!("the test profile was not written: {e}")),
            }
        });
        match written {
            Ok(Ok(Some(note))) => eprintln!("cabprof: {note}"),
            Ok(Ok(None)) => {}
            Ok(Err(e)) | Err(e) => eprintln!("cabprof: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cabprof_cab::event::MethodId;

    fn marked(begin: bool, id: u32) -> u64 {
        Event::marker(TEST_MARK | if begin { BEGIN } else { 0 } | u64::from(id))
            .unwrap()
            .word()
    }

    #[test]
    fn finished_tests_leave_the_streams_and_the_snapshots() {
        // Ids far from any a real test of this binary takes.
        let base = 1 << 30;
        let mut split = Split::new(Arc::new(AnalysisPlan::default()));
        let call = Event::call(MethodId::ROOT, MethodId::new(1).unwrap()).word();
        for id in base..base + 100 {
            live_tests().push(id);
            split.consume(&[marked(true, id), call, marked(false, id)]);
            assert_eq!(
                split.clone().tests.len(),
                1,
                "a snapshot copies the live test"
            );
            forget_test(id);
        }
        assert!(split.tests.len() <= 1, "{} tests kept", split.tests.len());
        assert!(split.clone().tests.is_empty());
    }
}
