//! For tests of what a full disk does to lsr's writers: a small tmpfs mounted on a fresh
//! temporary directory and filled on demand. Mounting needs root (or the capability); where it
//! is refused the test is skipped with a message saying why, or fails in CI (`crate::ci`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs, unmounted when dropped.
pub struct SmallDisk {
    dir: tempfile::TempDir,
    filler: PathBuf,
}

impl SmallDisk {
    /// A tmpfs of `bytes`; `None`, after saying why on stderr, where it cannot be mounted (in CI,
    /// a panic instead).
    pub fn mount(bytes: u64) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Self {
                filler: dir.path().join("filler"),
                dir,
            }),
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                crate::ci::cannot_set_up(&format!("a small tmpfs (mount: {})", why.trim()));
                None
            }
            Err(e) => {
                crate::ci::cannot_set_up(&format!("a small tmpfs (cannot run mount: {e})"));
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk, then frees `spare` bytes (rounded by the file system to its pages).
    pub fn fill(&self, spare: u64) {
        let mut file = std::fs::File::create(&self.filler).expect("the filler can be created");
        for chunk in [1 << 20, 4096, 1] {
            let zeros = vec![0u8; chunk];
            while file.write_all(&zeros).is_ok() {}
        }
        let full = file.metadata().expect("the filler exists").len();
        file.set_len(full.saturating_sub(spare))
            .expect("the filler can be shortened");
    }

    /// Removes what [`fill`](Self::fill) wrote.
    pub fn free(&self) {
        std::fs::remove_file(&self.filler).expect("the filler can be removed");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
