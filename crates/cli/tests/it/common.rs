//! What the CLI tests share: the binary and the committed fixtures.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use assert_cmd::Command;

/// `data/fixtures/<path>` as a string argument.
pub fn fixture(path: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/fixtures");
    dir.join(path).to_str().unwrap().to_string()
}

/// Runs `command`, which must succeed (its stderr otherwise), and returns its stdout.
/// What `command` did, which must have succeeded (else its stderr is the failure).
pub fn succeeded(command: &mut Command) -> Output {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout_of(command: &mut Command) -> Vec<u8> {
    succeeded(command).stdout
}

pub fn lsr() -> Command {
    let mut command = Command::cargo_bin("lsr").unwrap();
    // The binary must pin burn's implicit default device itself (the test recipe sets it for
    // the in-process tests).
    command.env_remove("BURN_DEVICE");
    command
}

/// Writes the BEIR set `beir/<name>` under `root`.
pub fn beir_set(root: &Path, name: &str, corpus: &str, queries: &str, qrels: &str) {
    let dir = root.join("beir").join(name);
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
    std::fs::write(dir.join("queries.jsonl"), queries).unwrap();
    let header = "query-id\tcorpus-id\tscore\n";
    std::fs::write(dir.join("qrels/test.tsv"), format!("{header}{qrels}")).unwrap();
}

/// Polls until `done`, failing after two minutes.
pub fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(120), "no {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
