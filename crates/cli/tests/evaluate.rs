//! `lsr evaluate` on the pytrec_eval fixture: the means equal the mean of pytrec_eval's
//! per-query values.

mod common;

use common::{fixture, lsr};

#[test]
fn means_match_pytrec_eval_at_trec_dl_relevance_level() {
    let out = lsr()
        .args([
            "evaluate",
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
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
            "evaluate",
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

#[test]
fn eval_writes_metrics_for_a_beir_data_set() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("beir/mini");
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    std::fs::write(
        dir.join("corpus.jsonl"),
        "{\"_id\": \"a\", \"title\": \"France\", \"text\": \"paris is the capital\"}\n\
         {\"_id\": \"b\", \"text\": \"boil an egg\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("queries.jsonl"),
        "{\"_id\": \"q\", \"text\": \"capital of france\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("qrels/test.tsv"),
        "query-id\tcorpus-id\tscore\nq\ta\t1\n",
    )
    .unwrap();
    let checkpoint = fixture("bert");
    let out = root.path().join("out");
    let status = lsr()
        .args([
            "eval",
            "--checkpoint",
            &checkpoint,
            "--dataset",
            "beir/mini",
        ])
        .args([
            "--data-root",
            root.path().to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let metrics: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("beir_mini/metrics.json")).unwrap())
            .unwrap();
    assert_eq!(metrics["dataset"], "beir/mini");
    assert_eq!(metrics["queries_evaluated"], 1);
    assert!(metrics["metrics"]["ndcg@10"].as_f64().unwrap() > 0.0);
    assert!(metrics["sparsity"]["flops"].as_f64().unwrap() > 0.0);
}
