//! `lsr train` and `lsr export`: one training run from a cell config, and a checkpoint written
//! back as a Hugging Face checkpoint. The work is in `lsr-train`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use lsr_compute::parse_device;
use lsr_files::stop::{INTERRUPTED_EXIT_CODE, stop_on_signals};
use lsr_train::{Outcome, TrainConfig};

/// Exit code of a run that collapsed (a recorded result, distinct from an error's 1).
pub const COLLAPSED: u8 = 3;

#[derive(Args)]
pub struct TrainArgs {
    /// The cell's config (model, recipe, data, output), TOML.
    #[arg(long)]
    config: PathBuf,
    /// Override a field: `--set recipe.lr=1e-5 --set model.k=16 --set device=cuda`.
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    overrides: Vec<String>,
    /// Continue the run in the output directory from its newest checkpoint.
    #[arg(long)]
    resume: bool,
}

#[derive(Args)]
pub struct ExportArgs {
    /// A training checkpoint directory (`<checkpoints>/step-N`).
    checkpoint: PathBuf,
    /// Where to write the Hugging Face checkpoint (must not exist or be empty).
    out_dir: PathBuf,
    /// flex, wgpu[:N] or cuda[:N]; default flex (writing needs no accelerator).
    #[arg(long, default_value = "flex")]
    device: String,
}

/// Trains; the exit code says how the run ended (0 finished, 3 collapsed, 75 interrupted).
pub fn run(args: TrainArgs) -> Result<ExitCode> {
    let config = TrainConfig::load(&args.config, &args.overrides)?;
    stop_on_signals()?;
    match lsr_matrix::validation::train(&config, args.resume)? {
        Outcome::Finished { steps, model } => {
            eprintln!("finished {steps} steps; model: {}", model.display());
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Interrupted { step } => {
            eprintln!(
                "interrupted after step {step}, with a checkpoint there; continue with --resume"
            );
            Ok(ExitCode::from(INTERRUPTED_EXIT_CODE))
        }
        Outcome::Collapsed {
            step,
            reason,
            model,
        } => {
            eprintln!("collapsed at step {step}: {reason}");
            match model {
                Some(model) => eprintln!("model at the collapse: {}", model.display()),
                None => eprintln!("no model: its weights are not finite"),
            }
            Ok(ExitCode::from(COLLAPSED))
        }
    }
}

pub fn export(args: ExportArgs) -> Result<()> {
    let device = parse_device(Some(&args.device))?;
    lsr_train::checkpoint::export(&args.checkpoint, &args.out_dir, &device)?;
    eprintln!("wrote {}", args.out_dir.display());
    Ok(())
}
