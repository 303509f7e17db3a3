//! Texts to sparse vectors in batches of similar length, and the terms as retrieval sees them:
//! what the corpus pass, its shards and the query encoding share.

use lsr_backbone::TextTokenizer;
use lsr_splade::SpladeEncoder;

use crate::error::Result;
use crate::index::Sparse;

/// Documents read ahead and sorted by length before batching, so that a batch pads little.
pub(crate) const SORT_WINDOW: usize = 4096;

/// The terms as retrieval sees them: the weights, or with `quantize`, the integer impacts
/// round(weight × quantize) that are not 0.
pub(crate) fn impacts(
    terms: &[(u32, f32)],
    quantize: Option<f32>,
) -> std::borrow::Cow<'_, [(u32, f32)]> {
    match quantize {
        None => std::borrow::Cow::Borrowed(terms),
        Some(factor) => terms
            .iter()
            .map(|&(t, w)| (t, crate::impact::quantize(w, factor) as f32))
            .filter(|&(_, impact)| impact > 0.0)
            .collect(),
    }
}

/// Encodes `records` (id, text) sorted by length, so that a batch pads little, and hands
/// each vector to `each` with its id.
pub(crate) fn encode_by_length(
    encoder: &SpladeEncoder,
    tokenizer: &TextTokenizer,
    records: &mut [(String, String)],
    batch_size: usize,
    mut each: impl FnMut(&str, &Sparse) -> Result<()>,
) -> Result<()> {
    records.sort_by_key(|(_, text)| text.len());
    for batch in records.chunks(batch_size.max(1)) {
        let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
        let vectors = encoder.encode_with(tokenizer, &texts, texts.len())?;
        for ((id, _), vector) in batch.iter().zip(vectors) {
            each(id, &vector.terms)?;
        }
    }
    Ok(())
}
