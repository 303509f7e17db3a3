//! The rule every writer of a result follows: write beside the target, then rename over it, so
//! an interrupted process never leaves a half-written file or directory under the real name and
//! a reader sees the old version or the new one; and every file gets the mode the umask gives
//! (as `File::create` would), whoever writes it.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{FileError, Result};

/// Creates `path` (and its directory) atomically with the bytes `fill` writes, buffered and
/// synced before the rename.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut file = AtomicFile::create(path)?;
    fill(&mut file).map_err(|e| FileError::io(path, e))?;
    file.commit()
}

/// A file written over time (records as they are produced) beside `path`, which it becomes
/// only on [`commit`](Self::commit); dropped uncommitted, it disappears.
pub struct AtomicFile {
    path: PathBuf,
    out: std::io::BufWriter<tempfile::NamedTempFile>,
}

impl AtomicFile {
    /// Starts the file that will be `path` (creating its directory).
    pub fn create(path: &Path) -> Result<Self> {
        let tmp = temporary_beside(path).map_err(|e| FileError::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            out: std::io::BufWriter::with_capacity(1 << 20, tmp),
        })
    }

    /// Where the file will appear.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and syncs the bytes written, then renames the file to its path.
    pub fn commit(self) -> Result<()> {
        let io = |source| FileError::io(&self.path, source);
        let tmp = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.out.write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// For writers that take only a path (image encoders): `write` fills a temporary path beside
/// `path`, with its extension, which is then renamed over `path`.
pub fn write_through_path<E: From<FileError>>(
    path: &Path,
    write: impl FnOnce(&Path) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let tmp = temporary_beside(path).map_err(|e| FileError::io(path, e))?;
    write(tmp.path())?;
    tmp.persist(path)
        .map_err(|e| FileError::io(path, e.error))?;
    Ok(())
}

/// A hidden temporary file in `path`'s directory (created if missing), with `path`'s extension
/// and the permissions a plain `File::create` would give: 0666 less the umask, the one rule for
/// the mode of every file lsr writes (tempfile's own default, 0600, would hide results from the
/// group on a shared machine).
fn temporary_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let suffix = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut builder = tempfile::Builder::new();
    builder.prefix(".lsr-").suffix(&suffix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    builder.tempfile_in(dir)
}

/// `bytes` as `path`, atomically.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |out| out.write_all(bytes))
}

/// Pretty JSON, atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    write_atomically(path, |out| {
        serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::other)
    })
}

/// Fills a fresh sibling `<out>.partial` directory with `fill`, then renames it to `out`,
/// replacing what was there (callers that must not replace a finished result check first).
/// A failed fill removes its `.partial`; one left by a killed process is discarded.
pub fn write_directory<E: From<FileError>>(
    out: &Path,
    fill: impl FnOnce(&Path) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let staging = out.with_extension("partial");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| FileError::io(&staging, e))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| FileError::io(&staging, e))?;
    if let Err(error) = fill(&staging) {
        // On a full disk, what was staged holds the space a retry needs.
        let _ = std::fs::remove_dir_all(&staging);
        return Err(error);
    }
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| FileError::io(out, e))?;
    }
    std::fs::rename(&staging, out).map_err(|e| FileError::io(out, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_stray_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.json");
        write_bytes(&path, b"old").unwrap();
        let failed = write_atomically(&path, |out| {
            out.write_all(b"half")?;
            Err(std::io::Error::other("interrupted"))
        });
        assert!(failed.unwrap_err().to_string().contains("metrics.json"));
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_result_gets_the_permissions_of_a_plainly_created_file() {
        let dir = tempfile::tempdir().unwrap();
        write_bytes(&dir.path().join("metrics.json"), b"{}").unwrap();
        std::fs::File::create(dir.path().join("plain")).unwrap();
        let mode = |name: &str| {
            std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
        };
        assert_eq!(mode("metrics.json"), mode("plain"));
    }

    /// The ways to create a file other than these helpers, and the only places they may
    /// appear (outside tests), with why.
    const OTHER_WRITERS: [&str; 6] = [
        "File::create",
        "fs::write(",
        "fs::copy(",
        "NamedTempFile",
        "serialize_to_file",
        "OpenOptions",
    ];
    const ALLOWED: [(&str, &str); 9] = [
        ("files/src/atomic.rs", "the helpers"),
        (
            "files/src/damage.rs",
            "test support: a file damaged in place, as a disk would",
        ),
        (
            "files/src/lock.rs",
            "a lock file, never renamed, created 0666 less the umask",
        ),
        (
            "files/src/small_disk.rs",
            "test support: the file that fills the disk",
        ),
        (
            "train/src/log.rs",
            "appends rows to the log `write_bytes` wrote",
        ),
        (
            "files/src/tensorboard.rs",
            "TensorBoard's event files, append-only: one per process, records appended",
        ),
        (
            "data/src/download.rs",
            "a download's `.partial` file, appended to as bytes arrive, renamed once verified",
        ),
        (
            "fuzz/src/lib.rs",
            "the fuzzer's inputs, in a scratch directory",
        ),
        (
            "files/src/workers.rs",
            "a worker process's log, appended to by the worker as it runs",
        ),
    ];

    /// Every file lsr writes goes through this module, so that it is atomic and gets the
    /// umask's mode: no other way of creating a file appears in the workspace's code outside
    /// tests and `ALLOWED`.
    #[test]
    fn no_code_creates_files_around_these_helpers() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut sources = Vec::new();
        let mut dirs = vec![crates.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy();
                // A `tests.rs` is a module's tests in a file of their own (`mod tests;`).
                let source = name.ends_with(".rs") && name != "tests.rs";
                if path.is_dir() && !["target", "libfuzzer", "tests"].contains(&&*name) {
                    dirs.push(path);
                } else if source && path.components().any(|c| c.as_os_str() == "src") {
                    sources.push(path);
                }
            }
        }
        assert!(sources.len() > 50, "{} sources", sources.len());
        let mut found = Vec::new();
        for path in sources {
            let relative = path
                .strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if ALLOWED.iter().any(|(file, _)| relative == *file) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for (number, line) in code.lines().enumerate() {
                let written = OTHER_WRITERS.iter().any(|way| {
                    line.match_indices(way).any(|(at, _)| {
                        !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                });
                if written && !line.trim_start().starts_with("//") {
                    found.push(format!("{relative}:{}: {}", number + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "files written around lsr_files: {found:#?}"
        );
    }

    #[test]
    fn a_path_only_writer_writes_atomically_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("losses.png");
        write_bytes(&path, b"old").unwrap();
        let failed = write_through_path(&path, |tmp| {
            assert_eq!(tmp.extension().unwrap(), "png");
            std::fs::write(tmp, b"half").map_err(|e| FileError::io(tmp, e))?;
            Err(FileError::io(tmp, std::io::Error::other("encoder failed")))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        write_through_path::<FileError>(&path, |tmp| {
            std::fs::write(tmp, b"new").map_err(|e| FileError::io(tmp, e))
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_directory_appears_whole_and_a_failed_one_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("step-00000010");
        write_directory::<FileError>(&out, |staging| {
            write_bytes(&staging.join("a"), b"1")?;
            write_bytes(&staging.join("b"), b"2")
        })
        .unwrap();
        assert_eq!(std::fs::read(out.join("b")).unwrap(), b"2");
        let failed = write_directory::<FileError>(&out, |staging| {
            write_bytes(&staging.join("a"), b"new")?;
            Err(FileError::Parse {
                path: staging.to_path_buf(),
                message: "interrupted".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(out.join("a")).unwrap(), b"1");
    }
}
