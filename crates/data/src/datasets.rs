//! Evaluation data sets by name, read from their standard files under a data root:
//!
//! | name | files (under the root) | binary relevance |
//! |---|---|---|
//! | `msmarco-dev` | `msmarco/collection.tsv`, `msmarco/queries.dev.small.tsv`, `msmarco/qrels.dev.small.tsv` | grade ≥ 1 |
//! | `trec-dl-2019` | `msmarco/collection.tsv`, `trec-dl-2019/msmarco-test2019-queries.tsv`, `trec-dl-2019/2019qrels-pass.txt` | grade ≥ 2 (nDCG graded) |
//! | `beir/<name>` | `beir/<name>/corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv` | grade ≥ 1 |
//! | `nanobeir/<name>` | `nanobeir/Nano<Name>/{corpus,queries,qrels}/*.parquet` (the HF layout) | binary qrels |
//!
//! Each file may also be gzipped (`.gz` appended). BEIR documents are `title + " " + text`;
//! BEIR queries are limited to those with judgements, and a hit whose document id equals the
//! query id is dropped before evaluation, as BEIR's `EvaluateRetrieval` does by default.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{DataError, Result};
use crate::trec::{Qrels, Run, for_each_line};

/// The NanoBEIR data sets (`zeta-alpha-ai/Nano<Name>` on the HF hub), 50 queries each.
pub const NANOBEIR_13: [&str; 13] = [
    "NanoArguAna",
    "NanoClimateFEVER",
    "NanoDBPedia",
    "NanoFEVER",
    "NanoFiQA2018",
    "NanoHotpotQA",
    "NanoMSMARCO",
    "NanoNFCorpus",
    "NanoNQ",
    "NanoQuoraRetrieval",
    "NanoSCIDOCS",
    "NanoSciFact",
    "NanoTouche2020",
];

/// The BEIR-13 data sets of the SPLADE papers (BEIR minus the non-public four and CQADupStack).
pub const BEIR_13: [&str; 13] = [
    "arguana",
    "climate-fever",
    "dbpedia-entity",
    "fever",
    "fiqa",
    "hotpotqa",
    "nfcorpus",
    "nq",
    "quora",
    "scidocs",
    "scifact",
    "trec-covid",
    "webis-touche2020",
];

#[derive(Clone, Debug, PartialEq)]
pub enum CorpusFormat {
    /// `id<TAB>text` (MS MARCO).
    Tsv,
    /// `{"_id", "title", "text"}` per line (BEIR).
    Jsonl,
    /// Columns `_id`, `text` (NanoBEIR); qrels `query-id`, `corpus-id`.
    Parquet,
}

/// A data set's files and evaluation conventions.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    pub corpus: PathBuf,
    pub corpus_format: CorpusFormat,
    pub queries: PathBuf,
    pub qrels: PathBuf,
    pub relevance_level: i32,
    /// Drop hits whose document id equals the query id (BEIR).
    pub ignore_identical_ids: bool,
    /// Keep only queries that have judgements (BEIR).
    pub judged_queries_only: bool,
}

impl Dataset {
    /// Resolves a data set name (or a group: `beir-13`) to its files under `root`.
    pub fn resolve(name: &str, root: &Path) -> Result<Vec<Dataset>> {
        if name == "beir-13" {
            return BEIR_13
                .iter()
                .map(|d| Self::resolve_one(&format!("beir/{d}"), root))
                .collect();
        }
        if name == "nanobeir-13" {
            return NANOBEIR_13
                .iter()
                .map(|d| Self::resolve_one(&format!("nanobeir/{d}"), root))
                .collect();
        }
        Ok(vec![Self::resolve_one(name, root)?])
    }

    fn resolve_one(name: &str, root: &Path) -> Result<Dataset> {
        let msmarco = root.join("msmarco");
        let dataset = match name {
            "msmarco-dev" => Dataset {
                name: name.into(),
                corpus: find(&msmarco, "collection.tsv")?,
                corpus_format: CorpusFormat::Tsv,
                queries: find(&msmarco, "queries.dev.small.tsv")?,
                qrels: find(&msmarco, "qrels.dev.small.tsv")?,
                relevance_level: 1,
                ignore_identical_ids: false,
                judged_queries_only: false,
            },
            "trec-dl-2019" => {
                let dl = root.join("trec-dl-2019");
                Dataset {
                    name: name.into(),
                    corpus: find(&msmarco, "collection.tsv")?,
                    corpus_format: CorpusFormat::Tsv,
                    queries: find(&dl, "msmarco-test2019-queries.tsv")?,
                    qrels: find(&dl, "2019qrels-pass.txt")?,
                    relevance_level: 2,
                    ignore_identical_ids: false,
                    // 200 test queries, 43 judged: only the judged ones are evaluated.
                    judged_queries_only: true,
                }
            }
            other if other.starts_with("nanobeir/") => {
                let requested = &other["nanobeir/".len()..];
                let canonical = NANOBEIR_13
                    .iter()
                    .find(|n| {
                        n.eq_ignore_ascii_case(requested)
                            || n["Nano".len()..].eq_ignore_ascii_case(requested)
                    })
                    .ok_or_else(|| DataError::File {
                        path: root.join("nanobeir"),
                        message: format!(
                            "unknown NanoBEIR set `{requested}`; expected one of {}",
                            NANOBEIR_13.join(", ")
                        ),
                    })?;
                let dir = root.join("nanobeir").join(canonical);
                Dataset {
                    name: format!("nanobeir/{canonical}"),
                    corpus: find_parquet(&dir.join("corpus"))?,
                    corpus_format: CorpusFormat::Parquet,
                    queries: find_parquet(&dir.join("queries"))?,
                    qrels: find_parquet(&dir.join("qrels"))?,
                    relevance_level: 1,
                    ignore_identical_ids: false,
                    judged_queries_only: true,
                }
            }
            other => {
                let Some(beir) = other.strip_prefix("beir/") else {
                    return Err(DataError::File {
                        path: root.to_path_buf(),
                        message: format!(
                            "unknown data set `{other}`; expected msmarco-dev, trec-dl-2019, \
                             beir/<name>, beir-13, nanobeir/<name> or nanobeir-13"
                        ),
                    });
                };
                let dir = root.join("beir").join(beir);
                Dataset {
                    name: name.into(),
                    corpus: find(&dir, "corpus.jsonl")?,
                    corpus_format: CorpusFormat::Jsonl,
                    queries: find(&dir, "queries.jsonl")?,
                    qrels: find(&dir.join("qrels"), "test.tsv")?,
                    relevance_level: 1,
                    ignore_identical_ids: true,
                    judged_queries_only: true,
                }
            }
        };
        Ok(dataset)
    }

    /// Calls `each(id, text)` for every document, streaming (the MS MARCO collection is 8.8M
    /// passages and is never held in memory).
    /// Generic over the caller's error type, so that an encoding error passes through.
    pub fn for_each_document<E: From<DataError>>(
        &self,
        mut each: impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut seen = HashSet::new();
        read_records(&self.corpus, &self.corpus_format, |line, id, text| {
            if !seen.insert(id.to_string()) {
                let message = format!("duplicate document id `{id}`");
                return Err(DataError::line(&self.corpus, line, message).into());
            }
            each(id, text)
        })
    }

    /// The queries to evaluate, in file order, with the judgements.
    pub fn queries_and_qrels(&self) -> Result<(Vec<(String, String)>, Qrels)> {
        let name = self.queries.to_string_lossy();
        let (qrels, format) = if name.ends_with(".parquet") {
            (parquet_qrels(&self.qrels)?, CorpusFormat::Parquet)
        } else if name.contains(".jsonl") {
            (Qrels::read(&self.qrels)?, CorpusFormat::Jsonl)
        } else {
            (Qrels::read(&self.qrels)?, CorpusFormat::Tsv)
        };
        let mut queries = Vec::new();
        let mut seen = HashSet::new();
        read_records(&self.queries, &format, |line, id, text| {
            if !seen.insert(id.to_string()) {
                return Err(DataError::line(
                    &self.queries,
                    line,
                    format!("duplicate query id `{id}`"),
                ));
            }
            if !self.judged_queries_only || qrels.queries.contains_key(id) {
                queries.push((id.to_string(), text.to_string()));
            }
            Ok(())
        })?;
        if let Some(unknown) = qrels.queries.keys().find(|q| !seen.contains(*q)) {
            return Err(DataError::File {
                path: self.qrels.clone(),
                message: format!(
                    "judgements for query `{unknown}`, which {} does not have",
                    self.queries.display()
                ),
            });
        }
        Ok((queries, qrels))
    }

    /// Applies the data set's conventions to a run before evaluation.
    pub fn prepare_run(&self, mut run: Run) -> Run {
        if self.ignore_identical_ids {
            for (query, docs) in run.queries.iter_mut() {
                docs.retain(|(doc, _)| doc != query);
            }
        }
        run
    }
}

/// `dir/file`, or `dir/file.gz`; otherwise an error naming both and how to get them.
fn find(dir: &Path, file: &str) -> Result<PathBuf> {
    let plain = dir.join(file);
    if plain.is_file() {
        return Ok(plain);
    }
    let gz = dir.join(format!("{file}.gz"));
    if gz.is_file() {
        return Ok(gz);
    }
    Err(DataError::File {
        path: plain,
        message: "not found (nor its .gz); put the data set's standard files under the data \
                  root (`--data-root`, default data/); see README.md, Data"
            .into(),
    })
}

/// The one `.parquet` file of a NanoBEIR split directory.
fn find_parquet(dir: &Path) -> Result<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.into_iter().next().ok_or_else(|| DataError::File {
        path: dir.to_path_buf(),
        message: "no .parquet file; fetch the set with `lsr data fetch nanobeir/<name>` or copy                   the HF dataset's files there"
            .into(),
    })
}

fn parquet_error(path: &Path, e: impl std::fmt::Display) -> DataError {
    DataError::File {
        path: path.to_path_buf(),
        message: format!("cannot read parquet: {e}"),
    }
}

/// The string columns `names` of a parquet file, row by row.
fn parquet_columns(path: &Path, names: &[&str]) -> Result<Vec<Vec<Option<String>>>> {
    use polars::prelude::*;
    let file = std::fs::File::open(path).map_err(|source| DataError::io(path, source))?;
    let frame = ParquetReader::new(file)
        .finish()
        .map_err(|e| parquet_error(path, e))?;
    names
        .iter()
        .map(|name| {
            let column = frame
                .column(name)
                .map_err(|_| parquet_error(path, format!("no column `{name}`")))?
                .cast(&DataType::String)
                .map_err(|e| parquet_error(path, e))?;
            let strings = column.str().map_err(|e| parquet_error(path, e))?;
            Ok(strings.iter().map(|v| v.map(str::to_string)).collect())
        })
        .collect()
}

/// NanoBEIR qrels: `query-id`, `corpus-id`, every pair relevant (grade 1).
fn parquet_qrels(path: &Path) -> Result<Qrels> {
    let columns = parquet_columns(path, &["query-id", "corpus-id"])?;
    let mut qrels = Qrels::default();
    for (row, (query, doc)) in columns[0].iter().zip(&columns[1]).enumerate() {
        let (Some(query), Some(doc)) = (query, doc) else {
            return Err(DataError::line(path, row + 1, "null id (row number)"));
        };
        qrels
            .queries
            .entry(query.clone())
            .or_default()
            .insert(doc.clone(), 1);
    }
    if qrels.queries.is_empty() {
        return Err(DataError::File {
            path: path.to_path_buf(),
            message: "no judgements".into(),
        });
    }
    Ok(qrels)
}

/// Streams `(line, id, text)` records of a TSV (`id<TAB>text`), BEIR JSONL or NanoBEIR
/// parquet file (for parquet, "line" is the row number).
fn read_records<E: From<DataError>>(
    path: &Path,
    format: &CorpusFormat,
    mut each: impl FnMut(usize, &str, &str) -> Result<(), E>,
) -> Result<(), E> {
    if *format == CorpusFormat::Parquet {
        let columns = parquet_columns(path, &["_id", "text"])?;
        if columns[0].is_empty() {
            return Err(DataError::File {
                path: path.to_path_buf(),
                message: "empty file".into(),
            }
            .into());
        }
        for (row, (id, text)) in columns[0].iter().zip(&columns[1]).enumerate() {
            let Some(id) = id else {
                return Err(DataError::line(path, row + 1, "null `_id` (row number)").into());
            };
            each(row + 1, id, text.as_deref().unwrap_or(""))?;
        }
        return Ok(());
    }
    #[derive(serde::Deserialize)]
    struct Record {
        #[serde(rename = "_id")]
        id: String,
        #[serde(default)]
        title: String,
        text: String,
    }
    let mut any = false;
    for_each_line(path, |line, content| {
        if content.trim().is_empty() {
            return Ok(());
        }
        any = true;
        if *format == CorpusFormat::Tsv {
            let Some((id, text)) = content.split_once('\t') else {
                return Err(DataError::line(path, line, "expected `id<TAB>text`").into());
            };
            return each(line, id, text);
        }
        let record: Record = serde_json::from_str(content).map_err(|e| {
            DataError::line(
                path,
                line,
                format!("expected {{\"_id\", \"title\", \"text\"}}: {e}"),
            )
        })?;
        if record.title.is_empty() {
            each(line, &record.id, &record.text)
        } else {
            each(
                line,
                &record.id,
                &format!("{} {}", record.title, record.text),
            )
        }
    })?;
    if !any {
        return Err(DataError::File {
            path: path.to_path_buf(),
            message: "empty file".into(),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn write(path: &Path, content: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if path.extension().is_some_and(|e| e == "gz") {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(content.as_bytes()).unwrap();
            std::fs::write(path, gz.finish().unwrap()).unwrap();
        } else {
            std::fs::write(path, content).unwrap();
        }
    }

    fn beir(root: &Path, corpus: &str, queries: &str, qrels: &str) -> Dataset {
        let dir = root.join("beir/tiny");
        write(&dir.join("corpus.jsonl.gz"), corpus);
        write(&dir.join("queries.jsonl"), queries);
        write(&dir.join("qrels/test.tsv"), qrels);
        Dataset::resolve("beir/tiny", root).unwrap().remove(0)
    }

    const CORPUS: &str = concat!(
        r#"{"_id": "d1", "title": "Paris", "text": "capital of france", "metadata": {}}"#,
        "\n",
        r#"{"_id": "q2", "title": "", "text": "a document sharing a query's id"}"#,
        "\n",
    );
    const QUERIES: &str = concat!(
        r#"{"_id": "q1", "text": "capital of france"}"#,
        "\n",
        r#"{"_id": "q2", "text": "unjudged? no, judged"}"#,
        "\n",
        r#"{"_id": "q3", "text": "no judgements"}"#,
        "\n",
    );
    const QRELS: &str = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\n";

    #[test]
    fn beir_documents_are_title_and_text_and_queries_are_the_judged_ones() {
        let root = tempfile::tempdir().unwrap();
        let dataset = beir(root.path(), CORPUS, QUERIES, QRELS);
        let mut docs = Vec::new();
        dataset
            .for_each_document(|id, text| -> Result<()> {
                docs.push((id.to_string(), text.to_string()));
                Ok(())
            })
            .unwrap();
        assert_eq!(docs[0], ("d1".into(), "Paris capital of france".into()));
        assert_eq!(docs[1].1, "a document sharing a query's id");
        let (queries, qrels) = dataset.queries_and_qrels().unwrap();
        let ids: Vec<&str> = queries.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["q1", "q2"]);
        assert_eq!(qrels.queries.len(), 2);
    }

    #[test]
    fn beir_drops_hits_whose_id_is_the_query_id() {
        let root = tempfile::tempdir().unwrap();
        let dataset = beir(root.path(), CORPUS, QUERIES, QRELS);
        let mut run = Run::default();
        run.queries
            .insert("q2".into(), vec![("q2".into(), 9.0), ("d1".into(), 1.0)]);
        let run = dataset.prepare_run(run);
        assert_eq!(run.queries["q2"], vec![("d1".to_string(), 1.0)]);
    }

    #[test]
    fn msmarco_and_trec_dl_layouts_resolve_with_their_conventions() {
        let root = tempfile::tempdir().unwrap();
        write(
            &root.path().join("msmarco/collection.tsv"),
            "0\tfirst passage\n1\tsecond\n",
        );
        write(
            &root.path().join("msmarco/queries.dev.small.tsv"),
            "10\tquery\n",
        );
        write(
            &root.path().join("msmarco/qrels.dev.small.tsv"),
            "10\t0\t1\t1\n",
        );
        write(
            &root
                .path()
                .join("trec-dl-2019/msmarco-test2019-queries.tsv.gz"),
            "20\tq\n21\tunjudged\n",
        );
        write(
            &root.path().join("trec-dl-2019/2019qrels-pass.txt"),
            "20 Q0 0 3\n20 Q0 1 1\n",
        );
        let dev = Dataset::resolve("msmarco-dev", root.path())
            .unwrap()
            .remove(0);
        assert_eq!((dev.relevance_level, dev.ignore_identical_ids), (1, false));
        let dl = Dataset::resolve("trec-dl-2019", root.path())
            .unwrap()
            .remove(0);
        assert_eq!(dl.relevance_level, 2);
        let (queries, _) = dl.queries_and_qrels().unwrap();
        assert_eq!(queries, vec![("20".to_string(), "q".to_string())]);
        let mut n = 0;
        dev.for_each_document(|_, _| -> Result<()> {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn nanobeir_parquet_layout_is_read_with_polars() {
        use polars::prelude::*;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("nanobeir/NanoSciFact");
        let save = |split: &str, mut frame: DataFrame| {
            std::fs::create_dir_all(dir.join(split)).unwrap();
            let file = std::fs::File::create(dir.join(split).join("train-00000-of-00001.parquet"))
                .unwrap();
            ParquetWriter::new(file).finish(&mut frame).unwrap();
        };
        save(
            "corpus",
            df!("_id" => ["d1", "d2"], "text" => ["first", "second"]).unwrap(),
        );
        save(
            "queries",
            df!("_id" => ["q1", "q2"], "text" => ["judged", "not judged"]).unwrap(),
        );
        save(
            "qrels",
            df!("query-id" => ["q1"], "corpus-id" => ["d2"]).unwrap(),
        );
        let dataset = Dataset::resolve("nanobeir/scifact", root.path())
            .unwrap()
            .remove(0);
        assert_eq!(dataset.name, "nanobeir/NanoSciFact");
        let mut docs = Vec::new();
        dataset
            .for_each_document(|id, text| -> Result<()> {
                docs.push(format!("{id}:{text}"));
                Ok(())
            })
            .unwrap();
        assert_eq!(docs, ["d1:first", "d2:second"]);
        let (queries, qrels) = dataset.queries_and_qrels().unwrap();
        assert_eq!(queries, vec![("q1".to_string(), "judged".to_string())]);
        assert_eq!(qrels.queries["q1"]["d2"], 1);
        let missing = Dataset::resolve("nanobeir-13", root.path())
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("NanoArguAna/corpus") && missing.contains("no .parquet"),
            "{missing}"
        );
    }

    #[test]
    fn bad_files_are_located() {
        let root = tempfile::tempdir().unwrap();
        let error = |dataset: &Dataset| {
            dataset
                .for_each_document(|_, _| Ok::<(), DataError>(()))
                .unwrap_err()
                .to_string()
        };
        let broken = beir(
            root.path(),
            "{\"_id\": \"d1\", \"text\": \"ok\"}\n{\"_id\": 5}\n",
            QUERIES,
            QRELS,
        );
        assert!(
            error(&broken).contains("corpus.jsonl.gz:2: expected"),
            "{}",
            error(&broken)
        );
        let twice = beir(
            root.path(),
            "{\"_id\": \"d1\", \"text\": \"a\"}\n{\"_id\": \"d1\", \"text\": \"b\"}\n",
            QUERIES,
            QRELS,
        );
        assert!(error(&twice).contains(":2: duplicate document id `d1`"));
        let empty = beir(root.path(), "\n", QUERIES, QRELS);
        assert!(error(&empty).contains("empty file"));
        let unknown = beir(
            root.path(),
            CORPUS,
            QUERIES,
            "query-id\tcorpus-id\tscore\nq9\td1\t1\n",
        );
        let message = unknown.queries_and_qrels().unwrap_err().to_string();
        assert!(
            message.contains("test.tsv") && message.contains("`q9`"),
            "{message}"
        );
        let missing = Dataset::resolve("beir/absent", root.path())
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("beir/absent/corpus.jsonl") && missing.contains("not found"),
            "{missing}"
        );
        let name = Dataset::resolve("robust04", root.path())
            .unwrap_err()
            .to_string();
        assert!(name.contains("unknown data set `robust04`"), "{name}");
    }
}
