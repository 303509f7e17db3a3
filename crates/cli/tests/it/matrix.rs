//! `lsr matrix` as a user meets it: everything a matrix names is checked before any cell starts,
//! by `status`, `run` and `slurm` alike; its relative paths are the working directory's and
//! `status` says where it looked; a Slurm script has what it needs when it is submitted.

use std::path::{Path, PathBuf};

use crate::common::{fixture, lsr, stdout_of};

/// A matrix over files that exist under the directory it is run from (relative paths): one
/// evaluated data set, a validation set, the triples, and the committed fixture of each
/// backbone in `backbones`.
pub fn matrix_text(backbones: &[&str]) -> String {
    let mut text = r#"name = "m"
results = "results"
checkpoints = "checkpoints"
k = [1, 4]

[eval]
data_root = "data"
datasets = ["beir/scifact"]
measures = ["ndcg@10", "recall@100"]
tradeoff = "beir/scifact"
batch_size = 8
top_k = 10

[validation]
dataset = "beir/val"
data_root = "data"
every = 10

[data]
format = "triples"
triples = "data/triples.tsv"
"#
    .to_string();
    for name in backbones {
        text.push_str(&format!(
            "\n[[backbone]]\nname = \"{name}\"\ncheckpoint = \"{}\"\n",
            fixture(name)
        ));
    }
    text
}

/// The files [`matrix_text`] names, under `root` (their content is not read before a cell
/// starts).
pub fn write_inputs(root: &Path) {
    for set in ["scifact", "val"] {
        let dir = root.join("data/beir").join(set);
        std::fs::create_dir_all(dir.join("qrels")).unwrap();
        for file in ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"] {
            std::fs::write(dir.join(file), "").unwrap();
        }
    }
    std::fs::write(root.join("data/triples.tsv"), "").unwrap();
}

/// A directory with the inputs and `m.toml` over them.
fn matrix_dir(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    let file = dir.path().join("m.toml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

#[test]
fn a_matrix_naming_anything_wrong_is_refused_by_status_run_and_slurm_before_any_cell() {
    let valid = matrix_text(&["bert"]);
    let (dir, file) = matrix_dir(&valid);
    let status = lsr()
        .args(["matrix", "status"])
        .arg(&file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");

    let paper = "top_k = 10\n[[paper]]\nbackbone = \"bert\"\nk = 2\ndataset = \"beir/scifact\"\n\
                 measure = \"ndcg@10\"\nvalue = 0.3\n";
    let checkpoint = format!("checkpoint = \"{}\"", fixture("bert"));
    for (from, to, expected) in [
        (
            "\"ndcg@10\", ",
            "\"ndcg@1O\", ",
            "unknown measure `ndcg@1O`",
        ),
        (
            "datasets = [\"beir/scifact\"]",
            "datasets = [\"beir/scifact\", \"robust04\"]",
            "unknown data set `robust04`",
        ),
        (
            "datasets = [\"beir/scifact\"]",
            "datasets = [\"beir/scifact\", \"beir/fiqa\"]",
            "beir/fiqa/corpus.jsonl: not found",
        ),
        (
            "tradeoff = \"beir/scifact\"",
            "tradeoff = \"beir/fiqa\"",
            "eval.tradeoff `beir/fiqa` is not evaluated",
        ),
        (
            "dataset = \"beir/val\"",
            "dataset = \"beir/vals\"",
            "beir/vals/corpus.jsonl: not found",
        ),
        (
            "data/triples.tsv",
            "data/triple.tsv",
            "[data]: no such file: data/triple.tsv",
        ),
        (
            checkpoint.as_str(),
            "checkpoint = \"./models/bert\"",
            "backbone `bert`: ./models/bert: no such directory",
        ),
        ("top_k = 10\n", paper, "not in bert's grid"),
    ] {
        assert!(valid.contains(from), "{from}");
        let (dir, file) = matrix_dir(&valid.replace(from, to));
        for command in [
            &["status"][..],
            &["run"][..],
            &["slurm", "--out", "job.sbatch"][..],
        ] {
            let out = lsr()
                .arg("matrix")
                .arg(command[0])
                .arg(&file)
                .args(&command[1..])
                .current_dir(dir.path())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains(expected),
                "{command:?} with {to}: {stderr}"
            );
            for made in ["results", "checkpoints", "job.sbatch"] {
                assert!(!dir.path().join(made).exists(), "{command:?} made {made}");
            }
        }
    }

    // Every problem at once, not one per attempt.
    let text = valid
        .replace("data/triples.tsv", "data/triple.tsv")
        .replace(&checkpoint, "checkpoint = \"./models/bert\"");
    let (dir, file) = matrix_dir(&text);
    let out = lsr()
        .args(["matrix", "status"])
        .arg(&file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("data/triple.tsv") && stderr.contains("./models/bert"),
        "{stderr}"
    );
}

#[test]
fn a_matrix_s_relative_paths_are_the_working_directory_s_and_status_says_which() {
    let (dir, file) = matrix_dir(&matrix_text(&["bert"]));
    let root = dir.path().canonicalize().unwrap();
    let text = stdout_of(
        lsr()
            .args(["matrix", "status"])
            .arg(&file)
            .current_dir(dir.path()),
    );
    let text = String::from_utf8(text).unwrap();
    let looked = format!("0/2 done in results ({})", root.join("results").display());
    assert!(text.contains(&looked), "{text}");

    // From elsewhere, the same file names other places, and the refusal says where.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().canonicalize().unwrap();
    let out = lsr()
        .args(["matrix", "status"])
        .arg(&file)
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&other.join("data").display().to_string())
            && stderr.contains(&format!(
                "relative to the working directory, here {}",
                other.display()
            )),
        "{stderr}"
    );
}

/// `lsr matrix slurm` then a stand-in `sbatch` that, as Slurm would, runs the task in the
/// script's working directory with its output in its log folder, failing if either is missing.
#[test]
fn a_slurm_script_has_its_log_folder_and_runs_wherever_it_is_submitted() {
    let (dir, file) = matrix_dir(&matrix_text(&["bert"]));
    let root = dir.path().canonicalize().unwrap();
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = |name: &str, body: &str| {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        let status = std::process::Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        path
    };
    let lsr_stand_in = script(
        "lsr",
        &format!("echo \"$PWD $*\" > {}/lsr-ran", bin.display()),
    );
    script(
        "sbatch",
        r#"script=$(realpath "$1")
chdir=$(sed -n 's/^#SBATCH --chdir=//p' "$script")
output=$(sed -n 's/^#SBATCH --output=//p' "$script")
cd "$chdir" || { echo "sbatch: no working directory $chdir" >&2; exit 1; }
[ -d "$(dirname "$output")" ] || { echo "sbatch: no log folder for $output" >&2; exit 1; }
log=${output//%A/$SLURM_ARRAY_JOB_ID}
exec bash "$script" >> "${log//%a/$SLURM_ARRAY_TASK_ID}" 2>&1"#,
    );
    lsr()
        .args(["matrix", "slurm"])
        .arg(&file)
        .args(["--out", "job.sbatch", "--lsr"])
        .arg(&lsr_stand_in)
        .current_dir(dir.path())
        .assert()
        .success();

    let elsewhere = tempfile::tempdir().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("sbatch {}", root.join("job.sbatch").display()))
        .env("PATH", path)
        .env("SLURM_ARRAY_JOB_ID", "7")
        .env("SLURM_ARRAY_TASK_ID", "1")
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let log = std::fs::read_to_string(root.join("results/slurm-7_1.out")).unwrap();
    assert!(log.contains("cell bert-k4 on"), "{log}");
    let ran = std::fs::read_to_string(bin.join("lsr-ran")).unwrap();
    assert_eq!(
        ran.trim(),
        format!(
            "{} matrix run {} --cell bert-k4",
            root.display(),
            file.display()
        )
    );
}
