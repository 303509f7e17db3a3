//! One test binary for the crate, each file a module: the workspace then links one test
//! executable per crate, not one per file (each links the whole backend stack).

#[path = "../common/mod.rs"]
mod common;
mod devices;
mod probe;
mod run;
