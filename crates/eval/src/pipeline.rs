//! A SPLADE model on a data set, end to end: encode the corpus in length-sorted batches
//! (streamed, never held whole), index it, encode the queries, retrieve, evaluate, measure
//! FLOPs, and write every artefact to an output directory:
//!
//! | file | content |
//! |---|---|
//! | `corpus.vectors`, `queries.vectors` | the sparse vectors ([`crate::vectors`]) |
//! | `run.trec` | top-k per query, TREC format |
//! | `metrics.json` | mean measures, FLOPs and L0, counts, settings |
//! | `per_query.json` | every query's measures |

use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use lsr_backbone::Precision;
use lsr_splade::SpladeEncoder;
use serde::Serialize;

use crate::error::Result;
use crate::flops::{Sparsity, sparsity};
use crate::index::{IndexBuilder, InvertedIndex};
use crate::metrics::{Measure, evaluate};
use crate::vectors::VectorWriter;
use lsr_data::Dataset;
use lsr_data::Qrels;
use lsr_files::write_json;

/// Documents read ahead and sorted by length before batching, so that a batch pads little.
const SORT_WINDOW: usize = 4096;

#[derive(Clone, Debug, Serialize)]
pub struct EvalSettings {
    pub batch_size: usize,
    pub query_max_length: usize,
    pub doc_max_length: usize,
    pub top_k: usize,
    #[serde(serialize_with = "measure_names")]
    pub measures: Vec<Measure>,
}

fn measure_names<S: serde::Serializer>(measures: &[Measure], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(measures.iter().map(Measure::name))
}

#[derive(Clone, Debug, Serialize)]
pub struct DatasetReport {
    pub dataset: String,
    pub metrics: std::collections::BTreeMap<String, f64>,
    pub sparsity: Sparsity,
    pub queries_evaluated: usize,
    pub queries_without_results: usize,
    /// Judged documents (of evaluated queries) that the corpus does not have: they can never
    /// be retrieved, which caps recall; counted and logged rather than fatal, as trec_eval
    /// also evaluates such qrels.
    pub judged_documents_missing_from_corpus: usize,
    pub relevance_level: i32,
    pub encode_seconds: f64,
    /// The arithmetic the vectors were encoded in.
    pub precision: Precision,
    pub settings: EvalSettings,
}

pub fn evaluate_dataset(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
    out_dir: &Path,
) -> Result<DatasetReport> {
    let start = Instant::now();
    let index = index_corpus(encoder, dataset, settings, out_dir)?;
    let (queries, qrels) = dataset.queries_and_qrels()?;
    let queries = encode_queries(encoder, queries, settings, out_dir)?;
    let encode_seconds = start.elapsed().as_secs_f64();
    let judged_documents_missing_from_corpus = judged_missing(dataset, &index, &queries, &qrels);
    let run = dataset.prepare_run(index.retrieve(&queries, settings.top_k));
    run.write(&out_dir.join("run.trec"), "lsr")?;
    let evaluation = evaluate(&run, &qrels, &settings.measures, dataset.relevance_level);
    let report = DatasetReport {
        dataset: dataset.name.clone(),
        metrics: evaluation.mean.clone(),
        sparsity: sparsity(&index, queries.iter().map(|(_, v)| v.as_slice())),
        queries_evaluated: evaluation.queries_evaluated,
        queries_without_results: evaluation.queries_without_results,
        judged_documents_missing_from_corpus,
        relevance_level: dataset.relevance_level,
        encode_seconds,
        precision: encoder.backbone.model.precision,
        settings: settings.clone(),
    };
    write_json(&out_dir.join("per_query.json"), &evaluation.per_query)?;
    write_json(&out_dir.join("metrics.json"), &report)?;
    Ok(report)
}

/// Encodes the corpus, streamed in windows sorted by length (fewer pads per batch), into the
/// inverted index and `corpus.vectors`.
fn index_corpus(
    encoder: &SpladeEncoder,
    dataset: &Dataset,
    settings: &EvalSettings,
    out_dir: &Path,
) -> Result<InvertedIndex> {
    let tokenizer = encoder
        .backbone
        .tokenizer
        .with_max_length(settings.doc_max_length)?;
    let progress = progress_bar(&format!("{} corpus", dataset.name));
    let mut builder = IndexBuilder::new(encoder.backbone.config.dims.vocab_size);
    let mut writer = VectorWriter::create(&out_dir.join("corpus.vectors"))?;
    let mut window: Vec<(String, String)> = Vec::with_capacity(SORT_WINDOW);
    let mut flush = |window: &mut Vec<(String, String)>| -> Result<()> {
        window.sort_by_key(|(_, text)| text.len());
        for batch in window.chunks(settings.batch_size.max(1)) {
            let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = encoder.encode_with(&tokenizer, &texts, texts.len())?;
            for ((id, _), vector) in batch.iter().zip(vectors) {
                builder.add(id, &vector.terms)?;
                writer.write(id, &vector.terms)?;
            }
            progress.inc(batch.len() as u64);
        }
        window.clear();
        Ok(())
    };
    dataset.for_each_document(|id, text| -> Result<()> {
        window.push((id.to_string(), text.to_string()));
        if window.len() == SORT_WINDOW {
            flush(&mut window)?;
        }
        Ok(())
    })?;
    flush(&mut window)?;
    writer.finish()?;
    progress.finish_and_clear();
    Ok(builder.build())
}

/// The queries' sparse vectors, by query id, also written to `queries.vectors`.
fn encode_queries(
    encoder: &SpladeEncoder,
    queries: Vec<(String, String)>,
    settings: &EvalSettings,
    out_dir: &Path,
) -> Result<Vec<(String, Vec<(u32, f32)>)>> {
    let tokenizer = encoder
        .backbone
        .tokenizer
        .with_max_length(settings.query_max_length)?;
    let texts: Vec<&str> = queries.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = encoder.encode_with(&tokenizer, &texts, settings.batch_size)?;
    let mut writer = VectorWriter::create(&out_dir.join("queries.vectors"))?;
    let queries: Vec<(String, Vec<(u32, f32)>)> = queries
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

/// Judged documents of the evaluated queries that the corpus lacks (a sign of a mismatched
/// corpus and qrels), counted and warned about.
fn judged_missing(
    dataset: &Dataset,
    index: &InvertedIndex,
    queries: &[(String, Vec<(u32, f32)>)],
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

fn progress_bar(label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_message(label.to_string());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {human_pos} texts, {per_sec}, {elapsed}")
            .expect("valid template"),
    );
    bar
}
