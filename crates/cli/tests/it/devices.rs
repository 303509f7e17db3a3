//! `lsr matrix run --devices`: a worker process per device on a small matrix of the miniature
//! backbones. Two flex workers give the table one process gives, digit for digit; SIGTERM to
//! the parent stops every worker at a checkpoint (exit code 75), `lsr matrix status` having
//! shown which device ran which cell, and a second run finishes to that same table; a device
//! that cannot start is retired and the other runs every cell.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{lsr, succeeded, wait_until};

/// The synthetic task, two miniature backbones, and the matrix over them as `<name>.toml`
/// with its results in `<name>/`.
struct Inputs {
    root: PathBuf,
}

impl Inputs {
    fn matrix(&self, name: &str) -> PathBuf {
        self.matrix_over(name, "[1, 16]")
    }

    /// The matrix over the factors `k` (a TOML array).
    fn matrix_over(&self, name: &str, k: &str) -> PathBuf {
        let path = self.root.join(format!("{name}.toml"));
        let text = format!(
            r#"name = "m"
results = "{name}"
checkpoints = "{name}/checkpoints"
device = "flex"
k = {k}

[eval]
data_root = "synth"
datasets = ["beir/synth-a"]
measures = ["ndcg@10", "recall@100"]
batch_size = 32
query_max_length = 16
document_max_length = 32
top_k = 100
tradeoff = "beir/synth-a"

[data]
format = "triples"
triples = "synth/train/triples.tsv"

[recipe]
steps = 24
batch_size = 8
warmup_steps = 2
lambda_warmup_steps = 4
checkpoint_every = 4
query_max_length = 16
document_max_length = 32
log_every = 1

[[backbone]]
name = "bert"
checkpoint = "models/bert"

[[backbone]]
name = "modernbert"
checkpoint = "models/modernbert"
"#
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `lsr args` in the inputs' folder, to spawn.
    fn spawn(&self, args: &[&str]) -> Command {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("lsr"));
        command
            .args(args)
            .current_dir(&self.root)
            .env_remove("BURN_DEVICE");
        command
    }

    /// `lsr args` in the inputs' folder, which must succeed: its stdout.
    fn stdout(&self, args: &[&str]) -> String {
        let out = succeeded(lsr().args(args).current_dir(&self.root));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `lsr report <name>`'s Table 1.
    fn table(&self, name: &str) -> String {
        succeeded(
            lsr()
                .args(["report", name, "--only", "table"])
                .current_dir(&self.root),
        );
        std::fs::read_to_string(self.root.join(name).join("report/table1.md")).unwrap()
    }
}

/// The inputs and the table of one process running the matrix, made once.
fn reference() -> &'static (Inputs, String) {
    static REFERENCE: OnceLock<(Inputs, String)> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("devices-run");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let inputs = Inputs { root };
        std::fs::write(
            inputs.root.join("norms.toml"),
            "seed = 1\n[norms]\nbert = 0.9\nmodernbert = 2.5\n",
        )
        .unwrap();
        let steps: [&[&str]; 2] = [
            &["data", "mini-task", "--out", "synth"],
            &[
                "data",
                "mini-models",
                "--spec",
                "norms.toml",
                "--vocab",
                "synth/vocab.txt",
                "--out",
                "models",
            ],
        ];
        for args in steps {
            succeeded(lsr().args(args).current_dir(&inputs.root));
        }
        let one = inputs.matrix("one");
        succeeded(
            lsr()
                .args(["matrix", "run"])
                .arg(&one)
                .current_dir(&inputs.root),
        );
        let table = inputs.table("one");
        (inputs, table)
    })
}

#[test]
fn two_flex_workers_give_the_table_one_process_gives() {
    let (inputs, one) = reference();
    let two = inputs.matrix("two");
    let out = inputs
        .spawn(&[
            "matrix",
            "run",
            two.to_str().unwrap(),
            "--devices",
            "flex,flex",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(&inputs.table("two"), one, "{stderr}");
    for cell in ["bert-k1", "bert-k16", "modernbert-k1", "modernbert-k16"] {
        let log =
            std::fs::read_to_string(inputs.root.join("two").join(format!("{cell}.log"))).unwrap();
        assert!(log.starts_with(&format!("== {cell} on flex\n")), "{log}");
        assert!(
            stderr.contains(&format!("{cell}\tflex\tdone\t")),
            "{stderr}"
        );
    }
}

/// A device that cannot start (no machine has a 100th GPU) is retired at its first cell, once,
/// which goes back to the queue: the other device runs every cell, and `lsr matrix status` says
/// which device was retired and why.
#[test]
fn a_device_that_cannot_start_is_retired_once_and_the_other_runs_every_cell() {
    let (inputs, _) = reference();
    let file = inputs.matrix_over("retiring", "[1]");
    let matrix = file.to_str().unwrap();
    let out = (inputs.spawn(&["matrix", "run", matrix, "--devices", "cuda:99,flex"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let retired = (stderr.lines())
        .filter(|l| l.starts_with("== device cuda:99 retired: the device could not start"))
        .count();
    assert_eq!(retired, 1, "{stderr}");
    for cell in ["bert-k1", "modernbert-k1"] {
        assert!(
            stderr.contains(&format!("{cell}\tflex\tdone\t")),
            "{stderr}"
        );
        assert!(!stderr.contains(&format!("{cell}\tcuda:99")), "{stderr}");
    }
    let status = inputs.stdout(&["matrix", "status", matrix]);
    assert!(
        status.contains("device cuda:99 retired by the last run: the device could not start"),
        "{status}"
    );
}

#[test]
fn sigterm_to_the_parent_stops_every_worker_resumably_and_a_rerun_ends_the_same() {
    let (inputs, one) = reference();
    let file = inputs.matrix("stopped");
    let matrix = file.to_str().unwrap();
    let parent = inputs
        .spawn(&["matrix", "run", matrix, "--devices", "flex,flex"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Both workers past a few steps of their first cells.
    let logged = |cell: &str| {
        std::fs::read_to_string(inputs.root.join("stopped").join(cell).join("train.csv"))
            .map_or(0, |log| log.lines().count())
    };
    wait_until("two cells in training", || {
        logged("bert-k1") > 3 && logged("bert-k16") > 3
    });
    let status = inputs.stdout(&["matrix", "status", matrix]);
    for cell in ["bert-k1", "bert-k16"] {
        assert!(
            status.contains(&format!("{cell}\trunning on flex (pid ")),
            "{status}"
        );
    }
    signal(parent.id(), "-TERM");
    let ended = parent.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(75), "{stderr}");
    let states = inputs.stdout(&["matrix", "status", matrix]);
    for cell in ["bert-k1", "bert-k16"] {
        assert!(
            states.contains(&format!("{cell}\tinterrupted\n"))
                || states.contains(&format!("{cell}\tdone\n")),
            "{states}"
        );
    }
    assert!(!states.contains("running"), "{states}");
    let again = inputs
        .spawn(&["matrix", "run", matrix, "--devices", "flex,flex"])
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(&inputs.table("stopped"), one);
    // The same steps, weights, runs and measures as the undisturbed run, cell by cell.
    inputs.stdout(&["matrix", "verify", matrix, "--against", "one"]);
}

fn signal(pid: u32, which: &str) {
    let status = Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The workers of a matrix share one `LSR_KERNEL_CACHE`: two processes tuning and compiling into
/// it at once, then a third finding everything both tuned, none of them with a word from the
/// cache (cubecl's database takes several processes: a write waits for another's lock, a key
/// stored by the other first is kept). Run
/// where `LSR_TEST_DEVICE` names a WGPU device (CI: lavapipe), which caches as CUDA does.
#[test]
fn processes_share_a_kernel_cache_two_writing_at_once_then_a_third_reading_it() {
    let Some(spec) = lsr_files::ci::wgpu_test_device() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let bench = |rows: &str| {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("lsr"));
        command
            .env_remove("BURN_DEVICE")
            .env("LSR_KERNEL_CACHE", cache.path())
            .env("RUST_LOG", "warn,cubecl_runtime::tune=info")
            .args(["bench", "reduce", "--device", &spec, "--rows", rows])
            .args([
                "--width",
                "8",
                "--batch",
                "2",
                "--seq-len",
                "4",
                "--terms",
                "16",
            ])
            .args(["--warmup", "0", "--iterations", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        command
    };
    let writers = [bench("64").spawn().unwrap(), bench("96").spawn().unwrap()];
    let logs: Vec<String> = writers
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            let log = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{log}");
            log
        })
        .collect();
    let tuned: std::collections::BTreeSet<&str> = logs
        .iter()
        .flat_map(|log| log.lines())
        .filter_map(|line| line.split_once("Tuning ").map(|(_, key)| key))
        .collect();
    assert!(!tuned.is_empty(), "nothing tuned: {logs:?}");
    let reader = bench("64").output().unwrap();
    let read = String::from_utf8_lossy(&reader.stderr).into_owned();
    assert!(reader.status.success(), "{read}");
    assert!(!read.contains("Tuning "), "tuned again: {read}");
    let loaded: usize = read
        .split_once("Loaded ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no autotune cache loaded: {read}"));
    assert!(
        loaded >= tuned.len(),
        "{loaded} entries of {tuned:?}: {read}"
    );
    // cubecl notes a value another process stored first and keeps it; nothing may fail.
    let failures = [
        "could not be stored",
        "Unable to open",
        "Corrupted",
        "discarding",
        "Turso",
    ];
    for log in logs.iter().chain([&read]) {
        let complaints: Vec<&str> = (log.lines())
            .filter(|l| failures.iter().any(|f| l.contains(f)))
            .collect();
        assert!(complaints.is_empty(), "{complaints:?}");
    }
}

/// `lsr eval --devices flex,flex`: a worker per device encodes its part of the corpus's shards,
/// each with its own log, then one pass retrieves: the vectors and the run one process writes,
/// byte for byte, and the shards gone as after one process.
#[test]
fn an_evaluation_over_two_devices_writes_what_one_process_writes() {
    let (inputs, _) = reference();
    let eval = |out: &str, more: &[&str]| {
        let args = [
            "eval",
            "--checkpoint",
            "models/bert",
            "--dataset",
            "beir/synth-a",
            "--data-root",
            "synth",
            "--output",
            out,
            "--shard-documents",
            "64",
            "--batch-size",
            "16",
            "--query-max-length",
            "16",
            "--document-max-length",
            "32",
            "--measures",
            "ndcg@10,recall@100",
            "--top-k",
            "100",
        ];
        inputs.stdout(&[&args[..], more].concat())
    };
    let one = eval("eval-one", &[]);
    let two = eval("eval-two", &["--devices", "flex,flex"]);
    assert_eq!(
        one.replace("eval-one", "eval-two"),
        two,
        "the measures printed"
    );
    let set = |out: &str| inputs.root.join(out).join("beir_synth-a");
    for file in ["corpus.vectors", "run.trec"] {
        let read = |out: &str| std::fs::read(set(out).join(file)).unwrap();
        assert!(read("eval-one") == read("eval-two"), "{file} differs");
    }
    assert!(!set("eval-two").join("corpus.shards").exists());
    for part in 0..2 {
        let log = inputs.root.join(format!("eval-two/part-{part}-of-2.log"));
        let log = std::fs::read_to_string(log).unwrap();
        assert!(
            log.starts_with(&format!("== part {part}/2 on flex\n")),
            "{log}"
        );
        assert!(log.contains(&format!("part {part}/2 encoded")), "{log}");
    }
}
