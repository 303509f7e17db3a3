//! One test binary for the crate, each file a module: the workspace then links one test
//! executable per crate, not one per file (each links the whole backend stack).

mod cli;
mod common;
mod compare;
mod devices;
mod gpu_check;
mod justfile;
mod matrix;
mod outputs;
mod paths;
mod readme;
mod sentence_transformers;
mod train;
mod trec_eval;
