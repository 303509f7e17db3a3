//! Sparse vectors on disk, so that re-evaluation and FLOPs need no re-encoding: a magic line,
//! then one record per text — `u32` id length, id bytes (UTF-8), `u32` number of terms, that
//! many (`u32` term, `f32` weight) pairs, all little-endian. Written to a temporary file and
//! renamed into place when complete, so a crash never leaves a half file under the real name.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{EvalError, Result};

const MAGIC: &[u8; 8] = b"LSRVEC1\n";

pub struct VectorWriter {
    path: PathBuf,
    out: BufWriter<tempfile::NamedTempFile>,
    count: usize,
}

impl VectorWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let io = |source| EvalError::io(path, source);
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut out = BufWriter::new(tempfile::NamedTempFile::new_in(dir).map_err(io)?);
        out.write_all(MAGIC).map_err(io)?;
        Ok(Self {
            path: path.to_path_buf(),
            out,
            count: 0,
        })
    }

    pub fn write(&mut self, id: &str, terms: &[(u32, f32)]) -> Result<()> {
        let io = |source| EvalError::io(&self.path, source);
        let mut record = Vec::with_capacity(8 + id.len() + terms.len() * 8);
        record.extend_from_slice(&(id.len() as u32).to_le_bytes());
        record.extend_from_slice(id.as_bytes());
        record.extend_from_slice(&(terms.len() as u32).to_le_bytes());
        for &(term, weight) in terms {
            record.extend_from_slice(&term.to_le_bytes());
            record.extend_from_slice(&weight.to_le_bytes());
        }
        self.out.write_all(&record).map_err(io)?;
        self.count += 1;
        Ok(())
    }

    /// Flushes and renames the file into place; returns the number of vectors.
    pub fn finish(self) -> Result<usize> {
        let path = self.path.clone();
        let io = |source| EvalError::io(&path, source);
        let file = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        file.as_file().sync_all().map_err(io)?;
        file.persist(&path).map_err(|e| io(e.error))?;
        Ok(self.count)
    }
}

/// Streams the vectors of a file written by [`VectorWriter`]; returns how many there were.
pub fn read_vectors(
    path: &Path,
    mut each: impl FnMut(&str, &[(u32, f32)]) -> Result<()>,
) -> Result<usize> {
    let file = std::fs::File::open(path).map_err(|source| EvalError::io(path, source))?;
    // Lengths read from the file are checked against what is left of it before anything is
    // allocated: a corrupt length must not become a huge allocation.
    let mut left = file
        .metadata()
        .map_err(|source| EvalError::io(path, source))?
        .len();
    let mut input = BufReader::with_capacity(1 << 20, file);
    let corrupt = |record: usize, what: &str| EvalError::File {
        path: path.to_path_buf(),
        message: format!("record {record}: {what}"),
    };
    let mut magic = [0u8; 8];
    if input.read_exact(&mut magic).is_err() || &magic != MAGIC {
        return Err(EvalError::File {
            path: path.to_path_buf(),
            message: "not an lsr sparse-vector file".into(),
        });
    }
    left = left.saturating_sub(MAGIC.len() as u64);
    let mut take = |record: usize, bytes: u64, what: &str| {
        if bytes > left {
            return Err(corrupt(
                record,
                &format!("{what} of {bytes} bytes, but only {left} bytes are left in the file"),
            ));
        }
        left -= bytes;
        Ok(bytes as usize)
    };
    let mut count = 0;
    let mut terms = Vec::new();
    loop {
        let mut word = [0u8; 4];
        match input.read(&mut word[..1]) {
            Ok(0) => return Ok(count),
            Ok(_) => {}
            Err(e) => return Err(corrupt(count + 1, &e.to_string())),
        }
        input
            .read_exact(&mut word[1..])
            .map_err(|_| corrupt(count + 1, "truncated id length"))?;
        take(count + 1, 4, "id length")?;
        let id_len = take(count + 1, u32::from_le_bytes(word).into(), "id")?;
        let mut id = vec![0u8; id_len];
        input
            .read_exact(&mut id)
            .map_err(|_| corrupt(count + 1, "truncated id"))?;
        let id = String::from_utf8(id).map_err(|_| corrupt(count + 1, "id is not UTF-8"))?;
        input
            .read_exact(&mut word)
            .map_err(|_| corrupt(count + 1, "truncated term count"))?;
        take(count + 1, 4, "term count")?;
        let n = u64::from(u32::from_le_bytes(word));
        let mut bytes = vec![0u8; take(count + 1, n * 8, "terms")?];
        input
            .read_exact(&mut bytes)
            .map_err(|_| corrupt(count + 1, "truncated terms"))?;
        terms.clear();
        terms.extend(bytes.chunks_exact(8).map(|c| {
            (
                u32::from_le_bytes(c[..4].try_into().expect("4 bytes")),
                f32::from_le_bytes(c[4..].try_into().expect("4 bytes")),
            )
        }));
        count += 1;
        each(&id, &terms)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_truncation_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.vectors");
        let mut writer = VectorWriter::create(&path).unwrap();
        writer.write("d1", &[(3, 1.5), (7, 0.25)]).unwrap();
        writer.write("dé2", &[]).unwrap();
        assert!(!path.exists(), "the file appears only when finished");
        assert_eq!(writer.finish().unwrap(), 2);
        let mut read = Vec::new();
        let n = read_vectors(&path, |id, terms| {
            read.push((id.to_string(), terms.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            read,
            vec![
                ("d1".into(), vec![(3, 1.5), (7, 0.25)]),
                ("dé2".into(), vec![])
            ]
        );

        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let error = read_vectors(&path, |_, _| Ok(())).unwrap_err().to_string();
        assert!(error.contains("corpus.vectors: record 2"), "{error}");
    }
}
