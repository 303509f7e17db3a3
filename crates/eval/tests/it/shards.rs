//! The corpus in shards: a pass that lost its last shards (a kill) or was split into parts ends
//! with the vectors, run and measures of one uninterrupted pass, reading back the complete
//! shards it found; shards encoded under other settings, or damaged since they were written,
//! are encoded again.

use std::path::Path;

use lsr_eval::Measure;
use lsr_eval::pipeline::{EvalSettings, encode_corpus_part, evaluate_dataset};
use lsr_eval::shards::{SHARD_DIR, ShardPart};
use lsr_files::damage::Damage;

use crate::end_to_end::tiny_task;

/// Three documents per shard: the eight documents of `beir/tiny` make three shards.
pub fn settings() -> EvalSettings {
    EvalSettings {
        batch_size: 2,
        query_max_length: 16,
        document_max_length: 32,
        top_k: 10,
        measures: vec![Measure::parse("ndcg@10").unwrap()],
        complete: true,
        quantize: None,
        shard_documents: Some(3),
    }
}

/// Every output of `a` and `b` is the same, `metrics.json` aside from its timing.
fn same_outputs(a: &Path, b: &Path) {
    for file in [
        "corpus.vectors",
        "queries.vectors",
        "run.trec",
        "per_query.json",
    ] {
        let read = |dir: &Path| std::fs::read(dir.join(file)).unwrap();
        assert!(read(a) == read(b), "{file} differs");
    }
    let metrics = |dir: &Path| {
        let text = std::fs::read_to_string(dir.join("metrics.json")).unwrap();
        let mut metrics: serde_json::Value = serde_json::from_str(&text).unwrap();
        metrics.as_object_mut().unwrap().remove("encode_seconds");
        metrics
    };
    assert_eq!(metrics(a), metrics(b));
}

fn shard_files(out: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(out.join(SHARD_DIR)).unwrap();
    let mut names: Vec<String> = (entries.map(|e| e.unwrap().file_name()))
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".vectors") && !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

#[test]
fn a_pass_resumed_after_its_complete_shards_or_split_in_parts_ends_as_one_pass() {
    let (root, dataset, encoder) = tiny_task();
    let whole = root.path().join("whole");
    evaluate_dataset(&encoder, &dataset, &settings(), &whole).unwrap();
    assert_eq!(
        shard_files(&whole),
        ["000000.vectors", "000001.vectors", "000002.vectors"]
    );

    // Killed after two shards: only they, and the key, are left.
    let resumed = root.path().join("resumed");
    let shards = resumed.join(SHARD_DIR);
    std::fs::create_dir_all(&shards).unwrap();
    for file in ["key.json", "000000.vectors", "000001.vectors"] {
        std::fs::copy(whole.join(SHARD_DIR).join(file), shards.join(file)).unwrap();
    }
    let modified = |file: &str| {
        std::fs::metadata(shards.join(file))
            .unwrap()
            .modified()
            .unwrap()
    };
    let kept = modified("000000.vectors");
    evaluate_dataset(&encoder, &dataset, &settings(), &resumed).unwrap();
    same_outputs(&whole, &resumed);
    assert_eq!(
        modified("000000.vectors"),
        kept,
        "a complete shard is read, not encoded again"
    );

    // Two parts, as two processes would encode them, then a run that finds every shard done.
    let parts = root.path().join("parts");
    let mut complete = Vec::new();
    for index in 0..2 {
        let part = ShardPart { index, count: 2 };
        complete.push(encode_corpus_part(&encoder, &dataset, &settings(), &parts, part).unwrap());
    }
    assert_eq!(
        complete,
        [(2, 3), (3, 3)],
        "part 0 takes shards 0 and 2, part 1 shard 1"
    );
    evaluate_dataset(&encoder, &dataset, &settings(), &parts).unwrap();
    same_outputs(&whole, &parts);

    // Other settings: the shards are not those of this pass, and are encoded again.
    let other = EvalSettings {
        batch_size: 1,
        ..settings()
    };
    evaluate_dataset(&encoder, &dataset, &other, &parts).unwrap();
    let key = std::fs::read_to_string(parts.join(SHARD_DIR).join("key.json")).unwrap();
    let key: serde_json::Value = serde_json::from_str(&key).unwrap();
    assert_eq!(key["batch_size"], 1, "{key}");
}

/// A killed pass resumed with one of its complete shards cut short or with a byte flipped: the
/// damaged shard is encoded again, the intact one read, and the outputs are those of an
/// undisturbed pass.
#[test]
fn a_damaged_shard_is_encoded_again_and_the_pass_ends_as_an_undisturbed_one() {
    let (root, dataset, encoder) = tiny_task();
    let whole = root.path().join("whole");
    evaluate_dataset(&encoder, &dataset, &settings(), &whole).unwrap();
    for damage in Damage::ALL {
        let kind = damage.to_string();
        let resumed = root.path().join(&kind);
        let shards = resumed.join(SHARD_DIR);
        std::fs::create_dir_all(&shards).unwrap();
        for file in ["key.json", "000000.vectors", "000001.vectors"] {
            std::fs::copy(whole.join(SHARD_DIR).join(file), shards.join(file)).unwrap();
        }
        damage.apply(&shards.join("000001.vectors")).unwrap();
        let modified = |file: &str| {
            let metadata = std::fs::metadata(shards.join(file)).unwrap();
            metadata.modified().unwrap()
        };
        let intact = modified("000000.vectors");
        evaluate_dataset(&encoder, &dataset, &settings(), &resumed).unwrap();
        same_outputs(&whole, &resumed);
        assert_eq!(
            modified("000000.vectors"),
            intact,
            "{kind}: an intact shard is read"
        );
        let shard = |dir: &Path| std::fs::read(dir.join(SHARD_DIR).join("000001.vectors"));
        assert!(
            shard(&whole).unwrap() == shard(&resumed).unwrap(),
            "{kind}: the damaged shard is not encoded again"
        );
    }
}

#[test]
fn a_shard_part_reads_as_i_of_n() {
    assert_eq!("1/4".parse(), Ok(ShardPart { index: 1, count: 4 }));
    for bad in ["4/4", "1", "a/2", "0/0", "-1/2"] {
        let error = bad.parse::<ShardPart>().unwrap_err();
        assert!(error.contains("expected I/N"), "{bad}: {error}");
    }
}
