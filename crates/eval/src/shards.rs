//! The corpus encoded in shards: runs of `shard_documents` documents in corpus order, each
//! written atomically as `<out>/corpus.shards/<index>.vectors`. A stopped or killed evaluation
//! resumes after its last complete shard; several processes can encode one corpus, each the
//! shards of its part (`--shard I/N`); and `corpus.vectors` is the shards' records in order,
//! byte for byte what one pass writes, since a shard is whole sort windows. Shards are reused
//! only under the key they were encoded with (`key.json`: model, weights, rescaling, corpus,
//! lengths, batch, precision, shard size); under another key they are removed, saying why.
//! Each shard ends with its checksum (`crate::vectors`): before a pass, the complete shards it
//! would otherwise skip are checked, and one damaged since it was written (cut short, a byte
//! changed) is encoded again, saying so, so that damage costs its recomputation, never a wrong
//! `corpus.vectors`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use indicatif::ProgressBar;
use lsr_backbone::TextTokenizer;
use lsr_data::Dataset;
use lsr_splade::SpladeEncoder;
use serde::Serialize;

use crate::encoding::{SORT_WINDOW, encode_by_length, impacts};
use crate::error::{EvalError, Result};
use crate::index::IndexBuilder;
use crate::settings::EvalSettings;
use crate::vectors::{Fingerprint, Integrity, VectorWriter, read_vectors, verify};

/// The folder of a corpus's shards, in a data set's output folder.
pub const SHARD_DIR: &str = "corpus.shards";

/// Documents per shard unless set: 16 sort windows, about two minutes of encoding MS MARCO
/// passages (≤ 256 tokens) at the 588 documents/s lsr measured on an H200
/// (docs/perf-gpu.md), so that a preemption loses at most that.
pub const DEFAULT_SHARD_DOCUMENTS: usize = 16 * SORT_WINDOW;

/// `--shard I/N`: this process encodes the shards whose index is I modulo N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardPart {
    pub index: usize,
    pub count: usize,
}

impl FromStr for ShardPart {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let expected = || format!("`{text}`: expected I/N with 0 ≤ I < N, e.g. 0/4");
        let (index, count) = text.split_once('/').ok_or_else(expected)?;
        let (index, count) = (index.trim().parse(), count.trim().parse());
        match (index, count) {
            (Ok(index), Ok(count)) if index < count => Ok(Self { index, count }),
            _ => Err(expected()),
        }
    }
}

impl ShardPart {
    fn takes(&self, shard: usize) -> bool {
        shard % self.count == self.index
    }
}

/// What a shard's vectors depend on: a shard is reused only under an equal key.
#[derive(Serialize)]
struct ShardKey {
    model: String,
    revision: Option<String>,
    weights: Option<FileStamp>,
    /// The head's rescaling as lsr recorded it (k and mode), if any.
    rescaled: Option<String>,
    vocabulary_sha256: String,
    corpus: PathBuf,
    corpus_file: Option<FileStamp>,
    document_max_length: usize,
    batch_size: usize,
    precision: String,
    shard_documents: Option<usize>,
}

/// A file as its metadata knows it: changed contents change one of these.
#[derive(Serialize)]
struct FileStamp {
    bytes: u64,
    modified_ns: Option<u64>,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let metadata = std::fs::metadata(path).ok()?;
        let modified = metadata.modified().ok();
        let since_epoch = modified.and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok());
        Some(Self {
            bytes: metadata.len(),
            modified_ns: since_epoch.and_then(|d| u64::try_from(d.as_nanos()).ok()),
        })
    }
}

impl ShardKey {
    fn of(
        encoder: &SpladeEncoder,
        dataset: &Dataset,
        settings: &EvalSettings,
        vocabulary: &Fingerprint,
    ) -> Self {
        let backbone = &encoder.backbone;
        let checkpoint = &backbone.checkpoint;
        let rescaled = backbone.model.rescaled.as_ref();
        Self {
            model: checkpoint.name.clone(),
            revision: checkpoint.revision.clone(),
            weights: FileStamp::of(&checkpoint.weights),
            rescaled: rescaled.map(|r| format!("k = {} ({:?})", r.k, r.mode)),
            vocabulary_sha256: vocabulary.sha256_hex(),
            corpus: std::path::absolute(&dataset.corpus).unwrap_or_else(|_| dataset.corpus.clone()),
            corpus_file: FileStamp::of(&dataset.corpus),
            document_max_length: settings.document_max_length,
            batch_size: settings.batch_size,
            precision: format!("{:?}", backbone.model.precision),
            shard_documents: settings.shard_documents,
        }
    }
}

/// A corpus's shard folder: which shards are complete.
pub(crate) struct Shards {
    dir: PathBuf,
    done: BTreeSet<usize>,
}

impl Shards {
    /// `<out_dir>/corpus.shards` for `key`: its complete shards, or none where they were
    /// encoded under another key (then removed, with a note of what changed). Of the shards
    /// that `part` takes, those whose checksum fails are removed too, saying which and why, so
    /// that the pass encodes them again.
    fn open(out_dir: &Path, key: &ShardKey, part: Option<ShardPart>) -> Result<Self> {
        let dir = out_dir.join(SHARD_DIR);
        let key_path = dir.join("key.json");
        let key = serde_json::to_value(key).expect("a key serialises");
        let recorded: Option<serde_json::Value> =
            (std::fs::read(&key_path).ok()).and_then(|bytes| serde_json::from_slice(&bytes).ok());
        if let Some(recorded) = recorded.filter(|r| *r != key) {
            tracing::info!(
                "{}: encoded under other settings ({}); encoding again",
                dir.display(),
                changed(&recorded, &key).join(", ")
            );
            std::fs::remove_dir_all(&dir).map_err(|e| EvalError::io(&dir, e))?;
        }
        if !key_path.exists() {
            lsr_files::write_json(&key_path, &key)?;
        }
        let mut shards = Self {
            done: complete_shards(&dir)?,
            dir,
        };
        shards.drop_damaged(part)?;
        if !shards.done.is_empty() {
            tracing::info!(
                "{}: resuming after {} complete shards",
                shards.dir.display(),
                shards.done.len()
            );
        }
        Ok(shards)
    }

    /// Verifies the complete shards `part` takes; removes each that fails, with one warning
    /// naming them and what is wrong with each.
    fn drop_damaged(&mut self, part: Option<ShardPart>) -> Result<()> {
        let mut damaged = Vec::new();
        for &shard in self
            .done
            .iter()
            .filter(|&&s| part.is_none_or(|p| p.takes(s)))
        {
            let path = self.path(shard);
            let found = match verify(&path)? {
                Integrity::Intact => continue,
                Integrity::Unrecorded => "no checksum (an older lsr's shard)".to_string(),
                Integrity::Damaged(found) => found,
            };
            std::fs::remove_file(&path).map_err(|e| EvalError::io(&path, e))?;
            damaged.push((shard, found));
        }
        if damaged.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = (damaged.iter())
            .map(|(shard, found)| format!("shard {shard}: {found}"))
            .collect();
        tracing::warn!(
            "{}: {} complete shards are damaged since they were written and are encoded again \
             ({})",
            self.dir.display(),
            damaged.len(),
            list.join("; ")
        );
        for (shard, _) in damaged {
            self.done.remove(&shard);
        }
        Ok(())
    }

    fn path(&self, shard: usize) -> PathBuf {
        self.dir.join(format!("{shard:06}.vectors"))
    }

    /// How many shards are complete now (other processes may have added some).
    pub(crate) fn complete(&self) -> Result<usize> {
        Ok(complete_shards(&self.dir)?.len())
    }
}

/// The top-level fields in which `recorded` and `key` differ.
fn changed(recorded: &serde_json::Value, key: &serde_json::Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let fields = |v: &serde_json::Value| v.as_object().cloned().unwrap_or(empty.clone());
    let (recorded, key) = (fields(recorded), fields(key));
    let names: BTreeSet<&String> = recorded.keys().chain(key.keys()).collect();
    names
        .into_iter()
        .filter(|n| recorded.get(*n) != key.get(*n))
        .cloned()
        .collect()
}

/// The indices of the shard files in `dir` (each complete: written atomically).
fn complete_shards(dir: &Path) -> Result<BTreeSet<usize>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(BTreeSet::new());
    };
    let mut done = BTreeSet::new();
    for entry in entries {
        let name = entry.map_err(|e| EvalError::io(dir, e))?.file_name();
        let index = name.to_str().and_then(|n| n.strip_suffix(".vectors"));
        if let Some(index) = index.and_then(|i| i.parse().ok()) {
            done.insert(index);
        }
    }
    Ok(done)
}

/// Removes the shard folder of each data set output folder under `dir` (`dir` itself
/// included): once the vectors are assembled and measured, they only take disk.
pub fn remove_shards(dir: &Path) -> Result<()> {
    let mut folders = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        folders.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    for folder in folders {
        let shards = folder.join(SHARD_DIR);
        if shards.is_dir() {
            std::fs::remove_dir_all(&shards).map_err(|e| EvalError::io(&shards, e))?;
        }
    }
    Ok(())
}

/// Encodes the shards of `dataset`'s corpus that `part` takes (all without one) and that are
/// not complete yet, in corpus order; returns the shards, complete or not, the corpus has. A
/// stop request ([`lsr_files::stop`]) ends a sharded pass after the batch in progress: the
/// shard it was in is dropped, the complete ones kept.
pub(crate) fn encode_shards(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
    vocabulary: &Fingerprint,
    out_dir: &Path,
    part: Option<ShardPart>,
    progress: &ProgressBar,
) -> Result<(Shards, usize)> {
    let key = ShardKey::of(encoder, dataset, settings, vocabulary);
    let size = settings.shard_documents.unwrap_or(usize::MAX);
    let mut pass = Pass {
        encoder,
        tokenizer: (encoder.backbone.tokenizer).with_max_length(settings.document_max_length)?,
        batch_size: settings.batch_size,
        size,
        window_size: SORT_WINDOW.min(size),
        stoppable: settings.shard_documents.is_some(),
        shards: Shards::open(out_dir, &key, part)?,
        vocabulary,
        part,
        seen: 0,
        window: Vec::new(),
        writer: None,
        progress,
    };
    dataset.for_each_document(|id, text| pass.add(id, text))?;
    let last = pass.seen.saturating_sub(1) / size;
    pass.flush(last)?;
    pass.finish()?;
    let count = pass.seen.div_ceil(size);
    Ok((pass.shards, count))
}

/// Every shard in order into `builder` and `corpus.vectors` in `out_dir`; a shard that is not
/// there (another part's, not encoded yet) or that fails its checksum (damaged since the pass
/// checked it) is an error naming it and saying what to do, and `corpus.vectors` is not written.
pub(crate) fn assemble(
    shards: &Shards,
    count: usize,
    vocabulary: &Fingerprint,
    builder: &mut IndexBuilder,
    quantize: Option<f32>,
    out_dir: &Path,
) -> Result<()> {
    let mut writer = VectorWriter::create(&out_dir.join("corpus.vectors"), vocabulary)?;
    for shard in 0..count {
        let path = shards.path(shard);
        if !path.exists() {
            return Err(EvalError::Invalid(format!(
                "{}: shard {shard} of {count} is missing; encode it (`lsr eval --shard I/N` for \
                 each part, or without --shard) before retrieving",
                path.display()
            )));
        }
        let read = read_vectors(&path, |id, terms| {
            builder.add(id, &impacts(terms, quantize))?;
            writer.write(id, terms)
        });
        if let Err(EvalError::Damaged { path, found }) = read {
            return Err(EvalError::Invalid(format!(
                "{}: shard {shard} of {count} is damaged since it was written: {found}; run \
                 the same command again, which finds it and encodes it again",
                path.display()
            )));
        }
        read?;
    }
    writer.finish()?;
    Ok(())
}

/// One pass over the corpus, encoding what it takes window by window into shard files.
struct Pass<'a> {
    encoder: &'a SpladeEncoder,
    tokenizer: TextTokenizer,
    batch_size: usize,
    size: usize,
    window_size: usize,
    /// Whether a stop request ends the pass (sharded evaluation; not a validation pass).
    stoppable: bool,
    shards: Shards,
    vocabulary: &'a Fingerprint,
    part: Option<ShardPart>,
    /// Documents read so far.
    seen: usize,
    window: Vec<(String, String)>,
    /// The shard being written.
    writer: Option<VectorWriter>,
    progress: &'a ProgressBar,
}

impl Pass<'_> {
    fn takes(&self, shard: usize) -> bool {
        !self.shards.done.contains(&shard) && self.part.is_none_or(|p| p.takes(shard))
    }

    fn add(&mut self, id: &str, text: &str) -> Result<()> {
        let shard = self.seen / self.size;
        self.seen += 1;
        if !self.takes(shard) {
            self.progress.inc(1);
            return Ok(());
        }
        self.window.push((id.to_string(), text.to_string()));
        let shard_ends = self.seen.is_multiple_of(self.size);
        if self.window.len() == self.window_size || shard_ends {
            self.flush(shard)?;
        }
        if shard_ends {
            self.finish()?;
        }
        Ok(())
    }

    /// Encodes the window into `shard`'s file; then, if a stop was asked for, drops that shard.
    fn flush(&mut self, shard: usize) -> Result<()> {
        if self.window.is_empty() {
            return Ok(());
        }
        if self.writer.is_none() {
            self.writer = Some(VectorWriter::create(
                &self.shards.path(shard),
                self.vocabulary,
            )?);
        }
        let writer = self.writer.as_mut().expect("just started");
        let progress = self.progress;
        encode_by_length(
            self.encoder,
            &self.tokenizer,
            &mut self.window,
            self.batch_size,
            |id, terms| {
                progress.inc(1);
                writer.write(id, terms)
            },
        )?;
        self.window.clear();
        if self.stoppable && lsr_files::stop::requested() {
            self.writer = None;
            return Err(EvalError::Interrupted {
                shards: self.shards.dir.clone(),
                complete: self.shards.complete()?,
            });
        }
        Ok(())
    }

    /// Commits the shard being written.
    fn finish(&mut self) -> Result<()> {
        if let Some(writer) = self.writer.take() {
            writer.finish()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::Vocabulary;

    /// A shard damaged after the pass checked it (between its check and the assembly) stops
    /// the assembly with what to do, and no `corpus.vectors` is written.
    #[test]
    fn assembly_refuses_a_shard_damaged_since_it_was_written() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join(SHARD_DIR);
        let vocabulary = Vocabulary {
            model: "m".into(),
            tokens: vec!["a".into(), "b".into()],
        }
        .fingerprint();
        let shards = Shards {
            dir,
            done: BTreeSet::from([0, 1]),
        };
        for shard in [0, 1] {
            let mut writer = VectorWriter::create(&shards.path(shard), &vocabulary).unwrap();
            writer.write(&format!("d{shard}"), &[(1, 0.5)]).unwrap();
            writer.finish().unwrap();
        }
        let path = shards.path(1);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 40;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let mut builder = IndexBuilder::new(2);
        let error = assemble(&shards, 2, &vocabulary, &mut builder, None, out.path())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("000001.vectors: shard 1 of 2 is damaged since it was written")
                && error.contains("run the same command again"),
            "{error}"
        );
        assert!(!out.path().join("corpus.vectors").exists());
    }
}
