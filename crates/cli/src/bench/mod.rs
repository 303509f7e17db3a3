//! Benchmarks on synthetic models of real shapes. Speed and memory live here, never in tests.
//! `scripts/bench/` holds the same workloads in PyTorch for comparison. Here: the commands, the
//! harness they share, encoding and retrieval; the training benches are in `train.rs`, single
//! products and reductions in `products.rs`, and what a step costs in kernel launches and kept
//! bytes (`--launches`) in `launches.rs`.

mod launches;
mod products;
mod train;

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use burn::prelude::*;
use clap::{Args, Subcommand};
use lsr_backbone::{MaskedLm, ModelConfig, TokenBatch, Weights};
use lsr_compute::attention::{self, AttentionMode};
use lsr_compute::matmul::{self, CublasTotals, cublaslt_library, products_on, take_cublas_totals};
use lsr_compute::{MatmulMode, Precision, parse_device};
use lsr_splade::{encode_pooled_tiles, head_tile};
use lsr_train::data::TrainBatch;
use lsr_train::{Recipe, Trainer};

use crate::values::ProductShape;
use products::{MatmulBench, ReduceBench, matmul, reduce};
use serde::Serialize;
use train::{CachedStepBench, TrainStepBench, cached_step, train_step};

/// BERT-base's hidden width.
const BERT_BASE_HIDDEN: usize = 768;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// SPLADE encoding (MLM logits + max pooling) with a random BERT-base-shaped model.
    Encode(EncodeBench),
    /// One SPLADE training step (forward, loss, backward, AdamW) with a random BERT-base-shaped
    /// model: queries and their positive and negative documents.
    TrainStep(TrainStepBench),
    /// A large contrastive batch by gradient caching (`batching = "cached"`, in micro-batches)
    /// beside the same step in one batch (in-batch negatives and FLOPS over every query either
    /// way): step time and peak RSS of each, each step run in a process of its own.
    CachedStep(CachedStepBench),
    /// Exact top-k retrieval over a synthetic SPLADE-like index (the same collection
    /// `scripts/bench/retrieve.py` generates for scipy.sparse).
    Retrieve(RetrieveBench),
    /// One matrix product `[m, k] · [k, n]` on the device, in TFLOP/s: the kernel alone, to
    /// split a model's time into "matmul" and "everything else" (`scripts/bench/matmul.py` is
    /// PyTorch's). It goes where the model's products go: `LSR_MATMUL=cube|cublas|blas|auto`.
    Matmul(MatmulBench),
    /// The reductions over tokens of a training step, each alone: the column sum of a
    /// `[rows, width]` gradient (a bias or LayerNorm gradient) in one pass and in the two
    /// passes lsr's parameter broadcasts give it (`lsr_compute::norm`), and the SPLADE max
    /// over the tokens of one vocabulary tile.
    Reduce(ReduceBench),
}

/// How a device bench repeats its work, where it runs and how it reports; each bench has its
/// own counts.
#[derive(Args)]
pub struct Repeat<const WARMUP: usize, const ITERATIONS: usize> {
    /// Untimed runs first (kernel compilation, autotune, caches).
    #[arg(long, default_value_t = WARMUP)]
    warmup: usize,
    /// Timed runs.
    #[arg(long, default_value_t = ITERATIONS, value_parser = crate::values::at_least_one)]
    iterations: usize,
    /// flex, wgpu[:N] or cuda[:N]; default: `$LSR_DEVICE`, else the best backend that starts here.
    #[arg(long)]
    device: Option<String>,
    /// One JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

impl<const WARMUP: usize, const ITERATIONS: usize> Repeat<WARMUP, ITERATIONS> {
    /// The device asked for, and the harness that times work there.
    fn start(&self) -> Result<(Device, Harness)> {
        let device = parse_device(self.device.as_deref())?;
        let harness = Harness {
            device: device.clone(),
            warmup: self.warmup,
            iterations: self.iterations,
            products: Default::default(),
        };
        Ok((device, harness))
    }
}

#[derive(Args)]
pub struct RetrieveBench {
    #[arg(long, default_value_t = 1_000_000, value_parser = crate::values::at_least_one)]
    docs: usize,
    #[arg(long, default_value_t = 30_000, value_parser = crate::values::at_least_one)]
    vocab: usize,
    /// Zipf draws per document (duplicates merge: 165 draws give ~120 non-zeros).
    #[arg(long, default_value_t = 165, value_parser = crate::values::at_least_one)]
    doc_draws: usize,
    /// Zipf draws per query (35 give ~30 non-zeros).
    #[arg(long, default_value_t = 35, value_parser = crate::values::at_least_one)]
    query_draws: usize,
    #[arg(long, default_value_t = 1.0, value_parser = crate::values::positive::<f64>)]
    zipf_exponent: f64,
    #[arg(long, default_value_t = 1000, value_parser = crate::values::at_least_one)]
    queries: usize,
    #[arg(long, default_value_t = 10, value_parser = crate::values::at_least_one)]
    k: usize,
    /// Weights independent of the term (`uniform`) or light for frequent terms (`splade`).
    #[arg(long, value_enum, default_value_t = Shape::Uniform)]
    shape: Shape,
    /// Score every posting (the reference) instead of skipping what cannot enter the top k.
    #[arg(long)]
    exhaustive: bool,
    /// Write the top-k lists here as a TREC run, for comparison with scipy's.
    #[arg(long)]
    run: Option<std::path::PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Shape {
    Uniform,
    Splade,
}

#[derive(Serialize)]
struct RetrieveReport {
    docs: usize,
    queries: usize,
    mean_doc_nonzeros: f64,
    mean_query_nonzeros: f64,
    threads: usize,
    build_seconds: f64,
    index_mib: f64,
    queries_per_second: f64,
    peak_rss_mib: Option<f64>,
}

#[derive(Args)]
pub struct EncodeBench {
    /// Texts per batch [default: 32; 8 with --launches].
    #[arg(long, value_parser = crate::values::at_least_one)]
    batch: Option<usize>,
    /// Tokens per text [default: 128; 32 with --launches].
    #[arg(long, value_parser = crate::values::at_least_one)]
    seq_len: Option<usize>,
    /// f32, bf16-mixed or bf16 (CPUs with AVX512_BF16 or AMX, through a CPU BLAS).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Vocabulary terms per tile of the MLM head (at least the vocabulary: the whole `[B, L, V]`
    /// logits at once, as without tiles) [default: as encoding chooses, `lsr_splade::head_tile`].
    #[arg(long, value_parser = crate::values::at_least_one)]
    head_tile: Option<usize>,
    #[command(flatten)]
    sizing: Sizing,
    #[command(flatten)]
    repeat: Repeat<1, 5>,
}

/// Whether the bench counts launches instead of timing, which sets its default sizes, and the
/// model's width.
#[derive(Args)]
pub struct Sizing {
    /// Count the kernels one steady-state step (batch) launches and the bytes it keeps, instead
    /// of timing (GPU backends), at a smaller shape of the same structure (`launches.rs`).
    #[arg(long)]
    launches: bool,
    /// Hidden width of the BERT-shaped model (heads of 64, FFN 4×) [default: BERT-base's 768;
    /// 128 with --launches].
    #[arg(long, value_parser = crate::values::at_least_one)]
    hidden: Option<usize>,
}

impl Sizing {
    /// `value` if given, else the default of a timed run or of a count.
    fn pick(&self, value: Option<usize>, timed: usize, counted: usize) -> usize {
        value.unwrap_or(if self.launches { counted } else { timed })
    }

    fn hidden(&self) -> usize {
        self.pick(self.hidden, BERT_BASE_HIDDEN, launches::COUNT_HIDDEN)
    }
}

/// What the model benches (train step, encoding) report beside their shape and time: where and
/// how the model ran and what the process and device held.
#[derive(Serialize)]
struct ModelRun {
    device: String,
    precision: Precision,
    hidden: usize,
    /// How the products ran (`LSR_MATMUL` on this device): `cube`, `cublas` or `blas`.
    matmul: MatmulMode,
    /// The CPU BLAS library file, where products went there.
    #[serde(skip_serializing_if = "Option::is_none")]
    blas: Option<String>,
    /// How attention ran (`LSR_ATTENTION` on this device, dtype and BERT-base's heads of 64):
    /// `fused` or `composed`.
    attention: AttentionMode,
    iterations: usize,
    peak_rss_mib: Option<f64>,
    /// What the device's allocator holds after the timed runs (GPU backends).
    device_reserved_mib: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cublas: Option<CublasReport>,
    /// With `--launches`: what one steady-state step (batch) launched and kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    launches: Option<launches::LaunchReport>,
}

#[derive(Serialize)]
struct EncodeReport {
    #[serde(flatten)]
    run: ModelRun,
    batch: usize,
    seq_len: usize,
    seconds_per_batch: f64,
    sequences_per_second: f64,
}

pub fn run(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Encode(args) => encode(args),
        BenchCommand::Retrieve(args) => retrieve(args),
        BenchCommand::Matmul(args) => matmul(args),
        BenchCommand::TrainStep(args) => train_step(args),
        BenchCommand::CachedStep(args) => cached_step(args),
        BenchCommand::Reduce(args) => reduce(args),
    }
}

/// `run`'s result and the seconds it took.
fn timed<T>(run: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let result = run();
    (result, start.elapsed().as_secs_f64())
}

/// How every device bench times its work: `warmup` untimed runs (kernel compilation, autotune,
/// caches), then `iterations` timed ones.
struct Harness {
    device: Device,
    warmup: usize,
    iterations: usize,
    /// What cuBLASLt did in the last timed runs (CUDA builds).
    products: std::cell::Cell<Option<CublasTotals>>,
}

impl Harness {
    /// The mean seconds of one timed run of `work`. Each run's result is held until the device
    /// has finished, so that no backend may skip or defer work whose result nobody holds (work
    /// whose results would not fit in memory together drops them itself).
    fn seconds<T>(&self, mut work: impl FnMut() -> T) -> Result<f64> {
        let warm: Vec<T> = (0..self.warmup).map(|_| work()).collect();
        self.device.sync()?;
        drop(warm);
        take_cublas_totals();
        let (done, seconds) = timed(|| {
            let results: Vec<T> = (0..self.iterations).map(|_| work()).collect();
            self.device.sync().map(|()| results)
        });
        drop(done?);
        self.products.set(take_cublas_totals());
        Ok(seconds / self.iterations.max(1) as f64)
    }

    /// With `count`, the launches of one run of `work` after at least `min_warmup` untimed ones
    /// and NaN seconds (counting slows every launch); else no count and `seconds`.
    fn count_or_time<T>(
        &self,
        count: bool,
        min_warmup: usize,
        mut work: impl FnMut() -> T,
    ) -> Result<(Option<launches::LaunchReport>, f64)> {
        if count {
            let warmup = self.warmup.max(min_warmup);
            Ok((Some(launches::count(&self.device, warmup, work)?), f64::NAN))
        } else {
            Ok((None, self.seconds(&mut work)?))
        }
    }

    /// What a model bench reports of its run, read after it.
    fn model_run(
        &self,
        precision: Precision,
        hidden: usize,
        launches: Option<launches::LaunchReport>,
    ) -> ModelRun {
        ModelRun {
            device: format!("{:?}", self.device),
            precision,
            hidden,
            matmul: products_on(&self.device),
            blas: self.blas(),
            attention: attention::route(&self.device, precision.compute(), 64),
            iterations: self.iterations,
            peak_rss_mib: peak_rss_mib(),
            device_reserved_mib: reserved_mib(&self.device),
            cublas: self.cublas(),
            launches,
        }
    }

    /// The CPU BLAS library file, where the device's products go there.
    fn blas(&self) -> Option<String> {
        (products_on(&self.device) == MatmulMode::Blas)
            .then(|| {
                matmul::blas::library()
                    .ok()
                    .map(|blas| blas.path().to_string())
            })
            .flatten()
    }

    /// cuBLASLt's share of the last timed runs, where products went there.
    fn cublas(&self) -> Option<CublasReport> {
        let totals = self
            .products
            .get()
            .filter(|t| t.products + t.fallbacks > 0)?;
        Some(CublasReport {
            library: cublaslt_library(),
            iterations: self.iterations,
            totals,
        })
    }
}

/// What the cuBLASLt route did over a bench's timed runs: products, fallbacks, host time in
/// Route A's syncs, device time under `LSR_CUBLAS_TIMING=1`, and the library file that served it.
#[derive(Serialize)]
struct CublasReport {
    library: Option<String>,
    iterations: usize,
    #[serde(flatten)]
    totals: CublasTotals,
}

/// Prints a bench's `report`: one JSON object with `--json`, else the line `describe` writes.
fn print<R: Serialize>(report: &R, json: bool, describe: impl FnOnce(&R) -> String) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        println!("{}", describe(report));
    }
    Ok(())
}

/// Seeds of the synthetic collection; `scripts/bench/retrieve.py` uses the same.
const DOC_SEED: u64 = 1;
const QUERY_SEED: u64 = 2;

fn retrieve(args: RetrieveBench) -> Result<()> {
    use lsr_data::bench_collection::{WeightShape, Zipf, sparse_vector};
    let zipf = Zipf::new(args.vocab, args.zipf_exponent);
    let shape = match args.shape {
        Shape::Uniform => WeightShape::Uniform,
        Shape::Splade => WeightShape::Splade,
    };
    let (built, build_seconds) = timed(|| -> Result<_> {
        let mut builder = lsr_eval::IndexBuilder::new(args.vocab);
        let mut doc_nonzeros = 0;
        for d in 0..args.docs {
            let vector = sparse_vector(&zipf, shape, DOC_SEED, d as u64, args.doc_draws);
            doc_nonzeros += vector.len();
            builder.add(&d.to_string(), &vector)?;
        }
        Ok((builder.build(), doc_nonzeros))
    });
    let (index, doc_nonzeros) = built?;
    let queries: Vec<(String, Vec<(u32, f32)>)> = (0..args.queries)
        .map(|q| {
            (
                q.to_string(),
                sparse_vector(&zipf, shape, QUERY_SEED, q as u64, args.query_draws),
            )
        })
        .collect();
    let (run, seconds) = timed(|| {
        if args.exhaustive {
            index.retrieve_exhaustive(&queries, args.k)
        } else {
            index.retrieve(&queries, args.k)
        }
    });
    if let Some(path) = &args.run {
        run.write(path, "lsr")?;
    }
    let report = RetrieveReport {
        docs: args.docs,
        queries: args.queries,
        mean_doc_nonzeros: doc_nonzeros as f64 / args.docs as f64,
        mean_query_nonzeros: queries.iter().map(|(_, v)| v.len()).sum::<usize>() as f64
            / args.queries as f64,
        threads: rayon_threads(),
        build_seconds,
        index_mib: index.memory_bytes() as f64 / (1024.0 * 1024.0),
        queries_per_second: args.queries as f64 / seconds,
        peak_rss_mib: peak_rss_mib(),
    };
    print(&report, args.json, |report| {
        format!(
            "retrieve top-{} over {} docs ({:.1} non-zeros/doc, {:.1}/query, {} threads): \
             {:.1} queries/s, index {:.0} MiB, built in {:.1} s, peak RSS {}",
            args.k,
            report.docs,
            report.mean_doc_nonzeros,
            report.mean_query_nonzeros,
            report.threads,
            report.queries_per_second,
            report.index_mib,
            report.build_seconds,
            describe_rss(report.peak_rss_mib)
        )
    })
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A random model of BERT-base's shape on `device`, without dropout (as the PyTorch
/// references in `scripts/bench/` are configured).
fn bert_base(device: &Device) -> Result<MaskedLm> {
    bert_shaped(device, BERT_BASE_HIDDEN)
}

/// [`bert_base`] with `hidden` units (`launches::bert_widths`): `bert-base-uncased`'s
/// config.json (the architecture; weights are random) at 768.
fn bert_shaped(device: &Device, hidden: usize) -> Result<MaskedLm> {
    let (heads, intermediate) = launches::bert_widths(hidden);
    let json = serde_json::json!({
        "model_type": "bert", "vocab_size": 30522, "hidden_size": hidden,
        "num_hidden_layers": 12, "num_attention_heads": heads,
        "intermediate_size": intermediate, "hidden_act": "gelu",
        "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "pad_token_id": 0
    });
    let name = format!("<bert-base-uncased shape, hidden {hidden}>");
    let mut config = ModelConfig::parse(Path::new(&name), &json.to_string())?;
    config.dropout = false;
    Ok(MaskedLm::load(&config, &Weights::random(0, 0.02, device))?)
}

/// Token ids `1000 + (i·7919 mod 29000)`, the same in `scripts/bench/`, and a full mask.
fn synthetic_tokens(batch: usize, len: usize) -> TokenBatch {
    TokenBatch {
        ids: (0..batch * len)
            .map(|i| 1000 + ((i * 7919) % 29_000) as u32)
            .collect(),
        mask: vec![1; batch * len],
        batch,
        len,
    }
}

fn encode(args: EncodeBench) -> Result<()> {
    let (device, harness) = args.repeat.start()?;
    let sizing = &args.sizing;
    let hidden = sizing.hidden();
    let (batch_size, seq_len) = (
        sizing.pick(args.batch, 32, 8),
        sizing.pick(args.seq_len, 128, 32),
    );
    args.precision.usable_on(&device)?;
    let model = bert_shaped(&device, hidden)?.with_precision(args.precision);
    let (ids, mask) = synthetic_tokens(batch_size, seq_len).to_tensors(&device);
    let tile = (args.head_tile).unwrap_or_else(|| head_tile(batch_size * seq_len, &device));
    let mut batch = || {
        let vectors = encode_pooled_tiles(&model, ids.clone(), mask.clone(), tile);
        // Reading the result back waits for the device to finish.
        vectors.into_data();
    };
    let (launches, seconds) = harness.count_or_time(sizing.launches, 1, &mut batch)?;
    let report = EncodeReport {
        run: harness.model_run(args.precision, hidden, launches),
        batch: batch_size,
        seq_len,
        seconds_per_batch: seconds,
        sequences_per_second: batch_size as f64 / seconds,
    };
    print(&report, args.repeat.json, |report| {
        let run = &report.run;
        if let Some(launches) = &run.launches {
            return format!(
                "encode {}x{} (hidden {}) on {}: {}",
                report.batch,
                report.seq_len,
                run.hidden,
                run.device,
                launches::describe(launches)
            );
        }
        format!(
            "encode {}x{} on {} ({} products, {} attention): {:.3} s/batch, {:.1} sequences/s, \
             peak RSS {}",
            report.batch,
            report.seq_len,
            run.device,
            run.matmul.name(),
            run.attention.name(),
            report.seconds_per_batch,
            report.sequences_per_second,
            describe_rss(run.peak_rss_mib)
        )
    })
}

fn reserved_mib(device: &Device) -> Option<f64> {
    device
        .memory_pool_usage()
        .map(|usage| usage.bytes_reserved as f64 / (1024.0 * 1024.0))
}

fn describe_rss(mib: Option<f64>) -> String {
    mib.map_or("unknown".into(), |m| format!("{m:.0} MiB"))
}

/// Peak resident memory of this process (Linux `VmHWM`).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}
