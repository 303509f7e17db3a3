//! Evaluation data sets by name, read from their standard files under a data root. Which names
//! there are, where each set's files are and the conventions it is evaluated with are the
//! registry's ([`crate::registry`]); here they are found on disk and read:
//!
//! | collection | files (under the root) | format |
//! |---|---|---|
//! | MS MARCO, TREC DL | `msmarco/collection.tsv`, the set's queries and qrels | TSV, TREC qrels |
//! | `beir/<name>` | `beir/<name>/corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv` | BEIR JSONL |
//! | `nanobeir/<name>` | `nanobeir/Nano<Name>/{corpus,queries,qrels}/*.parquet` | HF parquet |
//!
//! Each file may also be gzipped (`.gz` appended). BEIR documents are `title + " " + text`.
//! MS MARCO's FLOPs are measured over the full dev queries when `queries.dev.tsv` is there, as
//! naver/splade's `conf/flops/msmarco.yaml` does, and over the evaluated queries otherwise.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{DataError, Result};
use crate::registry::{self, CorpusFormat, DataSet};
use crate::trec::{Qrels, Run, for_each_line};

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
    /// The queries FLOPs are measured over when they are not the evaluated ones: MS MARCO's
    /// full dev set (`queries.dev.tsv`) when it is in the data root.
    pub flops_queries: Option<PathBuf>,
}

impl Dataset {
    /// The data sets a name stands for, by their canonical names, without touching files: a
    /// group (`beir-13`, `nanobeir-13`) its members, a NanoBEIR set its HF name
    /// (`nanobeir/scifact` → `nanobeir/NanoSciFact`), an ir_datasets id lsr's name, any other
    /// known name itself.
    pub fn members(name: &str) -> Result<Vec<String>> {
        Ok(registry::evaluated(name)?
            .into_iter()
            .map(|set| set.name)
            .collect())
    }

    /// Resolves a data set name (or a group: `beir-13`) to its files under `root`.
    pub fn resolve(name: &str, root: &Path) -> Result<Vec<Dataset>> {
        registry::evaluated(name)?
            .iter()
            .map(|set| Self::locate(set, root))
            .collect()
    }

    /// The files of a registered set under `root`, with its conventions.
    pub fn locate(set: &DataSet, root: &Path) -> Result<Dataset> {
        let Some(evaluation) = &set.evaluation else {
            return Err(DataError::Invalid(format!(
                "`{}` is training data, not an evaluation set",
                set.name
            )));
        };
        let file = |path: &str| match evaluation.format {
            CorpusFormat::Parquet => find_parquet(&root.join(path)),
            CorpusFormat::Tsv | CorpusFormat::Jsonl => find(root, path),
        };
        Ok(Dataset {
            name: set.name.clone(),
            corpus: file(&evaluation.corpus)?,
            corpus_format: evaluation.format.clone(),
            queries: file(&evaluation.queries)?,
            qrels: file(&evaluation.qrels)?,
            relevance_level: evaluation.relevance_level,
            ignore_identical_ids: evaluation.ignore_identical_ids,
            judged_queries_only: evaluation.judged_queries_only,
            flops_queries: evaluation
                .flops_queries
                .as_deref()
                .and_then(|path| find(root, path).ok()),
        })
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
        let qrels = if query_format(&self.queries) == CorpusFormat::Parquet {
            parquet_qrels(&self.qrels)?
        } else {
            Qrels::read(&self.qrels)?
        };
        let keep = |id: &str| !self.judged_queries_only || qrels.queries.contains_key(id);
        let (queries, seen) = read_queries(&self.queries, keep)?;
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

    /// The file and queries of [`Self::flops_queries`], in file order, if the data set has them.
    pub fn read_flops_queries(&self) -> Result<Option<(&Path, Queries)>> {
        let Some(path) = &self.flops_queries else {
            return Ok(None);
        };
        let (queries, _) = read_queries(path, |_| true)?;
        Ok(Some((path, queries)))
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

/// The layout of a queries file, by its name: NanoBEIR parquet, BEIR JSONL, or TSV.
fn query_format(path: &Path) -> CorpusFormat {
    let name = path.to_string_lossy();
    if name.ends_with(".parquet") {
        CorpusFormat::Parquet
    } else if name.contains(".jsonl") {
        CorpusFormat::Jsonl
    } else {
        CorpusFormat::Tsv
    }
}

/// `(id, text)` of each query, in file order.
pub type Queries = Vec<(String, String)>;

/// The queries of `path` that `keep` accepts, in file order, and every id the file has; an id
/// given twice is an error at its line.
fn read_queries(path: &Path, keep: impl Fn(&str) -> bool) -> Result<(Queries, HashSet<String>)> {
    let mut queries = Vec::new();
    let mut seen = HashSet::new();
    read_records(path, &query_format(path), |line, id, text| {
        if !seen.insert(id.to_string()) {
            let message = format!("duplicate query id `{id}`");
            return Err(DataError::line(path, line, message));
        }
        if keep(id) {
            queries.push((id.to_string(), text.to_string()));
        }
        Ok(())
    })?;
    Ok((queries, seen))
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
                  root (`--data-root`, default data/); see docs/data.md"
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
        message: "no .parquet file; fetch the set with `lsr data fetch nanobeir/<name>` or copy \
                  the HF dataset's files there"
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

    #[test]
    fn ir_datasets_ids_name_the_same_sets() {
        let members = |name: &str| Dataset::members(name).unwrap();
        assert_eq!(members("msmarco-passage/dev/small"), ["msmarco-dev"]);
        assert_eq!(
            members("msmarco-passage/trec-dl-2019/judged"),
            ["trec-dl-2019"]
        );
        assert_eq!(
            members("msmarco-passage/trec-dl-2020/judged"),
            ["trec-dl-2020"]
        );
        assert_eq!(members("beir/scifact/test"), ["beir/scifact"]);
        assert_eq!(members("beir/arguana"), ["beir/arguana"]);
        assert_eq!(
            members("beir/webis-touche2020/v2"),
            ["beir/webis-touche2020"]
        );
        assert_eq!(
            members("nano-beir/climate-fever"),
            ["nanobeir/NanoClimateFEVER"]
        );
        assert_eq!(
            members("nano-beir/webis-touche2020"),
            ["nanobeir/NanoTouche2020"]
        );
        let error = Dataset::members("msmarco-passage/train").unwrap_err();
        assert!(error.to_string().contains("ir_datasets ids"), "{error}");
    }

    #[test]
    fn trec_dl_2020_reads_its_own_files_at_grade_2() {
        let root = tempfile::tempdir().unwrap();
        write(&root.path().join("msmarco/collection.tsv"), "0\tpassage\n");
        let dl = root.path().join("trec-dl-2020");
        write(&dl.join("msmarco-test2020-queries.tsv.gz"), "1\tq\n");
        write(&dl.join("2020qrels-pass.txt"), "1 0 0 3\n");
        let set = Dataset::resolve("trec-dl-2020", root.path())
            .unwrap()
            .remove(0);
        assert_eq!(set.relevance_level, 2);
        assert!(set.qrels.ends_with("trec-dl-2020/2020qrels-pass.txt"));
        assert_eq!(set.queries_and_qrels().unwrap().0.len(), 1);
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
        assert!(dev.read_flops_queries().unwrap().is_none());
        write(
            &root.path().join("msmarco/queries.dev.tsv"),
            "10\tquery\n11\tunjudged dev query\n",
        );
        let full = Dataset::resolve("msmarco-dev", root.path())
            .unwrap()
            .remove(0);
        let (file, flops_queries) = full.read_flops_queries().unwrap().unwrap();
        assert!(
            file.ends_with("msmarco/queries.dev.tsv"),
            "{}",
            file.display()
        );
        assert_eq!(flops_queries.len(), 2);
        assert_eq!(full.queries_and_qrels().unwrap().0.len(), 1);
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
    fn names_expand_to_canonical_members_without_files() {
        let members = |name: &str| Dataset::members(name).map_err(|e| e.to_string());
        assert_eq!(
            members("nanobeir/scifact").unwrap(),
            ["nanobeir/NanoSciFact"]
        );
        assert_eq!(members("beir/arguana").unwrap(), ["beir/arguana"]);
        let group = members("beir-13").unwrap();
        assert_eq!((group.len(), group[0].as_str()), (13, "beir/arguana"));
        let unknown = members("nanobeir/absent").unwrap_err();
        assert!(
            unknown.contains("unknown NanoBEIR set `absent`"),
            "{unknown}"
        );
        assert!(
            members("beir/")
                .unwrap_err()
                .contains("unknown data set `beir/`")
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
