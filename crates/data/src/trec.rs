//! TREC run and qrels files, plain or gzipped.
//!
//! Qrels: TREC `qid iter docid rel` (whitespace separated; MS MARCO's `qrels.dev.small.tsv`
//! uses tabs), or BEIR's `query-id<TAB>corpus-id<TAB>score` with a header line.
//! Runs: `qid Q0 docid rank score tag`; the rank column is ignored, as trec_eval does.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{DataError, Result};

/// Relevance judgements: query id → document id → grade.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Qrels {
    pub queries: BTreeMap<String, HashMap<String, i32>>,
}

/// Retrieved documents with scores, per query, in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    pub queries: BTreeMap<String, Vec<(String, f64)>>,
    /// The tag of the file's last line (what trec_eval prints as `runid`).
    pub tag: Option<String>,
}

/// Opens a file, decompressing it when its name ends in `.gz`.
pub fn open_text(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path).map_err(|source| DataError::io(path, source))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

/// The longest line read: far beyond any document of the supported sets, and a bound on what a
/// small compressed file can make a reader allocate.
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// Calls `each(line_number, line)` for every line, with I/O and UTF-8 errors located.
/// Generic over the caller's error type, so a caller's own failures pass through unchanged.
pub fn for_each_line<E: From<DataError>>(
    path: &Path,
    mut each: impl FnMut(usize, &str) -> Result<(), E>,
) -> Result<(), E> {
    let mut reader = open_text(path)?;
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        buffer.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut buffer)
            .map_err(|e| DataError::line(path, number + 1, format!("cannot read: {e}")))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        if buffer.len() as u64 > MAX_LINE_BYTES {
            let message = format!(
                "longer than {} MiB: not a line of text",
                MAX_LINE_BYTES >> 20
            );
            return Err(DataError::line(path, number, message).into());
        }
        let line = std::str::from_utf8(&buffer)
            .map_err(|e| DataError::line(path, number, format!("invalid UTF-8: {e}")))?;
        each(number, line.trim_end_matches(['\n', '\r']))?;
    }
}

impl Qrels {
    pub fn read(path: &Path) -> Result<Self> {
        let mut qrels = Qrels::default();
        // The first line fixes the layout: 4 fields (TREC) or 3 (BEIR, header optional).
        let mut width = None;
        for_each_line(path, |number, line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.is_empty() || (number == 1 && fields == ["query-id", "corpus-id", "score"]) {
                if !fields.is_empty() {
                    width = Some(3);
                }
                return Ok(());
            }
            let expected = *width.get_or_insert(fields.len());
            let (query, doc, grade) = match (expected, fields.as_slice()) {
                (4, [query, _iteration, doc, grade]) => (*query, *doc, *grade),
                (3, [query, doc, grade]) => (*query, *doc, *grade),
                _ => {
                    return Err(DataError::line(
                        path,
                        number,
                        format!(
                            "expected {}, found {} fields",
                            if expected == 3 {
                                "3 fields (`query-id corpus-id score`)"
                            } else {
                                "4 fields (`qid iter docid rel`)"
                            },
                            fields.len()
                        ),
                    ));
                }
            };
            let grade: i32 = grade.parse().map_err(|_| {
                DataError::line(
                    path,
                    number,
                    format!("relevance `{grade}` is not an integer"),
                )
            })?;
            let previous = qrels
                .queries
                .entry(query.to_string())
                .or_default()
                .insert(doc.to_string(), grade);
            if previous.is_some() {
                return Err(DataError::line(
                    path,
                    number,
                    format!("document `{doc}` judged twice for query `{query}`"),
                ));
            }
            Ok(())
        })?;
        if qrels.queries.is_empty() {
            return Err(DataError::File {
                path: path.to_path_buf(),
                message: "no judgements".into(),
            });
        }
        Ok(qrels)
    }
}

impl Run {
    pub fn read(path: &Path) -> Result<Self> {
        let mut run = Run::default();
        let mut seen: HashMap<String, std::collections::HashSet<String>> = HashMap::new();
        for_each_line(path, |number, line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [query, _q0, doc, _rank, score, rest @ ..] = fields.as_slice() else {
                if fields.is_empty() {
                    return Ok(());
                }
                return Err(DataError::line(
                    path,
                    number,
                    format!(
                        "expected `qid Q0 docid rank score tag`, found {} fields",
                        fields.len()
                    ),
                ));
            };
            let value: f64 = score.parse().map_err(|_| {
                DataError::line(path, number, format!("score `{score}` is not a number"))
            })?;
            if !value.is_finite() {
                return Err(DataError::line(
                    path,
                    number,
                    format!("score `{score}` is not finite"),
                ));
            }
            if !seen
                .entry(query.to_string())
                .or_default()
                .insert(doc.to_string())
            {
                return Err(DataError::line(
                    path,
                    number,
                    format!("document `{doc}` retrieved twice for query `{query}`"),
                ));
            }
            run.queries
                .entry(query.to_string())
                .or_default()
                .push((doc.to_string(), value));
            run.tag = rest.first().map(|tag| tag.to_string());
            Ok(())
        })?;
        Ok(run)
    }

    /// Writes the run in TREC format, each query ranked as trec_eval ranks it, atomically
    /// (a temporary file renamed into place).
    pub fn write(&self, path: &Path, tag: &str) -> Result<()> {
        lsr_files::write_atomically(path, |out| {
            for (query, docs) in &self.queries {
                for (rank, (doc, score)) in ranked(docs).into_iter().enumerate() {
                    let score = lsr_files::number::shortest(score);
                    writeln!(out, "{query} Q0 {doc} {} {score} {tag}", rank + 1)?;
                }
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// trec_eval's order: score descending, ties by document id descending (`strcmp`).
pub fn ranked(docs: &[(String, f64)]) -> Vec<(&str, f64)> {
    let mut ranked: Vec<(&str, f64)> = docs.iter().map(|(d, s)| (d.as_str(), *s)).collect();
    // Scores are finite (checked on reading); `partial_cmp` treats -0 and 0 as tied, as C does.
    ranked.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| b.0.as_bytes().cmp(a.0.as_bytes()))
    });
    ranked
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file(name: &str, content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    /// 70 KB of gzip that inflate to one 65 MiB line: refused at the cap, not read whole (a
    /// few MB of gzip could ask for gigabytes).
    #[test]
    fn a_line_beyond_the_cap_is_refused_not_allocated() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..65 {
            gz.write_all(&chunk).unwrap();
        }
        let (_dir, path) = file("run.txt.gz", &gz.finish().unwrap());
        let error = Run::read(&path).unwrap_err().to_string();
        assert!(
            error.contains("run.txt.gz:1: longer than 64 MiB"),
            "{error}"
        );
    }

    fn error(result: Result<impl std::fmt::Debug>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn trec_and_msmarco_qrels_read_alike() {
        let (_d, spaces) = file("qrels.txt", b"1 0 7 1\n1 0 8 0\n2 0 9 2\n");
        let (_e, tabs) = file(
            "qrels.dev.small.tsv",
            b"1\t0\t7\t1\n1\t0\t8\t0\n2\t0\t9\t2\n",
        );
        assert_eq!(Qrels::read(&spaces).unwrap(), Qrels::read(&tabs).unwrap());
    }

    #[test]
    fn gzipped_files_are_read() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\n")
            .unwrap();
        let (_d, path) = file("run.trec.gz", &gz.finish().unwrap());
        let run = Run::read(&path).unwrap();
        assert_eq!(
            run.queries["q1"],
            vec![("d1".into(), 2.5), ("d2".into(), 1.5)]
        );
    }

    #[test]
    fn malformed_lines_are_located() {
        let (_d, path) = file("qrels.txt", b"1 0 7 1\n1 0 8\n");
        assert!(error(Qrels::read(&path)).contains("qrels.txt:2: expected 4 fields"));
        let (_d, path) = file("qrels.tsv", b"query-id\tcorpus-id\tscore\n1\t7\tx\n");
        assert!(error(Qrels::read(&path)).contains("qrels.tsv:2: relevance `x`"));
        let (_d, path) = file("qrels.txt", b"1 0 7 1\n1 0 7 2\n");
        assert!(error(Qrels::read(&path)).contains("qrels.txt:2: document `7` judged twice"));
        let (_d, path) = file("qrels.txt", b"");
        assert!(error(Qrels::read(&path)).contains("no judgements"));
        let (_d, path) = file("run.txt", b"q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 nan t\n");
        let message = error(Run::read(&path));
        assert!(
            message.contains("run.txt:2: score `nan` is not finite"),
            "{message}"
        );
        let (_d, path) = file("run.txt", b"q1 Q0 d1 1 x t\n");
        assert!(error(Run::read(&path)).contains("run.txt:1: score `x` is not a number"));
        let (_d, path) = file("run.txt", b"q1 Q0 d1 1 1 t\nq1 Q0 d1 2 0.5 t\n");
        assert!(error(Run::read(&path)).contains("run.txt:2: document `d1` retrieved twice"));
        let (_d, path) = file("run.txt", b"q1 Q0 d1\n");
        assert!(error(Run::read(&path)).contains("run.txt:1: expected"));
        let (_d, path) = file("run.txt", b"q1 Q0 d\xff 1 1 t\n");
        assert!(error(Run::read(&path)).contains("run.txt:1: invalid UTF-8"));
    }

    #[test]
    fn written_runs_are_in_trec_eval_order_and_read_back() {
        let mut run = Run::default();
        run.queries.insert(
            "q".into(),
            vec![("a".into(), 1.0), ("c".into(), 2.0), ("b".into(), 1.0)],
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.trec");
        run.write(&path, "lsr").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "q Q0 c 1 2 lsr\nq Q0 b 2 1 lsr\nq Q0 a 3 1 lsr\n");
        let back = Run::read(&path).unwrap();
        assert_eq!(
            back.queries["q"],
            vec![("c".into(), 2.0), ("b".into(), 1.0), ("a".into(), 1.0)]
        );
    }
}
