//! The walk-through of one miniature cell by hand (docs/miniature.md), run as it is written:
//! the block after its `walk-through` marker, by bash, from a directory laid out as the
//! repository (its `experiments/`), with the `lsr` under test first on the PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first `sh` block after the walk-through marker of docs/miniature.md.
fn walk_through() -> String {
    let readme = std::fs::read_to_string(repository().join("docs/miniature.md")).unwrap();
    let (_, after) = readme
        .split_once("<!-- walk-through: run by crates/cli/tests/it/readme.rs -->")
        .expect("docs/miniature.md has the walk-through marker");
    let (_, block) = after
        .split_once("```sh\n")
        .expect("a sh block after the marker");
    let (block, _) = block.split_once("\n```").expect("the block ends");
    block.to_string()
}

#[test]
fn the_readme_walk_through_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        repository().join("experiments"),
        dir.path().join("experiments"),
    )
    .unwrap();
    let lsr = assert_cmd::cargo::cargo_bin("lsr");
    let bin = lsr.parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &walk_through()])
        .current_dir(dir.path())
        .env("PATH", path)
        // As `common::lsr`: the binary pins burn's implicit default device itself.
        .env_remove("BURN_DEVICE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made = |path: &str| Path::new(dir.path()).join(path).is_file();
    for file in [
        "results/walk/bert-k4-hf/model.safetensors",
        "results/walk/eval/beir_synth-a/metrics.json",
        "results/walk/eval/beir_synth-b/run.trec",
    ] {
        assert!(made(file), "{file}");
    }
    // The cell learnt the task (nDCG@10 is about 0.9; untrained, about 0.03).
    let metrics = std::fs::read(
        dir.path()
            .join("results/walk/eval/beir_synth-a/metrics.json"),
    );
    let metrics: serde_json::Value = serde_json::from_slice(&metrics.unwrap()).unwrap();
    let ndcg = metrics["metrics"]["ndcg@10"].as_f64().unwrap();
    assert!(ndcg > 0.5, "nDCG@10 {ndcg}");
    // The last command printed trec_eval's default set over the 150 queries of synth-a.
    assert!(
        stdout.contains("num_q                 \tall\t150\n"),
        "{stdout}"
    );
    assert!(stdout.contains("P_1000                \tall\t"), "{stdout}");
}
