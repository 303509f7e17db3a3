//! Sparse vectors (a vector file of `lsr eval` or `lsr encode`) in the formats search
//! engines index: Anserini's `JsonVectorCollection` (integer impacts) and its pre-tokenised
//! query TSV, Seismic's JSONL (float weights), CIFF, the protobuf interchange format PISA and
//! others import, and PISA's query file. Each streams the vector file (CIFF in as many passes as
//! its memory budget needs), writes atomically, and names terms by the model's vocabulary, which
//! must be the one the vector file records, as its engine can take them ([`naming`]).

use std::io::Write;
use std::path::Path;

use prost::Message;

pub mod naming;

pub use naming::Naming;

use crate::error::{EvalError, Result};
use crate::impact::{DEFAULT_QUANTIZE, quantize};
use crate::progress::progress_bar;
use crate::vectors::{Vocabulary, check_vocabulary, read_vectors};

/// The target formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `{"id", "contents", "vector": {token: int}}` per line (documents).
    AnseriniDocuments,
    /// `qid<TAB>token token …`, each token repeated by its impact (`-topicReader TsvString`).
    AnseriniQueries,
    /// `{"id", "content", "vector": {token: float}}` per line (documents or queries).
    Seismic,
    /// CIFF: header, postings lists in term order, document records.
    Ciff,
    /// `qid:token token …`, each token repeated by its impact (PISA's `queries` with
    /// `--weighted`; pyterrier-pisa's `query_toks`), the queries of a CIFF index.
    PisaQueries,
}

impl Format {
    /// How this format's engine must be given the vocabulary's tokens: the one place each
    /// format's naming is chosen, so that a collection and its queries always agree.
    pub fn naming(self) -> Naming {
        match self {
            Self::AnseriniDocuments | Self::AnseriniQueries => Naming::NoWhitespace,
            Self::Ciff | Self::PisaQueries => Naming::NoWhitespaceOrCapitals,
            Self::Seismic => Naming::AsIs,
        }
    }
}

/// Writes the vectors of `vectors` to `out` in `format`; `vocabulary.tokens[id]` is term `id`'s
/// token, written under the name `format`'s engine needs ([`Format::naming`]). The integer
/// formats hold the impacts round(w × `quantization`) (default [`DEFAULT_QUANTIZE`]); Seismic's
/// the float weights, or with a `quantization` those same impacts, the vectors an `lsr eval
/// --quantize` run scored. Returns the number of vectors written.
pub fn export(
    vectors: &Path,
    vocabulary: &Vocabulary,
    format: Format,
    quantization: Option<f32>,
    out: &Path,
) -> Result<usize> {
    let factor = quantization.unwrap_or(DEFAULT_QUANTIZE);
    let names = names(&vocabulary.tokens, format.naming())?;
    check_vocabulary(vectors, vocabulary)?;
    let term = |id: u32| -> Result<&str> {
        names
            .get(id as usize)
            .map(String::as_str)
            .ok_or_else(|| EvalError::File {
                path: vectors.to_path_buf(),
                message: format!(
                    "term {id} is beyond the vocabulary of {} tokens",
                    names.len()
                ),
            })
    };
    // Integer formats of queries: each term as many times as its impact.
    let repeated = |terms: &[(u32, f32)]| -> Result<String> {
        let mut words = Vec::new();
        for &(t, w) in terms {
            words.extend(std::iter::repeat_n(term(t)?, quantize(w, factor) as usize));
        }
        Ok(words.join(" "))
    };
    if format == Format::Ciff {
        return write_ciff(vectors, &names, factor, CIFF_POSTINGS_PER_PASS, out);
    }
    let mut count = 0;
    let progress = progress_bar(&format!("{}", out.display()));
    write_out(out, |file| {
        read_vectors(vectors, |id, terms| {
            let line = match format {
                Format::AnseriniDocuments => json_line(id, "contents", terms, &term, |w| {
                    let impact = quantize(w, factor);
                    (impact > 0).then(|| impact.into())
                })?,
                Format::Seismic => json_line(id, "content", terms, &term, |w| {
                    let value = match quantization {
                        Some(factor) => quantize(w, factor) as f32,
                        None => w,
                    };
                    (value != 0.0).then(|| value.into())
                })?,
                Format::AnseriniQueries => format!("{id}\t{}", repeated(terms)?),
                Format::PisaQueries if id.contains(':') => {
                    return Err(EvalError::File {
                        path: vectors.to_path_buf(),
                        message: format!(
                            "query id {id:?} holds a `:`, which PISA's query files end the id at"
                        ),
                    });
                }
                Format::PisaQueries => format!("{id}:{}", repeated(terms)?),
                Format::Ciff => unreachable!("CIFF is written above"),
            };
            writeln!(file, "{line}").map_err(|e| EvalError::io(out, e))?;
            count += 1;
            progress.inc(1);
            Ok(())
        })
        .map(drop)
    })?;
    progress.finish_and_clear();
    Ok(count)
}

/// A JSON engine's line for one vector: `{"id", <text_key>: "", "vector": {token: value}}`,
/// with the terms whose `value` is `None` (zero) left out.
fn json_line<'a>(
    id: &str,
    text_key: &str,
    terms: &[(u32, f32)],
    term: &impl Fn(u32) -> Result<&'a str>,
    value: impl Fn(f32) -> Option<serde_json::Value>,
) -> Result<String> {
    let mut vector = serde_json::Map::new();
    for &(t, w) in terms {
        if let Some(value) = value(w) {
            vector.insert(term(t)?.into(), value);
        }
    }
    let mut line = serde_json::Map::new();
    line.insert("id".into(), id.into());
    line.insert(text_key.into(), "".into());
    line.insert("vector".into(), vector.into());
    Ok(serde_json::Value::Object(line).to_string())
}

/// Fills `out` atomically with `fill`, whose own error (a bad input, say) is returned as it is
/// rather than as a failure to write `out`.
fn write_out(out: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let mut failure = None;
    let written = lsr_files::write_atomically(out, |file| {
        fill(file).map_err(|e| {
            let message = e.to_string();
            failure = Some(e);
            std::io::Error::other(message)
        })
    });
    match (written, failure) {
        (Ok(()), _) => Ok(()),
        (Err(_), Some(error)) => Err(error),
        (Err(error), None) => Err(error.into()),
    }
}

/// Every token's name under `naming`, by term id.
fn names(tokens: &[String], naming: Naming) -> Result<Vec<String>> {
    tokens
        .iter()
        .map(|token| naming.name(token).map(|name| name.into_owned()))
        .collect()
}

/// Postings held in memory per pass over the vectors when writing CIFF (12 bytes each).
const CIFF_POSTINGS_PER_PASS: usize = 50_000_000;

/// CIFF's messages (osirrc/ciff `CommonIndexFileFormat.proto`).
mod ciff {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Header {
        #[prost(int32, tag = "1")]
        pub version: i32,
        #[prost(int32, tag = "2")]
        pub num_postings_lists: i32,
        #[prost(int32, tag = "3")]
        pub num_docs: i32,
        #[prost(int32, tag = "4")]
        pub total_postings_lists: i32,
        #[prost(int32, tag = "5")]
        pub total_docs: i32,
        #[prost(int64, tag = "6")]
        pub total_terms_in_collection: i64,
        #[prost(double, tag = "7")]
        pub average_doclength: f64,
        #[prost(string, tag = "8")]
        pub description: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Posting {
        /// The gap to the previous posting's docid (the first: the docid).
        #[prost(int32, tag = "1")]
        pub docid: i32,
        #[prost(int32, tag = "2")]
        pub tf: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PostingsList {
        #[prost(string, tag = "1")]
        pub term: String,
        #[prost(int64, tag = "2")]
        pub df: i64,
        #[prost(int64, tag = "3")]
        pub cf: i64,
        #[prost(message, repeated, tag = "4")]
        pub postings: Vec<Posting>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DocRecord {
        #[prost(int32, tag = "1")]
        pub docid: i32,
        #[prost(string, tag = "2")]
        pub collection_docid: String,
        #[prost(int32, tag = "3")]
        pub doclength: i32,
    }
}

pub use ciff::{DocRecord, Header, Posting, PostingsList};

/// CIFF in three stages over the vector file: count each term's postings; then, for runs of
/// terms (in the string order of their `names`) whose postings fit `budget`, gather and write
/// their lists; then the document records. A document's length is its number of terms with a
/// non-zero impact.
fn write_ciff(
    vectors: &Path,
    names: &[String],
    factor: f32,
    budget: usize,
    out: &Path,
) -> Result<usize> {
    let Postings {
        df,
        num_docs,
        total_terms,
    } = count_postings(vectors, names.len(), factor)?;
    let mut terms: Vec<u32> = (0..names.len() as u32)
        .filter(|&t| df[t as usize] > 0)
        .collect();
    terms.sort_by(|a, b| names[*a as usize].cmp(&names[*b as usize]));
    let header = Header {
        version: 1,
        num_postings_lists: terms.len() as i32,
        num_docs: num_docs as i32,
        total_postings_lists: terms.len() as i32,
        total_docs: num_docs as i32,
        total_terms_in_collection: total_terms,
        average_doclength: if num_docs == 0 {
            0.0
        } else {
            total_terms as f64 / num_docs as f64
        },
        description: format!(
            "lsr {}: SPLADE impacts round(w × {factor}) of {}",
            env!("CARGO_PKG_VERSION"),
            vectors.display()
        ),
    };
    write_out(out, |file| {
        let mut write = |bytes: Vec<u8>| file.write_all(&bytes).map_err(|e| EvalError::io(out, e));
        write(header.encode_length_delimited_to_vec())?;
        let mut start = 0;
        while start < terms.len() {
            let mut end = start;
            let mut held = 0;
            while end < terms.len() && (end == start || held + df[terms[end] as usize] <= budget) {
                held += df[terms[end] as usize];
                end += 1;
            }
            let lists = gather(vectors, &terms[start..end], factor)?;
            for (term, postings) in terms[start..end].iter().zip(lists) {
                let list = postings_list(&names[*term as usize], &postings);
                write(list.encode_length_delimited_to_vec())?;
            }
            start = end;
        }
        let mut docid = 0;
        let progress = progress_bar(&format!("{} documents", out.display()));
        let records = read_vectors(vectors, |id, terms| {
            let doclength = terms
                .iter()
                .filter(|(_, w)| quantize(*w, factor) > 0)
                .count();
            let record = DocRecord {
                docid,
                collection_docid: id.to_string(),
                doclength: doclength as i32,
            };
            docid += 1;
            progress.inc(1);
            write(record.encode_length_delimited_to_vec())
        });
        progress.finish_and_clear();
        records.map(drop)
    })?;
    Ok(num_docs)
}

/// What CIFF's header and the batching of postings lists need from a first pass.
struct Postings {
    /// Per term id, its documents with a non-zero impact.
    df: Vec<usize>,
    num_docs: usize,
    /// Non-zero impacts over the collection.
    total_terms: i64,
}

/// One pass over `vectors`, whose term ids must be within a vocabulary of `vocabulary` terms.
fn count_postings(vectors: &Path, vocabulary: usize, factor: f32) -> Result<Postings> {
    let mut df = vec![0usize; vocabulary];
    let (mut num_docs, mut total_terms) = (0usize, 0i64);
    read_vectors(vectors, |_, terms| {
        num_docs += 1;
        for &(t, w) in terms {
            let slot = df.get_mut(t as usize).ok_or_else(|| EvalError::File {
                path: vectors.to_path_buf(),
                message: format!("term {t} is beyond the vocabulary of {vocabulary} tokens"),
            })?;
            if quantize(w, factor) > 0 {
                *slot += 1;
                total_terms += 1;
            }
        }
        Ok(())
    })?;
    Ok(Postings {
        df,
        num_docs,
        total_terms,
    })
}

/// The postings (docid, impact) of each of `terms`, in docid order, from one pass.
fn gather(vectors: &Path, terms: &[u32], factor: f32) -> Result<Vec<Vec<(u32, u32)>>> {
    let slot: std::collections::HashMap<u32, usize> =
        terms.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let mut lists = vec![Vec::new(); terms.len()];
    let mut docid = 0u32;
    read_vectors(vectors, |_, doc| {
        for &(t, w) in doc {
            let impact = quantize(w, factor);
            if let (Some(&i), true) = (slot.get(&t), impact > 0) {
                lists[i].push((docid, impact));
            }
        }
        docid += 1;
        Ok(())
    })?;
    Ok(lists)
}

fn postings_list(term: &str, postings: &[(u32, u32)]) -> PostingsList {
    let mut previous = 0;
    PostingsList {
        term: term.to_string(),
        df: postings.len() as i64,
        cf: postings.iter().map(|(_, tf)| *tf as i64).sum(),
        postings: postings
            .iter()
            .map(|&(docid, tf)| {
                let gap = docid - previous;
                previous = docid;
                Posting {
                    docid: gap as i32,
                    tf: tf as i32,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::impact::DEFAULT_QUANTIZE;
    use crate::vectors::VectorWriter;

    type Vectors = Vec<(String, BTreeMap<u32, f32>)>;

    /// Tokens as BERT ("[CLS]"), RoBERTa ("ĠRome") and others write them, with a space and the
    /// escape character: each needs a name in one engine or another.
    const VOCABULARY: [&str; 6] = ["[PAD]", "the", "[CLS]", "ĠRome", "two words", "100%"];

    fn vocabulary() -> Vocabulary {
        Vocabulary {
            model: "models/test".into(),
            tokens: VOCABULARY.map(String::from).to_vec(),
        }
    }

    fn vectors() -> Vectors {
        let doc =
            |id: &str, terms: &[(u32, f32)]| (id.to_string(), terms.iter().copied().collect());
        vec![
            doc("d1", &[(1, 0.5), (3, 2.25), (5, 0.004)]),
            doc("d2", &[]),
            doc("d3", &[(2, 1.0), (3, 0.126), (4, 3.5)]),
            doc("d4", &[(1, 0.02), (4, 0.7), (5, 1.5)]),
        ]
    }

    fn write(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("corpus.vectors");
        let mut writer = VectorWriter::create(&path, &vocabulary().fingerprint()).unwrap();
        for (id, terms) in vectors() {
            let terms: Vec<(u32, f32)> = terms.into_iter().collect();
            writer.write(&id, &terms).unwrap();
        }
        writer.finish().unwrap();
        path
    }

    /// The vectors as the integer formats keep them.
    fn quantized() -> Vec<(String, BTreeMap<u32, u32>)> {
        vectors()
            .into_iter()
            .map(|(id, terms)| {
                let kept = terms
                    .into_iter()
                    .map(|(t, w)| (t, quantize(w, DEFAULT_QUANTIZE)))
                    .filter(|(_, q)| *q > 0)
                    .collect();
                (id, kept)
            })
            .collect()
    }

    /// The term a name in `format`'s output stands for.
    fn term_id(name: &str, format: Format) -> u32 {
        let token = format.naming().token(name).unwrap();
        VOCABULARY.iter().position(|t| *t == token).unwrap() as u32
    }

    /// What `export` writes of the four vectors in `format`.
    fn exported(input: &Path, format: Format) -> Vec<u8> {
        let out = input.with_file_name(format!("{format:?}"));
        assert_eq!(export(input, &vocabulary(), format, None, &out).unwrap(), 4);
        std::fs::read(&out).unwrap()
    }

    /// JSON lines back to (id, term → weight as `value` reads it).
    fn json<T>(
        text: &str,
        format: Format,
        value: fn(&serde_json::Value) -> T,
    ) -> Vec<(String, BTreeMap<u32, T>)> {
        text.lines()
            .map(|line| {
                let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                let vector = doc["vector"].as_object().unwrap();
                let terms = vector.iter().map(|(t, v)| (term_id(t, format), value(v)));
                (doc["id"].as_str().unwrap().to_string(), terms.collect())
            })
            .collect()
    }

    /// Query lines `id<separator>name name …` back to (id, term → repeats).
    fn repeated(text: &str, format: Format, separator: char) -> Vec<(String, BTreeMap<u32, u32>)> {
        text.lines()
            .map(|line| {
                let (id, names) = line.split_once(separator).unwrap();
                let mut terms = BTreeMap::new();
                for name in names.split_whitespace() {
                    *terms.entry(term_id(name, format)).or_default() += 1;
                }
                (id.to_string(), terms)
            })
            .collect()
    }

    /// Each document's collection docid and term → impact.
    type Impacts = Vec<(String, BTreeMap<u32, u32>)>;

    /// CIFF back to each document's impacts, checking its framing on the way, and the names of
    /// its postings lists in file order.
    fn read_ciff(bytes: &[u8]) -> (Impacts, Vec<String>) {
        let mut buf = bytes;
        let header = Header::decode_length_delimited(&mut buf).unwrap();
        assert_eq!((header.version, header.num_docs), (1, 4));
        let mut docs: Vec<BTreeMap<u32, u32>> = vec![BTreeMap::new(); 4];
        let mut names = Vec::new();
        for _ in 0..header.num_postings_lists {
            let list = PostingsList::decode_length_delimited(&mut buf).unwrap();
            let mut docid = 0;
            for posting in &list.postings {
                docid += posting.docid as usize;
                docs[docid].insert(term_id(&list.term, Format::Ciff), posting.tf as u32);
            }
            assert_eq!(list.df as usize, list.postings.len());
            names.push(list.term);
        }
        let mut read = Vec::new();
        for docid in 0..header.num_docs {
            let record = DocRecord::decode_length_delimited(&mut buf).unwrap();
            assert_eq!(record.docid, docid);
            assert_eq!(record.doclength as usize, docs[docid as usize].len());
            read.push((record.collection_docid, docs[docid as usize].clone()));
        }
        assert!(buf.is_empty(), "nothing after the document records");
        let total: usize = read.iter().map(|(_, t)| t.len()).sum();
        assert_eq!(header.total_terms_in_collection as usize, total);
        (read, names)
    }

    #[test]
    fn every_format_reads_back_to_every_dimension_of_the_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(dir.path());
        let text = |format| String::from_utf8(exported(&input, format)).unwrap();
        let anserini = json(
            &text(Format::AnseriniDocuments),
            Format::AnseriniDocuments,
            |v| v.as_u64().unwrap() as u32,
        );
        assert_eq!(anserini, quantized());
        let seismic = json(&text(Format::Seismic), Format::Seismic, |v| {
            v.as_f64().unwrap() as f32
        });
        assert_eq!(seismic, vectors());
        // With a quantization, Seismic gets the impacts the integer formats hold.
        let out = input.with_file_name("seismic-impacts");
        export(
            &input,
            &vocabulary(),
            Format::Seismic,
            Some(DEFAULT_QUANTIZE),
            &out,
        )
        .unwrap();
        let impacts = json(
            &std::fs::read_to_string(&out).unwrap(),
            Format::Seismic,
            |v| v.as_f64().unwrap() as u32,
        );
        assert_eq!(impacts, quantized());
        let queries = text(Format::AnseriniQueries);
        assert_eq!(
            repeated(&queries, Format::AnseriniQueries, '\t'),
            quantized()
        );
        let pisa = text(Format::PisaQueries);
        assert_eq!(repeated(&pisa, Format::PisaQueries, ':'), quantized());
        assert_eq!(read_ciff(&exported(&input, Format::Ciff)).0, quantized());
    }

    /// The names each engine is given: what it would change is escaped, and its collection and
    /// its queries name every term alike.
    #[test]
    fn an_engine_s_documents_and_queries_name_every_term_alike() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(dir.path());
        let text = |format| String::from_utf8(exported(&input, format)).unwrap();
        let json_names = |text: &str| -> BTreeSet<String> {
            text.lines()
                .flat_map(|line| {
                    let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                    let vector = doc["vector"].as_object().unwrap().clone();
                    vector.into_iter().map(|(name, _)| name)
                })
                .collect()
        };
        let query_names = |text: &str, separator: char| -> BTreeSet<String> {
            text.lines()
                .flat_map(|line| line.split_once(separator).unwrap().1.split_whitespace())
                .map(String::from)
                .collect()
        };
        let anserini = json_names(&text(Format::AnseriniDocuments));
        assert_eq!(anserini, query_names(&text(Format::AnseriniQueries), '\t'));
        let expected = ["the", "[CLS]", "ĠRome", "two%20words", "100%25"];
        assert_eq!(anserini, BTreeSet::from(expected.map(String::from)));

        let ciff = read_ciff(&exported(&input, Format::Ciff)).1;
        assert!(
            ciff.windows(2).all(|w| w[0] < w[1]),
            "names in order: {ciff:?}"
        );
        let ciff: BTreeSet<String> = ciff.into_iter().collect();
        assert_eq!(ciff, query_names(&text(Format::PisaQueries), ':'));
        let expected = ["the", "[%43%4c%53]", "Ġ%52ome", "two%20words", "100%25"];
        assert_eq!(ciff, BTreeSet::from(expected.map(String::from)));

        let seismic = json_names(&text(Format::Seismic));
        assert!(seismic.contains("two words") && seismic.contains("[CLS]"));
    }

    #[test]
    fn ciff_is_the_same_in_one_pass_or_many() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(dir.path());
        let names = names(&vocabulary().tokens, Format::Ciff.naming()).unwrap();
        let mut written = Vec::new();
        for budget in [usize::MAX, 1] {
            let out = dir.path().join(format!("{budget}.ciff"));
            write_ciff(&input, &names, DEFAULT_QUANTIZE, budget, &out).unwrap();
            written.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(read_ciff(&written[1]).0, quantized());
        assert_eq!(written[0], written[1]);
    }

    #[test]
    fn an_empty_token_and_a_query_id_pisa_would_cut_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(dir.path());
        let mut vocabulary = vocabulary();
        vocabulary.tokens[3] = String::new();
        let out = dir.path().join("x");
        for format in [Format::AnseriniDocuments, Format::Ciff, Format::PisaQueries] {
            let error = export(&input, &vocabulary, format, None, &out)
                .unwrap_err()
                .to_string();
            assert!(error.contains("empty token"), "{error}");
            assert!(!out.exists());
        }
        let path = dir.path().join("queries.vectors");
        let mut writer = VectorWriter::create(&path, &self::vocabulary().fingerprint()).unwrap();
        writer.write("q:1", &[(1, 1.0)]).unwrap();
        writer.finish().unwrap();
        let error = export(&path, &self::vocabulary(), Format::PisaQueries, None, &out)
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"q:1\""), "{error}");
        assert!(!out.exists());
    }
}
