//! What the commands leave behind, over one representative run made from another git
//! repository under umask 027 (the data tools, a one-cell matrix trained from a hub name in an
//! offline cache and evaluated, a checkpoint exported, texts encoded and their vectors
//! exported, an evaluation, the report): every file and folder lsr writes has the mode the umask
//! gives, the results record the commit lsr was built from rather than the repository it runs
//! in and the hub commit the backbone resolved to, and every command that prints ends quietly
//! when its reader has gone away.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::common::{beir_set, fixture};

#[path = "../../git.rs"]
mod git;
use git::git;

/// The run's folders: `repo` (a git repository of its own, the working directory), `inputs`
/// (written by the test) and `out` (everything lsr wrote).
struct Run {
    root: PathBuf,
}

impl Run {
    fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }
    fn inputs(&self) -> PathBuf {
        self.root.join("inputs")
    }
    fn out(&self) -> PathBuf {
        self.root.join("out")
    }
    fn matrix(&self) -> PathBuf {
        self.inputs().join("tiny.toml")
    }
    /// The offline hub cache the backbone comes from (`HF_HUB_CACHE`).
    fn hub(&self) -> PathBuf {
        self.root.join("hub")
    }
}

/// The backbone's hub name, not pinned to a commit, and the commit `main` is in the cache.
const HUB_NAME: &str = "tiny-org/bert";
const HUB_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// The BERT fixture as the Python libraries cache a download of `HUB_NAME`'s `main`.
fn fill_hub_cache(run: &Run) {
    let repo = run.hub().join("models--tiny-org--bert");
    let snapshot = repo.join("snapshots").join(HUB_COMMIT);
    std::fs::create_dir_all(&snapshot).unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(Path::new(&fixture("bert")).join(file), snapshot.join(file)).unwrap();
    }
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), HUB_COMMIT).unwrap();
}

const UMASK: u32 = 0o027;

/// `lsr args` under umask 027 in the run's own git repository, with the run's offline hub
/// cache; it must succeed. Returns its stderr.
fn lsr_in(run: &Run, args: &[&str]) -> String {
    let script = format!("umask {UMASK:03o} && exec \"$0\" \"$@\"");
    let output = Command::new("sh")
        .args(["-c", &script])
        .arg(assert_cmd::cargo::cargo_bin("lsr"))
        .args(args)
        .current_dir(run.repo())
        .env_remove("BURN_DEVICE")
        .env("HF_HUB_CACHE", run.hub())
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "lsr {args:?}: {stderr}");
    stderr
}

fn matrix_text(run: &Run) -> String {
    format!(
        r#"name = "tiny"
results = "{out}/results"
checkpoints = "{out}/checkpoints"
device = "flex"
k = [2]

[eval]
data_root = "{inputs}"
datasets = ["beir/tiny"]
measures = ["ndcg@10"]
batch_size = 4
query_max_length = 16
document_max_length = 32
top_k = 10
tradeoff = "beir/tiny"

[data]
format = "triples"
triples = "{triples}"

[recipe]
steps = 4
batch_size = 4
warmup_steps = 1
lambda_warmup_steps = 1
checkpoint_every = 2
query_max_length = 16
document_max_length = 32

[[backbone]]
name = "bert"
checkpoint = "{HUB_NAME}"
"#,
        out = run.out().display(),
        inputs = run.inputs().display(),
        triples = fixture("train/triples.tsv"),
    )
}

/// The run, made once for the tests of this file.
fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let run = Run {
            root: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("outputs-run"),
        };
        let _ = std::fs::remove_dir_all(&run.root);
        std::fs::create_dir_all(run.repo()).unwrap();
        let repo = run.repo();
        git(&repo, &["init", "-q"]);
        let identity = ["-c", "user.name=t", "-c", "user.email=t@t"];
        git(
            &repo,
            &[&identity[..], &["commit", "-q", "--allow-empty", "-m", "x"]].concat(),
        );
        beir_set(
            &run.inputs(),
            "tiny",
            "{\"_id\": \"a\", \"text\": \"paris is the capital of france\"}\n\
             {\"_id\": \"b\", \"text\": \"boil an egg in water\"}\n",
            "{\"_id\": \"q1\", \"text\": \"capital of france\"}\n",
            "q1\ta\t1\n",
        );
        fill_hub_cache(&run);
        std::fs::write(run.matrix(), matrix_text(&run)).unwrap();
        std::fs::write(
            run.inputs().join("norms.toml"),
            "seed = 1\n[norms]\nbert = 0.9\n",
        )
        .unwrap();
        lsr_representative_run(&run);
        run
    })
}

fn lsr_representative_run(run: &Run) {
    let path = |p: PathBuf| p.to_str().unwrap().to_string();
    let o = |name: &str| path(run.out().join(name));
    let (matrix, inputs) = (path(run.matrix()), path(run.inputs()));
    lsr_in(run, &["data", "mini-task", "--out", &o("synth")]);
    let spec = path(run.inputs().join("norms.toml"));
    let vocab = o("synth/vocab.txt");
    lsr_in(
        run,
        &[
            "data",
            "mini-models",
            "--spec",
            &spec,
            "--vocab",
            &vocab,
            "--out",
            &o("models"),
        ],
    );
    lsr_in(
        run,
        &["matrix", "slurm", &matrix, "--out", &o("job.sbatch")],
    );
    let said = lsr_in(run, &["matrix", "run", &matrix]);
    std::fs::write(run.root.join("matrix-run.stderr"), said).unwrap();
    let step = find(&run.out().join("checkpoints"), &|p| {
        p.ends_with("step-00000004")
    });
    let model = o("exported");
    lsr_in(run, &["export", &path(step[0].clone()), &model]);
    let texts = o("texts.vectors");
    lsr_in(
        run,
        &[
            "encode",
            "--checkpoint",
            &model,
            "--text",
            "an egg",
            "--vectors",
            &texts,
        ],
    );
    for format in ["ciff", "anserini"] {
        let out = o(format);
        let export = ["--format", format, "--out", &out, "--checkpoint", &model];
        lsr_in(run, &[&["vectors", "export", &texts][..], &export].concat());
    }
    let eval = [
        "--dataset",
        "beir/tiny",
        "--data-root",
        &inputs,
        "--output",
        &o("eval"),
    ];
    lsr_in(
        run,
        &[&["eval", "--checkpoint", &model][..], &eval].concat(),
    );
    lsr_in(run, &["report", &o("results")]);
}

/// Every path under `dir` (itself excluded) that `keep` keeps.
fn find(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(find(&path, keep));
        }
        if keep(&path) {
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn every_file_lsr_writes_has_the_mode_the_umask_gives() {
    let run = run();
    let written = find(&run.out(), &|_| true);
    assert!(
        written.iter().any(|p| p.ends_with("model.safetensors"))
            && written.iter().any(|p| p.ends_with("corpus.vectors"))
            && written.iter().any(|p| p.ends_with("texts.vectors")),
        "{written:?}"
    );
    let wrong: Vec<String> = written
        .iter()
        .filter_map(|path| {
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            let full = if path.is_dir() { 0o777 } else { 0o666 };
            (mode != full & !UMASK).then(|| format!("{:o} {}", mode, path.display()))
        })
        .collect();
    assert!(wrong.is_empty(), "not the umask's mode: {wrong:#?}");
}

/// The commit of the tree lsr was built from, and whether its sources had changes; none when
/// it was built outside lsr's git checkout.
fn built_from() -> Option<(String, bool)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    git(
        &root,
        &["ls-files", "--error-unmatch", "crates/cli/build.rs"],
    )?;
    let commit = git(&root, &["rev-parse", "HEAD"])?;
    let status = git(
        &root,
        &[
            "status",
            "--porcelain",
            "--",
            "crates",
            "Cargo.toml",
            "Cargo.lock",
        ],
    );
    Some((commit, !status?.is_empty()))
}

#[test]
fn results_record_the_commit_lsr_was_built_from_not_the_working_directorys() {
    let run = run();
    let expected = built_from();
    let records = find(&run.out(), &|p| {
        p.ends_with("cell.json") || p.ends_with("lsr-card.json")
    });
    // The cell, the model its training exported and the checkpoint `lsr export` wrote.
    assert_eq!(records.len(), 3, "{records:?}");
    for record in records {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
        let recorded = json["git_commit"]
            .as_str()
            .map(|commit| (commit.to_string(), json["git_dirty"].as_bool().unwrap()));
        assert_eq!(recorded, expected, "{}", record.display());
    }
    let card = find(&run.out().join("exported"), &|p| p.ends_with("README.md")).remove(0);
    let card = std::fs::read_to_string(card).unwrap();
    let said = match &expected {
        Some((commit, true)) => format!("| lsr commit | {commit} with uncommitted changes |"),
        Some((commit, false)) => format!("| lsr commit | {commit} |"),
        None => "| lsr commit | unknown (built outside lsr's git checkout) |".into(),
    };
    assert!(card.contains(&said), "{card}");
}

/// The cell trained from a hub name: its `cell.json` and the exported model's card record the
/// commit the name resolved to, the card's metadata names the repository without it, and
/// `matrix run`, which resolves the name several times, said once that it is not pinned.
#[test]
fn results_record_the_hub_commit_and_an_unpinned_name_is_said_once() {
    let run = run();
    let json = |path: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let cell = find(&run.out().join("results"), &|p| p.ends_with("cell.json")).remove(0);
    let cell = json(&cell);
    assert_eq!(cell["checkpoint"], HUB_NAME);
    assert_eq!(cell["checkpoint_revision"], HUB_COMMIT);
    let model = find(&run.out().join("checkpoints"), &|p| {
        p.ends_with("model/lsr-card.json")
    });
    assert_eq!(json(&model[0])["base_revision"], HUB_COMMIT);
    let card = std::fs::read_to_string(model[0].with_file_name("README.md")).unwrap();
    assert!(
        card.contains(&format!("base_model: \"{HUB_NAME}\""))
            && card.contains(&format!("`{HUB_NAME}` at commit `{HUB_COMMIT}`")),
        "{card}"
    );
    let said = std::fs::read_to_string(run.root.join("matrix-run.stderr")).unwrap();
    let warning = format!(
        "checkpoint `{HUB_NAME}` is not pinned: it loads the hub's `main`, here commit \
         {HUB_COMMIT}; name it `{HUB_NAME}@{HUB_COMMIT}`"
    );
    assert_eq!(said.matches(&warning).count(), 1, "{said}");
}

/// `--only k-choice` on results without probes: refused, saying what is missing, with no table
/// of zeros written.
#[test]
fn a_k_choice_report_of_a_matrix_without_probes_is_refused() {
    let run = run();
    let out = run.root.join("k-choice");
    let output = crate::common::lsr()
        .arg("report")
        .arg(run.out().join("results"))
        .args(["--only", "k-choice", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("k-choice: nothing to report") && stderr.contains("tiny/bert: no probe"),
        "{stderr}"
    );
    assert!(!out.join("k-choice.md").exists());
}

/// The leaf subcommands, as `lsr help` lists them (`help` itself left out).
fn leaf_commands(path: &[String]) -> Vec<Vec<String>> {
    let help = Command::new(assert_cmd::cargo::cargo_bin("lsr"))
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let names: Vec<String> = help
        .lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        // A name at the indent of the list, not a wrapped description under it.
        .filter(|line| !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next().map(String::from))
        .filter(|name| name != "help")
        .collect();
    if names.is_empty() {
        return vec![path.to_vec()];
    }
    names
        .iter()
        .flat_map(|name| leaf_commands(&[path, std::slice::from_ref(name)].concat()))
        .collect()
}

/// `lsr args` with its standard output a pipe whose reader has already gone away.
fn with_reader_gone(run: &Run, args: &[String]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(assert_cmd::cargo::cargo_bin("lsr"))
        .args(args)
        .current_dir(run.repo())
        .env_remove("BURN_DEVICE")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Every subcommand that prints, given what it needs from the run (its own outputs under
/// `pipe/`), piped into a reader that has gone away, ends as `cat` does: at once, quietly (by
/// SIGPIPE, or having finished), with no panic and no error. The subcommands are those `lsr help`
/// lists, so that a new one must be added here (or to the list of those that print nothing).
#[test]
fn every_command_that_prints_ends_quietly_when_its_reader_goes_away() {
    let run = run();
    let path = |p: PathBuf| p.to_str().unwrap().to_string();
    let (out, pipe) = (run.out(), run.root.join("pipe"));
    let (bert, matrix, exported) = (
        fixture("bert"),
        path(run.matrix()),
        path(out.join("exported")),
    );
    let trec = |file: &str| fixture(&format!("trec_eval/{file}"));
    let (qrels, trec_run) = (trec("qrels.graded.txt"), trec("run.txt"));
    let evaluate = ["trec-eval", "--run", &trec_run, "--qrels", &qrels];
    let synth = path(out.join("synth"));
    let (norms, vocab) = (
        path(run.inputs().join("norms.toml")),
        path(out.join("synth/vocab.txt")),
    );
    let (inputs, results, fixtures) = (path(run.inputs()), path(out.join("results")), fixture(""));
    let at = |name: &str| path(pipe.join(name));
    let (pipe_synth, models, eval, report) = (at("synth"), at("models"), at("eval"), at("report"));
    let cases: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["norms", &bert],
        vec!["norms", &bert, "--json"],
        vec!["k", "suggest", &bert],
        vec!["encode", "--checkpoint", &bert, "--text", "an egg"],
        vec![
            "encode",
            "--checkpoint",
            &bert,
            "--text",
            "an egg",
            "--json",
        ],
        vec!["data", "mini-task", "--out", &pipe_synth],
        vec![
            "data",
            "mini-models",
            "--spec",
            &norms,
            "--vocab",
            &vocab,
            "--out",
            &models,
        ],
        vec!["data", "verify", "beir/synth-a", "--data-root", &synth],
        vec![
            "data",
            "fetch",
            "beir/synth-a",
            "--data-root",
            &synth,
            "--offline",
        ],
        vec![
            "eval",
            "--checkpoint",
            &exported,
            "--dataset",
            "beir/tiny",
            "--data-root",
            &inputs,
            "--output",
            &eval,
        ],
        [&evaluate[..], &["-q"]].concat(),
        [&evaluate[..], &["--json"]].concat(),
        [&evaluate[..], &["--format", "trec_eval", "-q"]].concat(),
        vec![
            "compare", &trec_run, &trec_run, "--qrels", &qrels, "-m", "ndcg@10",
        ],
        vec!["matrix", "list", &matrix],
        vec!["matrix", "status", &matrix],
        vec!["matrix", "slurm", &matrix],
        vec!["matrix", "verify", &matrix],
        vec!["report", &results, "--out", &report],
        vec!["report", &results, &results, "--compare"],
        vec!["check", "--json", "--fixtures", &fixtures],
        vec![
            "bench",
            "matmul",
            "--shape",
            "small=4x4x4t",
            "--shape",
            "plain=4x4x4",
            "--iterations",
            "1",
        ],
        vec![
            "bench",
            "retrieve",
            "--docs",
            "50",
            "--vocab",
            "50",
            "--queries",
            "5",
        ],
        // The benches at a width of one head: what is tried is how they print, not BERT-base.
        vec![
            "bench",
            "encode",
            "--batch",
            "1",
            "--seq-len",
            "8",
            "--hidden",
            "64",
            "--iterations",
            "1",
        ],
        vec![
            "bench",
            "reduce",
            "--rows",
            "8",
            "--width",
            "4",
            "--batch",
            "1",
            "--seq-len",
            "4",
            "--terms",
            "4",
            "--iterations",
            "1",
        ],
        vec![
            "bench",
            "train-step",
            "--queries",
            "1",
            "--query-len",
            "8",
            "--document-len",
            "8",
            "--hidden",
            "64",
            "--warmup",
            "0",
            "--iterations",
            "1",
        ],
        vec![
            "bench",
            "cached-step",
            "--model",
            &bert,
            "--queries",
            "2",
            "--accumulation",
            "2",
            "--query-len",
            "8",
            "--document-len",
            "8",
            "--warmup",
            "0",
            "--iterations",
            "1",
        ],
    ];
    let prints_nothing = [
        "train",
        "export",
        "vectors export",
        "matrix run",
        "matrix probe",
    ];
    let leaves = leaf_commands(&[]);
    assert!(leaves.len() >= 20, "{leaves:?}");
    for leaf in leaves {
        let name = leaf.join(" ");
        let tried = |case: &Vec<&str>| case[..leaf.len().min(case.len())] == leaf[..];
        assert!(
            prints_nothing.contains(&name.as_str()) || cases.iter().any(tried),
            "`lsr {name}` is neither tried here nor listed as printing nothing"
        );
    }
    for case in &cases {
        let args: Vec<String> = case.iter().map(|a| a.to_string()).collect();
        let output = with_reader_gone(run, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let sigpipe = output.status.signal() == Some(13);
        assert!(
            (output.status.success() || sigpipe)
                && !stderr.contains("panicked")
                && !stderr.contains("error")
                && !stderr.contains("Broken pipe"),
            "lsr {}: {:?}\n{stderr}",
            args.join(" "),
            output.status
        );
    }
}
