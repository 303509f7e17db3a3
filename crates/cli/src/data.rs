//! `lsr data`: fetch and verify evaluation data sets, and write the offline miniature's task
//! and models. The work is in `lsr-data` (data sets, the task) and `lsr-backbone` (models).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum DataCommand {
    /// Download data sets from their canonical public locations into the data root, each file
    /// checked against its published md5 before it is installed, then check them.
    Fetch(FetchArgs),
    /// Check data sets already under the data root: files a fetch installed still have the
    /// sha256 recorded then, files parse, query counts are as published.
    Verify(FetchArgs),
    /// Write the synthetic retrieval task of the offline miniature: MS MARCO-style triplets and
    /// BEIR-style test sets needing exact matching and expansion (deterministic).
    #[command(name = "mini-task", alias = "synth")]
    MiniTask(SynthArgs),
    /// Write the miniature checkpoints of the seven families (random weights, MLM-head row
    /// norms from a spec file) over a synthetic vocabulary.
    #[command(name = "mini-models", alias = "miniatures")]
    MiniModels(MiniatureArgs),
}

#[derive(Args)]
pub struct SynthArgs {
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = lsr_data::miniature::SynthSpec::default().seed)]
    seed: u64,
}

#[derive(Args)]
pub struct MiniatureArgs {
    /// TOML with `seed` and a `[norms]` table: family = decoder row norm.
    #[arg(long)]
    spec: PathBuf,
    /// One word per line (`lsr data mini-task` writes `vocab.txt`).
    #[arg(long)]
    vocab: PathBuf,
    /// One checkpoint directory per family is written here.
    #[arg(long)]
    out: PathBuf,
    /// Draw the weights with this seed instead of the spec's.
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MiniatureSpec {
    seed: u64,
    norms: std::collections::BTreeMap<String, f64>,
}

#[derive(Args)]
pub struct FetchArgs {
    #[arg(required = true, help = lsr_data::registry::known(true))]
    names: Vec<String>,
    #[arg(long, default_value = "data")]
    data_root: PathBuf,
    /// Download nothing; say what is missing and where it comes from.
    #[arg(long)]
    offline: bool,
}

pub fn run(command: DataCommand) -> Result<()> {
    let (args, download) = match command {
        DataCommand::Fetch(args) => (args, true),
        DataCommand::Verify(args) => (args, false),
        DataCommand::MiniTask(args) => return synth(args),
        DataCommand::MiniModels(args) => return miniatures(args),
    };
    for name in &args.names {
        let checked = if download {
            lsr_data::fetch::fetch(name, &args.data_root, args.offline)?
        } else {
            lsr_data::fetch::verify(name, &args.data_root)?
        };
        let (matched, files) = lsr_data::fetch::verify_installed(name, &args.data_root)?;
        for (dataset, queries) in checked {
            println!("{dataset}: ok, {queries} evaluated queries");
        }
        let unchecked = match files - matched {
            0 => String::new(),
            n => format!("; {n} put in place by hand, their contents unchecked"),
        };
        println!("{name}: {matched} of {files} files as installed (sha256){unchecked}");
    }
    Ok(())
}

fn synth(args: SynthArgs) -> Result<()> {
    let spec = lsr_data::miniature::SynthSpec {
        seed: args.seed,
        ..Default::default()
    };
    lsr_data::miniature::write_synthetic(&spec, &args.out)?;
    println!("wrote the synthetic task to {}", args.out.display());
    Ok(())
}

fn miniatures(args: MiniatureArgs) -> Result<()> {
    let text =
        std::fs::read_to_string(&args.spec).with_context(|| args.spec.display().to_string())?;
    let mut spec: MiniatureSpec =
        toml::from_str(&text).with_context(|| args.spec.display().to_string())?;
    spec.seed = args.seed.unwrap_or(spec.seed);
    let vocab =
        std::fs::read_to_string(&args.vocab).with_context(|| args.vocab.display().to_string())?;
    let words: Vec<String> = vocab
        .lines()
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect();
    for (family, norm) in &spec.norms {
        let out = args.out.join(family);
        if out.join("model.safetensors").exists() {
            println!("{family}: {} exists, kept", out.display());
            continue;
        }
        lsr_backbone::miniature::write_miniature(family, &words, *norm, spec.seed, &out)?;
        println!("{family}: row norm {norm} → {}", out.display());
    }
    Ok(())
}
