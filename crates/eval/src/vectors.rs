//! Sparse vectors on disk, so that re-evaluation and FLOPs need no re-encoding. `LSRVEC3`: a
//! magic line, the vocabulary that names the terms (`u32` size, the SHA-256 of its tokens in id
//! order, each as `u32` length and UTF-8 bytes, and the model, `u32` length and UTF-8: by its
//! content, `Backbone::content_id`, in files written since 2026-12-05, as named before),
//! then one record per text — `u32` id length, id bytes (UTF-8), `u32` number of terms, that
//! many (`u32` term, `f32` weight) pairs, all little-endian — and last the SHA-256 of every
//! byte before it, so that a file damaged since it was written (cut short, a byte changed) is
//! found ([`verify`], and every read) rather than read as other vectors. Files of the formats
//! before are still read: `LSRVEC2` (no checksum) and `LSRVEC1` (the records alone; what names
//! their terms cannot be checked either).
//! Written through `lsr_files::AtomicFile`: a crash never leaves a half file under the real name.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use lsr_backbone::TextTokenizer;
use lsr_files::AtomicFile;
use lsr_splade::SpladeEncoder;
use sha2::{Digest, Sha256};

use crate::error::{EvalError, Result};

const MAGIC: &[u8; 8] = b"LSRVEC3\n";
/// Without a checksum.
const MAGIC_V2: &[u8; 8] = b"LSRVEC2\n";
/// Records without a vocabulary or a checksum.
const MAGIC_V1: &[u8; 8] = b"LSRVEC1\n";
/// The checksum at the end of an `LSRVEC3` file: a SHA-256.
const CHECKSUM_BYTES: u64 = 32;

/// The tokens that name a model's term ids (id `i` is `tokens[i]`), and the model.
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
    /// The model that encoded the vectors (by its content, or as named in older files); not
    /// part of the comparison (one tokenizer serves several models).
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

    /// The vocabulary of the terms `encoder` produces, with the model by its content
    /// (`Backbone::content_id`), so that a file does not depend on where the model lay.
    pub fn of_encoder(encoder: &SpladeEncoder) -> Result<Self> {
        let backbone = &encoder.backbone;
        let size = backbone.config.dims.vocab_size;
        Ok(Self::of(&backbone.tokenizer, size, &backbone.content_id()?))
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
        hex::encode(self.sha256)
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digest = &self.sha256_hex()[..12];
        write!(f, "{} tokens, sha256 {digest}…", self.size)
    }
}

/// The vocabulary and model the vector file `path` records (none in an `LSRVEC1` file).
pub fn recorded(path: &Path) -> Result<Option<Fingerprint>> {
    Ok(open(path)?.1)
}

/// Refuses `vocabulary` for naming the terms of the vector file `path` if the file records
/// another one; an `LSRVEC1` file records none, which is said, not refused.
pub fn check_vocabulary(path: &Path, vocabulary: &Vocabulary) -> Result<()> {
    let wanted = vocabulary.fingerprint();
    match recorded(path)? {
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

/// Writes a vector file record by record, hashing what it writes for the checksum at its end.
pub struct VectorWriter {
    out: AtomicFile,
    hash: Sha256,
    count: usize,
}

impl VectorWriter {
    /// Starts `path`, whose terms `vocabulary` names.
    pub fn create(path: &Path, vocabulary: &Fingerprint) -> Result<Self> {
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&vocabulary.size.to_le_bytes());
        header.extend_from_slice(&vocabulary.sha256);
        header.extend_from_slice(&(vocabulary.model.len() as u32).to_le_bytes());
        header.extend_from_slice(vocabulary.model.as_bytes());
        let mut writer = Self {
            out: AtomicFile::create(path)?,
            hash: Sha256::new(),
            count: 0,
        };
        writer.put(&header)?;
        Ok(writer)
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
        self.put(&record)?;
        self.count += 1;
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.hash.update(bytes);
        self.out
            .write_all(bytes)
            .map_err(|source| EvalError::io(self.out.path(), source))
    }

    /// Ends the file with its checksum, then flushes and renames it into place; returns the
    /// number of vectors.
    pub fn finish(mut self) -> Result<usize> {
        let checksum = std::mem::take(&mut self.hash).finalize();
        self.out
            .write_all(&checksum)
            .map_err(|source| EvalError::io(self.out.path(), source))?;
        self.out.commit()?;
        Ok(self.count)
    }
}

/// What [`verify`] found in a vector file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Integrity {
    /// Its checksum matches its contents.
    Intact,
    /// A format without a checksum (`LSRVEC1`, `LSRVEC2`): nothing to check it against.
    Unrecorded,
    /// What is wrong with it.
    Damaged(String),
}

/// Checks the checksum at the end of the vector file `path` against its contents, reading it
/// once without parsing its records. A file that cannot be read is an error, not damage.
pub fn verify(path: &Path) -> Result<Integrity> {
    let io = |source| EvalError::io(path, source);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut magic = [0u8; 8];
    if file.read_exact(&mut magic).is_err() {
        return Ok(Integrity::Damaged("shorter than the magic line".into()));
    }
    if [MAGIC_V1, MAGIC_V2].contains(&&magic) {
        return Ok(Integrity::Unrecorded);
    }
    if &magic != MAGIC {
        return Ok(Integrity::Damaged(unknown_format(&magic)));
    }
    let Some(body) = size.checked_sub(MAGIC.len() as u64 + CHECKSUM_BYTES) else {
        return Ok(Integrity::Damaged(format!("{size} bytes: cut short")));
    };
    let mut hash = Sha256::new_with_prefix(magic);
    std::io::copy(&mut (&mut file).take(body), &mut hash).map_err(io)?;
    let mut recorded = [0u8; CHECKSUM_BYTES as usize];
    file.read_exact(&mut recorded).map_err(io)?;
    Ok(match hash.finalize()[..] == recorded {
        true => Integrity::Intact,
        false => Integrity::Damaged(DAMAGED.into()),
    })
}

const DAMAGED: &str =
    "its contents do not match the SHA-256 recorded at its end (cut short, or a byte changed)";

/// Why `magic` is not one this lsr reads: a newer lsr's format, or no vector file at all.
fn unknown_format(magic: &[u8; 8]) -> String {
    match magic.strip_prefix(b"LSRVEC") {
        Some([version, b'\n']) if version.is_ascii_digit() => format!(
            "an lsr sparse-vector file of format LSRVEC{}, newer than the LSRVEC1–3 this lsr \
             reads: use the lsr that wrote it",
            *version as char
        ),
        _ => "not an lsr sparse-vector file".into(),
    }
}

/// A buffered reader that counts down the bytes left before the checksum (or the end of a file
/// without one), so that a length read from it is checked against them before anything is
/// allocated: a corrupt length must not become a huge allocation. It hashes what it reads of
/// an `LSRVEC3` file, to compare with the checksum at the end.
struct Input {
    path: PathBuf,
    reader: BufReader<std::fs::File>,
    left: u64,
    hash: Option<Sha256>,
}

impl Input {
    /// Fills `buf` from the file, for the `what` of record `record` (0: the header).
    fn exact(&mut self, buf: &mut [u8], record: usize, what: &str) -> Result<()> {
        self.reader
            .read_exact(buf)
            .map_err(|_| self.corrupt(record, &format!("truncated {what}")))?;
        self.left = self.left.saturating_sub(buf.len() as u64);
        if let Some(hash) = &mut self.hash {
            hash.update(&*buf);
        }
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

    /// Whether the records are over: at the checksum, or at the end of a file without one.
    fn at_end(&mut self) -> Result<bool> {
        if self.hash.is_some() {
            return Ok(self.left == 0);
        }
        let path = &self.path;
        Ok(self
            .reader
            .fill_buf()
            .map_err(|e| EvalError::io(path, e))?
            .is_empty())
    }

    /// After the records: the checksum at the end of an `LSRVEC3` file against what was read.
    fn check_checksum(&mut self) -> Result<()> {
        let Some(hash) = self.hash.take() else {
            return Ok(());
        };
        let mut recorded = [0u8; CHECKSUM_BYTES as usize];
        let read = self.reader.read_exact(&mut recorded);
        match read.is_ok() && hash.finalize()[..] == recorded {
            true => Ok(()),
            false => Err(self.damaged(None)),
        }
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

    /// The file is damaged; `parsing` is what reading it ran into first, if anything.
    fn damaged(&self, parsing: Option<&EvalError>) -> EvalError {
        let found = match parsing {
            Some(EvalError::File { message, .. }) => format!("{DAMAGED}; reading it: {message}"),
            _ => DAMAGED.to_string(),
        };
        EvalError::Damaged {
            path: self.path.clone(),
            found,
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
        hash: None,
    };
    let mut magic = [0u8; 8];
    let known = [MAGIC, MAGIC_V2, MAGIC_V1];
    if input.exact(&mut magic, 0, "magic").is_err() || !known.contains(&&magic) {
        return Err(EvalError::File {
            path: path.to_path_buf(),
            message: unknown_format(&magic),
        });
    }
    if &magic == MAGIC_V1 {
        return Ok((input, None));
    }
    if &magic == MAGIC {
        input.hash = Some(Sha256::new_with_prefix(magic));
        input.left = input.left.saturating_sub(CHECKSUM_BYTES);
    }
    match read_header(&mut input) {
        Ok(header) => Ok((input, Some(header))),
        Err(error) => Err(damaged_or(&input, error)?),
    }
}

/// The vocabulary a file's header records, after its magic line.
fn read_header(input: &mut Input) -> Result<Fingerprint> {
    let size = input.word(0, "vocabulary size")?;
    let mut sha256 = [0u8; 32];
    input.exact(&mut sha256, 0, "vocabulary digest")?;
    let model = input.text(0, "model name")?;
    Ok(Fingerprint {
        size,
        sha256,
        model,
    })
}

/// Streams the vectors of a file written by [`VectorWriter`] (or of an older format); returns
/// how many there were. An `LSRVEC3` file whose checksum does not match its contents is
/// [`EvalError::Damaged`], found at its end or where its records stop making sense, so a caller
/// that keeps what it reads only once it returns never keeps a damaged file's vectors.
pub fn read_vectors(
    path: &Path,
    mut each: impl FnMut(&str, &[(u32, f32)]) -> Result<()>,
) -> Result<usize> {
    let (mut input, _) = open(path)?;
    let mut count = 0;
    let mut record = (String::new(), Vec::new());
    while !input.at_end()? {
        if let Err(error) = read_record(&mut input, count + 1, &mut record) {
            return Err(damaged_or(&input, error)?);
        }
        count += 1;
        each(&record.0, &record.1)?;
    }
    input.check_checksum()?;
    Ok(count)
}

/// Reads record `record` into `into` (id, terms).
fn read_record(
    input: &mut Input,
    record: usize,
    into: &mut (String, Vec<(u32, f32)>),
) -> Result<()> {
    into.0 = input.text(record, "id")?;
    let n = u64::from(input.word(record, "term count")?);
    let bytes = input.bytes(n * 8, record, "terms")?;
    into.1.clear();
    into.1.extend(bytes.chunks_exact(8).map(|c| {
        (
            u32::from_le_bytes(c[..4].try_into().expect("4 bytes")),
            f32::from_le_bytes(c[4..].try_into().expect("4 bytes")),
        )
    }));
    Ok(())
}

/// A record that does not parse: in a file with a checksum, said as the damage it is when the
/// checksum confirms it.
fn damaged_or(input: &Input, parsing: EvalError) -> Result<EvalError> {
    if input.hash.is_none() {
        return Ok(parsing);
    }
    Ok(match verify(&input.path)? {
        Integrity::Damaged(_) => input.damaged(Some(&parsing)),
        _ => parsing,
    })
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
    fn vectors_round_trip_with_their_vocabulary_and_checksum() {
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
        assert_eq!(verify(&path).unwrap(), Integrity::Intact);
    }

    /// A file cut short, or with one byte flipped in an id, a term count or a weight, is found
    /// by `verify` and refused by every read as damaged, wherever its records stop making sense.
    #[test]
    fn a_damaged_file_is_found_and_never_read_as_other_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.vectors");
        let mut writer = VectorWriter::create(&path, &vocabulary(&["a"]).fingerprint()).unwrap();
        writer.write("d1", &[(3, 1.5), (7, 0.25)]).unwrap();
        writer.write("d2", &[(1, 2.0)]).unwrap();
        writer.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let header = MAGIC.len() + 4 + 32 + 4 + "models/a".len();
        let weight = header + 4 + 2 + 4 + 4;
        let term_count = header + 4 + 2;
        let id = header + 4;
        let cut = bytes[..bytes.len() - 3].to_vec();
        let flipped = |at: usize| {
            let mut bytes = bytes.clone();
            bytes[at] ^= 0x40;
            bytes
        };
        for (what, damaged) in [
            ("cut short", cut),
            ("a weight", flipped(weight)),
            ("a term count", flipped(term_count)),
            ("an id", flipped(id)),
            ("the checksum", flipped(bytes.len() - 1)),
        ] {
            std::fs::write(&path, damaged).unwrap();
            assert!(
                matches!(verify(&path).unwrap(), Integrity::Damaged(_)),
                "{what}"
            );
            let error = read_vectors(&path, |_, _| Ok(())).unwrap_err();
            assert!(
                matches!(error, EvalError::Damaged { .. }),
                "{what}: {error}"
            );
            let error = error.to_string();
            assert!(
                error.contains("corpus.vectors: damaged since it was written"),
                "{what}: {error}"
            );
        }
    }

    /// A file of the format before the checksum (`LSRVEC2`) is read, and `verify` says it has
    /// nothing to check; a newer lsr's format is refused as such.
    #[test]
    fn a_file_without_a_checksum_is_read_and_a_newer_format_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queries.vectors");
        let mut writer = VectorWriter::create(&path, &vocabulary(&["a"]).fingerprint()).unwrap();
        writer.write("q1", &[(1, 2.0)]).unwrap();
        writer.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut old = MAGIC_V2.to_vec();
        old.extend_from_slice(&bytes[MAGIC.len()..bytes.len() - CHECKSUM_BYTES as usize]);
        std::fs::write(&path, &old).unwrap();
        assert_eq!(verify(&path).unwrap(), Integrity::Unrecorded);
        let mut read = Vec::new();
        read_vectors(&path, |id, terms| {
            read.push((id.to_string(), terms.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(read, vec![("q1".to_string(), vec![(1, 2.0)])]);

        old[..MAGIC.len()].copy_from_slice(b"LSRVEC4\n");
        std::fs::write(&path, &old).unwrap();
        let error = read_vectors(&path, |_, _| Ok(())).unwrap_err().to_string();
        assert!(
            error.contains("format LSRVEC4, newer than the LSRVEC1–3 this lsr reads"),
            "{error}"
        );
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
