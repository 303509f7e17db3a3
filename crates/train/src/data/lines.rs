//! Random access to the lines of a large text file, memory-mapped, with a sparse line index.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{Result, TrainError};

/// Lines of a text file, memory-mapped, with the offset of every 64th line start: random access
/// to line i costs one jump and at most 63 newline searches, and the index is 1/8 byte per line.
pub struct LineFile {
    path: PathBuf,
    map: Mmap,
    block_starts: Vec<u64>,
    lines: usize,
}

const BLOCK: usize = 64;

impl LineFile {
    /// Maps and indexes `path`; an empty file is an error (there is nothing to train on).
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| TrainError::io(path, e))?;
        // SAFETY: the mapping is read-only; a file truncated while training would fault, as
        // reading it would fail, and training data is not rewritten in place.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| TrainError::io(path, e))?;
        let mut block_starts = vec![0u64];
        let mut lines = 0usize;
        let mut start = 0usize;
        for newline in memchr::memchr_iter(b'\n', &map) {
            lines += 1;
            start = newline + 1;
            if lines.is_multiple_of(BLOCK) {
                block_starts.push(start as u64);
            }
        }
        if start < map.len() {
            lines += 1; // a last line without a newline
        }
        if lines == 0 {
            return Err(TrainError::data(path, None, "file is empty"));
        }
        Ok(Self {
            path: path.to_path_buf(),
            map,
            block_starts,
            lines,
        })
    }

    pub fn len(&self) -> usize {
        self.lines
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Line `index` (0-based) without its newline (and without a trailing `\r`).
    pub fn bytes(&self, index: usize) -> &[u8] {
        assert!(index < self.lines, "line {index} of {} lines", self.lines);
        let mut start = self.block_starts[index / BLOCK] as usize;
        for _ in 0..index % BLOCK {
            start += memchr::memchr(b'\n', &self.map[start..]).expect("indexed line") + 1;
        }
        self.line_from(start)
    }

    /// The bytes from offset `start` to the end of its line (without `\n` or `\r\n`).
    pub fn line_from(&self, start: usize) -> &[u8] {
        let rest = &self.map[start..];
        let line = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
        line.strip_suffix(b"\r").unwrap_or(line)
    }

    /// Line `index` as UTF-8; an error names the file and the 1-based line.
    pub fn text(&self, index: usize) -> Result<&str> {
        std::str::from_utf8(self.bytes(index))
            .map_err(|e| self.error(index, format!("not UTF-8: {e}")))
    }

    /// An error about line `index` (0-based; reported 1-based).
    pub fn error(&self, index: usize, message: impl Into<String>) -> TrainError {
        TrainError::data(&self.path, Some(index + 1), message)
    }

    /// Every line's byte range, in order (for building id indexes).
    pub fn ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut start = 0;
        std::iter::from_fn(move || {
            if start >= self.map.len() {
                return None;
            }
            let end =
                memchr::memchr(b'\n', &self.map[start..]).map_or(self.map.len(), |n| start + n);
            let range = start..end;
            start = end + 1;
            Some(range)
        })
    }

    pub fn slice(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.map[range]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_access_across_blocks_and_a_last_line_without_newline() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let text: Vec<String> = (0..200).map(|i| format!("line {i}")).collect();
        std::fs::write(file.path(), text.join("\r\n")).unwrap();
        let lines = LineFile::open(file.path()).unwrap();
        assert_eq!(lines.len(), 200);
        for i in [0, 1, 63, 64, 65, 127, 128, 199] {
            assert_eq!(lines.text(i).unwrap(), format!("line {i}"));
        }
        assert_eq!(lines.ranges().count(), 200);
    }

    #[test]
    fn empty_files_and_bad_utf8_are_errors_naming_the_file_and_line() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let message = LineFile::open(file.path()).err().unwrap().to_string();
        assert!(message.contains("empty"), "{message}");
        std::fs::write(file.path(), b"fine\n\xff\xfe bad\n").unwrap();
        let lines = LineFile::open(file.path()).unwrap();
        let message = lines.text(1).unwrap_err().to_string();
        assert!(message.contains(":2: not UTF-8"), "{message}");
    }
}
