//! Writing a report file: the JSON report (at exit, a test profile, [`Session`]'s output) and
//! the text tables beside it.
//!
//! - A report is written whole: to a temporary file beside its path, renamed over it
//!   ([`OutputFile`]), so that two processes writing one path leave one of the two reports,
//!   never a mix, and a reader never sees half of one.
//! - Only a file cabprof wrote is replaced: an existing non-empty file that does not start as
//!   a report (or as tables) does is left as it is and the write fails, naming it. A report's
//!   path may name a program's own input by mistake.
//! - A path that is not a regular file (`/dev/stdout`, `/dev/null`, a pipe), or that is the
//!   process's own standard output or error redirected to a file, is written in place,
//!   after what is there: a rename cannot replace a device, and must not replace what the
//!   program printed.
//!
//! [`Session`]: crate::Session

use crate::trace::OutputFile;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// What a report file holds, which tells a file cabprof wrote from one it must not replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contents {
    /// The JSON report.
    Json,
    /// The text tables ([`ReportData::text`](crate::ReportData::text)).
    Tables,
    /// The timeline as a Chrome trace ([`ReportData::chrome_trace`](crate::ReportData::chrome_trace)).
    ChromeTrace,
}

/// How a report file was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// Whole, renamed into place.
    Replaced,
    /// Into the file as it is (a device, a pipe, the process's own output): see the module.
    InPlace,
}

/// Where the tables of the JSON report at `json` go: its path with the extension `.txt`, or
/// with `.txt` added when it already ends in `.txt` (`report.txt` → `report.txt.txt`), so
/// that the tables never land on the report itself.
pub(crate) fn tables_path(json: &Path) -> PathBuf {
    match json.extension() {
        Some(ext) if ext.eq_ignore_ascii_case("txt") => {
            let mut path = json.as_os_str().to_owned();
            path.push(".txt");
            PathBuf::from(path)
        }
        _ => json.with_extension("txt"),
    }
}

/// Where the timeline of the JSON report at `json` goes: its path with the extension
/// `.trace.json` (`out/app.json` → `out/app.trace.json`).
pub(crate) fn trace_path(json: &Path) -> PathBuf {
    json.with_extension("trace.json")
}

/// Write `data`'s timeline as a Chrome trace to `path` (as [`write`] does); the number of
/// slices written, or an error if `data` has no timeline.
pub(crate) fn write_timeline(path: &Path, data: &crate::ReportData) -> io::Result<usize> {
    let (Some(t), Some(trace)) = (&data.timeline, data.chrome_trace()) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no timeline: the timeline analysis does not run (add it: \
             CABPROF_ANALYSES=...,timeline, or Analysis::Timeline)",
        ));
    };
    write(path, Contents::ChromeTrace, |w| {
        w.write_all(trace.as_bytes())
    })?;
    Ok(t.threads.iter().map(|t| t.slices.len()).sum())
}

/// Write `path` with what `body` writes, as the module describes. Every error names `path`.
pub(crate) fn write(
    path: &Path,
    contents: Contents,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<Written> {
    write_unnamed(path, contents, body)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn write_unnamed(
    path: &Path,
    contents: Contents,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<Written> {
    let exists = match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() || is_standard_output(path) => {
            let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
            body(&mut file)?;
            file.flush()?;
            return Ok(Written::InPlace);
        }
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    if exists {
        replaceable(path, contents)?;
    }
    // Through a symbolic link the file it names is replaced, and the link stays.
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let mut out = OutputFile::create(target)?;
    body(&mut out)?;
    out.commit()?;
    Ok(Written::Replaced)
}

/// Whether `path` is the file this process's standard output or error writes to.
fn is_standard_output(path: &Path) -> bool {
    let Ok(file) = same_file::Handle::from_path(path) else {
        return false;
    };
    [same_file::Handle::stdout(), same_file::Handle::stderr()]
        .into_iter()
        .any(|std| std.is_ok_and(|h| h == file))
}

/// `Ok` if a file at `path` may be replaced by a report file holding `contents`: there is
/// none, it is empty, or it starts as such a file does. Otherwise an error saying what may
/// be replaced.
pub(crate) fn replaceable(path: &Path, contents: Contents) -> io::Result<()> {
    let mut start = Vec::with_capacity(256);
    match std::fs::File::open(path) {
        Ok(file) => file.take(256).read_to_end(&mut start)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let ours = match contents {
        Contents::Json => starts_as_json_report(&start),
        Contents::Tables => start.starts_with(b"cabprof report"),
        Contents::ChromeTrace => {
            start.starts_with(b"{\"traceEvents\":[\n{\"name\":\"process_name\"")
        }
    };
    if start.is_empty() || ours {
        return Ok(());
    }
    let message = match contents {
        Contents::Json => {
            "exists and is not a cabprof report (a report replaces only an earlier report, an \
             empty file or none)"
        }
        Contents::Tables => {
            "exists and is not cabprof's tables (tables replace only earlier tables, an empty \
             file or none)"
        }
        Contents::ChromeTrace => {
            "exists and is not a timeline cabprof wrote (a timeline replaces only an earlier \
             one, an empty file or none)"
        }
    };
    Err(io::Error::new(io::ErrorKind::AlreadyExists, message))
}

/// Whether `start`, the first bytes of a file, begin a JSON report: `{"schema":
/// "cabprof-report/`, in any layout (the first member of every report is its schema).
fn starts_as_json_report(start: &[u8]) -> bool {
    fn token<'a>(s: &'a [u8], t: &[u8]) -> Option<&'a [u8]> {
        s.trim_ascii_start().strip_prefix(t)
    }
    token(start, b"{")
        .and_then(|s| token(s, b"\"schema\""))
        .and_then(|s| token(s, b":"))
        .and_then(|s| token(s, b"\"cabprof-report/"))
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_never_go_to_the_report_itself() {
        for (json, tables) in [
            ("out/app.json", "out/app.txt"),
            ("report.txt", "report.txt.txt"),
            ("REPORT.TXT", "REPORT.TXT.txt"),
            ("report", "report.txt"),
            ("a.b.json", "a.b.txt"),
        ] {
            assert_eq!(tables_path(Path::new(json)), Path::new(tables), "{json}");
        }
    }

    #[test]
    fn a_report_is_told_by_its_first_member() {
        let report = crate::ReportData {
            schema: crate::model::SCHEMA.into(),
            ..Default::default()
        }
        .json();
        assert!(starts_as_json_report(report.as_bytes()));
        assert!(starts_as_json_report(
            b" {\"schema\":\"cabprof-report/1\",\"session\""
        ));
        for other in [
            &b"name,size\n"[..],
            b"{\"name\": \"cabprof-report/1\"}",
            b"[{\"schema\": \"cabprof-report/1\"}]",
            b"{\"schema\": \"other/1\"}",
        ] {
            assert!(!starts_as_json_report(other), "{other:?}");
        }
    }
}
