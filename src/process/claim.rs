//! Report files of the process-wide session: one per process, never over another process's
//! report of the same run (see the parent module's docs).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::report::file::{self as report_file, Contents};
use std::time::{Duration, SystemTime};

/// Where a report went, and whether its default name was taken.
pub(crate) struct Claim {
    /// The file written.
    pub(crate) path: PathBuf,
    /// The default name, when it held another process's report of this run.
    pub(crate) displaced: Option<PathBuf>,
}

impl Claim {
    /// What the exit message adds: nothing, or why the report has another name.
    pub(crate) fn note(&self) -> String {
        match &self.displaced {
            Some(taken) => format!(
                "; {} holds another process's report of this run",
                taken.display()
            ),
            None => String::new(),
        }
    }
}

/// Report files this process claimed: its own, to overwrite.
static CREATED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// How long before the run's start a report still counts as of this run: a parent's start is
/// read from clocks of 10 ms ticks, and a file's modification time lags the clock by up to one
/// kernel tick (10 ms at worst). A report of an earlier run written this close to the start is
/// kept too.
const RUN_START_SLACK: Duration = Duration::from_millis(100);

/// Choose the file the report at `path` goes to (and make its directory), for
/// [`report_file::write`] to write. With `keep_others`, a file already there that another
/// process wrote since this run started (see [`run_start`]) is kept, and the report goes to
/// `<stem>.<pid>.<ext>` beside it: two processes of one binary, same-named test binaries of
/// two packages, doctests. The name is then taken at once by an empty file, which the report
/// replaces. An older file, from an earlier run, is replaced, and so is one this process
/// wrote itself.
pub(crate) fn claim_report(path: &Path, keep_others: bool) -> std::io::Result<Claim> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    }
    let mut created = CREATED.lock().unwrap_or_else(|e| e.into_inner());
    let mine = created.iter().any(|p| p == path);
    if !keep_others || mine {
        if !mine {
            created.push(path.to_path_buf());
        }
        return Ok(Claim {
            path: path.to_path_buf(),
            displaced: None,
        });
    }
    // Held from the age check to the creation: of two processes that both found an old file,
    // the second must not remove the first one's new report.
    let _lock = DirLock::take(path.parent().unwrap_or(Path::new(".")));
    let since = run_start().checked_sub(RUN_START_SLACK);
    let of_this_run = |p: &Path| match (std::fs::metadata(p).and_then(|m| m.modified()), since) {
        (Ok(modified), Some(since)) => modified >= since,
        // No clock to compare with: whoever wrote it may be of this run.
        (Ok(_), None) => true,
        (Err(_), _) => false,
    };
    if !of_this_run(path) {
        // An earlier run's report (or none): replace it, if it is one. `create_new` below,
        // not a plain create, so that of two processes that both found it old, one takes the
        // name and the other moves aside.
        report_file::replaceable(path, Contents::Json)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let _ = std::fs::remove_file(path);
    }
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(_) => {
            created.push(path.to_path_buf());
            Ok(Claim {
                path: path.to_path_buf(),
                displaced: None,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let aside = with_pid(path);
            created.push(aside.clone());
            Ok(Claim {
                path: aside,
                displaced: Some(path.to_path_buf()),
            })
        }
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        )),
    }
}

/// An exclusive advisory lock (`flock`) on `dir/.cabprof.lock`, released when dropped (the
/// file is closed). Where it cannot be taken, nothing is held: the reports are then as safe
/// as `create_new` alone makes them.
struct DirLock {
    _file: Option<File>,
}

impl DirLock {
    fn take(dir: &Path) -> DirLock {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let Ok(file) = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".cabprof.lock"))
        else {
            return DirLock { _file: None };
        };
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: `flock` on a descriptor this function owns; it blocks until the lock is
            // free and touches no memory of ours.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return DirLock { _file: None };
            }
        }
        DirLock { _file: Some(file) }
    }
}

/// `dir/name.json` → `dir/name.<pid>.json`.
fn with_pid(path: &Path) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let pid = std::process::id();
    match path.extension() {
        Some(ext) => path.with_file_name(format!("{stem}.{pid}.{}", ext.to_string_lossy())),
        None => path.with_file_name(format!("{stem}.{pid}")),
    }
}

/// When this run started. Under cargo (which sets `CARGO` in the environment of what it
/// runs: `cargo test`, `cargo run`, rustdoc and its doctests) the run is the command that
/// started this process: its parent's start (Linux; cargo, rustdoc, or the test that
/// spawned this process). Otherwise, or where that cannot be read, the run is this process:
/// from when it first needed a report (its process-wide session's start, or its first test
/// profile).
pub(super) fn run_start() -> SystemTime {
    static START: OnceLock<SystemTime> = OnceLock::new();
    *START.get_or_init(|| {
        let parent = if std::env::var_os("CARGO").is_some() {
            parent_start()
        } else {
            None
        };
        parent.unwrap_or_else(SystemTime::now)
    })
}

/// When the parent process started, from `/proc`: its start in clock ticks since boot,
/// against the time since boot now.
#[cfg(target_os = "linux")]
fn parent_start() -> Option<SystemTime> {
    let ppid = std::os::unix::process::parent_id();
    let stat = std::fs::read_to_string(format!("/proc/{ppid}/stat")).ok()?;
    // After the command name (in parentheses, which it may itself contain), the fields from
    // the third on: `starttime` is the 22nd.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let started_ticks: u64 = fields.get(22 - 3)?.parse().ok()?;
    // SAFETY: `sysconf` only reads a configuration value.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks_per_s <= 0 {
        return None;
    }
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let ago = uptime - started_ticks as f64 / ticks_per_s as f64;
    SystemTime::now().checked_sub(Duration::try_from_secs_f64(ago.max(0.0)).ok()?)
}

#[cfg(not(target_os = "linux"))]
fn parent_start() -> Option<SystemTime> {
    None
}
