//! One writer per output: an exclusive OS lock on a file in the output directory. The OS drops
//! it when the process ends, however it ends, so a SIGKILLed run never leaves a stale lock; the
//! file holds the holder's process id and what it noted (a matrix cell's device), for the
//! message another writer gets and for [`live_holder`], which reads it without taking the lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::{FileError, Result};

/// Held while this process writes an output; released when dropped or when the process dies.
#[derive(Debug)]
pub struct OutputLock {
    file: File,
}

impl OutputLock {
    /// Locks `dir` (created if missing) through its file `name`; another holder is an error
    /// that names the output and the holder's process id.
    pub fn acquire(dir: &Path, name: &str) -> Result<Self> {
        Self::try_acquire(dir, name)?.map_err(|holder| FileError::Busy {
            path: dir.to_path_buf(),
            holder,
        })
    }

    /// As [`OutputLock::acquire`], the holder's process id (if it wrote one) when another
    /// process holds it.
    pub fn try_acquire(dir: &Path, name: &str) -> Result<std::result::Result<Self, Option<u32>>> {
        Self::try_acquire_noting(dir, name, "")
    }

    /// As [`OutputLock::try_acquire`], writing `note` after the process id for [`live_holder`].
    pub fn try_acquire_noting(
        dir: &Path,
        name: &str,
        note: &str,
    ) -> Result<std::result::Result<Self, Option<u32>>> {
        std::fs::create_dir_all(dir).map_err(|e| FileError::io(dir, e))?;
        let path = dir.join(name);
        let io = |e| FileError::io(&path, e);
        // Not truncated on open: the holder's id stays readable until the lock is ours.
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(Err(holder(&mut file).map(|h| h.pid))),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        write!(file, "{} {note}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Ok(Self { file }))
    }
}

impl Drop for OutputLock {
    /// Empties the file before the OS lets go of it: a note outlives its holder only where the
    /// holder was killed.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// A lock's holder as its file says: the process and what it noted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub note: String,
}

fn holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let (pid, note) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    Some(Holder {
        pid: pid.parse().ok()?,
        note: note.to_string(),
    })
}

/// Who holds the lock `dir/name`, read from its file without taking the lock (which would make
/// a writer starting that instant see it held): the holder it names, if that process is alive.
pub fn live_holder(dir: &Path, name: &str) -> Option<Holder> {
    let mut file = File::open(dir.join(name)).ok()?;
    holder(&mut file).filter(|h| alive(h.pid))
}

/// Whether process `pid` exists (signal 0 checks without sending anything).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The lock file of a training run's output.
pub const TRAIN_LOCK: &str = ".train.lock";
/// The lock file of an evaluation's output.
pub const EVAL_LOCK: &str = ".eval.lock";

/// The lock file of part `index` of `count` encoding a corpus into an evaluation's output
/// (`lsr eval --shard I/N`): parts share the output, each holding its own lock.
pub fn eval_part_lock(index: usize, count: usize) -> String {
    format!(".eval-part-{index}-of-{count}.lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_with_the_holder_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = OutputLock::acquire(dir.path(), TRAIN_LOCK).unwrap();
        let message = OutputLock::acquire(dir.path(), TRAIN_LOCK)
            .unwrap_err()
            .to_string();
        let pid = std::process::id().to_string();
        assert!(
            message.contains(&dir.path().display().to_string()) && message.contains(&pid),
            "{message}"
        );
        assert_eq!(
            OutputLock::try_acquire(dir.path(), TRAIN_LOCK)
                .unwrap()
                .err(),
            Some(Some(std::process::id()))
        );
        drop(first);
        OutputLock::acquire(dir.path(), TRAIN_LOCK).unwrap();
    }

    #[test]
    fn a_live_holder_and_its_note_are_read_without_taking_the_lock_and_gone_with_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(live_holder(dir.path(), "cell.lock"), None);
        let held = OutputLock::try_acquire_noting(dir.path(), "cell.lock", "cuda:1")
            .unwrap()
            .unwrap();
        let me = Holder {
            pid: std::process::id(),
            note: "cuda:1".into(),
        };
        assert_eq!(live_holder(dir.path(), "cell.lock"), Some(me));
        drop(held);
        assert_eq!(live_holder(dir.path(), "cell.lock"), None);
        // A killed holder's note stays in the file, naming a process that is gone.
        std::fs::write(
            dir.path().join("cell.lock"),
            format!("{} cuda:0", u32::MAX >> 1),
        )
        .unwrap();
        assert_eq!(live_holder(dir.path(), "cell.lock"), None);
    }
}
