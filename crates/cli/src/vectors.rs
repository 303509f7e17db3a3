//! `lsr vectors export`: the sparse vectors `lsr eval` or `lsr encode --vectors` wrote, in the
//! formats search engines index or query (Anserini, Seismic, CIFF, PISA). The work is in
//! `lsr-eval`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use lsr_backbone::{Checkpoint, ModelConfig, TextTokenizer};
use lsr_eval::export::{Format, export};
use lsr_eval::vectors::Vocabulary;

#[derive(Subcommand)]
pub enum VectorsCommand {
    /// Write a vector file for a search engine, tokens named as it needs them (docs/interop.md,
    /// "Indexing with a search engine").
    Export(ExportArgs),
}

#[derive(Args)]
pub struct ExportArgs {
    /// A vector file: `<eval output>/<data set>/corpus.vectors` or `queries.vectors`, or what
    /// `lsr encode --vectors` wrote.
    vectors: PathBuf,
    /// The model that encoded them: its tokenizer names the terms (another model's is refused;
    /// a file of the first format, `LSRVEC1`, records none to check against).
    #[arg(long)]
    checkpoint: String,
    #[arg(long, value_enum)]
    format: FormatArg,
    /// Where to write (one file; nothing is written unless complete).
    #[arg(long)]
    out: PathBuf,
    /// Integer impacts are round(weight × F) (Anserini, CIFF, PISA queries; default 100, as
    /// the SPLADE corpora of Anserini's regressions); Seismic gets float weights unless F is
    /// given, then the same impacts: the vectors `lsr eval --quantize F` scored.
    #[arg(long, value_name = "F", value_parser = crate::values::positive::<f32>)]
    quantize: Option<f32>,
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
    /// PISA queries for a CIFF index (`qid:token token …`, tokens repeated by impact).
    PisaQueries,
}

pub fn run(command: VectorsCommand) -> Result<()> {
    let VectorsCommand::Export(args) = command;
    let format = match args.format {
        FormatArg::Anserini => Format::AnseriniDocuments,
        FormatArg::AnseriniQueries => Format::AnseriniQueries,
        FormatArg::Seismic => Format::Seismic,
        FormatArg::Ciff => Format::Ciff,
        FormatArg::PisaQueries => Format::PisaQueries,
    };
    // The tokenizer names the terms; the weights are not needed.
    let checkpoint = Checkpoint::resolve(&args.checkpoint)?;
    let dims = ModelConfig::read(&checkpoint.config)?.dims;
    let tokenizer =
        TextTokenizer::from_file(&checkpoint.tokenizer, dims.pad_token_id, dims.vocab_size, 8)?;
    let vocabulary = Vocabulary::of(&tokenizer, dims.vocab_size, &checkpoint.name);
    let written = export(&args.vectors, &vocabulary, format, args.quantize, &args.out)?;
    eprintln!("{written} vectors → {}", args.out.display());
    Ok(())
}
