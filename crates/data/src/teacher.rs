//! A teacher's scores of candidate passages per training query, read from the files the anchors
//! ship: naver/splade's gzipped pickle `{qid: {pid: score}}` (its `MsMarcoHardNegatives`, the
//! sentence-transformers `cross-encoder-ms-marco-MiniLM-L-6-v2-scores.pkl.gz`) with the qrels
//! naming each query's positives, and sentence-transformers' parquet rows `query_id,
//! positive_id, negative_id, score` whose score is the margin `teacher(q, d⁺) − teacher(q, d⁻)`
//! (`sentence-transformers/msmarco`, `bert-ensemble-margin-mse`). Both become
//! [`TeacherScores`]: per query, scored positives and scored negatives, ids as integers, every
//! score finite. The pickle's ids and scores may be Python's or NumPy's numbers (what
//! `CrossEncoder.predict` returns), a score also a NumPy array of one (`pickle.rs` reads them);
//! an id written two ways (`5` and `'5'`) is one id, counted in [`Respelled`]. What the anchors skip (a query without judgements, a query without a scored
//! negative) is skipped and counted; anything else wrong is an error naming the file and the
//! record.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use crate::error::{DataError, Result};
use crate::pickle::Value;
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
    /// Ids the file writes two ways, each read as one id.
    pub respelled: Respelled,
}

/// One training query: its id and the ranges of its scored positives and negatives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoredQuery {
    pub id: u64,
    pub positives: Range<usize>,
    pub negatives: Range<usize>,
}

/// Queries the reader leaves out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Scored queries without a positive in the qrels: both of naver/splade's readers
    /// (`MsMarcoHardNegatives`, the HF trainer's `L2I_Dataset`) keep judged queries only.
    pub unjudged: usize,
    /// Queries whose every scored passage is a positive: the HF trainer keeps a query only if
    /// it has more scored passages than positives; `MsMarcoHardNegatives` keeps it and raises
    /// `ValueError` when it draws a negative from none.
    pub without_negatives: usize,
}

/// Ids a pickle writes twice, as Python's dict allows under two spellings (the int `5` and the
/// str `'5'`, or `'05'`), each read as one id. naver/splade's `MsMarcoHardNegatives` would train
/// such a query twice; its HF trainer, making both keys `str(k)`, keeps the later one's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Respelled {
    /// Query keys joined to an earlier key of the same id, their candidates with it.
    pub queries: usize,
    /// Passages scored twice under one query, kept once (their two scores equal).
    pub passages: usize,
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

/// naver/splade's pickle `{qid: {pid: score}}` (gzipped when its name ends in `.gz`), each
/// query's positives being the documents `qrels` grades ≥ 1. Every positive must be scored
/// (naver's `MsMarcoHardNegatives` takes its score from the file); unjudged queries and queries
/// without a scored negative are skipped and counted.
pub fn read_pickle(path: &Path, qrels: &Qrels) -> Result<TeacherScores> {
    let (table, respelled) = read_score_table(path)?;
    let record = |qid: u64, pid: u64, message: String| DataError::File {
        path: path.to_path_buf(),
        message: format!("query {qid}, passage {pid}: {message}"),
    };
    let mut teacher = TeacherScores {
        respelled,
        ..TeacherScores::default()
    };
    for (qid, candidates) in table {
        let relevant: Vec<u64> = (qrels.queries.get(&qid.to_string()).into_iter())
            .flatten()
            .filter(|(_, grade)| **grade >= 1)
            .filter_map(|(pid, _)| pid.parse().ok())
            .collect();
        if relevant.is_empty() {
            teacher.skipped.unjudged += 1;
            continue;
        }
        let (mut positives, mut negatives) = (Vec::new(), Vec::new());
        for (pid, score) in candidates {
            let score = finite(score).ok_or_else(|| record(qid, pid, format!("score {score}")))?;
            match relevant.contains(&pid) {
                true => positives.push((pid, score)),
                false => negatives.push((pid, score)),
            }
        }
        if let Some(unscored) =
            (relevant.iter()).find(|&&pid| !positives.iter().any(|p| p.0 == pid))
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

/// Each query's `(passage, score)` pairs in the file's order.
type ScoreTable = Vec<(u64, Vec<(u64, f64)>)>;

/// The pickle `{qid: {pid: score}}` as a table, ids written two ways read as one (a query's
/// candidates joined in the order they come, a passage scored twice kept once if its two
/// scores are equal, an error if not).
fn read_score_table(path: &Path) -> Result<(ScoreTable, Respelled)> {
    let invalid = |message: String| DataError::File {
        path: path.to_path_buf(),
        message,
    };
    let what = "not a pickled {qid: {pid: score}} dict";
    let root = crate::pickle::read(open_text(path)?)
        .map_err(|e| invalid(format!("{what} (truncated or corrupt?): {e}")))?;
    let Value::Dict(queries) = &root else {
        return Err(invalid(format!("{what}: the file holds a {}", kind(&root))));
    };
    let queries = std::mem::take(&mut *queries.borrow_mut());
    let mut table: ScoreTable = Vec::with_capacity(queries.len());
    let mut rows: HashMap<u64, usize> = HashMap::with_capacity(queries.len());
    let mut respelled = Respelled::default();
    for (key, candidates) in queries {
        let qid = id(&key).map_err(|e| invalid(format!("a query key: {e}")))?;
        let Value::Dict(candidates) = &candidates else {
            let message = format!(
                "query {qid}: a {}, not a {{pid: score}} dict",
                kind(&candidates)
            );
            return Err(invalid(message));
        };
        let row = *rows.entry(qid).or_insert(table.len());
        if row == table.len() {
            table.push((qid, Vec::new()));
        } else {
            respelled.queries += 1;
        }
        for (key, score) in candidates.borrow().iter() {
            let pid = id(key).map_err(|e| invalid(format!("query {qid}: a passage key: {e}")))?;
            let score =
                score_of(score).map_err(|e| invalid(format!("query {qid}, passage {pid}: {e}")))?;
            table[row].1.push((pid, score));
        }
    }
    for (qid, candidates) in &mut table {
        respelled.passages += once_each(candidates)
            .map_err(|(pid, message)| invalid(format!("query {qid}, passage {pid}: {message}")))?;
    }
    Ok((table, respelled))
}

/// Keeps the first of each passage's pairs, returning how many were dropped; a passage scored
/// twice with two scores is an error. Sorting a copy of the ids finds the common case, no
/// passage twice, in `n log n`.
fn once_each(candidates: &mut Vec<(u64, f64)>) -> std::result::Result<usize, (u64, String)> {
    let mut ids: Vec<u64> = candidates.iter().map(|c| c.0).collect();
    ids.sort_unstable();
    if ids.windows(2).all(|pair| pair[0] != pair[1]) {
        return Ok(0);
    }
    let before = candidates.len();
    let mut seen: HashMap<u64, f64> = HashMap::with_capacity(before);
    let mut conflict = None;
    candidates.retain(|&(pid, score)| match seen.insert(pid, score) {
        None => true,
        Some(first) => {
            let same = first == score || (first.is_nan() && score.is_nan());
            if !same && conflict.is_none() {
                let message = format!(
                    "scored twice, {first} and {score} (its id written two ways, as {pid} and \
                     '{pid}'?)"
                );
                conflict = Some((pid, message));
            }
            false
        }
    });
    match conflict {
        Some(conflict) => Err(conflict),
        None => Ok(before - candidates.len()),
    }
}

/// An id: a non-negative int (Python's or NumPy's) or a str (bytes, from Python 2) of digits.
fn id(value: &Value) -> std::result::Result<u64, String> {
    let text = match value {
        Value::Int(v) => return u64::try_from(*v).map_err(|_| format!("negative id {v}")),
        Value::Str(text) => text.to_string(),
        Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => {
            return Err(format!(
                "a {} where an id (int or str) is expected",
                kind(other)
            ));
        }
    };
    (text.trim().parse()).map_err(|_| format!("id `{text}` is not an integer"))
}

/// A score: a number (Python's or NumPy's), or a NumPy array holding exactly one.
fn score_of(value: &Value) -> std::result::Result<f64, String> {
    match value {
        Value::Float(v) => Ok(*v),
        Value::Int(v) => Ok(*v as f64),
        Value::Array(array) => match &array.borrow().values[..] {
            [one] => score_of(one),
            values => Err(format!(
                "a NumPy array of {} values (shape {:?}) where one score is expected",
                values.len(),
                array.borrow().shape
            )),
        },
        other => Err(format!("a {} where a score is expected", kind(other))),
    }
}

/// What Python would call the value's type.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::None => "None",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::Bytes(_) => "bytes",
        Value::Tuple(_) => "tuple",
        Value::List(_) => "list",
        Value::Dict(_) => "dict",
        Value::Array(_) => "NumPy array",
        Value::Global(_) => "class or function",
        Value::Dtype(_) => "NumPy dtype",
    }
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

    /// `numpy_pickles.py`'s variants of scores.pkl.gz: NumPy int64 ids and float32 scores (as
    /// `CrossEncoder.predict` returns them), and the first query written as 100 and '100' with
    /// one passage twice, read as the table itself.
    #[test]
    fn numpy_numbers_and_ids_written_two_ways_read_as_the_python_table() {
        let python = read_pickle(&fixtures().join("scores.pkl.gz"), &qrels()).unwrap();
        let numpy = read_pickle(&fixtures().join("scores-numpy.pkl.gz"), &qrels()).unwrap();
        assert_eq!(numpy, python);
        let respelled = read_pickle(&fixtures().join("scores-respelled.pkl.gz"), &qrels()).unwrap();
        let merged = Respelled {
            queries: 1,
            passages: 1,
        };
        assert_eq!(respelled.respelled, merged);
        assert_eq!(
            TeacherScores {
                respelled: Respelled::default(),
                ..respelled
            },
            python
        );
    }

    #[test]
    fn a_passage_written_two_ways_with_two_scores_is_an_error_naming_both() {
        use serde_pickle::{HashableValue as Key, Value};
        let candidates = [(Key::I64(0), 7.0), (Key::String("0".into()), 6.5)];
        let candidates = candidates.into_iter().map(|(k, s)| (k, Value::F64(s)));
        let table = [(Key::I64(100), Value::Dict(candidates.collect()))];
        let bytes = serde_pickle::value_to_vec(
            &Value::Dict(table.into_iter().collect()),
            serde_pickle::SerOptions::new(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twice.pkl");
        std::fs::write(&path, bytes).unwrap();
        let message = read_pickle(&path, &qrels()).unwrap_err().to_string();
        assert!(
            message.contains("twice.pkl: query 100, passage 0: scored twice, 7 and 6.5"),
            "{message}"
        );
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
