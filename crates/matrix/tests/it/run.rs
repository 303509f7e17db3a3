//! A whole matrix on the miniature backbones and a small synthetic task: cells run in order,
//! a failed and two collapsed cells are recorded (one evaluated at its collapse, one with
//! non-finite weights that cannot be) and the rest goes on, finished cells are never rerun
//! unless forced, the Slurm array holds what is missing, and the report reads it all; a variant
//! (`--results`, `--set`) runs apart from the original and is verified against it.

use crate::common;

use std::path::Path;

use lsr_files::MatrixSummary;
use lsr_matrix::slurm::{SlurmOptions, job_array};
use lsr_matrix::verify::verify;
use lsr_matrix::{CellState, Matrix, RunOptions, Variant, run_cells};

fn matrix_file(root: &Path) -> std::path::PathBuf {
    let head = common::head(root, "tiny", "[1, 4]", r#"["mrr@10", "ndcg@10"]"#);
    let text = format!(
        r#"note = "What this matrix can show."
{head}
[validation]
dataset = "beir/synth-val"
data_root = "{root}/synth"
every = 2
query_max_length = 16
document_max_length = 32
batch_size = 16

{recipe}
{bert}
{modernbert}k = [16]

[[backbone]]
name = "broken"
checkpoint = "{root}/models/absent"
k = [1]

[[backbone]]
name = "blowup"
checkpoint = "{root}/models/bert"
k = [1e-39]

# A FLOPS weight that dwarfs the ranking loss at once: the documents die, the weights stay finite.
[[backbone]]
name = "dying"
checkpoint = "{root}/models/bert"
k = [1]
[backbone.recipe]
steps = 20
lr = 0.1
warmup_steps = 0
lambda_q = 1e4
lambda_d = 1e4
lambda_warmup_steps = 0
collapse_patience = 1
"#,
        root = root.display(),
        recipe = common::recipe(4, 1, 1, 2),
        bert = common::backbone(root, "bert"),
        modernbert = common::backbone(root, "modernbert"),
    );
    let path = root.join("tiny.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn runs_records_skips_and_reports() {
    let root = tempfile::tempdir().unwrap();
    common::task(root.path(), &[("bert", 0.9), ("modernbert", 2.553)]);
    let matrix = Matrix::load(&matrix_file(root.path())).unwrap();
    let ids: Vec<&str> = matrix.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "bert-k1",
            "bert-k4",
            "modernbert-k16",
            "broken-k1",
            "blowup-k1e-39",
            "dying-k1"
        ]
    );
    assert!(
        matrix
            .cells
            .iter()
            .all(|c| c.state().unwrap() == CellState::Missing)
    );

    let states = run_cells(&matrix, &RunOptions::default()).unwrap();
    let states: Vec<CellState> = states.into_iter().map(|(_, s)| s).collect();
    use CellState::*;
    assert_eq!(states, [Done, Done, Done, Failed, Collapsed, Collapsed]);
    assert!(!matrix.cells[4].dir().join("metrics.json").exists());
    assert!(matrix.cells[5].dir().join("metrics.json").exists());
    let failure = std::fs::read_to_string(matrix.cells[3].dir().join("failure.json")).unwrap();
    assert!(failure.contains("absent"), "{failure}");
    let done = matrix.cell("bert-k1").unwrap();
    for file in [
        "cell.json",
        "config.toml",
        "train.csv",
        "status.json",
        "metrics.json",
        "eval/beir_synth-a/run.trec",
    ] {
        assert!(done.dir().join(file).exists(), "{file}");
    }
    let metrics_before = std::fs::read(done.dir().join("metrics.json")).unwrap();
    // The exported model's card records the cell and what it measured.
    let card = std::fs::read_to_string(done.checkpoint_dir().join("model/README.md")).unwrap();
    assert!(
        card.contains("| matrix cell | bert-k1 |") && card.contains("| beir/synth-a | ndcg@10 |"),
        "{card}"
    );
    // Validated at steps 2 and 4, the better pass recorded.
    let log = std::fs::read_to_string(done.dir().join("train.csv")).unwrap();
    let validated = log.lines().skip(1).filter(|l| !l.contains("NaN")).count();
    assert_eq!(validated, 2, "{log}");
    let status = lsr_files::StatusFile::read(done.dir()).unwrap().unwrap();
    assert!(
        status
            .best_validation
            .is_some_and(|b| [2, 4].contains(&b.step))
    );

    // Again: only the failed cell is tried; finished and collapsed cells are left alone.
    let again = run_cells(&matrix, &RunOptions::default()).unwrap();
    assert_eq!(again, vec![("broken-k1".to_string(), Failed)]);
    assert_eq!(
        std::fs::read(done.dir().join("metrics.json")).unwrap(),
        metrics_before
    );

    let options = SlurmOptions {
        partition: Some("gpu".into()),
        gpus: 1,
        cpus: 8,
        memory: "64G".into(),
        time: "48:00:00".into(),
        lsr: "target/release/lsr".into(),
        parallel: Some(4),
        gpus_per_node: None,
    };
    let (script, cells) = job_array(&matrix, &options).unwrap();
    assert_eq!(cells, ["broken-k1"]);
    assert!(
        script.contains("#SBATCH --array=0-0%4") && script.contains("CELLS=(broken-k1)"),
        "{script}"
    );
    assert!(
        script.contains("matrix run") && script.contains("--cell \"$CELL\""),
        "{script}"
    );
    // A task per node of four GPUs instead: each runs what is left over all four.
    let per_node = SlurmOptions {
        gpus_per_node: Some(4),
        ..options.clone()
    };
    let (script, cells) = job_array(&matrix, &per_node).unwrap();
    assert_eq!(cells, ["broken-k1"]);
    for line in [
        "#SBATCH --array=0-0%4",
        "#SBATCH --gres=gpu:4",
        " --devices cuda:0,cuda:1,cuda:2,cuda:3 &",
    ] {
        assert!(script.contains(line), "{line}: {script}");
    }
    assert!(!script.contains("--cell"), "{script}");

    // --force reruns a finished cell.
    let forced = run_cells(
        &matrix,
        &RunOptions {
            cell: Some("bert-k1".into()),
            force: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(forced, vec![("bert-k1".to_string(), Done)]);

    // A cell another process holds is skipped, not run twice, even when forced.
    let locks = root.path().join("results/.locks");
    let held = lsr_files::OutputLock::acquire(&locks, "bert-k1.lock").unwrap();
    let options = RunOptions {
        cell: Some("bert-k1".into()),
        force: true,
        ..RunOptions::default()
    };
    assert!(run_cells(&matrix, &options).unwrap().is_empty());
    drop(held);

    let out = root.path().join("report");
    let written = lsr_report::write_report(
        &root.path().join("results"),
        &out,
        &[
            lsr_report::Part::Table,
            lsr_report::Part::Losses,
            lsr_report::Part::Tradeoff,
        ],
    )
    .unwrap();
    assert!(written.iter().any(|p| p.ends_with("validation.png")));
    for path in &written {
        assert!(
            std::fs::metadata(path).unwrap().len() > 0,
            "{}",
            path.display()
        );
    }
    let table = std::fs::read_to_string(out.join("table1.md")).unwrap();
    assert!(table.starts_with("What this matrix can show.\n\n| backbone |"));
    assert!(
        table.contains("| broken | 1 |") && table.contains("failed"),
        "{table}"
    );
    assert!(
        table.contains("collapsed") && table.contains("| modernbert | 16 |"),
        "{table}"
    );
    let dying = table.lines().find(|l| l.starts_with("| dying |")).unwrap();
    assert!(
        dying.contains('†') && dying.contains("collapsed"),
        "{dying}"
    );
}

/// The array task as Slurm runs it, with stand-ins for `lsr` and `scontrol`: the signal Slurm
/// sends the batch shell before the time limit reaches lsr, and a stop with code 75 requeues.
#[test]
fn a_slurm_task_passes_the_signal_on_and_requeues_a_stopped_cell() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = |name: &str, body: &str| {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .unwrap();
        path
    };
    let out = bin.display();
    let lsr = script(
        "lsr",
        &format!(
            "trap 'echo \"$@\" > {out}/stopped; exit 75' USR1\ntouch {out}/started\n\
             while :; do sleep 0.05; done"
        ),
    );
    script("scontrol", &format!("echo \"$@\" > {out}/scontrol"));
    let matrix = Matrix::load(&matrix_file(root.path())).unwrap();
    let options = SlurmOptions {
        partition: None,
        gpus: 1,
        cpus: 8,
        memory: "64G".into(),
        time: "48:00:00".into(),
        lsr: lsr.display().to_string(),
        parallel: None,
        gpus_per_node: None,
    };
    let (text, cells) = job_array(&matrix, &options).unwrap();
    assert!(
        text.contains("#SBATCH --signal=B:USR1@600") && text.contains("#SBATCH --requeue"),
        "{text}"
    );
    let job = root.path().join("job.sh");
    std::fs::write(&job, text).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut task = std::process::Command::new("bash")
        .arg(&job)
        .env("PATH", path)
        .env("SLURM_ARRAY_JOB_ID", "42")
        .env("SLURM_ARRAY_TASK_ID", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !bin.join("started").exists() {
        assert!(
            started.elapsed().as_secs() < 30,
            "the task never started lsr"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::process::Command::new("kill")
        .args(["-USR1", &task.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(task.wait().unwrap().code(), Some(75));
    let stopped = std::fs::read_to_string(bin.join("stopped")).unwrap();
    assert!(
        stopped.contains(&format!("--cell {}", cells[1])),
        "{stopped}"
    );
    let requeued = std::fs::read_to_string(bin.join("scontrol")).unwrap();
    assert_eq!(requeued.trim(), "requeue 42_1");
}

/// A variant of the matrix (`--results`, `--set`) runs apart from the original and records what
/// it changed, in matrix.json and on the Slurm script's command line; `verify` finds a rerun
/// equal to the original (while other tests train on other threads), names what differs in a
/// run under another seed, and names the line of a log that holds a step twice, and a
/// TensorBoard log that does.
#[test]
fn variants_run_apart_and_verify_against_the_original() {
    let root = tempfile::tempdir().unwrap();
    common::task(root.path(), &[("bert", 0.9)]);
    let file = matrix_file(root.path());
    let only = RunOptions {
        cell: Some("bert-k1".into()),
        ..RunOptions::default()
    };
    let original = Matrix::load(&file).unwrap();
    run_cells(&original, &only).unwrap();
    // The test matrix keeps its checkpoints beside its results: each variant names its own.
    let variant = |name: &str, set: &[&str]| {
        let checkpoints = root.path().join(name).join("checkpoints");
        let mut set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        set.push(format!("checkpoints={}", checkpoints.display()));
        let variant = Variant {
            set,
            results: Some(root.path().join(name)),
        };
        let matrix = Matrix::load_variant(&file, &variant).unwrap();
        let states = run_cells(&matrix, &only).unwrap();
        assert_eq!(states, [("bert-k1".to_string(), CellState::Done)]);
        matrix
    };

    let rerun = variant("rerun", &[]);
    let checkpoints = rerun.cell("bert-k1").unwrap().checkpoint_dir();
    assert!(
        checkpoints.starts_with(root.path().join("rerun")),
        "{checkpoints:?}"
    );
    let same = verify(&rerun, Some(&original.results)).unwrap();
    assert_eq!((same.started, same.compared), (1, 1));
    assert!(same.problems.is_empty(), "{:?}", same.problems);

    let seeded = variant("seeded", &["recipe.seed=7"]);
    let summary = MatrixSummary::read(&seeded.results).unwrap().unwrap();
    let results = root.path().join("seeded").display().to_string();
    let checkpoints = format!("checkpoints={results}/checkpoints");
    let recorded = [
        "--set",
        "recipe.seed=7",
        "--set",
        &checkpoints,
        "--results",
        &results,
    ];
    assert_eq!(summary.variant, recorded);
    let differs = verify(&seeded, Some(&original.results)).unwrap().problems;
    let differs = differs.join("\n");
    for what in [
        "model.safetensors differs",
        "run.trec differs",
        "measures differ",
    ] {
        assert!(differs.contains(what), "{what}: {differs}");
    }
    let options = SlurmOptions {
        partition: None,
        gpus: 1,
        cpus: 8,
        memory: "64G".into(),
        time: "1:00:00".into(),
        lsr: "lsr".into(),
        parallel: None,
        gpus_per_node: None,
    };
    let (script, _) = job_array(&seeded, &options).unwrap();
    let run =
        format!("--set recipe.seed=7 --set {checkpoints} --results {results} --cell \"$CELL\"");
    assert!(script.contains(&run), "{script}");

    let cell = rerun.cell("bert-k1").unwrap().dir();
    let log = cell.join("train.csv");
    let logged = std::fs::read_to_string(&log).unwrap();
    let last = logged.lines().last().unwrap().to_string();
    std::fs::write(&log, format!("{logged}{last}\n")).unwrap();
    let problems = verify(&rerun, None).unwrap().problems;
    assert!(
        problems[0].contains("line 6 logs step 4 after step 4"),
        "{problems:?}"
    );
    // A step twice in the TensorBoard log (a second process that logged it again).
    std::fs::write(&log, logged).unwrap();
    let mut events = lsr_files::tensorboard::EventWriter::open(cell, 4).unwrap();
    events.scalars(4, &[("train/loss", 1.0)]).unwrap();
    let problems = verify(&rerun, None).unwrap().problems;
    assert!(
        problems.len() == 1
            && problems[0].contains("TensorBoard log's train/loss holds 5 steps, train.csv 4"),
        "{problems:?}"
    );
}
