//! `lsr compare` on the trec_eval fixture: the per-query values are `lsr trec-eval -c`'s, the
//! output says the tests, permutations and seed, several runs get Holm, and a run of other
//! queries is refused naming it.

use std::path::Path;

use crate::common::{beir_set, fixture, lsr, stdout_of};

/// The fixture run with q0 and q1 dropped (they count 0) and q2's ranking reversed.
fn worse_run(dir: &Path) -> String {
    let text = std::fs::read_to_string(fixture("trec_eval/run.txt")).unwrap();
    let lines: Vec<String> = (text.lines())
        .filter(|line| !line.starts_with("q0 ") && !line.starts_with("q1 "))
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            match fields[..] {
                ["q2", q0, doc, rank, score, tag] => {
                    let score = -score.parse::<f64>().unwrap();
                    format!("q2 {q0} {doc} {rank} {score} {tag}")
                }
                _ => line.to_string(),
            }
        })
        .collect();
    let path = dir.join("worse.run");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_str().unwrap().to_string()
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_slice(&stdout_of(lsr().args(args))).unwrap()
}

#[test]
fn runs_are_compared_on_trec_eval_values_with_holm_over_several() {
    let dir = tempfile::tempdir().unwrap();
    let (base, worse) = (fixture("trec_eval/run.txt"), worse_run(dir.path()));
    let qrels = fixture("trec_eval/qrels.graded.txt");
    let measured = |run: &str| {
        let args = [
            "trec-eval",
            "--run",
            run,
            "--qrels",
            &qrels,
            "-m",
            "ndcg@10",
            "-c",
        ];
        json(&[&args[..], &["--json"]].concat())["mean"]["ndcg@10"].clone()
    };
    let compare = [
        "compare", &base, &worse, &base, "--qrels", &qrels, "-m", "ndcg@10",
    ];
    let got = json(&[&compare[..], &["--json"]].concat());
    assert_eq!(
        (got["permutations"].as_u64(), got["seed"].as_u64()),
        (Some(10000), Some(1))
    );
    let [worse_test, same] = got["comparisons"].as_array().unwrap().as_slice() else {
        panic!("{got}");
    };
    let t = &worse_test["t_test"];
    assert_eq!(t["queries"], 12, "every judged query, as trec_eval -c");
    assert_eq!(
        (&t["mean_a"], &t["mean_b"]),
        (&measured(&base), &measured(&worse))
    );
    assert!(t["difference"].as_f64().unwrap() < 0.0, "{t}");
    let permutation = &worse_test["permutation"];
    assert_eq!(
        (&permutation["exact"], &permutation["resamples"]),
        (&true.into(), &4096.into())
    );
    assert_eq!(
        (&same["t_test"]["p"], &same["permutation"]["p"]),
        (&1.0.into(), &1.0.into())
    );
    assert_eq!(same["t_test_p_holm"], 1.0);
    let p = worse_test["t_test"]["p"].as_f64().unwrap();
    assert_eq!(
        worse_test["t_test_p_holm"].as_f64().unwrap(),
        (2.0 * p).min(1.0)
    );

    let text = String::from_utf8(stdout_of(lsr().args(compare))).unwrap();
    for said in [
        "10000 random sign flips of the per-query differences (seed 1)",
        "Holm–Bonferroni over the 2 comparisons",
        &format!("| {base} | {worse} | 12 |"),
    ] {
        assert!(text.contains(said), "{said}\n{text}");
    }
    let drawn = [
        &compare[..],
        &["--permutations", "100", "--seed", "7", "--json"],
    ]
    .concat();
    let drawn = json(&drawn)["comparisons"][0]["permutation"].clone();
    assert_eq!(
        (&drawn["exact"], &drawn["resamples"]),
        (&false.into(), &100.into())
    );
}

#[test]
fn a_run_of_other_queries_or_an_unknown_measure_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.run");
    std::fs::write(&other, "x1 Q0 d1 1 2.0 t\nx2 Q0 d1 1 1.0 t\n").unwrap();
    let qrels = fixture("trec_eval/qrels.graded.txt");
    let base = fixture("trec_eval/run.txt");
    let refused = |run: &str, measure: &str| {
        let args = ["compare", &base, run, "--qrels", &qrels, "-m", measure];
        let out = lsr().args(args).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let error = refused(other.to_str().unwrap(), "ndcg@10");
    assert!(
        error.contains("other.run: none of its 2 queries is judged in")
            && error.contains("qrels.graded.txt"),
        "{error}"
    );
    let error = refused(&base, "ndcg@ten");
    assert!(error.contains("ndcg@ten"), "{error}");
}

#[test]
fn cells_and_eval_outputs_are_compared_on_a_data_set_with_its_qrels() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let qrels = std::fs::read_to_string(fixture("trec_eval/qrels.graded.txt")).unwrap();
    let beir_qrels: String = (qrels.lines())
        .map(|line| match line.split(' ').collect::<Vec<_>>()[..] {
            [query, _, doc, grade] => format!("{query}\t{doc}\t{grade}\n"),
            _ => panic!("{line}"),
        })
        .collect();
    let corpus = r#"{"_id": "d1", "title": "", "text": "x"}"#;
    let queries = r#"{"_id": "q0", "text": "x"}"#;
    beir_set(&root, "scifact", corpus, queries, &beir_qrels);
    // A matrix cell's evaluation and an `lsr eval --output`.
    let cell = dir.path().join("cell");
    let output = dir.path().join("output");
    for (run, at) in [
        (fixture("trec_eval/run.txt"), cell.join("eval/beir_scifact")),
        (worse_run(dir.path()), output.join("beir_scifact")),
    ] {
        std::fs::create_dir_all(&at).unwrap();
        std::fs::copy(run, at.join("run.trec")).unwrap();
    }
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (cell, output, root) = (path(&cell), path(&output), path(&root));
    let by_name = [
        "compare",
        &cell,
        &output,
        "--dataset",
        "beir/scifact",
        "--data-root",
        &root,
        "-m",
        "ndcg@10",
        "--json",
    ];
    let (base, worse) = (fixture("trec_eval/run.txt"), worse_run(dir.path()));
    let qrels = fixture("trec_eval/qrels.graded.txt");
    let by_file = [
        "compare", &base, &worse, "--qrels", &qrels, "-m", "ndcg@10", "--json",
    ];
    let tests = |args: &[&str]| {
        let got = json(args)["comparisons"][0].clone();
        (got["t_test"].clone(), got["permutation"].clone())
    };
    assert_eq!(tests(&by_name), tests(&by_file));

    let args = ["compare", &cell, &output, "--qrels", &qrels, "-m", "map"];
    let out = lsr().args(args).output().unwrap();
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && error.contains("a directory; name the data set"),
        "{error}"
    );
}
