//! `lsr norms`: MLM-head statistics of checkpoints (row norms, bias, logit scale), the
//! evidence for choosing k.

use anyhow::Result;
use clap::Args;
use lsr_backbone::{Backbone, HeadStats, parse_device};

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

pub fn run(args: NormsArgs) -> Result<()> {
    let device = parse_device(args.device.as_deref())?;
    let mut rows = Vec::new();
    for checkpoint in &args.checkpoints {
        let backbone = Backbone::load(checkpoint, &device, 128)?;
        rows.push(HeadStats::compute(&backbone)?);
    }
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
