//! `lsr train` and `lsr export` as a user runs them: a real SIGKILL and `--resume`, SIGTERM
//! (a checkpoint at the next step, exit code 75) and `--resume`, a damaged checkpoint passed
//! over, two processes on one output, a full disk, the collapse exit code, an exported
//! checkpoint read back by `lsr encode`, and what a piped run prints and logs.

use std::path::Path;

use crate::common::{fixture, lsr, stdout_of, wait_until};
use lsr_files::damage::Damage;
use lsr_files::small_disk::SmallDisk;

fn write_cell(dir: &Path, steps: usize, checkpoint_every: usize) -> std::path::PathBuf {
    let cell = format!(
        r#"output = "{output}"
device = "flex"

[model]
checkpoint = "{model}"
k = 2.0

[data]
format = "triples"
triples = "{triples}"

[recipe]
steps = {steps}
batch_size = 4
warmup_steps = 4
lr = 1e-3
lambda_q = 1e-3
lambda_d = 1e-3
lambda_warmup_steps = 10
checkpoint_every = {checkpoint_every}
query_max_length = 16
document_max_length = 32
"#,
        output = dir.join("out").display(),
        model = fixture("bert"),
        triples = fixture("train/triples.tsv"),
    );
    let path = dir.join("cell.toml");
    std::fs::write(&path, cell).unwrap();
    path
}

fn logged_steps(output: &Path) -> Vec<usize> {
    std::fs::read_to_string(output.join("train.csv"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').next()?.parse().ok())
        .collect()
}

/// A cell in `dir`, trained to the end in one run.
fn train_whole(dir: &Path, steps: usize, checkpoint_every: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let cell = write_cell(dir, steps, checkpoint_every);
    lsr()
        .args(["train", "--config"])
        .arg(&cell)
        .assert()
        .success();
}

/// `lsr train --config cell` in the background, its stderr piped.
fn spawn_train(cell: &Path) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("lsr"))
        .args(["train", "--config"])
        .arg(cell)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `--resume` on `cell` (output `resumed/out`) ends with the weights of the uninterrupted run
/// in `whole/out`, every step logged once.
fn resume_to_the_same_weights(cell: &Path, whole: &Path, resumed: &Path, steps: usize) {
    lsr()
        .args(["train", "--resume", "--config"])
        .arg(cell)
        .assert()
        .success();
    let weights =
        |root: &Path| std::fs::read(root.join("out/checkpoints/model/model.safetensors")).unwrap();
    assert!(weights(whole) == weights(resumed), "resumed weights differ");
    let every_step: Vec<usize> = (1..=steps).collect();
    assert_eq!(logged_steps(&resumed.join("out")), every_step);
    // TensorBoard's curves too: every scalar at every step, once, however the run was cut.
    let run = lsr_files::tensorboard::read_run(&resumed.join("out")).unwrap();
    assert!(
        run.scalars.contains_key("train/loss"),
        "{:?}",
        run.scalars.keys()
    );
    for (tag, logged) in &run.scalars {
        let logged: Vec<usize> = logged.iter().map(|&(step, _)| step as usize).collect();
        assert_eq!(logged, every_step, "{tag}");
    }
    assert_eq!(run.texts["settings"].len(), 1);
}

#[test]
fn a_run_killed_with_sigkill_resumes_to_the_weights_of_an_uninterrupted_run() {
    const STEPS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    train_whole(&whole, STEPS, 50);

    let killed = dir.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let cell = write_cell(&killed, STEPS, 50);
    let mut child = spawn_train(&cell);
    wait_until("progress", || {
        logged_steps(&killed.join("out")).len() >= 120
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let status = std::fs::read_to_string(killed.join("out/status.json")).unwrap();
    assert!(
        status.contains("running"),
        "the run ended before the kill: {status}"
    );

    resume_to_the_same_weights(&cell, &whole, &killed, STEPS);
}

/// A disk that fills up during a run: the checkpoint that did not fit leaves nothing behind, the
/// error names the file and the cause, the last complete checkpoint is intact, and once there
/// is room again `--resume` reaches the weights of an uninterrupted run. An export onto the full
/// disk fails the same way and leaves no directory. (Needs root to mount a small tmpfs.)
#[test]
fn a_full_disk_keeps_the_last_checkpoint_and_resume_continues_from_it() {
    let Some(disk) = SmallDisk::mount(16 << 20) else {
        return;
    };
    const STEPS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    train_whole(dir.path(), STEPS, 20);

    let cell = write_cell(disk.path(), STEPS, 20);
    let checkpoints = disk.path().join("out/checkpoints");
    let child = spawn_train(&cell);
    wait_until("checkpoint", || checkpoints.join("step-00000020").is_dir());
    // Room for the log's rows, not for the next checkpoint.
    disk.fill(64 << 10);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let mut kept: Vec<String> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert!(
        kept.iter().all(|name| !name.ends_with(".partial")),
        "{kept:?}"
    );
    let status = lsr_files::StatusFile::read(&disk.path().join("out"))
        .unwrap()
        .unwrap();
    assert_eq!(
        kept.last().unwrap(),
        &format!("step-{:08}", status.step),
        "{status:?}"
    );

    let export = disk.path().join("exported");
    disk.free();
    disk.fill(0);
    let failed = lsr()
        .args(["export"])
        .arg(checkpoints.join(kept.last().unwrap()))
        .arg(&export)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(!export.exists() && !export.with_extension("partial").exists());

    disk.free();
    resume_to_the_same_weights(&cell, dir.path(), disk.path(), STEPS);
}

/// As Slurm stops a task at its time limit: SIGTERM, a checkpoint at the next step, code 75.
#[test]
fn a_run_stopped_with_sigterm_checkpoints_exits_75_and_resumes_to_the_same_weights() {
    const STEPS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    train_whole(&whole, STEPS, 50);

    let stopped = dir.path().join("stopped");
    std::fs::create_dir_all(&stopped).unwrap();
    let cell = write_cell(&stopped, STEPS, 50);
    let child = spawn_train(&cell);
    wait_until("progress", || {
        logged_steps(&stopped.join("out")).len() >= 60
    });
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    let status = lsr_files::StatusFile::read(&stopped.join("out"))
        .unwrap()
        .unwrap();
    assert_eq!(status.status, lsr_files::RunStatus::Interrupted);
    assert!(status.step >= 60 && status.step < STEPS, "{status:?}");
    let checkpoint = format!("out/checkpoints/step-{:08}", status.step);
    assert!(stopped.join(&checkpoint).is_dir(), "no {checkpoint}");
    assert_eq!(
        logged_steps(&stopped.join("out")),
        (1..=status.step).collect::<Vec<_>>()
    );

    resume_to_the_same_weights(&cell, &whole, &stopped, STEPS);
}

/// A run killed after its last checkpoint (step 20) but before it ended, whose newest checkpoint
/// was then damaged (its model record cut short): `--resume` says so, removes it, resumes from
/// step 15 and ends with the weights of an uninterrupted run; `lsr export` refuses it.
#[test]
fn a_damaged_checkpoint_is_passed_over_saying_so_and_the_run_ends_with_the_same_weights() {
    const STEPS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    train_whole(&whole, STEPS, 5);

    let killed = dir.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let cell = write_cell(&killed, STEPS, 5);
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .args([whole.join("out"), killed.join("out")])
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::remove_dir_all(killed.join("out/checkpoints/model")).unwrap();
    let status = std::fs::read_to_string(killed.join("out/status.json")).unwrap();
    std::fs::write(
        killed.join("out/status.json"),
        status.replace("finished", "running"),
    )
    .unwrap();
    let newest = killed.join("out/checkpoints/step-00000020");
    Damage::CutShort.apply(&newest.join("model.bpk")).unwrap();

    let export = lsr()
        .arg("export")
        .args([&newest, &dir.path().join("exported")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&export.stderr);
    assert_eq!(export.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("damaged since it was written"), "{stderr}");

    let resumed = lsr()
        .args(["train", "--resume", "--config"])
        .arg(&cell)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains("step-00000020: damaged since it was written (model.bpk: ")
            && stderr.contains("cut short); removed")
            && stderr.contains("resuming from step 15, the newest intact checkpoint, and steps 16–20 are trained again"),
        "{stderr}"
    );
    let weights = |root: &Path| std::fs::read(root.join("out/checkpoints/model/model.safetensors"));
    assert!(
        weights(&whole).unwrap() == weights(&killed).unwrap(),
        "weights differ"
    );
    assert_eq!(
        logged_steps(&killed.join("out")),
        (1..=STEPS).collect::<Vec<_>>()
    );
}

#[test]
fn a_collapse_exits_with_code_3_and_an_invalid_config_with_1() {
    let dir = tempfile::tempdir().unwrap();
    let cell = write_cell(dir.path(), 5, 5);
    let collapsed = lsr()
        .args(["train", "--config"])
        .arg(&cell)
        .args(["--set", "model.k=1e-39"])
        .output()
        .unwrap();
    assert_eq!(collapsed.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&collapsed.stderr).contains("collapsed at step 1"));

    for (set, field) in [
        ("recipe.batch_size=0", "recipe.batch_size"),
        ("model.k=0", "model.k"),
    ] {
        let out = lsr()
            .args(["train", "--config"])
            .arg(&cell)
            .args(["--set", set])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(field) && stderr.contains("cell.toml"),
            "{stderr}"
        );
    }
}

#[test]
fn an_exported_checkpoint_encodes_like_the_model_training_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let cell = write_cell(dir.path(), 10, 5);
    lsr()
        .args(["train", "--config"])
        .arg(&cell)
        .assert()
        .success();
    let out = dir.path().join("out");
    let exported = dir.path().join("exported");
    // `step-10` names `step-00000010`; a name that is no checkpoint lists those there are.
    lsr()
        .arg("export")
        .arg(out.join("checkpoints/step-10"))
        .arg(&exported)
        .assert()
        .success();
    for wrong in ["checkpoints/step-7", "checkpoints", "checkpoints/model"] {
        let output = lsr()
            .arg("export")
            .arg(out.join(wrong))
            .arg(dir.path().join("not-written"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success()
                && stderr.contains("not a training checkpoint")
                && stderr.contains("step-00000010")
                && !stderr.contains("os error"),
            "{wrong}: {stderr}"
        );
    }
    let encode = |checkpoint: &Path| {
        stdout_of(
            lsr()
                .args(["encode", "--json", "--device", "flex", "--checkpoint"])
                .arg(checkpoint)
                .args(["--text", "boil an egg", "--text", "the capital of italy"]),
        )
    };
    let trained = encode(&out.join("checkpoints/model"));
    assert_eq!(encode(&exported), trained);
    // Training changed the model: the base checkpoint rescaled by the same k encodes otherwise.
    let base = lsr()
        .args([
            "encode",
            "--json",
            "--device",
            "flex",
            "--k",
            "2",
            "--checkpoint",
            &fixture("bert"),
        ])
        .args(["--text", "boil an egg", "--text", "the capital of italy"])
        .output()
        .unwrap();
    assert_ne!(base.stdout, trained);
}

/// Training with its stderr piped (not a terminal) logs progress lines as it goes at the default
/// level, without terminal colours, and `train.csv` holds each number as the shortest text that reads back exactly
/// (λ = 1.2e-13, not 0.00000000000012000000000000002).
#[test]
fn piped_training_logs_progress_and_writes_numbers_shortest() {
    let dir = tempfile::tempdir().unwrap();
    let cell = write_cell(dir.path(), 10, 5);
    let out = lsr()
        .args(["train", "--config"])
        .arg(&cell)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "no terminal colours in a pipe: {stderr}"
    );
    let progress = stderr
        .lines()
        .filter(|l| l.contains("training") && l.contains("step="))
        .count();
    assert_eq!(
        progress, 10,
        "a line per step of 10 (1% is less than a step): {stderr}"
    );
    let csv = std::fs::read_to_string(dir.path().join("out/train.csv")).unwrap();
    for field in csv.lines().skip(1).flat_map(|row| row.split(',')) {
        let value: f64 = field.parse().unwrap();
        assert_eq!(lsr_files::number::shortest(value), field);
        assert!(field.len() <= 24, "{field}");
    }
}

#[test]
fn two_processes_on_one_output_train_it_once() {
    const STEPS: usize = 60;
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single");
    train_whole(&single, STEPS, 20);

    // Both with --resume, as a requeued Slurm task and its original would be.
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let cell = write_cell(&shared, STEPS, 20);
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("lsr"))
            .args(["train", "--resume", "--config"])
            .arg(&cell)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn(), spawn());
    let outputs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    for output in &outputs {
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The other one either trains or finds the run it has just finished.
        assert!(
            output.status.success() || stderr.contains("another process"),
            "{stderr}"
        );
    }
    assert!(outputs.iter().any(|o| o.status.success()));
    assert_eq!(
        logged_steps(&shared.join("out")),
        (1..=STEPS).collect::<Vec<_>>(),
        "every step logged exactly once"
    );
    let model =
        |dir: &Path| std::fs::read(dir.join("out/checkpoints/model/model.safetensors")).unwrap();
    assert!(
        model(&shared) == model(&single),
        "the result differs from a single run's"
    );
}
