//! Sparse vectors on disk, so that re-evaluation and FLOPs need no re-encoding. `LSRVEC2`: a
//! magic line, the vocabulary that names the terms (`u32` size, the SHA-256 of its tokens in id
//! order, each as `u32` length and UTF-8 bytes, and the model as named, `u32` length and UTF-8),
//! then one record per text — `u32` id length, id bytes (UTF-8), `u32` number of terms, that
//! many (`u32` term, `f32` weight) pairs, all little-endian. Files written before the vocabulary
//! was recorded (`LSRVEC1`: the records alone) are still read; what names their terms cannot be
//! checked.
//! Written through `lsr_files::AtomicFile`: a crash never leaves a half file under the real name.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use lsr_backbone::TextTokenizer;
use lsr_files::AtomicFile;
use lsr_splade::SpladeEncoder;
use sha2::{Digest, Sha256};

use crate::error::{EvalError, Result};

const MAGIC: &[u8; 8] = b"LSRVEC2\n";
/// Records without a vocabulary.
const MAGIC_V1: &[u8; 8] = b"LSRVEC1\n";

/// The tokens that name a model's term ids (id `i` is `tokens[i]`), and the model, as named.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    pub model: String,
    pub tokens: Vec<String>,
}

/// A vocabulary as a vector file records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub size: u32,
    pub sha256: [u8; 32],
    /// The model that encoded the vectors, as named; not part of the comparison (one tokenizer
    /// can be reached by several names).
    pub model: String,
}

impl Vocabulary {
    /// Term ids `0..size` as `tokenizer` names them; an id it has no token for (the head can be
    /// larger than the tokenizer's vocabulary) is `[id]`.
    pub fn of(tokenizer: &TextTokenizer, size: usize, model: &str) -> Self {
        let tokens = (0..size as u32)
            .map(|id| tokenizer.token(id).unwrap_or_else(|| format!("[{id}]")))
            .collect();
        Self {
            model: model.to_string(),
            tokens,
        }
    }

    /// The vocabulary of the terms `encoder` produces.
    pub fn of_encoder(encoder: &SpladeEncoder) -> Self {
        let backbone = &encoder.backbone;
        let size = backbone.config.dims.vocab_size;
        Self::of(&backbone.tokenizer, size, &backbone.checkpoint.name)
    }

    pub fn fingerprint(&self) -> Fingerprint {
        let mut hash = Sha256::new();
        for token in &self.tokens {
            hash.update((token.len() as u32).to_le_bytes());
            hash.update(token.as_bytes());
        }
        Fingerprint {
            size: self.tokens.len() as u32,
            sha256: hash.finalize().into(),
            model: self.model.clone(),
        }
    }
}

impl Fingerprint {
    fn same_vocabulary(&self, other: &Self) -> bool {
        (self.size, self.sha256) == (other.size, other.sha256)
    }

    /// The vocabulary's SHA-256 in hexadecimal.
    pub(crate) fn sha256_hex(&self) -> String {
        self.sha256.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digest = &self.sha256_hex()[..12];
        write!(f, "{} tokens, sha256 {digest}…", self.size)
    }
}

/// Refuses `vocabulary` for naming the terms of the vector file `path` if the file records
/// another one; an `LSRVEC1` file records none, which is said, not refused.
pub fn check_vocabulary(path: &Path, vocabulary: &Vocabulary) -> Result<()> {
    let wanted = vocabulary.fingerprint();
    match open(path)?.1 {
        Some(recorded) if !recorded.same_vocabulary(&wanted) => Err(EvalError::File {
            path: path.to_path_buf(),
            message: format!(
                "encoded by {} ({recorded}), whose terms the tokenizer of {} ({wanted}) would \
                 misname; use the model that encoded the vectors",
                recorded.model, vocabulary.model
            ),
        }),
        Some(_) => Ok(()),
        None => {
            tracing::warn!(
                "{}: an LSRVEC1 file records no vocabulary, so nothing checks that {} encoded \
                 it; encode again to have the check",
                path.display(),
                vocabulary.model
            );
            Ok(())
        }
    }
}

pub struct VectorWriter {
    out: AtomicFile,
    count: usize,
}

impl VectorWriter {
    /// Starts `path`, whose terms `vocabulary` names.
    pub fn create(path: &Path, vocabulary: &Fingerprint) -> Result<Self> {
        let mut out = AtomicFile::create(path)?;
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&vocabulary.size.to_le_bytes());
        header.extend_from_slice(&vocabulary.sha256);
        header.extend_from_slice(&(vocabulary.model.len() as u32).to_le_bytes());
        header.extend_from_slice(vocabulary.model.as_bytes());
        out.write_all(&header)
            .map_err(|source| EvalError::io(path, source))?;
        Ok(Self { out, count: 0 })
    }

    pub fn write(&mut self, id: &str, terms: &[(u32, f32)]) -> Result<()> {
        let mut record = Vec::with_capacity(8 + id.len() + terms.len() * 8);
        record.extend_from_slice(&(id.len() as u32).to_le_bytes());
        record.extend_from_slice(id.as_bytes());
        record.extend_from_slice(&(terms.len() as u32).to_le_bytes());
        for &(term, weight) in terms {
            record.extend_from_slice(&term.to_le_bytes());
            record.extend_from_slice(&weight.to_le_bytes());
        }
        self.out
            .write_all(&record)
            .map_err(|source| EvalError::io(self.out.path(), source))?;
        self.count += 1;
        Ok(())
    }

    /// Flushes and renames the file into place; returns the number of vectors.
    pub fn finish(self) -> Result<usize> {
        self.out.commit()?;
        Ok(self.count)
    }
}

/// A buffered reader that counts down the bytes left in the file, so that a length read from
/// it is checked against them before anything is allocated: a corrupt length must not become a
/// huge allocation.
struct Input {
    path: PathBuf,
    reader: BufReader<std::fs::File>,
    left: u64,
}

impl Input {
    /// Fills `buf` from the file, for the `what` of record `record` (0: the header).
    fn exact(&mut self, buf: &mut [u8], record: usize, what: &str) -> Result<()> {
        self.reader
            .read_exact(buf)
            .map_err(|_| self.corrupt(record, &format!("truncated {what}")))?;
        self.left = self.left.saturating_sub(buf.len() as u64);
        Ok(())
    }

    fn word(&mut self, record: usize, what: &str) -> Result<u32> {
        let mut word = [0u8; 4];
        self.exact(&mut word, record, what)?;
        Ok(u32::from_le_bytes(word))
    }

    /// The next `bytes` bytes, if the file has that many left.
    fn bytes(&mut self, bytes: u64, record: usize, what: &str) -> Result<Vec<u8>> {
        if bytes > self.left {
            let left = self.left;
            return Err(self.corrupt(
                record,
                &format!("{what} of {bytes} bytes, but only {left} bytes are left in the file"),
            ));
        }
        let mut buf = vec![0u8; bytes as usize];
        self.exact(&mut buf, record, what)?;
        Ok(buf)
    }

    /// A `u32` length, then that many bytes of UTF-8.
    fn text(&mut self, record: usize, what: &str) -> Result<String> {
        let length = self.word(record, &format!("{what} length"))?;
        let bytes = self.bytes(length.into(), record, what)?;
        String::from_utf8(bytes).map_err(|_| self.corrupt(record, &format!("{what} is not UTF-8")))
    }

    fn at_end(&mut self) -> Result<bool> {
        let path = &self.path;
        Ok(self
            .reader
            .fill_buf()
            .map_err(|e| EvalError::io(path, e))?
            .is_empty())
    }

    fn corrupt(&self, record: usize, what: &str) -> EvalError {
        let place = match record {
            0 => "header".to_string(),
            n => format!("record {n}"),
        };
        EvalError::File {
            path: self.path.clone(),
            message: format!("{place}: {what}"),
        }
    }
}

/// A vector file's reader past its header, and the vocabulary it records (none in `LSRVEC1`).
fn open(path: &Path) -> Result<(Input, Option<Fingerprint>)> {
    let file = std::fs::File::open(path).map_err(|source| EvalError::io(path, source))?;
    let left = file
        .metadata()
        .map_err(|source| EvalError::io(path, source))?
        .len();
    let mut input = Input {
        path: path.to_path_buf(),
        reader: BufReader::with_capacity(1 << 20, file),
        left,
    };
    let mut magic = [0u8; 8];
    if input.exact(&mut magic, 0, "magic").is_err() || ![MAGIC, MAGIC_V1].contains(&&magic) {
        return Err(EvalError::File {
            path: path.to_path_buf(),
            message: "not an lsr sparse-vector file".into(),
        });
    }
    if &magic == MAGIC_V1 {
        return Ok((input, None));
    }
    let size = input.word(0, "vocabulary size")?;
    let mut sha256 = [0u8; 32];
    input.exact(&mut sha256, 0, "vocabulary digest")?;
    let model = input.text(0, "model name")?;
    let recorded = Fingerprint {
        size,
        sha256,
        model,
    };
    Ok((input, Some(recorded)))
}

/// Streams the vectors of a file written by [`VectorWriter`] (or an `LSRVEC1` file); returns
/// how many there were.
pub fn read_vectors(
    path: &Path,
    mut each: impl FnMut(&str, &[(u32, f32)]) -> Result<()>,
) -> Result<usize> {
    let (mut input, _) = open(path)?;
    let mut count = 0;
    let mut terms = Vec::new();
    while !input.at_end()? {
        let record = count + 1;
        let id = input.text(record, "id")?;
        let n = u64::from(input.word(record, "term count")?);
        let bytes = input.bytes(n * 8, record, "terms")?;
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
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary(tokens: &[&str]) -> Vocabulary {
        Vocabulary {
            model: "models/a".into(),
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn vectors_round_trip_and_truncation_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.vectors");
        let words = vocabulary(&["a", "b"]).fingerprint();
        let mut writer = VectorWriter::create(&path, &words).unwrap();
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
        assert_eq!(open(&path).unwrap().1, Some(words));

        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let error = read_vectors(&path, |_, _| Ok(())).unwrap_err().to_string();
        assert!(error.contains("corpus.vectors: record 2"), "{error}");
    }

    /// Another tokenizer, larger or of the same size, is refused with both models named; a file
    /// of the first format (no vocabulary) is read and checked against nothing.
    #[test]
    fn a_vocabulary_other_than_the_encoders_is_refused_and_an_old_file_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queries.vectors");
        let encoder = vocabulary(&["[PAD]", "egg"]);
        let mut writer = VectorWriter::create(&path, &encoder.fingerprint()).unwrap();
        writer.write("q1", &[(1, 2.0)]).unwrap();
        writer.finish().unwrap();
        check_vocabulary(&path, &encoder).unwrap();
        for tokens in [&["[PAD]", "egg", "ham"][..], &["[PAD]", "ham"]] {
            let other = Vocabulary {
                model: "models/b".into(),
                ..vocabulary(tokens)
            };
            let error = check_vocabulary(&path, &other).unwrap_err().to_string();
            assert!(
                error.contains("queries.vectors")
                    && error.contains("models/a (2 tokens")
                    && error.contains(&format!("models/b ({} tokens", tokens.len())),
                "{error}"
            );
        }

        let old = dir.path().join("old.vectors");
        // id length, id, term count, (term, weight).
        let mut bytes = MAGIC_V1.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(b"q1");
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&2.0f32.to_le_bytes());
        std::fs::write(&old, bytes).unwrap();
        let mut read = Vec::new();
        read_vectors(&old, |id, terms| {
            read.push((id.to_string(), terms.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(read, vec![("q1".to_string(), vec![(1, 2.0)])]);
        check_vocabulary(&old, &vocabulary(&["x"])).unwrap();
    }
}
