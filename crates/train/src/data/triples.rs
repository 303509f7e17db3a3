//! Training files of one example per line: text triples, JSON lines, id triples resolved
//! through the text stores, and naver/splade's distillation triples (with the teacher's scores).

use std::path::Path;

use serde::Deserialize;

use crate::data::example::Example;
use crate::data::lines::LineFile;
use crate::data::store::TextStore;
use crate::error::Result;

/// A triple file, memory-mapped and indexed by line, in one of its formats.
pub enum LineSource {
    /// `query<TAB>positive<TAB>negative`.
    Text(LineFile),
    /// `qid<TAB>pid<TAB>pid`, the texts looked up in the stores.
    Ids {
        triples: LineFile,
        queries: TextStore,
        collection: TextStore,
    },
    /// `{"query", "positive", "negatives": [...]}` per line.
    Jsonl(LineFile),
    /// `query<TAB>positive<TAB>negative<TAB>s⁺<TAB>s⁻` (naver/splade's distillation triplets),
    /// every line checked when the file is opened.
    DistilText(LineFile),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonExample {
    query: String,
    positive: String,
    negatives: Vec<String>,
}

impl LineSource {
    pub fn text(triples: &Path) -> Result<Self> {
        Ok(Self::Text(LineFile::open(triples)?))
    }

    pub fn ids(triples: &Path, queries: &Path, collection: &Path) -> Result<Self> {
        Ok(Self::Ids {
            triples: LineFile::open(triples)?,
            queries: TextStore::open(queries)?,
            collection: TextStore::open(collection)?,
        })
    }

    pub fn jsonl(triples: &Path) -> Result<Self> {
        Ok(Self::Jsonl(LineFile::open(triples)?))
    }

    pub fn distil(triples: &Path) -> Result<Self> {
        let lines = LineFile::open(triples)?;
        for index in 0..lines.len() {
            distil_fields(&lines, index)?;
        }
        Ok(Self::DistilText(lines))
    }

    pub fn len(&self) -> usize {
        self.lines().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lines(&self) -> &LineFile {
        match self {
            Self::Text(lines)
            | Self::Jsonl(lines)
            | Self::DistilText(lines)
            | Self::Ids { triples: lines, .. } => lines,
        }
    }

    /// Line `index` as an example with its first `negatives` hard negatives; a malformed line,
    /// an unknown id or too few negatives is an error naming the file and line.
    pub fn example(&self, index: usize, negatives: usize) -> Result<Example> {
        let lines = self.lines();
        let mut example = match self {
            Self::Text(_) => text_example(lines, index)?,
            Self::DistilText(_) => {
                let (texts, scores) = distil_fields(lines, index)?;
                Example {
                    query: texts[0].into(),
                    positive: texts[1].into(),
                    negatives: vec![texts[2].into()],
                    teacher: Some(scores.to_vec()),
                }
            }
            Self::Ids {
                queries,
                collection,
                ..
            } => id_example(lines, index, queries, collection)?,
            Self::Jsonl(_) => json_example(lines, index)?,
        };
        if example.negatives.len() < negatives {
            let found = example.negatives.len();
            let message = format!("has {found} negatives, the recipe asks for {negatives}");
            return Err(lines.error(index, message));
        }
        example.negatives.truncate(negatives);
        Ok(example)
    }
}

fn text_example(lines: &LineFile, index: usize) -> Result<Example> {
    let [query, positive, negative] = fields(lines.text(index)?)
        .ok_or_else(|| lines.error(index, "expected `query<TAB>positive<TAB>negative`"))?;
    Ok(Example {
        query: query.into(),
        positive: positive.into(),
        negatives: vec![negative.into()],
        teacher: None,
    })
}

fn id_example(
    lines: &LineFile,
    index: usize,
    queries: &TextStore,
    collection: &TextStore,
) -> Result<Example> {
    let ids = fields(lines.text(index)?)
        .and_then(|f| {
            f.map(|id| id.trim().parse::<u64>().ok())
                .into_iter()
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| lines.error(index, "expected `qid<TAB>pid<TAB>pid` (integers)"))?;
    let lookup = |store: &TextStore, id: u64| -> Result<String> {
        store.get(id)?.map(str::to_string).ok_or_else(|| {
            let message = format!("id {id} is not in {}", store.path().display());
            lines.error(index, message)
        })
    };
    Ok(Example {
        query: lookup(queries, ids[0])?,
        positive: lookup(collection, ids[1])?,
        negatives: vec![lookup(collection, ids[2])?],
        teacher: None,
    })
}

fn json_example(lines: &LineFile, index: usize) -> Result<Example> {
    let json: JsonExample = serde_json::from_str(lines.text(index)?).map_err(|e| {
        let expected = "expected {\"query\", \"positive\", \"negatives\": [...]}";
        lines.error(index, format!("{expected}: {e}"))
    })?;
    Ok(Example {
        query: json.query,
        positive: json.positive,
        negatives: json.negatives,
        teacher: None,
    })
}

/// The texts and the teacher's two scores of a distillation triplet line.
fn distil_fields(lines: &LineFile, index: usize) -> Result<([&str; 3], [f32; 2])> {
    let expected = "expected `query<TAB>positive<TAB>negative<TAB>score<TAB>score`";
    let line = lines.text(index)?;
    let fields: Vec<&str> = line.split('\t').collect();
    let &[query, positive, negative, s_pos, s_neg] = fields.as_slice() else {
        let message = format!("{expected}, found {} fields", fields.len());
        return Err(lines.error(index, message));
    };
    let score = |text: &str| {
        text.trim()
            .parse::<f32>()
            .ok()
            .filter(|s| s.is_finite())
            .ok_or_else(|| lines.error(index, format!("score `{text}` is not a finite number")))
    };
    Ok(([query, positive, negative], [score(s_pos)?, score(s_neg)?]))
}

/// Exactly three tab-separated fields.
fn fields(line: &str) -> Option<[&str; 3]> {
    let mut parts = line.split('\t');
    let fields = [parts.next()?, parts.next()?, parts.next()?];
    parts.next().is_none().then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DataConfig;
    use crate::data::source::TripleSource;
    use std::path::PathBuf;

    fn write(dir: &tempfile::TempDir, name: &str, text: &[u8]) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn reads_the_three_formats() {
        let dir = tempfile::tempdir().unwrap();
        let text = write(
            &dir,
            "triples.tsv",
            b"what is rust\ta language\ta metal oxide\n",
        );
        let source = TripleSource::open(&DataConfig::Triples { triples: text }).unwrap();
        let expected = Example {
            query: "what is rust".into(),
            positive: "a language".into(),
            negatives: vec!["a metal oxide".into()],
            teacher: None,
        };
        assert_eq!(source.example(0, 1, 0).unwrap(), expected);

        let ids = TripleSource::open(&DataConfig::IdTriples {
            triples: write(&dir, "ids.tsv", b"7\t100\t5\n"),
            queries: write(&dir, "queries.tsv", b"7\twhat is rust\n"),
            collection: write(
                &dir,
                "collection.tsv",
                b"5\ta metal oxide\n100\ta language\n",
            ),
        })
        .unwrap();
        assert_eq!(ids.example(0, 1, 0).unwrap(), expected);

        let jsonl = TripleSource::open(&DataConfig::Jsonl {
            triples: write(
                &dir,
                "t.jsonl",
                br#"{"query": "what is rust", "positive": "a language", "negatives": ["a metal oxide", "a game"]}"#,
            ),
        })
        .unwrap();
        assert_eq!(jsonl.example(0, 1, 0).unwrap(), expected);
        assert_eq!(jsonl.example(0, 2, 0).unwrap().negatives.len(), 2);
    }

    #[test]
    fn malformed_lines_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let text = write(&dir, "triples.tsv", b"q\tp\tn\nq\tp only\nq\tp\tn\textra\n");
        let source = TripleSource::open(&DataConfig::Triples { triples: text }).unwrap();
        for line in [1, 2] {
            let message = source.example(line, 1, 0).unwrap_err().to_string();
            assert!(
                message.contains(&format!("triples.tsv:{}", line + 1)),
                "{message}"
            );
        }

        let ids = TripleSource::open(&DataConfig::IdTriples {
            triples: write(&dir, "ids.tsv", b"1\t2\t3\n1\t2\t99\n1\tx\t3\n"),
            queries: write(&dir, "queries.tsv", b"1\tq\n"),
            collection: write(&dir, "collection.tsv", b"2\tp\n3\tn\n"),
        })
        .unwrap();
        assert!(ids.example(0, 1, 0).is_ok());
        let unknown = ids.example(1, 1, 0).unwrap_err().to_string();
        assert!(
            unknown.contains("ids.tsv:2") && unknown.contains("id 99"),
            "{unknown}"
        );
        let not_int = ids.example(2, 1, 0).unwrap_err().to_string();
        assert!(
            not_int.contains("ids.tsv:3") && not_int.contains("integers"),
            "{not_int}"
        );

        let jsonl = TripleSource::open(&DataConfig::Jsonl {
            triples: write(&dir, "t.jsonl", b"{\"query\": \"q\", \"positive\": \"p\"}\n{\"query\": \"q\", \"positive\": \"p\", \"negatives\": []}\n"),
        })
        .unwrap();
        let missing = jsonl.example(0, 1, 0).unwrap_err().to_string();
        assert!(
            missing.contains("t.jsonl:1") && missing.contains("negatives"),
            "{missing}"
        );
        let few = jsonl.example(1, 1, 0).unwrap_err().to_string();
        assert!(
            few.contains("t.jsonl:2") && few.contains("has 0 negatives"),
            "{few}"
        );

        let duplicate = TextStore::open(&write(&dir, "dup.tsv", b"1\ta\n1\tb\n"))
            .err()
            .unwrap();
        assert!(
            duplicate
                .to_string()
                .contains("id 1 appears more than once"),
            "{duplicate}"
        );
        let bad_id = TextStore::open(&write(&dir, "bad.tsv", b"1\ta\nx\tb\n"))
            .err()
            .unwrap();
        assert!(bad_id.to_string().contains("bad.tsv:2"), "{bad_id}");
    }
}
