//! Writing a file all or nothing: [`OutputFile`] writes to a temporary file beside the
//! destination and renames it into place on [`commit`](OutputFile::commit), so a write that
//! fails (a full disk, a malformed input, an interrupted run) never leaves a half-written file
//! and never touches an existing one. [`is_same_file`] tells whether two paths name one file
//! (by device and inode, not by name), for commands that read one and write the other.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file being written; it appears at its path only on [`commit`](Self::commit). Dropped
/// uncommitted, it vanishes.
#[derive(Debug)]
pub struct OutputFile {
    temp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl OutputFile {
    /// Start writing `path`: a temporary file in the same directory (so the final rename stays
    /// on one file system), with the permissions of the file it will replace, or `rw-r--r--`.
    pub fn create(path: impl AsRef<Path>) -> io::Result<OutputFile> {
        let path = path.as_ref().to_path_buf();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".cabprof-").suffix(".tmp");
        #[cfg(unix)]
        let permissions = match std::fs::metadata(&path) {
            Ok(m) => m.permissions(),
            Err(_) => std::os::unix::fs::PermissionsExt::from_mode(0o644),
        };
        #[cfg(unix)]
        builder.permissions(permissions);
        let temp = builder.tempfile_in(dir)?;
        Ok(OutputFile { temp, path })
    }

    /// Where the file will appear.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush, sync and rename the file into place, replacing any file there.
    pub fn commit(mut self) -> io::Result<()> {
        self.temp.flush()?;
        self.temp.as_file().sync_all()?;
        self.temp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// Whether `a` and `b` are the same existing file (same device and inode), whatever their
/// names: `x`, `./x`, a hard link or a symbolic link to it. `false` if either does not exist.
pub fn is_same_file(a: impl AsRef<Path>, b: impl AsRef<Path>) -> bool {
    same_file::is_same_file(a, b).unwrap_or(false)
}
