//! How a data set is evaluated (`EvalSettings`): batch, lengths, depth, measures, means, impacts
//! and corpus shards, as `lsr eval` and a matrix's `[eval]` give them and `metrics.json`
//! records them.

use serde::Serialize;

use crate::metrics::Measure;

/// Tokens per query and per document at evaluation unless set otherwise (`lsr eval`'s flags, a
/// matrix's `[eval]`): naver/splade's `max_length` (`conf/train/config/splade.yaml`), which its
/// retrieval and BEIR evaluation give queries and documents alike, whatever the training's
/// query length.
pub const DEFAULT_MAX_LENGTH: usize = 256;

#[derive(Clone, Debug, Serialize)]
pub struct EvalSettings {
    pub batch_size: usize,
    /// Tokens kept per query and per document; capped at the model's positions, and recorded
    /// as used.
    pub query_max_length: usize,
    pub document_max_length: usize,
    pub top_k: usize,
    #[serde(serialize_with = "measure_names")]
    pub measures: Vec<Measure>,
    /// Means over every judged query, those without results (an empty query vector retrieves
    /// nothing) counting 0: trec_eval `-c`, and MS MARCO's official evaluation.
    pub complete: bool,
    /// Retrieve with integer impacts, documents and queries as round(weight × this), as
    /// Anserini scores an export of them (`lsr eval`'s export); the vector files keep the weights.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantize: Option<f32>,
    /// Documents per corpus shard (`crate::shards`): a stop request or a kill loses at most
    /// the shard in progress. None: one shard, and no stopping (a validation pass).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_documents: Option<usize>,
}

impl EvalSettings {
    /// These settings with both lengths at most `positions`, the model's longest input.
    pub(crate) fn within(&self, positions: usize, dataset: &str) -> Self {
        let mut capped = self.clone();
        capped.query_max_length = self.query_max_length.min(positions);
        capped.document_max_length = self.document_max_length.min(positions);
        // A note, not a warning: only texts longer than the model's positions are cut shorter
        // than asked, and the lengths used are recorded in metrics.json.
        if capped.query_max_length != self.query_max_length
            || capped.document_max_length != self.document_max_length
        {
            tracing::info!(
                "{dataset}: the model takes at most {positions} tokens: queries are cut at {}, \
                 documents at {}",
                capped.query_max_length,
                capped.document_max_length
            );
        }
        capped
    }
}

fn measure_names<S: serde::Serializer>(measures: &[Measure], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(measures.iter().map(Measure::name))
}
