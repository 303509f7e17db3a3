//! `lsr trec-eval` on the pytrec_eval fixture: the means equal the mean of pytrec_eval's
//! per-query values. `lsr eval` on tiny BEIR sets: what `metrics.json` records, and that it
//! agrees with `lsr trec-eval -c` on the run it wrote, and what a full disk leaves.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{beir_set, fixture, lsr, stdout_of, succeeded, wait_until};
use lsr_files::damage::Damage;

#[test]
fn means_match_pytrec_eval_at_trec_dl_relevance_level() {
    let out = succeeded(
        lsr()
            .args([
                "trec-eval",
                "--run",
                &fixture("trec_eval/run.txt"),
                "--qrels",
                &fixture("trec_eval/qrels.graded.txt"),
            ])
            .args([
                "--measures",
                "ndcg_cut_10,mrr@10,recall_100",
                "--relevance-level",
                "2",
                "--json",
            ]),
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("trec_eval/expected.json")).unwrap())
            .unwrap();
    let per_query = expected["graded_level2"].as_object().unwrap();
    for (ours, theirs) in [
        ("ndcg@10", "ndcg_cut_10"),
        ("mrr@10", "mrr@10"),
        ("recall@100", "recall_100"),
    ] {
        let mean = per_query
            .values()
            .map(|v| v[theirs].as_f64().unwrap())
            .sum::<f64>()
            / per_query.len() as f64;
        let value = got["mean"][ours].as_f64().unwrap();
        assert!((value - mean).abs() < 1e-12, "{ours}: {value} != {mean}");
    }
    assert_eq!(got["queries_evaluated"], 10);
    assert_eq!(got["queries_without_results"], 2);
}

#[test]
fn a_malformed_run_is_reported_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("bad.run");
    std::fs::write(&run, "q1 Q0 d1 1 1.0 x\nq1 Q0 d2 2 inf x\n").unwrap();
    let out = lsr()
        .args([
            "trec-eval",
            "--run",
            run.to_str().unwrap(),
            "--qrels",
            &fixture("trec_eval/qrels.graded.txt"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("bad.run:2: score `inf` is not finite"),
        "{stderr}"
    );
}

/// `lsr eval` of the BERT fixture on `beir/<name>` under `root`; its `metrics.json`.
fn eval(root: &Path, name: &str) -> serde_json::Value {
    let out = root.join("out");
    let status = eval_into(root, name, &out);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let metrics = out.join(format!("beir_{name}/metrics.json"));
    serde_json::from_str(&std::fs::read_to_string(metrics).unwrap()).unwrap()
}

/// `lsr eval` of the BERT fixture on `beir/<name>` under `root`, into `out`.
fn eval_into(root: &Path, name: &str, out: &Path) -> std::process::Output {
    lsr()
        .args(["eval", "--checkpoint", &fixture("bert")])
        .args(["--dataset", &format!("beir/{name}")])
        .args(["--data-root", root.to_str().unwrap()])
        .args(["--output", out.to_str().unwrap()])
        .output()
        .unwrap()
}

/// Every result file under `dir` (not the lock, which holds the last holder's pid) with its
/// length and a hash of its bytes.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, usize, u64)> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files(&path));
        } else if !path.ends_with(".eval.lock") {
            let bytes = std::fs::read(&path).unwrap();
            let mut hasher = DefaultHasher::new();
            bytes.hash(&mut hasher);
            found.push((path, bytes.len(), hasher.finish()));
        }
    }
    found.sort();
    found
}

/// `lsr eval` again onto a full disk: a clear error, and the previous evaluation's files
/// (vectors, run, metrics) exactly as they were, with nothing half-written beside them.
/// (Needs root to mount a small tmpfs.)
#[test]
fn a_full_disk_during_eval_leaves_the_previous_evaluation() {
    let Some(disk) = lsr_files::small_disk::SmallDisk::mount(4 << 20) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    beir_set(
        root.path(),
        "mini",
        "{\"_id\": \"a\", \"text\": \"paris is the capital\"}\n{\"_id\": \"b\", \"text\": \"eggs\"}\n",
        "{\"_id\": \"q\", \"text\": \"capital of france\"}\n",
        "q\ta\t1\n",
    );
    let out = disk.path().join("eval");
    assert!(eval_into(root.path(), "mini", &out).status.success());
    let before = files(&out);
    disk.fill(0);
    let failed = eval_into(root.path(), "mini", &out);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("No space left on device") && stderr.contains(out.to_str().unwrap()),
        "{stderr}"
    );
    assert_eq!(files(&out), before);
}

/// `lsr evaluate --json` of `run` against `qrels`, with `extra` arguments.
fn evaluate(run: &Path, qrels: &Path, extra: &[&str]) -> serde_json::Value {
    let out = stdout_of(
        lsr()
            .args(["trec-eval", "--run", run.to_str().unwrap()])
            .args(["--qrels", qrels.to_str().unwrap(), "--json"])
            .args(extra),
    );
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn eval_writes_metrics_for_a_beir_data_set() {
    let root = tempfile::tempdir().unwrap();
    beir_set(
        root.path(),
        "mini",
        "{\"_id\": \"a\", \"title\": \"France\", \"text\": \"paris is the capital\"}\n\
         {\"_id\": \"b\", \"text\": \"boil an egg\"}\n",
        "{\"_id\": \"q\", \"text\": \"capital of france\"}\n",
        "q\ta\t1\n",
    );
    let metrics = eval(root.path(), "mini");
    assert_eq!(metrics["dataset"], "beir/mini");
    assert_eq!(metrics["queries_evaluated"], 1);
    assert_eq!(metrics["empty_queries"], 0);
    assert!(metrics["metrics"]["ndcg@10"].as_f64().unwrap() > 0.0);
    assert!(metrics["sparsity"]["flops"].as_f64().unwrap() > 0.0);
    assert_eq!(metrics["flops_queries"]["queries"], 1);
    // The default 256 tokens, capped at the fixture's 64 positions and recorded as used.
    let settings = &metrics["settings"];
    assert_eq!(
        (
            &settings["query_max_length"],
            &settings["document_max_length"]
        ),
        (&serde_json::json!(64), &serde_json::json!(64))
    );
    assert_eq!(settings["complete"], true);
}

/// A judged query that retrieves nothing has no line in `run.trec`: `metrics.json` counts it 0,
/// as `lsr evaluate -c` does on the file, and without `-c` the file's means are over the
/// queries it has, as trec_eval's. Here the query's only hit is the document with its own id,
/// which BEIR's convention drops.
#[test]
fn eval_and_evaluate_c_agree_on_a_query_without_results() {
    let root = tempfile::tempdir().unwrap();
    beir_set(
        root.path(),
        "self",
        "{\"_id\": \"q2\", \"title\": \"France\", \"text\": \"paris is the capital\"}\n",
        "{\"_id\": \"q1\", \"text\": \"capital of france\"}\n\
         {\"_id\": \"q2\", \"text\": \"paris\"}\n",
        "q1\tq2\t1\nq2\tq2\t1\n",
    );
    let metrics = eval(root.path(), "self");
    assert_eq!(metrics["queries_evaluated"], 2);
    assert_eq!(metrics["queries_without_results"], 1);
    let run = root.path().join("out/beir_self/run.trec");
    let qrels = root.path().join("beir/self/qrels/test.tsv");
    let measures = ["--measures", "mrr@10,ndcg@10,recall@100,recall@1000"];
    let complete = evaluate(&run, &qrels, &[&measures[..], &["-c"]].concat());
    assert_eq!(complete["mean"], metrics["metrics"]);
    assert_eq!(complete["queries_evaluated"], 2);
    let present = evaluate(&run, &qrels, &measures);
    assert_eq!(present["queries_evaluated"], 1);
    for (name, value) in metrics["metrics"].as_object().unwrap() {
        let over_present = present["mean"][name].as_f64().unwrap();
        assert!(
            (over_present - 2.0 * value.as_f64().unwrap()).abs() < 1e-12,
            "{name}"
        );
    }
}

/// `lsr evaluate --format trec_eval` prints what trec_eval 9.0.8 prints, byte for byte
/// (`data/fixtures/trec_eval/trec_eval-9.0.8`): chosen measures, its default set and
/// `all_trec`, under each flag.
#[test]
fn trec_eval_format_prints_what_trec_eval_prints() {
    let dir = fixture("trec_eval");
    let expected =
        |file: &str| std::fs::read_to_string(format!("{dir}/trec_eval-9.0.8/{file}.txt")).unwrap();
    let text_of = |qrels: &str, args: &[&str]| {
        let output = lsr()
            .args(["trec-eval", "--format", "trec_eval"])
            .args(["--qrels", &format!("{dir}/{qrels}")])
            .args(["--run", &format!("{dir}/run.txt")])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let lsr_text = |args: &[&str]| text_of("qrels.graded.txt", args);
    let three = ["-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "recall.1000"];
    let with = |flags: &[&'static str]| [flags, &three[..]].concat();
    assert_eq!(
        lsr_text(&three),
        expected("m_ndcg_cut.10_recip_rank_recall.1000")
    );
    assert_eq!(
        lsr_text(&with(&["-q"])),
        expected("q_m_ndcg_cut.10_recip_rank_recall.1000")
    );
    assert_eq!(
        lsr_text(&with(&["-l", "2"])),
        expected("l2_m_ndcg_cut.10_recip_rank_recall.1000")
    );
    assert_eq!(
        lsr_text(&with(&["-c", "-M", "10", "-l", "2"])),
        expected("c_M10_l2_m_recip_rank_ndcg_cut.10_recall.1000")
    );
    // trec_eval's default set, whole, under each flag, and as `-m official` names it.
    for (flags, file) in [
        (&[][..], "default"),
        (&["-c"][..], "c"),
        (&["-M", "10"][..], "M10"),
        (&["-l", "2"][..], "l2"),
        (&["-c", "-l", "2"][..], "c_l2"),
        (&["-q"][..], "q"),
        (&["-m", "official"][..], "default"),
        (&["-m", "all_trec"][..], "m_all_trec"),
        (&["-q", "-m", "all_trec"][..], "q_m_all_trec"),
        (&["-c", "-l", "2", "-m", "all_trec"][..], "c_l2_m_all_trec"),
        (&["-M", "10", "-m", "all_trec"][..], "M10_m_all_trec"),
    ] {
        assert_eq!(lsr_text(flags), expected(file), "{file} ({flags:?})");
    }
    // Judgements of -1 (pooled, not judged), which bpref, infAP and relstring set apart.
    let pooled = text_of("qrels.pooled.txt", &["-q", "-m", "all_trec"]);
    assert_eq!(pooled, expected("pooled_q_m_all_trec"));
}

/// `lsr eval --quantize 100` scores as Anserini would score the vectors `lsr vectors export`
/// writes for it: every score in its run is the integer dot product of the exported query
/// (tokens repeated by impact) and document (`{token: impact}`).
#[test]
fn eval_with_quantize_scores_as_the_anserini_export_would() {
    let root = tempfile::tempdir().unwrap();
    beir_set(
        root.path(),
        "mini",
        "{\"_id\": \"a\", \"text\": \"paris is the capital of france\"}\n\
         {\"_id\": \"b\", \"text\": \"boil an egg in water\"}\n\
         {\"_id\": \"c\", \"text\": \"rome is the capital of italy\"}\n",
        "{\"_id\": \"q1\", \"text\": \"capital of france\"}\n\
         {\"_id\": \"q2\", \"text\": \"boiled eggs\"}\n",
        "q1\ta\t1\nq2\tb\t1\n",
    );
    let out = root.path().join("out");
    let status = lsr()
        .args([
            "eval",
            "--checkpoint",
            &fixture("bert"),
            "--dataset",
            "beir/mini",
        ])
        .args(["--data-root", root.path().to_str().unwrap()])
        .args(["--output", out.to_str().unwrap(), "--quantize", "100"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let dir = out.join("beir_mini");
    let export = |vectors: &str, format: &str| {
        let file = root.path().join(format);
        lsr()
            .args(["vectors", "export"])
            .arg(dir.join(vectors))
            .args([
                "--checkpoint",
                &fixture("bert"),
                "--format",
                format,
                "--out",
            ])
            .arg(&file)
            .assert()
            .success();
        std::fs::read_to_string(file).unwrap()
    };
    let documents: BTreeMap<String, BTreeMap<String, i64>> = export("corpus.vectors", "anserini")
        .lines()
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            let vector = serde_json::from_value(doc["vector"].clone()).unwrap();
            (doc["id"].as_str().unwrap().to_string(), vector)
        })
        .collect();
    let queries: BTreeMap<String, BTreeMap<String, i64>> =
        export("queries.vectors", "anserini-queries")
            .lines()
            .map(|line| {
                let (id, text) = line.split_once('\t').unwrap();
                let mut counts = BTreeMap::new();
                for token in text.split_whitespace() {
                    *counts.entry(token.to_string()).or_default() += 1;
                }
                (id.to_string(), counts)
            })
            .collect();
    let run = std::fs::read_to_string(dir.join("run.trec")).unwrap();
    assert!(run.lines().count() >= 4, "{run}");
    for line in run.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (query, doc, score) = (fields[0], fields[2], fields[4].parse::<f64>().unwrap());
        let dot: i64 = queries[query]
            .iter()
            .map(|(token, count)| count * documents[doc].get(token).unwrap_or(&0))
            .sum();
        assert_eq!(score, dot as f64, "{query} {doc}");
    }
}

/// As Slurm stops a task during evaluation: SIGTERM keeps the corpus shards finished and exits
/// with code 75, and the same command resumes after them to the run of an undisturbed one,
/// then removes the shards.
#[test]
fn eval_stopped_with_sigterm_exits_75_and_resumes_to_the_same_run() {
    let root = tempfile::tempdir().unwrap();
    let corpus: String = (0..2000)
        .map(|i| {
            format!(
                "{{\"_id\": \"d{i}\", \"text\": \"passage {i} on topic {}\"}}\n",
                i % 37
            )
        })
        .collect();
    let queries = "{\"_id\": \"q\", \"text\": \"topic 5\"}\n";
    beir_set(root.path(), "many", &corpus, queries, "q\td5\t1\n");
    let eval = |out: &Path| {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("lsr"));
        command
            .args([
                "eval",
                "--checkpoint",
                &fixture("bert"),
                "--dataset",
                "beir/many",
            ])
            .args(["--data-root", root.path().to_str().unwrap()])
            .args(["--output", out.to_str().unwrap(), "--shard-documents", "8"]);
        command
    };
    let (whole, stopped) = (root.path().join("whole"), root.path().join("stopped"));
    assert!(eval(&whole).status().unwrap().success());

    let shards = stopped.join("beir_many/corpus.shards");
    let child = eval(&stopped)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let complete = || {
        let entries = std::fs::read_dir(&shards).into_iter().flatten().flatten();
        let names = entries.map(|e| e.file_name().to_string_lossy().into_owned());
        // Not the shard in progress, which is a hidden temporary file until it is complete.
        names
            .filter(|n| n.ends_with(".vectors") && !n.starts_with('.'))
            .count()
    };
    wait_until("a complete shard", || complete() > 0);
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("stopped on request"), "{stderr}");
    let kept = complete();
    assert!(kept > 0 && kept < 250, "{kept} of 250 shards");

    assert!(eval(&stopped).status().unwrap().success());
    for file in ["corpus.vectors", "run.trec", "per_query.json"] {
        let read = |dir: &Path| std::fs::read(dir.join("beir_many").join(file)).unwrap();
        assert!(read(&whole) == read(&stopped), "{file} differs");
    }
    assert!(!shards.exists(), "the shards are removed once evaluated");
}

/// Two of the shards a part (`--shard 0/2`) left damaged before the run that assembles them,
/// one cut short and one with a byte flipped: that run says which it encodes again and why,
/// and ends with the vectors and run of an undisturbed evaluation.
#[test]
fn eval_encodes_damaged_shards_again_saying_so_and_ends_with_the_undisturbed_run() {
    let root = tempfile::tempdir().unwrap();
    let corpus: String = (0..40)
        .map(|i| {
            format!(
                "{{\"_id\": \"d{i}\", \"text\": \"passage {i} on topic {}\"}}\n",
                i % 7
            )
        })
        .collect();
    let queries = "{\"_id\": \"q\", \"text\": \"topic 5\"}\n";
    beir_set(root.path(), "forty", &corpus, queries, "q\td5\t1\n");
    let eval = |out: &Path, extra: &[&str]| {
        let mut command = lsr();
        command
            .args([
                "eval",
                "--checkpoint",
                &fixture("bert"),
                "--dataset",
                "beir/forty",
            ])
            .args(["--data-root", root.path().to_str().unwrap()])
            .args(["--output", out.to_str().unwrap(), "--shard-documents", "8"])
            .args(extra);
        succeeded(&mut command)
    };
    let (whole, damaged) = (root.path().join("whole"), root.path().join("damaged"));
    eval(&whole, &[]);
    eval(&damaged, &["--shard", "0/2"]);
    let shards = damaged.join("beir_forty/corpus.shards");
    Damage::CutShort
        .apply(&shards.join("000000.vectors"))
        .unwrap();
    Damage::Flipped
        .apply(&shards.join("000002.vectors"))
        .unwrap();

    let stderr = String::from_utf8(eval(&damaged, &[]).stderr).unwrap();
    assert!(
        stderr.contains(
            "2 complete shards are damaged since they were written and are encoded again"
        ) && stderr.contains("shard 0: its contents do not match the SHA-256")
            && stderr.contains("shard 2: its contents do not match the SHA-256"),
        "{stderr}"
    );
    for file in [
        "corpus.vectors",
        "queries.vectors",
        "run.trec",
        "per_query.json",
    ] {
        let read = |dir: &Path| std::fs::read(dir.join("beir_forty").join(file)).unwrap();
        assert!(read(&whole) == read(&damaged), "{file} differs");
    }
}
