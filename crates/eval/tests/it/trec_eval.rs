//! Per-query equality (1e-9) with pytrec_eval on a run with heavy ties, graded and binary
//! qrels, judged queries missing from the run and retrieved documents missing from the qrels
//! (`scripts/fixtures/trec_eval_fixtures.py`), and trec_eval's `-c` means over every judged
//! query from the same values.

use itertools::Itertools;
use std::collections::BTreeMap;
use std::path::PathBuf;

use lsr_eval::{Measure, Qrels, Run, evaluate};

fn fixture(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/fixtures/trec_eval")
        .join(file)
}

type Expected = BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>>;

fn check(case: &str, qrels_file: &str, level: i32) {
    let expected: Expected =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    let expected = &expected[case];
    let qrels = Qrels::read(&fixture(qrels_file)).unwrap();
    let run = Run::read(&fixture("run.txt")).unwrap();
    let names: Vec<&String> = expected.values().next().unwrap().keys().collect();
    let measures: Vec<Measure> = names.iter().map(|n| Measure::parse(n).unwrap()).collect();
    let evaluation = evaluate(&run, &qrels, &measures, level, false);
    assert_eq!(
        evaluation.per_query.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{case}: evaluated queries"
    );
    for (query, values) in expected {
        for (name, measure) in names.iter().zip_eq(&measures) {
            let got = evaluation.per_query[query][&measure.name()];
            let want = values[*name];
            assert!(
                (got - want).abs() <= 1e-9,
                "{case} {query} {name}: {got} != pytrec_eval {want}"
            );
        }
    }
    assert_eq!(
        evaluation.queries_without_results, 2,
        "{case}: q5 and q9 are not in the run"
    );
}

#[test]
fn graded_qrels_at_default_relevance_level() {
    check("graded_level1", "qrels.graded.txt", 1);
}

#[test]
fn graded_qrels_with_binary_measures_at_level_two_as_trec_dl() {
    check("graded_level2", "qrels.graded.txt", 2);
}

#[test]
fn binary_beir_style_qrels_with_header() {
    check("binary", "qrels.binary.tsv", 1);
}

#[test]
fn complete_averages_over_every_judged_query_with_the_missing_at_zero() {
    let expected: Expected =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    let expected = &expected["graded_level1"];
    let qrels = Qrels::read(&fixture("qrels.graded.txt")).unwrap();
    let mut run = Run::read(&fixture("run.txt")).unwrap();
    // A query with no retrieved document is absent from a run file: the same here.
    run.queries.insert("q5".into(), Vec::new());
    let measures = [
        Measure::parse("ndcg@10").unwrap(),
        Measure::parse("mrr@10").unwrap(),
    ];
    let present = evaluate(&run, &qrels, &measures, 1, false);
    let complete = evaluate(&run, &qrels, &measures, 1, true);
    assert_eq!(present.queries_evaluated, expected.len());
    assert_eq!(complete.queries_evaluated, expected.len() + 2);
    assert_eq!(complete.queries_without_results, 2);
    assert_eq!(complete.per_query["q9"]["ndcg@10"], 0.0);
    for (ours, theirs) in [("ndcg@10", "ndcg_cut_10"), ("mrr@10", "mrr@10")] {
        let sum: f64 = expected.values().map(|v| v[theirs]).sum();
        let (got_present, got_complete) = (present.mean[ours], complete.mean[ours]);
        let want_present = sum / expected.len() as f64;
        let want_complete = sum / (expected.len() + 2) as f64;
        assert!((got_present - want_present).abs() <= 1e-12, "{ours}");
        assert!((got_complete - want_complete).abs() <= 1e-12, "{ours} -c");
    }
}

/// ir_measures' `rel` on a measure is trec_eval's `-l` for that measure alone: at the default
/// level 1, `R(rel=2)@…` and friends give pytrec_eval's values at level 2.
#[test]
fn a_measure_with_rel_2_equals_pytrec_eval_at_level_two() {
    let expected: Expected =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    let expected = &expected["graded_level2"];
    let qrels = Qrels::read(&fixture("qrels.graded.txt")).unwrap();
    let run = Run::read(&fixture("run.txt")).unwrap();
    for (query, values) in expected {
        for (name, want) in values {
            let plain = Measure::parse(name).unwrap();
            if plain.name().starts_with("ndcg") {
                continue; // graded: the level does not apply
            }
            let with_rel = lsr_eval::Measure {
                rel: Some(2),
                ..plain
            };
            let evaluation = evaluate(&run, &qrels, &[with_rel], 1, false);
            let got = evaluation.per_query[query][&with_rel.name()];
            assert!(
                (got - want).abs() <= 1e-9,
                "{query} {}: {got} != pytrec_eval {want} at level 2",
                with_rel.name()
            );
        }
    }
}
