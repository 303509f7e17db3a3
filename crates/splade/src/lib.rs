//! SPLADE on top of a masked-LM backbone: the MLM logits of every token go through
//! `log(1 + relu(·))`, padded tokens are masked, and the maximum over the sequence gives one
//! weight per vocabulary term. The paper's rescaling of the MLM head by k is applied once, at
//! construction. This crate turns texts into sparse vectors, and packages an exported model
//! for sentence-transformers (`package`); training and retrieval build on it.

pub mod encoder;
pub mod package;

pub use encoder::{
    GPU_TILE_BYTES, HOST_TILE, SparseVector, SpladeEncoder, encode_pooled, encode_pooled_tiles,
    head_tile, splade_pool,
};
pub use package::{ModelCard, write_sentence_transformers};
