//! `lsr eval`: a model on named data sets (encode, index, retrieve, measure, FLOPs), through
//! `lsr_eval::pipeline`; the corpus in shards that survive a stop or a kill, only one part of
//! them (`--shard I/N`), or every part at once over several devices (`--devices`), each in a
//! worker process, before retrieving once.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

use anyhow::Result;
use clap::Args;
use lsr_compute::device::device_blame;
use lsr_data::Dataset;
use lsr_eval::pipeline::{
    DEFAULT_MAX_LENGTH, DatasetReport, EvalSettings, encode_corpus_part, evaluate_dataset,
};
use lsr_eval::shards::{DEFAULT_SHARD_DOCUMENTS, ShardPart, remove_shards};
use lsr_eval::{EvalError, Measure};
use lsr_files::layout::dataset_dir;
use lsr_files::lock::{EVAL_LOCK, eval_part_lock};
use lsr_files::stop::{INTERRUPTED_EXIT_CODE, Workers, forward_stops, requested, stop_on_signals};
use lsr_files::workers::{Blame, Job, Queue, output_of, run_jobs};
use lsr_files::{FileError, OutputLock, resolved};

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
    /// Encode the corpus over these devices at once (`cuda:0,cuda:1`; `flex,flex` too): part
    /// I of N (`--shard I/N`) in a worker process on the I-th, its output in
    /// `<output>/part-I-of-N.log`; then, once every part is complete, retrieve and measure here
    /// on the first. A stop (exit code 75) or a failed part keeps the complete shards: the
    /// same command resumes. A part that failed for reasons of its device (out of memory, a
    /// driver fault) goes to another; a device that cannot start, or failed two parts so, is
    /// retired.
    #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with_all = ["shard", "device"])]
    devices: Vec<String>,
}

pub fn run(mut args: EvalArgs) -> Result<ExitCode> {
    let workers = Workers::default();
    if !args.devices.is_empty() {
        forward_stops(&workers)?;
        match encode_on_devices(&args, &workers)? {
            Parts::Stopped(code) => return Ok(code),
            Parts::Encoded { device } => args.model.on_device(&device),
        }
    } else {
        stop_on_signals()?;
    }
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

/// How the parts over several devices ended: every one complete, to retrieve on `device` (the
/// first not retired), or stopped with the exit code to end with.
enum Parts {
    Encoded { device: String },
    Stopped(ExitCode),
}

/// `--devices`: this command again as part I of N on a device each, N the number of devices,
/// each with its own log. A part whose worker failed for reasons of its device goes to a device
/// that has not tried it; a device that could not start, or failed its last two parts so, is
/// retired (`lsr_files::workers`).
fn encode_on_devices(args: &EvalArgs, workers: &Workers) -> Result<Parts> {
    let count = args.devices.len();
    let own: Vec<String> = std::env::args().skip(1).collect();
    let lsr = std::env::current_exe()?;
    std::fs::create_dir_all(&args.output)?;
    let part = |index: usize, device: &str| {
        let mut command = Command::new(&lsr);
        command.args(without_devices(&own)).args([
            "--shard",
            &format!("{index}/{count}"),
            "--device",
            device,
        ]);
        Job {
            name: format!("part {index}/{count}"),
            command,
            log: args.output.join(format!("part-{index}-of-{count}.log")),
        }
    };
    let queue = RefCell::new(Queue::new(0..count, count));
    let mut ended: Vec<(String, ExitStatus, PathBuf)> = Vec::new();
    let next = |slot: usize| -> Result<Option<Job>, FileError> {
        let taken = queue.borrow_mut().take(slot);
        Ok(taken.map(|index| part(index, &args.devices[slot])))
    };
    let end = |slot: usize, job: Job, status: ExitStatus| {
        let blame = device_blame(status, &output_of(&job, &args.devices[slot]));
        if let Blame::Device(why) = &blame
            && queue.borrow_mut().retry(part_index(&job.name), slot)
        {
            eprintln!(
                "{} on {}: {why}; another device takes it",
                job.name, args.devices[slot]
            );
            return blame;
        }
        ended.push((args.devices[slot].clone(), status, job.log));
        blame
    };
    let retired = run_jobs::<FileError>(&args.devices, workers, next, end)?;
    let failed: Vec<String> = (ended.iter())
        .filter(|(_, status, _)| !status.success())
        .map(|(device, status, log)| format!("on {device}: {status} (log: {})", resolved(log)))
        .collect();
    let stopped = |(_, status, _): &(String, ExitStatus, PathBuf)| {
        status.code() == Some(INTERRUPTED_EXIT_CODE.into())
    };
    if requested() || ended.iter().any(stopped) {
        eprintln!("stopped on request; the complete shards are kept: run the same command again");
        return Ok(Parts::Stopped(ExitCode::from(INTERRUPTED_EXIT_CODE)));
    }
    if !failed.is_empty() || ended.len() < count {
        anyhow::bail!(
            "corpus parts failed ({}); {} of {count} ended; the complete shards are kept",
            failed.join("; "),
            ended.len()
        );
    }
    let live = (args.devices.iter()).find(|d| !retired.iter().any(|r| &&r.slot == d));
    let device = live.unwrap_or(&args.devices[0]).clone();
    Ok(Parts::Encoded { device })
}

/// The index of a part from its job's name, `part I/N`.
fn part_index(name: &str) -> usize {
    let index = name.trim_start_matches("part ").split('/').next();
    index
        .and_then(|i| i.parse().ok())
        .expect("a part's job name")
}

/// The arguments without `--devices` and its list.
fn without_devices(arguments: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip = false;
    for argument in arguments {
        if std::mem::take(&mut skip) {
            continue;
        }
        match argument.as_str() {
            "--devices" => skip = true,
            a if a.starts_with("--devices=") => {}
            _ => kept.push(argument.clone()),
        }
    }
    kept
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
