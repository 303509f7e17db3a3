//! Evaluation: turning a SPLADE model, or any run of retrieved documents, into the numbers IR
//! papers report, the way the community's tools compute them. Data sets by name from their
//! standard files, corpus encoding to on-disk sparse vectors, exact retrieval with an inverted
//! index, TREC run and qrels files, trec_eval-exact measures (MRR@10, nDCG@k, recall@k, P@k,
//! MAP) with per-query values, and the FLOPs of the SPLADE papers. Only [`pipeline`] touches a
//! model; everything else works on runs made elsewhere too.

pub mod datasets;
pub mod error;
pub mod fetch;
pub mod flops;
pub mod index;
pub mod metrics;
pub mod miniature;
pub mod pipeline;
pub mod synthetic;
pub mod trec;
pub mod vectors;

pub use error::{EvalError, Result};
pub use flops::{Sparsity, sparsity};
pub use index::{IndexBuilder, IndexError, InvertedIndex};
pub use metrics::{Evaluation, Measure, evaluate};
pub use trec::{Qrels, Run};
