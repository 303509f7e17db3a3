//! One test binary for the crate, each file a module: the workspace then links one test
//! executable per crate, not one per file (each links the whole backend stack).

mod bad_input;
mod device;
mod dropout;
mod parity;
mod precision;
mod rescale;
