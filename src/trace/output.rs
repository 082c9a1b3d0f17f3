//! Writing a file all or nothing: [`OutputFile`] writes to a temporary file beside the
//! destination and renames it into place on [`commit`](OutputFile::commit), so a write that
//! fails (a full disk, a malformed input, an interrupted run) never leaves a half-written file
//! and never touches an existing one. [`is_same_file`] tells whether two paths name one file
//! (by device and inode, not by name), for commands that read one and write the other.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A file being written; it appears at its path only on [`commit`](Self::commit). Dropped
/// uncommitted, it vanishes.
#[derive(Debug)]
pub struct OutputFile {
    /// `None` once committed: nothing left to remove on drop.
    temp: Option<(File, PathBuf)>,
    path: PathBuf,
}

impl OutputFile {
    /// Start writing `path`: a temporary file in the same directory (so the final rename stays
    /// on one file system), with the permissions of the file it will replace, or `rw-r--r--`
    /// (less what the umask removes).
    pub fn create(path: impl AsRef<Path>) -> io::Result<OutputFile> {
        let path = path.as_ref().to_path_buf();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        // A new file gets `rw-r--r--` less the umask, as `File::create` makes it; one that
        // replaces a file gets that file's permission bits (not its set-id bits), set on the
        // open file after creation because a mode given at creation passes through the umask.
        #[cfg(unix)]
        let replaced = {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let replaced = std::fs::metadata(&path)
                .ok()
                .map(|m| std::fs::Permissions::from_mode(m.permissions().mode() & 0o777));
            options.mode(if replaced.is_some() { 0o600 } else { 0o644 });
            replaced
        };
        // A name no other writer picks: this process's id, a per-process counter, and the
        // clock for a process that reuses the id of one that left a file behind; `create_new`
        // refuses an existing name, and the next attempt moves on.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        for _ in 0..100 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let temp = dir.join(format!(".cabprof-{pid}-{n}-{nanos:09}.tmp"));
            match options.open(&temp) {
                Ok(file) => {
                    #[cfg(unix)]
                    if let Some(perm) = &replaced {
                        if let Err(e) = file.set_permissions(perm.clone()) {
                            drop(file);
                            let _ = std::fs::remove_file(&temp);
                            return Err(e);
                        }
                    }
                    return Ok(OutputFile {
                        temp: Some((file, temp)),
                        path,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free temporary file name in {}", dir.display()),
        ))
    }

    /// Where the file will appear.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush, sync and rename the file into place, replacing any file there.
    pub fn commit(mut self) -> io::Result<()> {
        let (mut file, temp) = self
            .temp
            .take()
            .expect("an uncommitted file has its temporary");
        let moved = file
            .flush()
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&temp, &self.path));
        if moved.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        moved
    }

    fn file(&mut self) -> &mut File {
        &mut self.temp.as_mut().expect("written before commit").0
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some((file, temp)) = self.temp.take() {
            drop(file);
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// Whether `a` and `b` are the same existing file (same device and inode), whatever their
/// names: `x`, `./x`, a hard link or a symbolic link to it. `false` if either does not exist.
pub fn is_same_file(a: impl AsRef<Path>, b: impl AsRef<Path>) -> bool {
    same_file::is_same_file(a, b).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temporary directory, emptied first.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cabprof-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_file_appears_on_commit_and_replaces_the_old_one() {
        let dir = scratch("commit");
        let path = dir.join("out.bin");
        std::fs::write(&path, b"old").unwrap();
        let mut out = OutputFile::create(&path).unwrap();
        out.write_all(b"new contents").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old", "not before commit");
        assert_eq!(entries(&dir).len(), 2, "the temporary sits beside it");
        out.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
        assert_eq!(entries(&dir), ["out.bin"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_uncommitted_file_vanishes_and_leaves_the_old_one() {
        let dir = scratch("drop");
        let path = dir.join("out.bin");
        std::fs::write(&path, b"old").unwrap();
        let mut a = OutputFile::create(&path).unwrap();
        let mut b = OutputFile::create(&path).unwrap();
        a.write_all(b"a").unwrap();
        b.write_all(b"b").unwrap();
        assert_eq!(entries(&dir).len(), 3, "two writers, two temporaries");
        drop(a);
        drop(b);
        assert_eq!(entries(&dir), ["out.bin"]);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_replaced_files_permissions_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("mode");
        let path = dir.join("run.sh");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let out = OutputFile::create(&path).unwrap();
        out.commit().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
