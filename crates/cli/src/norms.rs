//! `lsr norms`: MLM-head statistics of checkpoints (row norms, bias, logit scale), the
//! evidence for choosing k; `lsr k suggest`: the k the head-norm rule draws from them.

use std::sync::LazyLock;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use lsr_backbone::{ANCHOR, ANCHOR_ROW_NORM, Backbone, HeadStats, PAPER_GRID, suggest_k};
use lsr_compute::parse_device;

#[derive(Args)]
pub struct NormsArgs {
    /// Checkpoint directories or Hugging Face ids.
    #[arg(required = true)]
    checkpoints: Vec<String>,
    /// One JSON object per checkpoint instead of a table.
    #[arg(long)]
    json: bool,
    /// flex, wgpu[:N] or cuda[:N]; default: `$LSR_DEVICE`, else the best backend that starts here.
    #[arg(long)]
    device: Option<String>,
}

#[derive(Subcommand)]
pub enum KCommand {
    /// The k the head-norm rule picks for each checkpoint before any training: the grid's k
    /// that brings the decoder's mean row norm nearest (log scale) to a reference norm
    /// (docs/k-choice.md, "The head-norm rule").
    Suggest(SuggestArgs),
}

#[derive(Args)]
pub struct SuggestArgs {
    /// Checkpoint directories or Hugging Face ids.
    #[arg(required = true)]
    checkpoints: Vec<String>,
    /// The k to choose from, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = PAPER_GRID_TEXT.as_str(), value_parser = crate::values::scale)]
    grid: Vec<f64>,
    /// A mean row norm known to train well, instead of ModernBERT-base's 2.553 / 16 (e.g. what
    /// `lsr norms` prints for a backbone that trains well at k = 1).
    #[arg(long, value_parser = crate::values::positive::<f64>)]
    reference_norm: Option<f64>,
    /// One JSON object per checkpoint instead of a table.
    #[arg(long)]
    json: bool,
    /// flex, wgpu[:N] or cuda[:N]; default: `$LSR_DEVICE`, else the best backend that starts here.
    #[arg(long)]
    device: Option<String>,
}

/// The paper's grid as `--grid` takes it: `1,2,4,8,16`.
static PAPER_GRID_TEXT: LazyLock<String> =
    LazyLock::new(|| PAPER_GRID.map(|k| k.to_string()).join(","));

/// Each checkpoint's head statistics, in order.
fn head_stats(checkpoints: &[String], device: Option<&str>) -> Result<Vec<HeadStats>> {
    let device = parse_device(device)?;
    checkpoints
        .iter()
        .map(|checkpoint| {
            let backbone = Backbone::load(checkpoint, &device, 128)?;
            Ok(HeadStats::compute(&backbone)?)
        })
        .collect()
}

pub fn suggest(command: KCommand) -> Result<()> {
    let KCommand::Suggest(args) = command;
    // `--grid 1 2 4` leaves `2` and `4` to the checkpoints.
    let stray = |c: &&String| c.parse::<f64>().is_ok() && !std::path::Path::new(c).exists();
    if let Some(number) = args.checkpoints.iter().find(stray) {
        bail!(
            "`{number}` is not a checkpoint: --grid takes its k comma-separated (--grid {})",
            *PAPER_GRID_TEXT
        );
    }
    let given;
    let reference = match args.reference_norm {
        Some(norm) => {
            given = format!("--reference-norm {norm}");
            (norm, given.as_str())
        }
        None => (ANCHOR_ROW_NORM, ANCHOR),
    };
    for stats in head_stats(&args.checkpoints, args.device.as_deref())? {
        let s = suggest_k(
            &stats.checkpoint,
            stats.row_norm_mean,
            reference,
            &args.grid,
        );
        if args.json {
            println!("{}", serde_json::to_string(&s)?);
        } else {
            println!(
                "{}: mean decoder row norm {:.4} / reference {:.4} ({}) = {:.3} → k = {}",
                s.checkpoint, s.row_norm_mean, s.reference_row_norm, s.reference, s.exact_k, s.k
            );
        }
    }
    Ok(())
}

pub fn run(args: NormsArgs) -> Result<()> {
    let rows = head_stats(&args.checkpoints, args.device.as_deref())?;
    if args.json {
        for row in &rows {
            println!("{}", serde_json::to_string(row)?);
        }
        return Ok(());
    }
    println!(
        "{:<32} {:<10} {:>5} {:>7} {:>5} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>9} {:>8} {:>9} {:>6}",
        "checkpoint",
        "family",
        "tied",
        "vocab",
        "dim",
        "row_mean",
        "row_min",
        "row_max",
        "frobenius",
        "bias_mean",
        "bias_std",
        "logit_std",
        "logit_max",
        "max_w",
        "lsr_k"
    );
    for s in &rows {
        println!(
            "{:<32} {:<10} {:>5} {:>7} {:>5} {:>9.4} {:>9.4} {:>9.4} {:>10.3} {:>9.4} {:>8.4} {:>9.4} {:>8.3} {:>9.4} {:>6}",
            s.checkpoint,
            s.family,
            s.tied,
            s.vocab,
            s.dim,
            s.row_norm_mean,
            s.row_norm_min,
            s.row_norm_max,
            s.frobenius_norm,
            s.bias_mean,
            s.bias_std,
            s.logit_std,
            s.logit_max,
            s.probe_max_weight,
            s.rescaled_k.map_or("-".to_string(), |k| format!("{k}"))
        );
    }
    Ok(())
}
