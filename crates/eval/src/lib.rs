//! Evaluation: turning a SPLADE model, or any run of retrieved documents, into the numbers IR
//! papers report, the way the community's tools compute them. Corpus encoding to on-disk sparse
//! vectors, exact retrieval with an inverted index, trec_eval-exact measures (MRR@10, nDCG@k,
//! recall@k, P@k, MAP, and the rest of trec_eval's `official` and `all_trec` sets) with
//! per-query values, and the FLOPs of the SPLADE papers, over the data sets and TREC files of
//! `lsr-data`. Only [`pipeline`] touches a model; everything else works on runs made elsewhere
//! too.

mod encoding;
pub mod error;
pub mod export;
pub mod flops;
pub mod impact;
pub mod index;
pub mod metrics;
pub mod pipeline;
mod progress;
pub mod settings;
pub mod shards;
pub mod trec_eval;
mod trec_measures;
pub mod vectors;

pub use error::{EvalError, Result};
pub use flops::{Sparsity, sparsity};
pub use index::{IndexBuilder, IndexError, InvertedIndex};
pub use lsr_data::{Dataset, Qrels, Run};
pub use metrics::{Evaluation, Measure, evaluate};
