use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum DataCommand {
    /// Download data sets from their canonical public locations into the data root, then
    /// check them.
    Fetch(FetchArgs),
    /// Check data sets already under the data root (files parse, query counts as published).
    Verify(FetchArgs),
}

#[derive(Args)]
pub struct FetchArgs {
    /// msmarco-dev, trec-dl-2019, beir/<name>, beir-13, nanobeir/<name>, nanobeir-13.
    #[arg(required = true)]
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
    };
    for name in &args.names {
        let checked = if download {
            lsr_eval::fetch::fetch(name, &args.data_root, args.offline)?
        } else {
            lsr_eval::fetch::verify(name, &args.data_root)?
        };
        for (dataset, queries) in checked {
            println!("{dataset}: ok, {queries} evaluated queries");
        }
    }
    Ok(())
}
