//! `lsr vectors export`: the sparse vectors `lsr eval` or `lsr encode --vectors` wrote, in the
//! formats search engines index (Anserini, Seismic, CIFF). The work is in `lsr-eval`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use lsr_backbone::{Checkpoint, ModelConfig, TextTokenizer};
use lsr_eval::export::{DEFAULT_QUANTIZE, Format, export};

#[derive(Subcommand)]
pub enum VectorsCommand {
    /// Write a vector file for a search engine (README.md, "Indexing with a search engine").
    Export(ExportArgs),
}

#[derive(Args)]
pub struct ExportArgs {
    /// An `LSRVEC1` file: `<eval output>/<data set>/corpus.vectors` or `queries.vectors`, or
    /// what `lsr encode --vectors` wrote.
    vectors: PathBuf,
    /// The model that encoded them: its tokenizer names the terms.
    #[arg(long)]
    checkpoint: String,
    #[arg(long, value_enum)]
    format: FormatArg,
    /// Where to write (one file; nothing is written unless complete).
    #[arg(long)]
    out: PathBuf,
    /// Integer impacts are round(weight × this) (Anserini, CIFF; 100 as the SPLADE corpora
    /// of Anserini's regressions).
    #[arg(long, default_value_t = DEFAULT_QUANTIZE)]
    quantize: f32,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// Anserini JsonVectorCollection (documents, integer impacts).
    Anserini,
    /// Anserini pre-tokenised queries (TSV, tokens repeated by impact).
    AnseriniQueries,
    /// Seismic JSONL (float weights; documents or queries).
    Seismic,
    /// CIFF (PISA and others; integer impacts as term frequencies).
    Ciff,
}

pub fn run(command: VectorsCommand) -> Result<()> {
    let VectorsCommand::Export(args) = command;
    let format = match args.format {
        FormatArg::Anserini => Format::AnseriniDocuments,
        FormatArg::AnseriniQueries => Format::AnseriniQueries,
        FormatArg::Seismic => Format::Seismic,
        FormatArg::Ciff => Format::Ciff,
    };
    if !(args.quantize.is_finite() && args.quantize > 0.0) {
        anyhow::bail!("--quantize must be finite and > 0, got {}", args.quantize);
    }
    // The tokenizer names the terms; the weights are not needed.
    let checkpoint = Checkpoint::resolve(&args.checkpoint)?;
    let dims = ModelConfig::read(&checkpoint.config)?.dims;
    let tokenizer =
        TextTokenizer::from_file(&checkpoint.tokenizer, dims.pad_token_id, dims.vocab_size, 8)?;
    let vocabulary: Vec<String> = (0..dims.vocab_size as u32)
        .map(|id| tokenizer.token(id).unwrap_or_else(|| format!("[{id}]")))
        .collect();
    let written = export(&args.vectors, &vocabulary, format, args.quantize, &args.out)?;
    eprintln!("{written} vectors → {}", args.out.display());
    Ok(())
}
