//! A fixture model encodes a tiny BEIR-format corpus, the index retrieves, and the measures
//! equal those of a brute-force dense dot product over the same vectors; MS MARCO's FLOPs are
//! over its full dev queries when they are there.

use std::path::Path;

use burn::prelude::*;
use lsr_backbone::reference::fixtures_dir;
use lsr_backbone::{Backbone, RescaleMode, Scale};
use lsr_data::Dataset;
use lsr_eval::pipeline::{EvalSettings, evaluate_dataset};
use lsr_eval::shards::DEFAULT_SHARD_DOCUMENTS;
use lsr_eval::vectors::read_vectors;
use lsr_eval::{IndexBuilder, Measure, Qrels, Run, evaluate, sparsity};
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

/// `beir/tiny` under `root`: eight documents, four queries.
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

/// `beir/tiny` in a fresh folder, and the encoder of [`modernbert_k4`].
pub fn tiny_task() -> (tempfile::TempDir, Dataset, SpladeEncoder) {
    let root = tempfile::tempdir().unwrap();
    write_beir(root.path());
    let dataset = Dataset::resolve("beir/tiny", root.path())
        .unwrap()
        .remove(0);
    (root, dataset, modernbert_k4())
}

/// The ModernBERT fixture at k = 4, on flex, at most 64 tokens.
fn modernbert_k4() -> SpladeEncoder {
    let checkpoint = fixtures_dir().join("modernbert");
    let backbone = Backbone::load(checkpoint.to_str().unwrap(), &Device::flex(), 64).unwrap();
    SpladeEncoder::new(backbone, Scale::new(4.0).unwrap(), RescaleMode::Shared).unwrap()
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

/// Two copies of one model in two directories, evaluated into two more, write the same vectors
/// files, byte for byte: they record the model by its content, not by where it lay.
#[test]
fn vectors_do_not_depend_on_where_the_model_was() {
    let (root, dataset, _) = tiny_task();
    let settings = crate::shards::settings();
    let written: Vec<_> = ["first/model", "second/elsewhere/model"]
        .iter()
        .map(|place| {
            let dir = root.path().join(place);
            std::fs::create_dir_all(&dir).unwrap();
            for file in ["config.json", "model.safetensors", "tokenizer.json"] {
                std::fs::copy(fixtures_dir().join("modernbert").join(file), dir.join(file))
                    .unwrap();
            }
            let backbone = Backbone::load(dir.to_str().unwrap(), &Device::flex(), 64).unwrap();
            let k = Scale::new(4.0).unwrap();
            let encoder = SpladeEncoder::new(backbone, k, RescaleMode::Shared).unwrap();
            let out = dir.join("out");
            evaluate_dataset(&encoder, &dataset, &settings, &out).unwrap();
            ["corpus.vectors", "queries.vectors"].map(|f| std::fs::read(out.join(f)).unwrap())
        })
        .collect();
    assert!(written[0] == written[1], "the vectors files differ");
    let queries = root.path().join("first/model/out/queries.vectors");
    let recorded = lsr_eval::vectors::recorded(&queries).unwrap();
    let model = recorded.expect("an LSRVEC3 file records its model").model;
    assert!(
        model.starts_with("sha256:") && model.ends_with(" k=4"),
        "{model}"
    );
}

#[test]
fn index_retrieval_matches_brute_force_dot_products() {
    let (root, dataset, encoder) = tiny_task();
    let measures: Vec<Measure> = ["ndcg@10", "mrr@10", "recall@100", "map"]
        .iter()
        .map(|m| Measure::parse(m).unwrap())
        .collect();
    let settings = EvalSettings {
        batch_size: 3,
        query_max_length: 16,
        document_max_length: 32,
        top_k: 1000,
        measures: measures.clone(),
        complete: true,
        quantize: None,
        shard_documents: Some(DEFAULT_SHARD_DOCUMENTS),
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
    let brute = evaluate(&run, &qrels, &measures, 1, true);
    for (name, value) in &brute.mean {
        let got = report.summary.metrics[name];
        assert!(
            (got - value).abs() < 1e-9,
            "{name}: index {got} vs brute force {value}"
        );
    }
    assert!(report.summary.sparsity.flops > 0.0 && report.summary.sparsity.mean_doc_l0 > 0.0);
    assert_eq!(report.judged_documents_missing_from_corpus, 0);
    let written = Run::read(&out.join("run.trec")).unwrap();
    assert!(
        written.queries["d6"].iter().all(|(doc, _)| doc != "d6"),
        "identical id kept"
    );
}

#[test]
fn msmarco_flops_are_over_the_full_dev_queries_when_the_data_root_has_them() {
    let root = tempfile::tempdir().unwrap();
    let msmarco = root.path().join("msmarco");
    std::fs::create_dir_all(&msmarco).unwrap();
    let collection: String = DOCS
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}\t{t}\n"))
        .collect();
    std::fs::write(msmarco.join("collection.tsv"), collection).unwrap();
    let small = "1\tcapital of france\n2\tboil an egg\n";
    std::fs::write(msmarco.join("queries.dev.small.tsv"), small).unwrap();
    std::fs::write(
        msmarco.join("qrels.dev.small.tsv"),
        "1\t0\t0\t1\n2\t0\t2\t1\n",
    )
    .unwrap();
    let encoder = modernbert_k4();
    let settings = EvalSettings {
        batch_size: 2,
        query_max_length: 16,
        document_max_length: 32,
        top_k: 10,
        measures: vec![Measure::parse("mrr@10").unwrap()],
        complete: true,
        quantize: None,
        shard_documents: Some(DEFAULT_SHARD_DOCUMENTS),
    };
    let evaluate_in = |dir: &str| {
        let dataset = Dataset::resolve("msmarco-dev", root.path())
            .unwrap()
            .remove(0);
        evaluate_dataset(&encoder, &dataset, &settings, &root.path().join(dir)).unwrap()
    };
    let dev_small = evaluate_in("small");
    assert!(
        dev_small
            .flops_queries
            .file
            .ends_with("queries.dev.small.tsv")
    );
    assert_eq!(
        (
            dev_small.flops_queries.queries,
            dev_small.summary.sparsity.num_queries
        ),
        (2, 2)
    );

    let full =
        format!("{small}3\tsparse retrieval model\n4\thead norm collapse\n5\tthe lazy dog\n");
    std::fs::write(msmarco.join("queries.dev.tsv"), &full).unwrap();
    let report = evaluate_in("full");
    assert!(report.flops_queries.file.ends_with("queries.dev.tsv"));
    assert_eq!(
        (
            report.flops_queries.queries,
            report.summary.sparsity.num_queries
        ),
        (5, 5)
    );
    assert_eq!(
        report.summary.metrics, dev_small.summary.metrics,
        "the evaluated queries are dev-small's"
    );

    // The FLOPs of the five queries, each encoded alone, against the written corpus vectors.
    let mut builder = IndexBuilder::new(encoder.backbone.config.dims.vocab_size);
    for (id, terms) in vectors(&root.path().join("full/corpus.vectors")) {
        builder.add(&id, &terms).unwrap();
    }
    let index = builder.build();
    let tokenizer = encoder.backbone.tokenizer.with_max_length(16).unwrap();
    let texts: Vec<&str> = full
        .lines()
        .map(|l| l.split_once('\t').unwrap().1)
        .collect();
    let alone = encoder.encode_with(&tokenizer, &texts, 1).unwrap();
    let expected = sparsity(&index, alone.iter().map(|v| v.terms.as_slice()));
    assert!(
        (report.summary.sparsity.flops - expected.flops).abs() < 1e-9,
        "{} vs {}",
        report.summary.sparsity.flops,
        expected.flops
    );
    let written: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("full/metrics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(written["flops_queries"]["queries"], 5);
}
