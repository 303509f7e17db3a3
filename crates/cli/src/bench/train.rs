//! The training benches: one step (`train-step`, or its launches with `--launches`) and the
//! cached step against the whole batch (`cached-step`, each side in a process of its own).

use super::*;

#[derive(Args)]
pub struct TrainStepBench {
    /// Queries per step; each has one positive and one hard negative (2× documents)
    /// [default: 8; 4 with --launches].
    #[arg(long, value_parser = crate::values::at_least_one)]
    queries: Option<usize>,
    /// [default: 32; 16 with --launches]
    #[arg(long, value_parser = crate::values::at_least_one)]
    query_len: Option<usize>,
    /// [default: 128; 32 with --launches]
    #[arg(long, value_parser = crate::values::at_least_one)]
    document_len: Option<usize>,
    /// f32 or bf16-mixed (f32 weights and AdamW state either way).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    #[command(flatten)]
    sizing: Sizing,
    #[command(flatten)]
    repeat: Repeat<1, 3>,
}

#[derive(Serialize)]
struct TrainStepReport {
    #[serde(flatten)]
    run: ModelRun,
    queries: usize,
    documents: usize,
    query_len: usize,
    document_len: usize,
    seconds_per_step: f64,
}

#[derive(Args)]
pub struct CachedStepBench {
    /// Queries per step; each has one positive and one hard negative (2× documents).
    #[arg(long, default_value_t = 128, value_parser = crate::values::at_least_one)]
    queries: usize,
    /// Micro-batches of the cached step (dividing `queries`).
    #[arg(long, default_value_t = 8, value_parser = crate::values::at_least_one)]
    accumulation: usize,
    #[arg(long, default_value_t = 32, value_parser = crate::values::at_least_one)]
    query_len: usize,
    #[arg(long, default_value_t = 128, value_parser = crate::values::at_least_one)]
    document_len: usize,
    /// A checkpoint to train (a miniature: `data/synth/models/bert`); default a random model of
    /// BERT-base's shape.
    #[arg(long)]
    model: Option<String>,
    /// Run one side in this process (what the bench starts each child process with).
    #[arg(long, hide = true)]
    only: Option<StepKind>,
    #[command(flatten)]
    repeat: Repeat<1, 3>,
}

/// The two sides of the cached-step bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
enum StepKind {
    /// One batch: every query's graph at once.
    Whole,
    /// Gradient caching over the micro-batches.
    Cached,
}

#[derive(Serialize, serde::Deserialize)]
struct CachedStepReport {
    kind: StepKind,
    device: String,
    model: String,
    queries: usize,
    micro_batches: usize,
    query_len: usize,
    document_len: usize,
    iterations: usize,
    seconds_per_step: f64,
    /// This process's peak resident memory (`VmHWM`): the model, AdamW's state and the step.
    peak_rss_mib: Option<f64>,
    device_reserved_mib: Option<f64>,
}

pub(super) fn train_step(args: TrainStepBench) -> Result<()> {
    if args.precision == Precision::Bf16 {
        anyhow::bail!("--precision bf16 is for encoding; a training step takes f32 or bf16-mixed");
    }
    let (device, harness) = args.repeat.start()?;
    let sizing = &args.sizing;
    let hidden = sizing.hidden();
    let queries = sizing.pick(args.queries, 8, 4);
    let query_len = sizing.pick(args.query_len, 32, 16);
    let document_len = sizing.pick(args.document_len, 128, 32);
    let model = bert_shaped(&device.clone().autodiff(), hidden)?;
    let recipe = Recipe {
        batch_size: queries,
        negatives: 1,
        precision: args.precision,
        ..Recipe::default()
    };
    let mut trainer = Trainer::new(model, recipe);
    let batch = TrainBatch {
        index: 0,
        queries: synthetic_tokens(queries, query_len),
        documents: synthetic_tokens(2 * queries, document_len),
        teacher: None,
    };
    // A step that is not logged, as nine in ten at table 1's `log_every` (PyTorch's reference
    // reads the loss alone).
    let mut step = || trainer.step(std::slice::from_ref(&batch), false);
    // Two steps before a count: AdamW's state exists from the second on. `step` reads its
    // metrics back from the device, so it returns when the step is done.
    let (launches, seconds_per_step) = harness.count_or_time(sizing.launches, 2, &mut step)?;
    let report = TrainStepReport {
        run: harness.model_run(args.precision, hidden, launches),
        queries,
        documents: 2 * queries,
        query_len,
        document_len,
        seconds_per_step,
    };
    print(&report, args.repeat.json, |report| {
        let run = &report.run;
        if let Some(launches) = &run.launches {
            return format!(
                "train step ({} queries x {}, {} documents x {}, hidden {}) on {}: {}",
                report.queries,
                report.query_len,
                report.documents,
                report.document_len,
                run.hidden,
                run.device,
                launches::describe(launches)
            );
        }
        format!(
            "train step ({} queries x {}, {} documents x {}) on {} ({} products, {} attention): \
             {:.3} s/step, peak RSS {}",
            report.queries,
            report.query_len,
            report.documents,
            report.document_len,
            run.device,
            run.matmul.name(),
            run.attention.name(),
            report.seconds_per_step,
            describe_rss(run.peak_rss_mib)
        )
    })
}

/// Both sides of the cached-step bench, each in a child process of this binary (so that each
/// peak RSS is that side's alone), printed side by side; or, with `--only`, one side here.
pub(super) fn cached_step(args: CachedStepBench) -> Result<()> {
    anyhow::ensure!(
        args.queries.is_multiple_of(args.accumulation),
        "--accumulation {} must divide --queries {}",
        args.accumulation,
        args.queries
    );
    if let Some(kind) = args.only {
        let report = cached_step_side(&args, kind)?;
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let reports: Vec<CachedStepReport> = [StepKind::Whole, StepKind::Cached]
        .into_iter()
        .map(|kind| cached_step_child(&args, kind))
        .collect::<Result<_>>()?;
    if args.repeat.json {
        println!("{}", serde_json::to_string(&reports)?);
        return Ok(());
    }
    let first = &reports[0];
    println!(
        "train step, {} queries x {} and {} documents x {}, {} on {}:",
        first.queries,
        first.query_len,
        2 * first.queries,
        first.document_len,
        first.model,
        first.device
    );
    for report in &reports {
        println!(
            "  {:<7} {} micro-batch(es): {:.3} s/step, peak RSS {}",
            format!("{:?}", report.kind).to_lowercase(),
            report.micro_batches,
            report.seconds_per_step,
            describe_rss(report.peak_rss_mib)
        );
    }
    Ok(())
}

/// Runs one side in a child process and reads its report.
fn cached_step_child(args: &CachedStepBench, kind: StepKind) -> Result<CachedStepReport> {
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.args(["bench", "cached-step", "--only"]);
    command.arg(format!("{kind:?}").to_lowercase());
    for (flag, value) in [
        ("--queries", args.queries),
        ("--accumulation", args.accumulation),
        ("--query-len", args.query_len),
        ("--document-len", args.document_len),
        ("--warmup", args.repeat.warmup),
        ("--iterations", args.repeat.iterations),
    ] {
        command.args([flag, &value.to_string()]);
    }
    for (flag, value) in [("--model", &args.model), ("--device", &args.repeat.device)] {
        if let Some(value) = value {
            command.args([flag, value]);
        }
    }
    let output = command.stderr(std::process::Stdio::inherit()).output()?;
    anyhow::ensure!(
        output.status.success(),
        "the {kind:?} step failed ({})",
        output.status
    );
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// One side of the cached-step bench in this process.
fn cached_step_side(args: &CachedStepBench, kind: StepKind) -> Result<CachedStepReport> {
    let (device, harness) = args.repeat.start()?;
    let autodiff = device.clone().autodiff();
    let (model, vocab) = match &args.model {
        Some(checkpoint) => {
            let backbone = lsr_backbone::Backbone::load_with_dropout(
                checkpoint,
                &autodiff,
                args.document_len,
                false,
            )?;
            let vocab = backbone.config.dims.vocab_size as u32;
            (backbone.model, vocab)
        }
        None => (bert_base(&autodiff)?, u32::MAX),
    };
    // BERT-base's ids, folded into a smaller vocabulary.
    let tokens = |batch, len| {
        let mut tokens = synthetic_tokens(batch, len);
        tokens.ids.iter_mut().for_each(|id| *id %= vocab);
        tokens
    };
    let micro_batches = match kind {
        StepKind::Whole => 1,
        StepKind::Cached => args.accumulation,
    };
    let recipe = Recipe {
        batch_size: args.queries,
        accumulation: micro_batches,
        batching: match kind {
            StepKind::Whole => lsr_train::Batching::Accumulation,
            StepKind::Cached => lsr_train::Batching::Cached,
        },
        negatives: 1,
        ..Recipe::default()
    };
    let mut trainer = Trainer::new(model, recipe);
    let size = args.queries / micro_batches;
    let batches: Vec<TrainBatch> = (0..micro_batches as u64)
        .map(|index| TrainBatch {
            index,
            queries: tokens(size, args.query_len),
            documents: tokens(2 * size, args.document_len),
            teacher: None,
        })
        .collect();
    let seconds_per_step = harness.seconds(|| {
        trainer.step(&batches, false);
    })?;
    Ok(CachedStepReport {
        kind,
        device: format!("{device:?}"),
        model: args
            .model
            .clone()
            .unwrap_or_else(|| "BERT-base shape (random)".into()),
        queries: args.queries,
        micro_batches,
        query_len: args.query_len,
        document_len: args.document_len,
        iterations: args.repeat.iterations,
        seconds_per_step,
        peak_rss_mib: peak_rss_mib(),
        device_reserved_mib: reserved_mib(&device),
    })
}
