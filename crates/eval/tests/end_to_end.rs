//! A fixture model encodes a tiny BEIR-format corpus, the index retrieves, and the measures
//! equal those of a brute-force dense dot product over the same vectors.

use std::path::Path;

use burn::prelude::*;
use lsr_backbone::reference::fixtures_dir;
use lsr_backbone::{Backbone, RescaleMode};
use lsr_data::Dataset;
use lsr_eval::pipeline::{EvalSettings, evaluate_dataset};
use lsr_eval::vectors::read_vectors;
use lsr_eval::{Measure, Qrels, Run, evaluate};
use lsr_splade::SpladeEncoder;

const DOCS: [&str; 8] = [
    "the capital of france is paris",
    "the capital of italy is rome",
    "how long to boil an egg in water",
    "sparse retrieval with a masked language model",
    "the quick brown fox jumps over the lazy dog",
    "neural ranking models score documents",
    "training collapses when the head norm is large",
    "rescaling the projection keeps every direction",
];
const QUERIES: [(&str, &str, &[&str]); 4] = [
    ("q1", "capital of france", &["d0"]),
    ("q2", "boil an egg", &["d2"]),
    ("q3", "sparse retrieval model", &["d3", "d5"]),
    ("d6", "head norm collapse", &["d6", "d7"]),
];

fn write_beir(root: &Path) {
    let dir = root.join("beir/tiny");
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    let corpus: String = DOCS
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{{\"_id\": \"d{i}\", \"title\": \"\", \"text\": \"{t}\"}}\n"))
        .collect();
    std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
    let queries: String = QUERIES
        .iter()
        .map(|(id, t, _)| format!("{{\"_id\": \"{id}\", \"text\": \"{t}\"}}\n"))
        .collect();
    std::fs::write(dir.join("queries.jsonl"), queries).unwrap();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for (id, _, relevant) in QUERIES {
        for doc in relevant {
            qrels.push_str(&format!("{id}\t{doc}\t1\n"));
        }
    }
    std::fs::write(dir.join("qrels/test.tsv"), qrels).unwrap();
}

fn vectors(path: &Path) -> Vec<(String, Vec<(u32, f32)>)> {
    let mut all = Vec::new();
    read_vectors(path, |id, terms| {
        all.push((id.to_string(), terms.to_vec()));
        Ok(())
    })
    .unwrap();
    all
}

#[test]
fn index_retrieval_matches_brute_force_dot_products() {
    let root = tempfile::tempdir().unwrap();
    write_beir(root.path());
    let dataset = Dataset::resolve("beir/tiny", root.path())
        .unwrap()
        .remove(0);
    let backbone = Backbone::load(
        fixtures_dir().join("modernbert").to_str().unwrap(),
        &Device::flex(),
        64,
    )
    .unwrap();
    let encoder = SpladeEncoder::new(backbone, 4.0, RescaleMode::Shared).unwrap();
    let measures: Vec<Measure> = ["ndcg@10", "mrr@10", "recall@100", "map"]
        .iter()
        .map(|m| Measure::parse(m).unwrap())
        .collect();
    let settings = EvalSettings {
        batch_size: 3,
        query_max_length: 16,
        doc_max_length: 32,
        top_k: 1000,
        measures: measures.clone(),
    };
    let out = root.path().join("out");
    let report = evaluate_dataset(&encoder, &dataset, &settings, &out).unwrap();
    for file in [
        "corpus.vectors",
        "queries.vectors",
        "run.trec",
        "metrics.json",
        "per_query.json",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }

    // Brute force: every document scored against every query with dense f64 dot products.
    let docs = vectors(&out.join("corpus.vectors"));
    let queries = vectors(&out.join("queries.vectors"));
    assert_eq!(docs.len(), DOCS.len());
    let vocab = encoder.backbone.config.dims.vocab_size;
    let dense = |terms: &[(u32, f32)]| {
        let mut v = vec![0f64; vocab];
        for &(t, w) in terms {
            v[t as usize] = w as f64;
        }
        v
    };
    let mut run = Run::default();
    for (qid, q) in &queries {
        let q = dense(q);
        let hits = docs
            .iter()
            .filter(|(did, _)| did != qid) // BEIR's identical-id rule
            .map(|(did, d)| {
                (
                    did.clone(),
                    dense(d).iter().zip(&q).map(|(a, b)| a * b).sum::<f64>(),
                )
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        run.queries.insert(qid.clone(), hits);
    }
    let qrels = Qrels::read(&dataset.qrels).unwrap();
    let brute = evaluate(&run, &qrels, &measures, 1);
    for (name, value) in &brute.mean {
        let got = report.metrics[name];
        assert!(
            (got - value).abs() < 1e-9,
            "{name}: index {got} vs brute force {value}"
        );
    }
    assert!(report.sparsity.flops > 0.0 && report.sparsity.mean_doc_l0 > 0.0);
    assert_eq!(report.judged_documents_missing_from_corpus, 0);
    let written = Run::read(&out.join("run.trec")).unwrap();
    assert!(
        written.queries["d6"].iter().all(|(doc, _)| doc != "d6"),
        "identical id kept"
    );
}
