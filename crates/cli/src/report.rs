//! `lsr report`: Table 1, loss curves and the trade-off plot of a matrix's results, through
//! `lsr-report`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use lsr_report::{Part, write_report};

#[derive(Clone, Copy, ValueEnum)]
enum PartArg {
    Table,
    Losses,
    Tradeoff,
}

#[derive(Args)]
pub struct ReportArgs {
    /// A matrix's results directory (`results/<matrix>`).
    results: PathBuf,
    /// Default: `<results>/report`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these parts (repeatable); default all.
    #[arg(long, value_enum)]
    only: Vec<PartArg>,
}

pub fn run(args: ReportArgs) -> Result<()> {
    let out = args.out.unwrap_or_else(|| args.results.join("report"));
    let parts: Vec<Part> = if args.only.is_empty() {
        vec![Part::Table, Part::Losses, Part::Tradeoff]
    } else {
        args.only
            .iter()
            .map(|p| match p {
                PartArg::Table => Part::Table,
                PartArg::Losses => Part::Losses,
                PartArg::Tradeoff => Part::Tradeoff,
            })
            .collect()
    };
    for path in write_report(&args.results, &out, &parts)? {
        println!("{}", path.display());
    }
    Ok(())
}
