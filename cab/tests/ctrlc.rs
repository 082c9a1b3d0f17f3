//! Ctrl-C on a real child process: the report printed after SIGINT is complete and exact.
//!
//! Its own test binary, not a module of `tests/it/`: it runs itself again as a child and
//! interrupts it with SIGINT, whose handler is process-wide.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn example_binary() -> std::path::PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        // The packages and features of the README's test command, which has built the example
        // already (it builds every example): this selection finds it up to date, where `-p
        // cabprof-cab` would resolve the dependencies' features anew and build them again.
        .args([
            "build",
            "-q",
            "--workspace",
            "--all-features",
            "--example",
            "interrupt",
        ])
        .status()
        .expect("run cargo build");
    assert!(status.success());
    // tests live in target/<profile>/deps; examples in target/<profile>/examples.
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("interrupt")
}

/// A child that takes Ctrl-C as it would from a terminal: SIGINT at its default action,
/// whatever this process inherited. A shell starts a background job (`cmd &` in a script,
/// `nohup`) with SIGINT ignored, the child inherits that, and cabprof leaves a signal the
/// program ignores ignored, so `kill -INT` would not end it.
#[cfg(unix)]
fn default_sigint(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only calls `signal`, which is
    // async-signal-safe, and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

#[test]
#[cfg(unix)]
fn sigint_produces_a_complete_exact_report() {
    let per: u64 = 123_457; // not a multiple of any chunk: the tails are partial chunks
    let mut child = default_sigint(&mut Command::new(example_binary()))
        .arg(per.to_string())
        .env("CABPROF_BUFFER", "64K")
        .env("CABPROF_CHUNK", "4K")
        .env("CABPROF_PIN", "0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn example");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "unexpected first line: {line:?}");
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(killed.success());
    let mut report = String::new();
    out.read_line(&mut report).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C");
    let sum = 2 * (per * (per + 1) / 2);
    let want = format!("report: events={} sum={sum} threads=2 dropped=0 ", 2 * per);
    assert!(
        report.starts_with(&want),
        "got {report:?}, want {want:?}..."
    );
}
