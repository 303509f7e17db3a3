//! Training triplets from MS MARCO files, read in place: every file is memory-mapped and
//! indexed by line offsets, so the 8.8M-passage collection or the 40M-line triple files never
//! become heap strings. A seeded pseudo-random permutation orders the examples of each epoch
//! without materialising it; batches are tokenised on a separate thread. A teacher's scored
//! candidates (`scored.rs`) give one example per query, its negatives drawn per example; a run's
//! data is one or the other (`source.rs`).

mod batches;
mod example;
mod lines;
mod order;
mod scored;
mod source;
mod store;
mod triples;

pub use batches::{BatchPlan, Batches, TrainBatch};
pub use example::Example;
pub use lines::LineFile;
pub use order::Permutation;
pub(crate) use order::splitmix64;
pub use scored::ScoredSource;
pub use source::TripleSource;
pub use store::TextStore;
pub use triples::LineSource;
