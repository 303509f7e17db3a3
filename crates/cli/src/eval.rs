//! `lsr eval`: a model on named data sets (encode, index, retrieve, measure, FLOPs), through
//! `lsr_eval::pipeline`; the corpus in shards that survive a stop or a kill, or only one part
//! of them (`--shard I/N`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use lsr_data::Dataset;
use lsr_eval::pipeline::{
    DEFAULT_MAX_LENGTH, DatasetReport, EvalSettings, encode_corpus_part, evaluate_dataset,
};
use lsr_eval::shards::{DEFAULT_SHARD_DOCUMENTS, ShardPart, remove_shards};
use lsr_eval::{EvalError, Measure};
use lsr_files::OutputLock;
use lsr_files::layout::dataset_dir;
use lsr_files::lock::{EVAL_LOCK, eval_part_lock};
use lsr_files::stop::{INTERRUPTED_EXIT_CODE, stop_on_signals};

use crate::model::ModelArgs;

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[arg(long = "dataset", required = true, help = format!("{} (repeatable)", lsr_data::registry::known(false)))]
    datasets: Vec<String>,
    /// Where the data sets' standard files are (see docs/data.md, "Data sets").
    #[arg(long, default_value = "data")]
    data_root: PathBuf,
    /// One subdirectory per data set receives vectors, run, metrics and per-query metrics.
    #[arg(long)]
    output: PathBuf,
    /// Measures, comma-separated (docs/data.md, "Measure names", has the names).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mrr@10,ndcg@10,recall@100,recall@1000"
    )]
    measures: Vec<String>,
    #[arg(long, default_value_t = 32, value_parser = crate::values::at_least_one)]
    batch_size: usize,
    /// Tokens per query, capped at the model's positions (naver/splade evaluates with the
    /// model's max_length, 256, whatever the training's query length).
    #[arg(long, default_value_t = DEFAULT_MAX_LENGTH, value_parser = crate::values::at_least_one)]
    query_max_length: usize,
    /// Tokens per document, capped at the model's positions.
    #[arg(long, default_value_t = DEFAULT_MAX_LENGTH, value_parser = crate::values::at_least_one)]
    document_max_length: usize,
    /// Documents retrieved per query.
    #[arg(long, default_value_t = 1000, value_parser = crate::values::at_least_one)]
    top_k: usize,
    /// Average over every judged query, those that retrieve nothing (an empty query vector)
    /// counting 0, as trec_eval -c and MS MARCO's official evaluation; `false`: over the
    /// queries with results only.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    complete: bool,
    /// Retrieve with integer impacts, round(weight × F) for documents and queries, as Anserini
    /// scores the vectors `lsr vectors export` writes (100 for its SPLADE regressions).
    #[arg(long, value_name = "F", value_parser = crate::values::positive::<f32>)]
    quantize: Option<f32>,
    /// Documents per corpus shard, each written as it is finished: a stopped (SIGTERM,
    /// SIGUSR1: exit code 75) or killed evaluation resumes after its last complete shard.
    #[arg(long, default_value_t = DEFAULT_SHARD_DOCUMENTS, value_parser = crate::values::at_least_one)]
    shard_documents: usize,
    /// Only encode the corpus shards whose index is I modulo N, then stop: run the N parts at
    /// once (one per GPU, a Slurm array's tasks) into one --output, then once without --shard,
    /// which finds every shard done and retrieves and measures.
    #[arg(long, value_name = "I/N")]
    shard: Option<ShardPart>,
}

pub fn run(args: EvalArgs) -> Result<ExitCode> {
    let measures = Measure::parse_all(&args.measures)?;
    let mut datasets = Vec::new();
    for name in &args.datasets {
        datasets.extend(Dataset::resolve(name, &args.data_root)?);
    }
    let encoder = args
        .model
        .encoder(args.document_max_length.max(args.query_max_length))?;
    let settings = EvalSettings {
        batch_size: args.batch_size,
        query_max_length: args.query_max_length,
        document_max_length: args.document_max_length,
        top_k: args.top_k,
        measures,
        complete: args.complete,
        quantize: args.quantize,
        shard_documents: Some(args.shard_documents),
    };
    let lock = match args.shard {
        Some(part) => eval_part_lock(part.index, part.count),
        None => EVAL_LOCK.to_string(),
    };
    let _lock = OutputLock::acquire(&args.output, &lock)?;
    stop_on_signals()?;
    for dataset in &datasets {
        let out = args.output.join(dataset_dir(&dataset.name));
        let done = match args.shard {
            Some(part) => encode_corpus_part(&encoder, dataset, &settings, &out, part)
                .map(|(complete, count)| print_part(dataset, part, complete, count)),
            None => evaluate_dataset(&encoder, dataset, &settings, &out)
                .map(|report| print_report(&report, &out)),
        };
        match done {
            Err(EvalError::Interrupted { shards, complete }) => {
                eprintln!(
                    "{}: stopped on request; {complete} complete shards kept in {}: run the \
                     same command again to resume",
                    dataset.name,
                    shards.display()
                );
                return Ok(ExitCode::from(INTERRUPTED_EXIT_CODE));
            }
            done => done?,
        }
    }
    if args.shard.is_none() {
        remove_shards(&args.output)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_part(dataset: &Dataset, part: ShardPart, complete: usize, count: usize) {
    let (i, n) = (part.index, part.count);
    println!(
        "{}: part {i}/{n} encoded; {complete} of {count} shards complete",
        dataset.name
    );
}

fn print_report(report: &DatasetReport, out: &Path) {
    let metrics: Vec<String> = (report.summary.metrics.iter())
        .map(|(name, value)| format!("{name} {value:.4}"))
        .collect();
    println!(
        "{}: {} | FLOPs {:.3} | L0 q {:.1} d {:.1} | {} queries ({} empty) → {}",
        report.dataset,
        metrics.join(", "),
        report.summary.sparsity.flops,
        report.summary.sparsity.mean_query_l0,
        report.summary.sparsity.mean_doc_l0,
        report.queries_evaluated,
        report.empty_queries,
        out.display()
    );
}
