//! `lsr encode`: texts (one per line) to SPLADE sparse vectors as JSON lines.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;

use lsr_eval::vectors::{VectorWriter, Vocabulary};

use crate::model::ModelArgs;

#[derive(Args)]
pub struct EncodeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Truncate texts to this many tokens (special tokens included).
    #[arg(long, default_value_t = 256, value_parser = crate::values::at_least_one)]
    max_length: usize,
    /// A text to encode (repeatable).
    #[arg(long = "text")]
    texts: Vec<String>,
    /// A file with one text per line, or `-` for standard input.
    #[arg(long)]
    input: Option<PathBuf>,
    /// One JSON object per text: {"text", "terms": [{"id", "token", "weight"}]}, all non-zero
    /// terms by weight descending.
    #[arg(long)]
    json: bool,
    /// Terms shown per text in the plain output.
    #[arg(long, default_value_t = 20, value_parser = crate::values::at_least_one)]
    top: usize,
    #[arg(long, default_value_t = 32, value_parser = crate::values::at_least_one)]
    batch_size: usize,
    /// Also write the vectors as an `LSRVEC2` file (ids: each text's 0-based position), for
    /// `lsr vectors export`.
    #[arg(long)]
    vectors: Option<PathBuf>,
}

#[derive(Serialize)]
struct Term {
    id: u32,
    token: Option<String>,
    weight: f32,
}

#[derive(Serialize)]
struct Encoded<'a> {
    text: &'a str,
    terms: Vec<Term>,
}

pub fn run(args: EncodeArgs) -> Result<()> {
    let mut texts = args.texts.clone();
    if let Some(input) = &args.input {
        texts.extend(read_lines(input)?);
    }
    if texts.is_empty() {
        bail!("nothing to encode: pass --text or --input");
    }
    let encoder = args.model.encoder(args.max_length)?;
    let used = encoder.backbone.tokenizer.max_length();
    if used < args.max_length {
        // As evaluation does: the model's positions cap the length, and the log says so.
        tracing::info!("the model takes at most {used} tokens: texts are cut at {used}");
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut file = args
        .vectors
        .as_deref()
        .map(|path| VectorWriter::create(path, &Vocabulary::of_encoder(&encoder)?.fingerprint()))
        .transpose()?;
    let mut position = 0usize;
    for chunk in texts.chunks(args.batch_size * 8) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let vectors = encoder.encode(&refs, args.batch_size)?;
        for (text, vector) in refs.iter().zip(vectors) {
            if let Some(file) = &mut file {
                file.write(&position.to_string(), &vector.terms)?;
            }
            position += 1;
            let terms = vector.terms.iter().map(|&(id, weight)| Term {
                id,
                token: encoder.token(id),
                weight,
            });
            if args.json {
                let line = Encoded {
                    text,
                    terms: terms.collect(),
                };
                writeln!(out, "{}", serde_json::to_string(&line)?)?;
            } else {
                writeln!(out, "# {text}  ({} non-zero terms)", vector.len())?;
                for term in terms.take(args.top) {
                    let token = term.token.unwrap_or_else(|| "<no token>".into());
                    writeln!(out, "{:>8.4}  {:>7}  {token}", term.weight, term.id)?;
                }
            }
        }
    }
    out.flush()?;
    if let Some(file) = file {
        file.finish()?;
    }
    Ok(())
}

fn read_lines(input: &PathBuf) -> Result<Vec<String>> {
    let reader: Box<dyn BufRead> = if input.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(input).with_context(|| input.display().to_string())?;
        Box::new(std::io::BufReader::new(file))
    };
    reader
        .lines()
        .enumerate()
        .map(|(i, line)| line.with_context(|| format!("{}:{}", input.display(), i + 1)))
        .collect()
}
