//! Evaluation: turning a run of retrieved documents into the numbers IR papers report, the way
//! the community's tools compute them. TREC run and qrels files, trec_eval-exact measures
//! (MRR@10, nDCG@k, recall@k, P@k, MAP) with per-query values, exact retrieval over sparse
//! vectors with an inverted index, and the FLOPs of the SPLADE papers. It works on any run,
//! including runs made elsewhere, and knows nothing of models.

pub mod datasets;
pub mod error;
pub mod flops;
pub mod index;
pub mod metrics;
pub mod synthetic;
pub mod trec;
pub mod vectors;

pub use error::{EvalError, Result};
pub use flops::{Sparsity, sparsity};
pub use index::{IndexBuilder, IndexError, InvertedIndex};
pub use metrics::{Evaluation, Measure, evaluate};
pub use trec::{Qrels, Run};
