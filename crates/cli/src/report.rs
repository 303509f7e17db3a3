//! `lsr report`: Table 1, loss curves, the trade-off plot and the choice of k of a matrix's
//! results, through `lsr-report`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use lsr_files::probe::PROBE_DIR;
use lsr_report::{Part, ReportError, comparison, write_k_choice, write_report};

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum PartArg {
    Table,
    Losses,
    Tradeoff,
    KChoice,
}

#[derive(Args)]
pub struct ReportArgs {
    /// A matrix's results directory (`results/<matrix>`); several (runs of one matrix under
    /// other seeds) for `--only k-choice`, which pools them.
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// Default: `<results>/report` (required with several results directories).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these parts (repeatable); default all (k-choice where the matrix was probed).
    #[arg(long, value_enum)]
    only: Vec<PartArg>,
    /// Each cell's score (mean nDCG@10 over the evaluation sets) in every results directory,
    /// side by side: printed, and written as compare.md and compare.csv with --out.
    #[arg(long, conflicts_with = "only")]
    compare: bool,
    /// With --compare: the first run again under another data-order seed. How far it lands
    /// from the first sets the tolerance (at least 0.05) by which each other run is judged to
    /// show the first one's pattern or not: every cell within it, the same cells failed, and
    /// each backbone's best k one that the first run scores within it of its own best.
    #[arg(long, requires = "compare", value_name = "RESULTS")]
    noise: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> Result<()> {
    if args.compare {
        let comparison = comparison(&args.results, args.noise.as_deref())?;
        print!("{}", comparison.markdown());
        if let Some(out) = &args.out {
            std::fs::create_dir_all(out)?;
            for path in comparison.write(out)? {
                eprintln!("{}", path.display());
            }
        }
        return Ok(());
    }
    if let [results] = args.results.as_slice() {
        let out = args.out.unwrap_or_else(|| results.join("report"));
        for path in write_report(results, &out, &parts(&args.only))? {
            println!("{}", path.display());
        }
        // Unasked, the choice of k is reported where the matrix was probed, and its absence
        // said rather than refused while the grid is still running.
        if args.only.is_empty() && results.join(PROBE_DIR).exists() {
            match write_k_choice(std::slice::from_ref(results), &out) {
                Ok(paths) => paths.iter().for_each(|p| println!("{}", p.display())),
                Err(ReportError::Nothing { part, why }) => eprintln!("note: no {part} yet: {why}"),
                Err(error) => return Err(error.into()),
            }
        }
        return Ok(());
    }
    if args.only != [PartArg::KChoice] {
        bail!("several results directories are pooled by `--only k-choice` alone");
    }
    let Some(out) = args.out else {
        bail!("several results directories need --out");
    };
    std::fs::create_dir_all(&out)?;
    for path in write_k_choice(&args.results, &out)? {
        println!("{}", path.display());
    }
    Ok(())
}

/// The parts asked for; unasked, those every matrix has.
fn parts(only: &[PartArg]) -> Vec<Part> {
    if only.is_empty() {
        return vec![Part::Table, Part::Losses, Part::Tradeoff];
    }
    only.iter()
        .map(|p| match p {
            PartArg::Table => Part::Table,
            PartArg::Losses => Part::Losses,
            PartArg::Tradeoff => Part::Tradeoff,
            PartArg::KChoice => Part::KChoice,
        })
        .collect()
}
