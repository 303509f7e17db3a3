//! Hugging Face masked-LM checkpoints as burn models. This crate turns a checkpoint directory
//! (or a hub id resolved through the HF cache) — `config.json`, safetensors or
//! `pytorch_model.bin` weights, `tokenizer.json` — into a [`MaskedLm`] whose logits match
//! transformers, for BERT, DistilBERT, ALBERT, RoBERTa, GTE ("new"), ModernBERT and Ettin. It
//! owns the MLM head as one concept across families (transform, decoder tied or not,
//! vocabulary bias), the paper's `rescale_mlm_head(k)`, the head statistics used to choose k,
//! and tokenisation. How a model computes on a device (device choice, precision, products,
//! cuBLASLt) is lsr-compute's, below it; it knows nothing of SPLADE.

pub mod checkpoint;
pub mod config;
pub mod error;
pub mod family;
pub mod head;
pub mod hf_names;
pub mod hf_writer;
pub mod layers;
pub mod miniature;
pub mod model;
pub mod reference;
pub mod stats;
pub mod tokenizer;
pub mod weights;

pub use checkpoint::{Checkpoint, HUB_RENAMES, HubSettings, Pinning, hub_id};
pub use error::{BackboneError, Result};
pub use family::ModelConfig;
pub use family::{Dims, Encoder, EncoderModel, FAMILIES, Family};
pub use head::MlmHead;
pub use hf_names::{TensorNames, parameter_values};
pub use hf_writer::{write_checkpoint, write_checkpoint_with};
pub use model::{Backbone, MaskedLm, RESCALE_RECORD, RescaleMode, RescaleRecord, Scale};
pub use stats::{ANCHOR, ANCHOR_ROW_NORM, HeadStats, PAPER_GRID, suggest_k};
pub use tokenizer::{TextTokenizer, TokenBatch};
pub use weights::{TensorOrigin, Weights};
