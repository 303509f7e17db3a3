//! The data lsr trains and evaluates on, and nothing that computes with a model: data sets by
//! name (MS MARCO, TREC DL, BEIR, NanoBEIR) read from their standard files, TREC run and qrels
//! files, downloads from the canonical locations with verification, and the offline miniature's
//! synthetic retrieval task, a teacher's scores for distillation (`teacher.rs`). Evaluation (`lsr-eval`) and training data readers build on it.

pub mod bench_collection;
pub mod datasets;
pub mod download;
pub mod error;
pub mod fetch;
pub mod installed;
pub mod miniature;
pub mod pickle;
pub mod registry;
pub mod teacher;
pub mod trec;

pub use datasets::Dataset;
pub use error::{DataError, Result};
pub use trec::{Qrels, Run};
