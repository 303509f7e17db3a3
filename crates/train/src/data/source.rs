//! The examples of a training run's data, whichever kind it is: a file of lines (one example
//! per line) or a teacher's scored candidates (one example per query). The one place that
//! matches the data's config.

use crate::config::DataConfig;
use crate::data::example::Example;
use crate::data::scored::ScoredSource;
use crate::data::triples::LineSource;
use crate::error::Result;

/// The examples of a training run's data.
pub enum TripleSource {
    /// One example per line of a triple file.
    Lines(LineSource),
    /// One example per query of a teacher's scores, its negatives drawn per example.
    Scored(ScoredSource),
}

impl TripleSource {
    pub fn open(config: &DataConfig) -> Result<Self> {
        Ok(match config {
            DataConfig::Triples { triples } => Self::Lines(LineSource::text(triples)?),
            DataConfig::IdTriples {
                triples,
                queries,
                collection,
            } => Self::Lines(LineSource::ids(triples, queries, collection)?),
            DataConfig::Jsonl { triples } => Self::Lines(LineSource::jsonl(triples)?),
            DataConfig::DistilTriples { triples } => Self::Lines(LineSource::distil(triples)?),
            DataConfig::PickleScores {
                scores,
                qrels,
                queries,
                collection,
            } => Self::Scored(ScoredSource::pickle(scores, qrels, queries, collection)?),
            DataConfig::ParquetMargins {
                scores,
                queries,
                collection,
            } => Self::Scored(ScoredSource::parquet_margins(scores, queries, collection)?),
        })
    }

    /// Number of examples (lines of the triple file; queries of scored candidates).
    pub fn len(&self) -> usize {
        match self {
            Self::Lines(lines) => lines.len(),
            Self::Scored(scored) => scored.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Example `index` with its first `negatives` hard negatives (for scored candidates,
    /// `negatives` drawn by `draw`, a seed of the example's place in the run). Malformed lines,
    /// unknown ids and too few negatives are errors naming the file and line.
    pub fn example(&self, index: usize, negatives: usize, draw: u64) -> Result<Example> {
        match self {
            Self::Lines(lines) => lines.example(index, negatives),
            Self::Scored(scored) => scored.example(index, negatives, draw),
        }
    }
}
