//! A SPLADE model on a data set, end to end: encode the corpus in length-sorted batches
//! (streamed, never held whole), index it, encode the queries, retrieve, evaluate, measure
//! FLOPs, and write every artefact to an output directory:
//!
//! | file | content |
//! |---|---|
//! | `corpus.vectors`, `queries.vectors` | the sparse vectors ([`crate::vectors`]) |
//! | `run.trec` | top-k per query, TREC format |
//! | `metrics.json` | mean measures, FLOPs and L0, counts, settings |
//! | `per_query.json` | every query's measures (`lsr_files::PerQuery`) |

use std::path::{Path, PathBuf};
use std::time::Instant;

use lsr_compute::Precision;
use lsr_splade::SpladeEncoder;
use serde::Serialize;

use crate::encoding::{encode_by_length, impacts};
use crate::error::Result;
use crate::flops::{Sparsity, sparsity};
use crate::index::{IndexBuilder, InvertedIndex};
use crate::metrics::{Evaluation, evaluate};
use crate::progress::{counted_style, progress_bar};
pub use crate::settings::{DEFAULT_MAX_LENGTH, EvalSettings};
use crate::shards::{ShardPart, assemble, encode_shards};
use crate::vectors::{Fingerprint, VectorWriter, Vocabulary};
use indicatif::ProgressBar;
use lsr_data::Dataset;
use lsr_data::Qrels;
use lsr_files::{DatasetSummary, PerQuery, write_json};

/// Query vectors by query id.
type QueryVectors = Vec<(String, Vec<(u32, f32)>)>;

/// The vectors of a data set's own FLOPs queries (one per query) and the file they come from.
type FlopsVectors = (PathBuf, Vec<Vec<(u32, f32)>>);

/// A query file and how many of its queries were encoded.
#[derive(Clone, Debug, Serialize)]
pub struct QuerySet {
    pub file: PathBuf,
    pub queries: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct DatasetReport {
    pub dataset: String,
    /// The means of the measures, and the FLOPs and L0 of the `flops_queries` against the
    /// corpus: what every reader of `metrics.json` takes (`lsr_files::DatasetSummary`).
    #[serde(flatten)]
    pub summary: DatasetSummary,
    /// The queries `sparsity` is over: the evaluated ones, or the larger set the data set
    /// names (MS MARCO's full dev queries, as naver/splade measures FLOPs).
    pub flops_queries: QuerySet,
    /// The queries the means are over (all judged ones with `complete`).
    pub queries_evaluated: usize,
    /// Judged queries with no line in `run.trec`: nothing retrieved (empty queries among them).
    pub queries_without_results: usize,
    /// Evaluated queries whose vector has no non-zero term.
    pub empty_queries: usize,
    /// Judged documents (of evaluated queries) that the corpus does not have: they can never
    /// be retrieved, which caps recall; counted and logged rather than fatal, as trec_eval
    /// also evaluates such qrels.
    pub judged_documents_missing_from_corpus: usize,
    pub relevance_level: i32,
    pub encode_seconds: f64,
    /// The arithmetic the vectors were encoded in.
    pub precision: Precision,
    /// As used: the lengths capped at the model's positions.
    pub settings: EvalSettings,
}

pub fn evaluate_dataset(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
    out_dir: &Path,
) -> Result<DatasetReport> {
    let settings = &settings.within(encoder.backbone.config.dims.max_positions, &dataset.name);
    let start = Instant::now();
    let vocabulary = Vocabulary::of_encoder(encoder)?.fingerprint();
    let index = index_corpus(encoder, dataset, settings, &vocabulary, out_dir)?;
    let (queries, qrels) = dataset.queries_and_qrels()?;
    let queries = encode_queries(encoder, queries, settings, &vocabulary, out_dir)?;
    let flops_queries = encode_flops_queries(encoder, dataset, settings)?;
    let encode_seconds = start.elapsed().as_secs_f64();
    let evaluation = retrieve_and_evaluate(dataset, &index, &queries, &qrels, settings, out_dir)?;
    let (flops_queries, sparsity) = flops_sparsity(&index, dataset, &queries, flops_queries);
    let report = DatasetReport {
        dataset: dataset.name.clone(),
        summary: DatasetSummary {
            metrics: evaluation.mean.clone(),
            sparsity,
        },
        flops_queries,
        queries_evaluated: evaluation.queries_evaluated,
        queries_without_results: evaluation.queries_without_results,
        empty_queries: empty_queries(&dataset.name, &queries),
        judged_documents_missing_from_corpus: judged_missing(dataset, &index, &queries, &qrels),
        relevance_level: dataset.relevance_level,
        encode_seconds,
        precision: encoder.backbone.model.precision,
        settings: settings.clone(),
    };
    PerQuery {
        queries: evaluation.per_query,
    }
    .write(out_dir)?;
    write_json(&out_dir.join("metrics.json"), &report)?;
    Ok(report)
}

/// FLOPs and L0 against `index`, over the data set's own FLOPs queries (`flops`: their file
/// and vectors) if it has them, over the evaluated queries otherwise; with the set they are
/// over.
fn flops_sparsity(
    index: &InvertedIndex,
    dataset: &Dataset,
    queries: &QueryVectors,
    flops: Option<FlopsVectors>,
) -> (QuerySet, Sparsity) {
    match flops {
        Some((file, vectors)) => {
            let queries = vectors.len();
            let sparsity = sparsity(index, vectors.iter().map(Vec::as_slice));
            (QuerySet { file, queries }, sparsity)
        }
        None => {
            let file = dataset.queries.clone();
            let sparsity = sparsity(index, queries.iter().map(|(_, v)| v.as_slice()));
            (
                QuerySet {
                    file,
                    queries: queries.len(),
                },
                sparsity,
            )
        }
    }
}

/// Retrieves the top k of every query, writes `run.trec` and evaluates it as it was written:
/// a query that retrieved nothing has no line there, and `settings.complete` decides whether
/// it counts 0 or is left out, for these means and for any evaluation of the file alike.
fn retrieve_and_evaluate(
    dataset: &Dataset,
    index: &InvertedIndex,
    queries: &QueryVectors,
    qrels: &Qrels,
    settings: &EvalSettings,
    out_dir: &Path,
) -> Result<Evaluation> {
    let quantized: QueryVectors;
    let queries = match settings.quantize {
        Some(_) => {
            let impacts = |(id, terms): &(String, Vec<(u32, f32)>)| {
                (id.clone(), impacts(terms, settings.quantize).into_owned())
            };
            quantized = queries.iter().map(impacts).collect();
            &quantized
        }
        None => queries,
    };
    let run = dataset.prepare_run(index.retrieve(queries, settings.top_k));
    run.write(&out_dir.join(lsr_files::layout::RUN), "lsr")?;
    let level = dataset.relevance_level;
    Ok(evaluate(
        &run,
        qrels,
        &settings.measures,
        level,
        settings.complete,
    ))
}

/// Encodes the corpus in shards (`crate::shards`: resuming after the complete ones), then reads
/// them in order into the inverted index and `corpus.vectors` (whose terms `vocabulary` names).
fn index_corpus(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
    vocabulary: &Fingerprint,
    out_dir: &Path,
) -> Result<InvertedIndex> {
    let progress = corpus_progress(dataset);
    let (shards, count) = encode_shards(
        encoder, dataset, settings, vocabulary, out_dir, None, &progress,
    )?;
    let mut builder = IndexBuilder::new(encoder.backbone.config.dims.vocab_size);
    assemble(
        &shards,
        count,
        vocabulary,
        &mut builder,
        settings.quantize,
        out_dir,
    )?;
    progress.finish_and_clear();
    Ok(builder.build())
}

/// `lsr eval --shard I/N`: the corpus shards of `part` encoded into `out_dir` (those already
/// complete kept), and nothing else; returns the shards complete now, by any process, and
/// the shards the corpus has.
pub fn encode_corpus_part(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
    out_dir: &Path,
    part: ShardPart,
) -> Result<(usize, usize)> {
    let settings = &settings.within(encoder.backbone.config.dims.max_positions, &dataset.name);
    let vocabulary = Vocabulary::of_encoder(encoder)?.fingerprint();
    let progress = corpus_progress(dataset);
    let (shards, count) = encode_shards(
        encoder,
        dataset,
        settings,
        &vocabulary,
        out_dir,
        Some(part),
        &progress,
    )?;
    progress.finish_and_clear();
    Ok((shards.complete()?, count))
}

/// The corpus's progress bar, counting towards its documents where a plain-text file gives
/// their number cheaply.
fn corpus_progress(dataset: &Dataset) -> ProgressBar {
    let progress = progress_bar(&format!("{} corpus", dataset.name));
    if !progress.is_hidden()
        && let Some(documents) = lines_of(&dataset.corpus)
    {
        progress.set_length(documents);
        progress.set_style(counted_style());
    }
    progress
}

/// The queries' sparse vectors, by query id, also written to `queries.vectors` (whose terms
/// `vocabulary` names).
fn encode_queries(
    encoder: &SpladeEncoder,
    queries: Vec<(String, String)>,
    settings: &EvalSettings,
    vocabulary: &Fingerprint,
    out_dir: &Path,
) -> Result<QueryVectors> {
    let tokenizer = encoder
        .backbone
        .tokenizer
        .with_max_length(settings.query_max_length)?;
    let texts: Vec<&str> = queries.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = encoder.encode_with(&tokenizer, &texts, settings.batch_size)?;
    let mut writer = VectorWriter::create(&out_dir.join("queries.vectors"), vocabulary)?;
    let queries: QueryVectors = queries
        .into_iter()
        .zip(vectors)
        .map(|((id, _), v)| (id, v.terms))
        .collect();
    for (id, terms) in &queries {
        writer.write(id, terms)?;
    }
    writer.finish()?;
    Ok(queries)
}

/// The vectors of the data set's own FLOPs queries, with their file, if it names any.
fn encode_flops_queries(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
) -> Result<Option<FlopsVectors>> {
    let Some((file, mut records)) = dataset.read_flops_queries()? else {
        return Ok(None);
    };
    tracing::info!(
        "{}: FLOPs over the {} queries of {}",
        dataset.name,
        records.len(),
        file.display()
    );
    let tokenizer = encoder
        .backbone
        .tokenizer
        .with_max_length(settings.query_max_length)?;
    let mut vectors = Vec::with_capacity(records.len());
    encode_by_length(
        encoder,
        &tokenizer,
        &mut records,
        settings.batch_size,
        |_, terms| {
            vectors.push(terms.to_vec());
            Ok(())
        },
    )?;
    Ok(Some((file.to_path_buf(), vectors)))
}

/// Queries whose vector has no non-zero term, counted and warned about: they retrieve nothing.
fn empty_queries(dataset: &str, queries: &QueryVectors) -> usize {
    let empty = queries
        .iter()
        .filter(|(_, terms)| !terms.iter().any(|&(_, w)| w > 0.0))
        .count();
    if empty > 0 {
        tracing::warn!(
            "{dataset}: {empty} of {} query vectors are empty",
            queries.len()
        );
    }
    empty
}

/// Judged documents of the evaluated queries that the corpus lacks (a sign of a mismatched
/// corpus and qrels), counted and warned about.
fn judged_missing(
    dataset: &Dataset,
    index: &InvertedIndex,
    queries: &QueryVectors,
    qrels: &Qrels,
) -> usize {
    let missing = queries
        .iter()
        .filter_map(|(id, _)| qrels.queries.get(id))
        .flat_map(|judged| judged.keys())
        .filter(|doc| !index.contains(doc))
        .count();
    if missing > 0 {
        tracing::warn!(
            "{}: {missing} judged documents are not in {}",
            dataset.name,
            dataset.corpus.display()
        );
    }
    missing
}

/// The number of lines of a plain-text corpus (a document per line, TSV or JSONL): the total
/// a progress bar counts towards, for the price of one read of the file. None for a gzipped
/// or Parquet corpus, which a spinner counts without a total.
fn lines_of(path: &Path) -> Option<u64> {
    use std::io::Read;
    let plain = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("tsv" | "jsonl" | "txt")
    );
    let mut file = std::fs::File::open(path).ok().filter(|_| plain)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        match file.read(&mut buffer).ok()? {
            0 => return Some(lines),
            n => lines += buffer[..n].iter().filter(|&&b| b == b'\n').count() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::Measure;
    use lsr_data::Run;
    use lsr_data::registry::CorpusFormat;

    use super::*;

    /// An empty query retrieves nothing, so `run.trec` has no line for it; the means of the
    /// pipeline and of the written file agree, with it at 0 (`complete`) or left out.
    #[test]
    fn an_empty_query_is_measured_alike_in_memory_and_from_the_written_run() {
        let mut builder = IndexBuilder::new(4);
        builder.add("d1", &[(0, 1.0)]).unwrap();
        builder.add("d2", &[(1, 1.0)]).unwrap();
        let index = builder.build();
        let queries: QueryVectors = vec![
            ("q1".into(), vec![(0, 1.0)]),
            ("q2".into(), vec![(1, 0.5)]),
            ("q3".into(), vec![]),
        ];
        assert_eq!(empty_queries("tiny", &queries), 1);
        let mut qrels = Qrels::default();
        for (query, doc) in [("q1", "d1"), ("q2", "d1"), ("q3", "d2")] {
            let judged = qrels.queries.entry(query.into()).or_default();
            judged.insert(doc.into(), 1);
        }
        let dataset = Dataset {
            name: "tiny".into(),
            corpus: "corpus.tsv".into(),
            corpus_format: CorpusFormat::Tsv,
            queries: "queries.tsv".into(),
            qrels: "qrels.tsv".into(),
            relevance_level: 1,
            ignore_identical_ids: false,
            judged_queries_only: true,
            flops_queries: None,
        };
        let out = tempfile::tempdir().unwrap();
        let measures = vec![Measure::parse("mrr@10").unwrap()];
        // q1 finds d1 first, q2 finds only d2, q3 finds nothing.
        for (complete, mrr, averaged) in [(true, 1.0 / 3.0, 3), (false, 1.0 / 2.0, 2)] {
            let settings = EvalSettings {
                batch_size: 1,
                query_max_length: 8,
                document_max_length: 8,
                top_k: 10,
                measures: measures.clone(),
                complete,
                quantize: None,
                shard_documents: None,
            };
            let evaluation =
                retrieve_and_evaluate(&dataset, &index, &queries, &qrels, &settings, out.path())
                    .unwrap();
            let written = Run::read(&out.path().join("run.trec")).unwrap();
            assert!(!written.queries.contains_key("q3"));
            let from_file = evaluate(&written, &qrels, &measures, 1, complete);
            assert_eq!(evaluation.mean, from_file.mean);
            assert_eq!(evaluation.mean["mrr@10"], mrr);
            assert_eq!(
                (evaluation.queries_evaluated, from_file.queries_evaluated),
                (averaged, averaged)
            );
            assert_eq!(evaluation.queries_without_results, 1);
        }
    }
}
