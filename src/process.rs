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
//! `.rustc_info.json`), else `./target`. A program that starts its own [`Session`] first keeps
//! it: the process-wide session only starts when no session runs.
//!
//! The report is written from an `atexit` handler: after `main` returns or `exit` is called
//! (a test binary ends that way, passing or failing), not when the process is killed or
//! aborts. By then the main thread's thread-locals are gone: its ring was closed and is drained
//! like any other, and events it emits from later exit handlers are not recorded. Threads still
//! running are drained as [`Session::finish`] drains them.
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

use crate::analysis::{AnalysisPlan, AnalysisSet};
use crate::report::Report;
use crate::session::SessionBuilder;
use cabprof_cab::event::{Event, EventKind};
use cabprof_cab::runtime::{
    self, activity, emit, flush_current_thread, process_session_requested, settle_idle, with_room,
    Activity, RingAnalysis, SessionError, PROCESS_VAR,
};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

/// The process-wide session, once started.
struct Process {
    session: runtime::Session<Split>,
    /// Where the whole-process report goes at exit (`CABPROF_OUTPUT`, else under `target/`).
    output: PathBuf,
    /// `CABPROF` asked for it: write the whole-process report at exit.
    write_at_exit: bool,
}

static PROCESS: Mutex<Option<Process>> = Mutex::new(None);

fn process() -> MutexGuard<'static, Option<Process>> {
    PROCESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first instrumented event of the process: start the process-wide session if `CABPROF`
/// asks for it, else go idle for good. Whether a session now runs.
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

/// Out of line: formatting takes stack, which the thread of a first event may lack.
#[cold]
#[inline(never)]
fn not_started(e: &str) {
    eprintln!("cabprof: {PROCESS_VAR} is set, but the process-wide session did not start: {e}");
}

/// Start the process-wide session if it is not running.
fn start(write_at_exit: bool) -> Result<(), SessionError> {
    let mut slot = process();
    if let Some(p) = slot.as_mut() {
        p.write_at_exit |= write_at_exit;
        return Ok(());
    }
    let (config, plan, output) = SessionBuilder::new().from_env()?.into_parts()?;
    let before = crate::analysis::begin_timing(&plan);
    let plan = Arc::new(plan);
    let session = runtime::Session::start_snapshotting(config, move || Split::new(plan.clone()))
        .inspect_err(|_| crate::analysis::restore_timing(before))?;
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `write_report_at_exit` is a plain `extern "C" fn()` that never unwinds
        // (it catches panics), as `atexit` requires.
        unsafe {
            libc::atexit(write_report_at_exit);
        }
    });
    *slot = Some(Process {
        session,
        output: output.unwrap_or_else(|| output_dir().join(format!("{}.json", binary_name()))),
        write_at_exit,
    });
    Ok(())
}

/// Rows per table in the text report written next to the JSON one.
const TEXT_ROWS: usize = 20;

/// At exit: finish the process-wide session and write its report, if `CABPROF` asked.
extern "C" fn write_report_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(p) = process().take_if(|p| p.write_at_exit) else {
            return;
        };
        let runtime = p.session.finish();
        let report = Report::new(runtime.map_analysis(|s| s.all));
        let tables = p.output.with_extension("txt");
        let written = p
            .output
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::File::create(&p.output))
            .and_then(|f| report.write_json(f))
            .and_then(|()| std::fs::write(&tables, report.text(TEXT_ROWS)));
        match written {
            Ok(()) => eprintln!(
                "cabprof: {} events, report written to {} (tables: {})",
                report.data.totals.events,
                p.output.display(),
                tables.display()
            ),
            Err(e) => eprintln!("cabprof: could not write {}: {e}", p.output.display()),
        }
    });
}

/// `target/cabprof`: under the directory cargo built this executable in (the ancestor holding
/// one of the files cargo keeps at the top of its target directory), else under `./target`.
pub(crate) fn output_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let target = exe
        .as_deref()
        .and_then(|e| e.ancestors().find(|d| is_target_dir(d)))
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    target.join("cabprof")
}

/// Whether cargo made `dir` as a target directory: `CACHEDIR.TAG` (newer cargo) or
/// `.rustc_info.json` (every cargo) is at its top.
fn is_target_dir(dir: &Path) -> bool {
    dir.join("CACHEDIR.TAG").is_file() || dir.join(".rustc_info.json").is_file()
}

/// The executable's name without the `-<16 hex digits>` cargo gives test binaries.
pub(crate) fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .map_or_else(|| "cabprof".into(), |s| s.to_string_lossy().into_owned());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem,
    }
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

/// The process-wide session's analysis: every event into `all`, and the events between a
/// test's marks also into that test's own set.
#[derive(Clone, Debug)]
struct Split {
    plan: Arc<AnalysisPlan>,
    all: AnalysisSet,
    /// The test whose marks this stream is between.
    current: Option<u32>,
    tests: HashMap<u32, AnalysisSet>,
}

impl Split {
    fn new(plan: Arc<AnalysisPlan>) -> Split {
        Split {
            all: plan.build(),
            plan,
            current: None,
            tests: HashMap::new(),
        }
    }

    fn feed(&mut self, words: &[u64]) {
        if let (Some(id), false) = (self.current, words.is_empty()) {
            if let Some(set) = self.tests.get_mut(&id) {
                set.consume(words);
            }
        }
    }
}

impl RingAnalysis for Split {
    fn consume(&mut self, words: &[u64]) {
        self.all.consume(words);
        let mut start = 0;
        for (i, &w) in words.iter().enumerate() {
            if let Some((begin, id)) = test_mark(w) {
                self.feed(&words[start..i]);
                start = i + 1;
                self.current = begin.then_some(id);
                if begin {
                    let plan = &self.plan;
                    self.tests.entry(id).or_insert_with(|| plan.build());
                }
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
/// # Panics
///
/// If the process-wide session cannot start: a bad `CABPROF_*` variable, or another
/// [`Session`](crate::Session) running in this process.
pub fn test_profile() -> TestProfile {
    // As in `decide`: a test may run on a thread with a small stack.
    let started = with_room(|| start(process_session_requested()).map_err(|e| e.to_string()));
    if let Ok(Err(e)) | Err(e) = started {
        panic!("cabprof::test_profile: the process-wide session did not start: {e}");
    }
    let id = NEXT_TEST.fetch_add(1, Ordering::Relaxed) & ID_MASK as u32;
    let thread = std::thread::current();
    mark(true, id);
    TestProfile {
        id,
        thread: thread.name().unwrap_or("main").to_owned(),
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
/// of a `#[test]` is named after the test). It stays on its thread (`!Send`).
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
    let mut runtime = snapshot
        .expect("the process-wide session runs until the process exits")
        .map_analysis(|mut split| split.tests.remove(&id).unwrap_or_default());
    runtime.threads.retain(|t| t.thread == thread);
    runtime.finish_totals();
    Report::new(runtime)
}

impl Drop for TestProfile {
    fn drop(&mut self) {
        if self.finished || std::thread::panicking() {
            return;
        }
        self.end();
        let (id, thread) = (self.id, self.thread.clone());
        let written = with_room(move || {
            let report = report_of(id, &thread);
            let dir = output_dir().join(binary_name());
            let path = dir.join(format!("{}.json", thread.replace("::", "-")));
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::File::create(&path))
                .and_then(|f| report.write_json(f))
                .map_err(|e| format!("could not write {}: {e}", path.display()))
        });
        if let Ok(Err(e)) | Err(e) = written {
            eprintln!("cabprof: {e}");
        }
    }
}
