//! What `CABPROF=1` does with the file it writes its report to: a child forked while the
//! session ran writes nothing at its exit; two processes writing one `CABPROF_OUTPUT` leave
//! one whole report, never a mix; an output ending in `.txt` keeps its JSON; a file that is
//! not a cabprof report is never overwritten; `/dev/stdout` gets the JSON itself. This file is
//! the child too: its `child_*` tests do the work when the drivers run it again (`#[ignore]`d
//! child roles, which fail when run without their variables).
//!
//! Its own test binary, not a module of `tests/it/`: its child runs install the process-wide
//! `CABPROF=1` session and fork while it runs.

mod support;

use cabprof::report::ReportData;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use support::stderr;

/// Set in the children (to the number of calls of `leaf`), where the drivers do nothing.
const CHILD: &str = "CABPROF_TEST_REPORT_OUTPUTS_CHILD";
/// Set in a child that also calls `other`: its report is longer.
const EXTRA: &str = "CABPROF_TEST_REPORT_OUTPUTS_EXTRA";
/// Set in a child whose report is large: calling contexts of `left` and `right` to this depth.
const DEPTH: &str = "CABPROF_TEST_REPORT_OUTPUTS_DEPTH";
/// A path a child waits for before its work, so that two children end together.
const GO: &str = "CABPROF_TEST_REPORT_OUTPUTS_GO";

#[cabprof::profile]
fn leaf(x: u64) -> u64 {
    x.wrapping_mul(5)
}

#[cabprof::profile]
fn other(x: u64) -> u64 {
    x.wrapping_add(1)
}

/// Every path of calls `left` and `right` to depth `d`: 2^(d+1) - 1 calling contexts.
#[cabprof::profile]
fn left(d: u32) -> u64 {
    if d == 0 {
        1
    } else {
        left(d - 1) + right(d - 1)
    }
}

#[cabprof::profile]
fn right(d: u32) -> u64 {
    if d == 0 {
        2
    } else {
        right(d - 1) + left(d - 1)
    }
}

/// The number of calls a child makes, `None` in the drivers' own run.
fn child_calls() -> Option<u64> {
    Some(std::env::var(CHILD).ok()?.parse().unwrap())
}

#[test]
#[ignore = "a child role: run by two_processes_writing_one_output_leave_one_whole_report and the other drivers that call `child`"]
fn child_workload() {
    let n: u64 = support::child_role(
        CHILD,
        "two_processes_writing_one_output_leave_one_whole_report",
    )
    .parse()
    .unwrap();
    if let Some(go) = std::env::var_os(GO) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !Path::new(&go).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    std::hint::black_box((0..n).map(leaf).sum::<u64>());
    if let Ok(d) = std::env::var(DEPTH) {
        std::hint::black_box(left(d.parse().unwrap()));
    }
    if std::env::var_os(EXTRA).is_some() {
        std::hint::black_box(other(n));
    }
}

/// Calls `leaf`, then forks: the child (a daemon, say) outlives its parent and calls `exit`
/// once the parent has gone, that is once the parent's report is written.
#[test]
#[ignore = "a child role: run by a_forked_childs_exit_leaves_the_parents_report"]
fn child_forks() {
    let n: u64 = support::child_role(CHILD, "a_forked_childs_exit_leaves_the_parents_report")
        .parse()
        .unwrap();
    std::hint::black_box((0..n).map(leaf).sum::<u64>());
    // SAFETY: `fork` in a test process; the child only sleeps, reads its parent's id and
    // exits (which runs the exit handlers, cabprof's among them: what is tested).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: `getppid` only reads the process's parent id.
        let parent = unsafe { libc::getppid() };
        let deadline = Instant::now() + Duration::from_secs(30);
        // SAFETY: as above.
        while unsafe { libc::getppid() } == parent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::process::exit(0);
    }
}

/// A fresh directory of this test binary's scratch space.
fn scratch() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cabprof-report-outputs")
        .join(format!("{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// This binary's `test` (a child role) under `CABPROF=1`, making `calls` calls of `leaf`, its
/// report to `output`.
fn child(test: &str, calls: u64, output: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--ignored", "--exact", "--test-threads", "1"])
        .env("CABPROF", "1")
        .env("CABPROF_PIN", "0")
        .env("CABPROF_OUTPUT", output)
        .env_remove(EXTRA)
        .env_remove(GO)
        .env_remove(DEPTH)
        .env(CHILD, calls.to_string());
    cmd
}

/// Run `cmd` to its end (and the end of whatever inherited its pipes), checking it passed.
fn run(cmd: &mut Command) -> Output {
    support::passed(cmd)
}

/// The report at `path`, which must be whole.
fn report(path: &Path) -> ReportData {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    ReportData::from_json(&text).unwrap_or_else(|e| panic!("{path:?} is no report: {e}\n{text}"))
}

/// The temporary files the writers left in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_forked_childs_exit_leaves_the_parents_report() {
    if child_calls().is_some() {
        return;
    }
    let path = scratch().join("forked.json");
    // `output` reads the pipes to their end: it returns once the forked child, which holds
    // them too, has exited as well.
    let out = run(&mut child("child_forks", 7, &path));
    let data = report(&path);
    assert_eq!(data.calls("leaf"), 7, "{}", stderr(&out));
    assert!(
        data.analyzer_failures.is_empty(),
        "{:?}",
        data.analyzer_failures
    );
    assert_eq!(
        stderr(&out).matches("report written").count(),
        1,
        "one process writes: {}",
        stderr(&out)
    );
}

#[test]
fn two_processes_writing_one_output_leave_one_whole_report() {
    if child_calls().is_some() {
        return;
    }
    let dir = scratch();
    let path = dir.join("shared.json");
    let tables = dir.join("shared.txt");
    for round in 0..10 {
        // Started together, released together: their exits, and so their writes, overlap
        // (reports of thousands of calling contexts take a while to write). The second's
        // report is longer (it calls `other` too), so that a longer write left under a
        // shorter one shows.
        let go = dir.join(format!("go-{round}"));
        let spawn = |calls: u64, extra: bool| {
            let mut cmd = child("child_workload", calls, &path);
            cmd.env(GO, &go)
                .env(DEPTH, "11")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if extra {
                cmd.env(EXTRA, "1");
            }
            cmd.spawn().unwrap()
        };
        let a = spawn(3, false);
        let b = spawn(5, true);
        std::fs::write(&go, b"").unwrap();
        for c in [a, b] {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
        let data = report(&path);
        assert!(
            matches!(data.calls("leaf"), 3 | 5),
            "round {round}: {} calls",
            data.calls("leaf")
        );
        let text = std::fs::read_to_string(&tables).unwrap();
        assert!(
            text.starts_with("cabprof report") && text.matches("cabprof report —").count() == 1,
            "round {round}: torn tables:\n{text}"
        );
    }
    assert_eq!(temporaries(&dir), Vec::<String>::new());
}

#[test]
fn an_output_ending_in_txt_keeps_its_json_and_the_tables_go_beside_it() {
    if child_calls().is_some() {
        return;
    }
    let dir = scratch();
    let path = dir.join("report.txt");
    let out = run(&mut child("child_workload", 4, &path));
    assert_eq!(report(&path).calls("leaf"), 4, "{}", stderr(&out));
    let tables = dir.join("report.txt.txt");
    let text = std::fs::read_to_string(&tables).unwrap();
    assert!(text.starts_with("cabprof report"), "{text}");
    assert!(
        stderr(&out).contains(&tables.display().to_string()),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_file_that_is_not_a_cabprof_report_is_never_overwritten() {
    if child_calls().is_some() {
        return;
    }
    let dir = scratch();
    // The program's own input, named by mistake.
    let input = dir.join("input.csv");
    let contents = "name,size\nparser,42\n";
    std::fs::write(&input, contents).unwrap();
    let out = run(&mut child("child_workload", 4, &input));
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        contents,
        "the input was replaced"
    );
    let said = stderr(&out);
    assert!(
        said.contains("CABPROF_OUTPUT")
            && said.contains(&input.display().to_string())
            && said.contains("not a cabprof report"),
        "{said}"
    );
    assert!(
        !dir.join("input.txt").exists(),
        "no tables without the report"
    );
    assert_eq!(temporaries(&dir), Vec::<String>::new());

    // A report of an earlier run, and an empty file, are replaced.
    let earlier = dir.join("earlier.json");
    run(&mut child("child_workload", 4, &earlier));
    run(&mut child("child_workload", 6, &earlier));
    assert_eq!(report(&earlier).calls("leaf"), 6);
    let empty = dir.join("empty.json");
    std::fs::write(&empty, b"").unwrap();
    run(&mut child("child_workload", 2, &empty));
    assert_eq!(report(&empty).calls("leaf"), 2);

    // Tables would replace someone's notes: the report is written, the notes are kept.
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, b"my notes\n").unwrap();
    let out = run(&mut child("child_workload", 3, dir.join("notes.json")));
    assert_eq!(report(&dir.join("notes.json")).calls("leaf"), 3);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    assert!(
        stderr(&out).contains("not cabprof's tables"),
        "{}",
        stderr(&out)
    );
}

/// The JSON report at the end of `text`, after what the program printed.
fn trailing_report(text: &str) -> ReportData {
    let start = text
        .find("{\n  \"schema\"")
        .unwrap_or_else(|| panic!("no report in:\n{text}"));
    ReportData::from_json(&text[start..]).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

#[test]
fn dev_stdout_gets_the_json_and_no_tables_file() {
    if child_calls().is_some() {
        return;
    }
    // Where the tables went when their name was made from the report's: a regular file in
    // `/dev` (for root; others got an error). Compared by time, so that one an older build
    // left there does not count.
    let stray = Path::new("/dev/stdout.txt");
    let written = || std::fs::metadata(stray).and_then(|m| m.modified()).ok();
    let before = written();
    // Standard output a pipe: the JSON follows what the program printed.
    let out = run(&mut child("child_workload", 5, "/dev/stdout"));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(text.contains("test result: ok"), "{text}");
    assert_eq!(trailing_report(&text).calls("leaf"), 5);
    assert_eq!(written(), before, "tables written to {stray:?}");
    let said = stderr(&out);
    assert!(
        said.contains("report written to /dev/stdout (no tables"),
        "{said}"
    );

    // Standard output a file: the JSON is appended to what the program printed there.
    let file = scratch().join("stdout.log");
    let mut cmd = child("child_workload", 6, "/dev/stdout");
    cmd.stdout(std::fs::File::create(&file).unwrap());
    run(&mut cmd);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("test result: ok"), "{text}");
    assert_eq!(trailing_report(&text).calls("leaf"), 6);
    assert_eq!(written(), before, "tables written to {stray:?}");
}

#[test]
fn finish_and_write_replaces_only_a_report() {
    if child_calls().is_some() {
        return;
    }
    let dir = scratch();
    let input = dir.join("input.csv");
    std::fs::write(&input, "name,size\n").unwrap();
    let session = cabprof::Session::builder().output(&input).start().unwrap();
    leaf(1);
    let e = session.finish_and_write().unwrap_err();
    assert!(
        e.to_string().contains(&input.display().to_string())
            && e.to_string().contains("not a cabprof report"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&input).unwrap(), "name,size\n");

    let path = dir.join("session.json");
    for calls in [2, 3] {
        let session = cabprof::Session::builder().output(&path).start().unwrap();
        for i in 0..calls {
            leaf(i);
        }
        session.finish_and_write().unwrap();
        assert_eq!(report(&path).calls("leaf"), calls);
    }
    assert_eq!(temporaries(&dir), Vec::<String>::new());
}
