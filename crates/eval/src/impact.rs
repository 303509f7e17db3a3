//! Integer impacts: SPLADE weights rounded as impact-scored engines (Anserini) and the published
//! SPLADE corpora store them, for exports and for retrieval with `quantize`.

/// Anserini's factor for SPLADE impacts: the published SPLADE corpora are `round(w × 100)`.
pub const DEFAULT_QUANTIZE: f32 = 100.0;

/// The integer impact of a weight, as the published SPLADE corpora round it.
pub fn quantize(weight: f32, factor: f32) -> u32 {
    (weight * factor).round().max(0.0) as u32
}
