//! One writer per output: an exclusive OS lock on a file in the output directory. The OS drops
//! it when the process ends, however it ends, so a SIGKILLed run never leaves a stale lock; the
//! file holds the holder's process id, for the message another writer gets.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::{FileError, Result};

/// Held while this process writes an output; released when dropped or when the process dies.
#[derive(Debug)]
pub struct OutputLock {
    _file: File,
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
            Err(TryLockError::WouldBlock) => return Ok(Err(holder(&mut file))),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Ok(Self { _file: file }))
    }
}

fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
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
}
