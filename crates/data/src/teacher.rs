//! A teacher's scores of candidate passages per training query, read from the files the anchors
//! ship: naver/splade's gzipped pickle `{qid: {pid: score}}` (its `MsMarcoHardNegatives`, the
//! sentence-transformers `cross-encoder-ms-marco-MiniLM-L-6-v2-scores.pkl.gz`) with the qrels
//! naming each query's positives, and sentence-transformers' parquet rows `query_id,
//! positive_id, negative_id, score` whose score is the margin `teacher(q, d⁺) − teacher(q, d⁻)`
//! (`sentence-transformers/msmarco`, `bert-ensemble-margin-mse`). Both become
//! [`TeacherScores`]: per query, scored positives and scored negatives, ids as integers, every
//! score finite. What the anchors skip (a query without judgements, a query without a scored
//! negative) is skipped and counted; anything else wrong is an error naming the file and the
//! record.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use crate::error::{DataError, Result};
use crate::trec::{Qrels, open_text};

/// Scored candidates per query, in flat arrays: query `q`'s positives are
/// `documents[q.positives]` with `scores[q.positives]`, its negatives likewise.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TeacherScores {
    pub queries: Vec<ScoredQuery>,
    pub documents: Vec<u64>,
    pub scores: Vec<f32>,
    /// What was left out, as the anchors leave it out.
    pub skipped: Skipped,
}

/// One training query: its id and the ranges of its scored positives and negatives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoredQuery {
    pub id: u64,
    pub positives: Range<usize>,
    pub negatives: Range<usize>,
}

/// Queries the readers leave out, as naver/splade's readers do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Scored queries without a positive in the qrels (`MsMarcoHardNegatives` keeps judged
    /// queries only).
    pub unjudged: usize,
    /// Queries whose every scored passage is a positive (the HF trainer keeps a query only if
    /// it has more scored passages than positives).
    pub without_negatives: usize,
}

impl TeacherScores {
    /// The positives of `query` as `(document, score)`.
    pub fn positives(&self, query: &ScoredQuery) -> impl Iterator<Item = (u64, f32)> + '_ {
        self.pairs(query.positives.clone())
    }

    /// The negatives of `query` as `(document, score)`.
    pub fn negatives(&self, query: &ScoredQuery) -> impl Iterator<Item = (u64, f32)> + '_ {
        self.pairs(query.negatives.clone())
    }

    fn pairs(&self, range: Range<usize>) -> impl Iterator<Item = (u64, f32)> + '_ {
        range.map(|i| (self.documents[i], self.scores[i]))
    }

    /// Appends a query with its scored positives and negatives.
    fn push(&mut self, id: u64, positives: &[(u64, f32)], negatives: &[(u64, f32)]) {
        let mut range = |pairs: &[(u64, f32)]| {
            let start = self.documents.len();
            for &(document, score) in pairs {
                self.documents.push(document);
                self.scores.push(score);
            }
            start..self.documents.len()
        };
        let positives = range(positives);
        let negatives = range(negatives);
        self.queries.push(ScoredQuery {
            id,
            positives,
            negatives,
        });
    }
}

/// An id in a pickle: an int (the sentence-transformers file) or a string of digits (naver's
/// toy file, its qrels).
struct PickleId(u64);

impl<'de> Deserialize<'de> for PickleId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = PickleId;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer id, or a string of one")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<PickleId, E> {
                Ok(PickleId(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<PickleId, E> {
                u64::try_from(v)
                    .map(PickleId)
                    .map_err(|_| E::custom(format!("negative id {v}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<PickleId, E> {
                v.trim()
                    .parse()
                    .map(PickleId)
                    .map_err(|_| E::custom(format!("id `{v}` is not an integer")))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// A score in a pickle: a float, or an int.
struct PickleScore(f64);

impl<'de> Deserialize<'de> for PickleScore {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ScoreVisitor;
        impl Visitor<'_> for ScoreVisitor {
            type Value = PickleScore;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<PickleScore, E> {
                Ok(PickleScore(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<PickleScore, E> {
                Ok(PickleScore(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<PickleScore, E> {
                Ok(PickleScore(v as f64))
            }
        }
        deserializer.deserialize_any(ScoreVisitor)
    }
}

/// A pickled dict as its `(key, value)` pairs in the file's order.
struct Pairs<K, V>(Vec<(K, V)>);

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for Pairs<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct PairsVisitor<K, V>(std::marker::PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for PairsVisitor<K, V> {
            type Value = Pairs<K, V>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a dict")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Pairs<K, V>, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor(std::marker::PhantomData))
    }
}

/// naver/splade's pickle `{qid: {pid: score}}` (gzipped when its name ends in `.gz`), each
/// query's positives being the documents `qrels` grades ≥ 1. Every positive must be scored
/// (naver's `MsMarcoHardNegatives` takes its score from the file); unjudged queries and queries
/// without a scored negative are skipped and counted.
pub fn read_pickle(path: &Path, qrels: &Qrels) -> Result<TeacherScores> {
    let reader = open_text(path)?;
    let table: Pairs<PickleId, Pairs<PickleId, PickleScore>> =
        serde_pickle::from_reader(reader, serde_pickle::DeOptions::new()).map_err(|e| {
            DataError::File {
                path: path.to_path_buf(),
                message: format!(
                    "not a pickled {{qid: {{pid: score}}}} dict (truncated or corrupt?): {e}"
                ),
            }
        })?;
    let record = |qid: u64, pid: u64, message: String| DataError::File {
        path: path.to_path_buf(),
        message: format!("query {qid}, passage {pid}: {message}"),
    };
    let mut teacher = TeacherScores::default();
    for (PickleId(qid), Pairs(candidates)) in table.0 {
        let relevant: Vec<&String> = (qrels.queries.get(&qid.to_string()).into_iter())
            .flatten()
            .filter(|(_, grade)| **grade >= 1)
            .map(|(pid, _)| pid)
            .collect();
        if relevant.is_empty() {
            teacher.skipped.unjudged += 1;
            continue;
        }
        let (mut positives, mut negatives) = (Vec::new(), Vec::new());
        for (PickleId(pid), PickleScore(score)) in candidates {
            let score = finite(score).ok_or_else(|| record(qid, pid, format!("score {score}")))?;
            match relevant.contains(&&pid.to_string()) {
                true => positives.push((pid, score)),
                false => negatives.push((pid, score)),
            }
        }
        if let Some(unscored) =
            (relevant.iter()).find(|pid| !positives.iter().any(|(p, _)| p.to_string() == ***pid))
        {
            let message = format!("positive {unscored} of the qrels has no teacher score");
            return Err(DataError::File {
                path: path.to_path_buf(),
                message: format!("query {qid}: {message}"),
            });
        }
        if negatives.is_empty() {
            teacher.skipped.without_negatives += 1;
            continue;
        }
        teacher.push(qid, &positives, &negatives);
    }
    Ok(teacher)
}

/// A finite score as f32 (what the loss computes in), `None` if it is not finite there.
fn finite(score: f64) -> Option<f32> {
    let narrowed = score as f32;
    narrowed.is_finite().then_some(narrowed)
}

/// sentence-transformers' parquet rows `query_id, positive_id, negative_id, score` (score =
/// the teacher's margin), from one file or every `.parquet` file of a directory in name order.
/// The rows of a (query, positive) pair become one query: the positive at score 0 and each
/// negative at `−margin`, so that every margin, and the softmax over them, is the file's.
pub fn read_parquet_margins(path: &Path) -> Result<TeacherScores> {
    let mut groups: BTreeMap<(u64, u64), Vec<(u64, f32)>> = BTreeMap::new();
    for file in parquet_files(path)? {
        for row in margin_rows(&file)? {
            let (query, positive, negative, margin) = row?;
            groups
                .entry((query, positive))
                .or_default()
                .push((negative, -margin));
        }
    }
    if groups.is_empty() {
        return Err(DataError::File {
            path: path.to_path_buf(),
            message: "no rows".into(),
        });
    }
    let mut teacher = TeacherScores::default();
    for ((query, positive), negatives) in groups {
        teacher.push(query, &[(positive, 0.0)], &negatives);
    }
    Ok(teacher)
}

fn parquet_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| DataError::io(path, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|file| file.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DataError::File {
            path: path.to_path_buf(),
            message: "no .parquet file".into(),
        });
    }
    Ok(files)
}

type MarginRow = Result<(u64, u64, u64, f32)>;

/// The rows of one parquet file; an error names the file and the 1-based row.
fn margin_rows(path: &Path) -> Result<impl Iterator<Item = MarginRow>> {
    use polars::prelude::*;
    let invalid = |message: String| DataError::File {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let frame = ParquetReader::new(file)
        .finish()
        .map_err(|e| invalid(format!("cannot read parquet: {e}")))?;
    let column = |name: &str, dtype: &DataType| -> Result<(Series, Series)> {
        let original = frame
            .column(name)
            .map_err(|_| {
                invalid(format!(
                    "no column `{name}` (expected query_id, positive_id, negative_id, score)"
                ))
            })?
            .as_materialized_series()
            .clone();
        let cast = original.cast(dtype).map_err(|e| invalid(e.to_string()))?;
        Ok((original, cast))
    };
    let ids: Vec<(Series, Series)> = ["query_id", "positive_id", "negative_id"]
        .iter()
        .map(|name| column(name, &DataType::UInt64))
        .collect::<Result<_>>()?;
    let (_, scores) = column("score", &DataType::Float64)?;
    let path = path.to_path_buf();
    let rows = frame.height();
    Ok((0..rows).map(move |row| {
        let at = |message: String| DataError::line(&path, row + 1, message);
        let mut id = [0u64; 3];
        for (slot, (original, cast)) in id.iter_mut().zip(&ids) {
            *slot = match cast.u64().expect("cast to u64").get(row) {
                Some(value) => value,
                None => {
                    let value = original.get(row).map(|v| v.to_string()).unwrap_or_default();
                    return Err(at(format!(
                        "{} {value} is not an integer id (row)",
                        original.name()
                    )));
                }
            };
        }
        let margin = scores.f64().expect("cast to f64").get(row);
        let margin = margin.and_then(finite).ok_or_else(|| {
            at(format!(
                "score {} is not a finite number (row)",
                margin.map_or("null".into(), |m| m.to_string())
            ))
        })?;
        Ok((id[0], id[1], id[2], margin))
    }))
}

/// Writes `scores` as naver/splade's pickle `{qid: {pid: score}}`, gzipped: the miniature's
/// teacher (`miniature.rs`).
pub fn write_pickle(path: &Path, scores: &BTreeMap<u64, BTreeMap<u64, f64>>) -> Result<()> {
    let bytes = serde_pickle::to_vec(scores, serde_pickle::SerOptions::new()).map_err(|e| {
        DataError::File {
            path: path.to_path_buf(),
            message: format!("cannot pickle: {e}"),
        }
    })?;
    lsr_files::write_atomically(path, |out| {
        let mut gzip = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        std::io::Write::write_all(&mut gzip, &bytes)?;
        gzip.finish().map(drop)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fixtures/train")
    }

    fn qrels() -> Qrels {
        Qrels::read(&fixtures().join("qrels.tsv")).unwrap()
    }

    /// The pickles Python wrote (`scripts/fixtures/distillation.py`): int keys and float scores
    /// (the sentence-transformers file), string keys and int scores (naver/splade's toy data).
    #[test]
    fn reads_the_pickles_python_writes_with_the_qrels_positives() {
        let teacher = read_pickle(&fixtures().join("scores.pkl.gz"), &qrels()).unwrap();
        assert_eq!(teacher.queries.len(), 10);
        assert_eq!(teacher.skipped, Skipped::default());
        for query in &teacher.queries {
            let positives: Vec<(u64, f32)> = teacher.positives(query).collect();
            assert_eq!(positives.len(), 1, "query {}", query.id);
            assert_eq!(positives[0].0, query.id - 100);
            assert!(positives[0].1 > 3.0, "{positives:?}");
            assert_eq!(teacher.negatives(query).count(), 9);
        }
        let strings = read_pickle(&fixtures().join("scores-str-keys.pkl.gz"), &qrels()).unwrap();
        let ids = |t: &TeacherScores| t.queries.iter().map(|q| q.id).collect::<Vec<_>>();
        assert_eq!(ids(&strings), ids(&teacher));
        assert_eq!(strings.documents, teacher.documents);
    }

    fn pickle(dir: &tempfile::TempDir, scores: &[(u64, &[(u64, f64)])]) -> PathBuf {
        let table: BTreeMap<u64, BTreeMap<u64, f64>> = scores
            .iter()
            .map(|(q, candidates)| (*q, candidates.iter().copied().collect()))
            .collect();
        let path = dir.path().join("scores.pkl.gz");
        write_pickle(&path, &table).unwrap();
        path
    }

    #[test]
    fn skips_what_naver_skips_and_refuses_the_rest_naming_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let qrels = qrels();
        // Query 100's positive is passage 0; 999 has no judgements; 101's only scored passage is
        // its positive.
        let path = pickle(
            &dir,
            &[
                (100, &[(0, 7.0), (5, 1.0)]),
                (999, &[(0, 1.0)]),
                (101, &[(1, 2.0)]),
            ],
        );
        let teacher = read_pickle(&path, &qrels).unwrap();
        assert_eq!(teacher.queries.len(), 1);
        assert_eq!(
            teacher.skipped,
            Skipped {
                unjudged: 1,
                without_negatives: 1
            }
        );

        let nan = pickle(&dir, &[(100, &[(0, 7.0), (5, f64::NAN)])]);
        let message = read_pickle(&nan, &qrels).unwrap_err().to_string();
        assert!(
            message.contains("scores.pkl.gz: query 100, passage 5: score NaN"),
            "{message}"
        );

        let unscored = pickle(&dir, &[(100, &[(3, 7.0), (5, 1.0)])]);
        let message = read_pickle(&unscored, &qrels).unwrap_err().to_string();
        assert!(
            message.contains("query 100: positive 0 of the qrels has no teacher score"),
            "{message}"
        );
    }

    #[test]
    fn a_truncated_gzip_or_not_a_pickle_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let whole = std::fs::read(fixtures().join("scores.pkl.gz")).unwrap();
        let truncated = dir.path().join("truncated.pkl.gz");
        std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
        let message = read_pickle(&truncated, &qrels()).unwrap_err().to_string();
        assert!(
            message.contains("truncated.pkl.gz") && message.contains("truncated or corrupt"),
            "{message}"
        );
        let text = dir.path().join("scores.pkl");
        std::fs::write(&text, b"qid\tpid\tscore\n").unwrap();
        let message = read_pickle(&text, &qrels()).unwrap_err().to_string();
        assert!(message.contains("not a pickled"), "{message}");
    }

    /// A parquet file laid out as `sentence-transformers/msmarco`'s `bert-ensemble-margin-mse`:
    /// string ids, float64 margins.
    fn parquet(dir: &tempfile::TempDir, name: &str, rows: &[(&str, &str, &str, f64)]) -> PathBuf {
        use polars::prelude::*;
        let column = |i: usize| -> Vec<&str> { rows.iter().map(|r| [r.0, r.1, r.2][i]).collect() };
        let mut frame = df!(
            "query_id" => column(0),
            "positive_id" => column(1),
            "negative_id" => column(2),
            "score" => rows.iter().map(|r| r.3).collect::<Vec<f64>>(),
        )
        .unwrap();
        let path = dir.path().join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        ParquetWriter::new(&mut file).finish(&mut frame).unwrap();
        file.flush().unwrap();
        path
    }

    #[test]
    fn parquet_margins_become_scored_queries_that_keep_every_margin() {
        let dir = tempfile::tempdir().unwrap();
        parquet(
            &dir,
            "a.parquet",
            &[("7", "1", "2", 3.5), ("7", "1", "4", -1.0)],
        );
        parquet(&dir, "b.parquet", &[("8", "2", "1", 0.25)]);
        let teacher = read_parquet_margins(dir.path()).unwrap();
        assert_eq!(teacher.queries.len(), 2);
        let first = &teacher.queries[0];
        assert_eq!(first.id, 7);
        assert_eq!(teacher.positives(first).collect::<Vec<_>>(), [(1, 0.0)]);
        assert_eq!(
            teacher.negatives(first).collect::<Vec<_>>(),
            [(2, -3.5), (4, 1.0)]
        );

        let bad = tempfile::tempdir().unwrap();
        let nan = parquet(
            &bad,
            "nan.parquet",
            &[("7", "1", "2", 1.0), ("7", "1", "3", f64::NAN)],
        );
        let message = read_parquet_margins(&nan).unwrap_err().to_string();
        assert!(message.contains("nan.parquet:2: score NaN"), "{message}");
        let word = parquet(&bad, "word.parquet", &[("7", "one", "2", 1.0)]);
        let message = read_parquet_margins(&word).unwrap_err().to_string();
        assert!(
            message.contains("word.parquet:1: positive_id \"one\" is not an integer"),
            "{message}"
        );
    }
}
