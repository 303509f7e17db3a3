//! What the CLI tests share: the binary and the committed fixtures.

use std::path::PathBuf;

use assert_cmd::Command;

/// `data/fixtures/<path>` as a string argument.
pub fn fixture(path: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/fixtures");
    dir.join(path).to_str().unwrap().to_string()
}

pub fn lsr() -> Command {
    Command::cargo_bin("lsr").unwrap()
}
