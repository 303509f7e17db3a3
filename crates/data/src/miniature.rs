//! A deterministic synthetic retrieval task for the offline miniature of the experiment
//! matrix: MS MARCO-style training triplets and BEIR-style test sets whose relevance needs both
//! exact matching and expansion.
//!
//! Every document has one *entity* token and belongs to one *topic*, written with the topic's
//! document-side words (`d07x3`); a query names an entity and its topic with the topic's
//! query-side words (`q07x1`), which never occur in documents. Each entity occurs in three
//! documents of three different topics, so the relevant document is the one that matches the
//! entity exactly *and* the topic through expansion (query word → document words of the same
//! topic, learnable only from the training triplets). Exact matching alone ties three documents;
//! expansion alone leaves every document of the topic. Noise words occur everywhere.
//!
//! Files written under the output directory:
//! - `train/triples.tsv`: query, positive, hard negative (same entity, another topic);
//! - a teacher for distillation, in naver/splade's layout: `train/queries.tsv` and
//!   `train/collection.tsv` (`id<TAB>text`: each triple's query, the training documents),
//!   `train/qrels.tsv` (each query's positive) and `train/scores.pkl.gz`, the pickle
//!   `{qid: {pid: score}}` over each query's candidates (its positive, its entity's other
//!   documents, documents of its topic, random documents), scored by what they match plus
//!   seeded noise: [`TEACHER_ENTITY`] for the entity, [`TEACHER_TOPIC`] for the topic, noise
//!   uniform in ±[`TEACHER_NOISE`];
//! - `beir/<name>/{corpus.jsonl, queries.jsonl, qrels/test.tsv}` for each test set;
//! - `vocab.txt`: every word, one per line (the miniature models' vocabulary).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use lsr_files::AtomicFile;

use crate::bench_collection::splitmix64;
use crate::error::{DataError, Result};

/// Sizes of the task.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    pub seed: u64,
    pub topics: usize,
    /// Query-side and document-side words per topic (each).
    pub words_per_topic: usize,
    pub entities: usize,
    pub noise_words: usize,
    pub train_triples: usize,
    /// Test sets: name and number of queries (each over a corpus of 3 × entities documents).
    pub test_sets: Vec<(String, usize)>,
}

impl Default for SynthSpec {
    fn default() -> Self {
        Self {
            seed: 20261129,
            topics: 40,
            words_per_topic: 6,
            entities: 300,
            noise_words: 80,
            train_triples: 6000,
            // synth-val is the validation set scored during training; each set draws from its
            // own stream, so adding one leaves the others unchanged.
            test_sets: vec![
                ("synth-a".into(), 150),
                ("synth-b".into(), 150),
                ("synth-val".into(), 100),
            ],
        }
    }
}

/// What the miniature's teacher scores a candidate that matches the query's entity, its topic,
/// and the amplitude of the uniform noise added to every score.
pub const TEACHER_ENTITY: f64 = 4.0;
pub const TEACHER_TOPIC: f64 = 5.0;
pub const TEACHER_NOISE: f64 = 1.0;

/// Candidates per training query beyond the positive and its entity's two other documents:
/// documents of the query's topic, and random documents.
const TOPIC_CANDIDATES: usize = 4;
const RANDOM_CANDIDATES: usize = 4;

/// The draw stream of the teacher, apart from the task's so that adding it left them as they were.
const TEACHER_STREAM: u64 = 1 << 32;

/// A stream of draws from `splitmix64(seed, counter)`.
struct Draws {
    seed: u64,
    counter: u64,
}

impl Draws {
    fn new(seed: u64, stream: u64) -> Self {
        Self {
            seed: splitmix64(seed ^ splitmix64(stream)),
            counter: 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        self.counter += 1;
        (splitmix64(self.seed.wrapping_add(self.counter)) % n as u64) as usize
    }

    /// Uniform in `[-1, 1)`.
    fn signed_unit(&mut self) -> f64 {
        self.counter += 1;
        let bits = splitmix64(self.seed.wrapping_add(self.counter)) >> 11;
        bits as f64 / (1u64 << 52) as f64 - 1.0
    }
}

struct Doc {
    entity: usize,
    topic: usize,
    text: String,
}

fn entity(e: usize) -> String {
    format!("e{e:04}")
}

fn query_word(t: usize, i: usize) -> String {
    format!("q{t:02}x{i}")
}

fn doc_word(t: usize, i: usize) -> String {
    format!("d{t:02}x{i}")
}

fn noise(n: usize) -> String {
    format!("n{n:03}")
}

/// Three documents per entity, on three distinct topics.
fn collection(spec: &SynthSpec, draws: &mut Draws) -> Vec<Doc> {
    let mut docs = Vec::with_capacity(3 * spec.entities);
    for e in 0..spec.entities {
        let mut topics: Vec<usize> = Vec::new();
        while topics.len() < 3 {
            let t = draws.below(spec.topics);
            if !topics.contains(&t) {
                topics.push(t);
            }
        }
        for topic in topics {
            let mut words = vec![entity(e)];
            for _ in 0..5 {
                words.push(doc_word(topic, draws.below(spec.words_per_topic)));
            }
            let stray = draws.below(spec.topics);
            words.push(doc_word(stray, draws.below(spec.words_per_topic)));
            for _ in 0..5 {
                words.push(noise(draws.below(spec.noise_words)));
            }
            for i in (1..words.len()).rev() {
                words.swap(i, draws.below(i + 1));
            }
            docs.push(Doc {
                entity: e,
                topic,
                text: words.join(" "),
            });
        }
    }
    docs
}

fn query(spec: &SynthSpec, doc: &Doc, draws: &mut Draws) -> String {
    let a = draws.below(spec.words_per_topic);
    let b = (a + 1 + draws.below(spec.words_per_topic - 1)) % spec.words_per_topic;
    let mut words = [
        entity(doc.entity),
        query_word(doc.topic, a),
        query_word(doc.topic, b),
        noise(draws.below(spec.noise_words)),
    ];
    for i in (1..words.len()).rev() {
        words.swap(i, draws.below(i + 1));
    }
    words.join(" ")
}

/// Every word of the task.
pub fn vocabulary(spec: &SynthSpec) -> Vec<String> {
    let mut words: Vec<String> = (0..spec.entities).map(entity).collect();
    for t in 0..spec.topics {
        for i in 0..spec.words_per_topic {
            words.push(query_word(t, i));
            words.push(doc_word(t, i));
        }
    }
    words.extend((0..spec.noise_words).map(noise));
    words
}

/// Writes the task under `out` (see the module documentation).
pub fn write_synthetic(spec: &SynthSpec, out: &Path) -> Result<()> {
    if spec.topics < 3 || spec.words_per_topic < 2 || spec.entities == 0 || spec.noise_words == 0 {
        return Err(DataError::Invalid(
            "the synthetic task needs ≥ 3 topics, ≥ 2 words per topic, entities and noise words"
                .into(),
        ));
    }
    let file = |path: &Path| -> Result<AtomicFile> { Ok(AtomicFile::create(path)?) };
    let write = |w: &mut AtomicFile, path: &Path, line: String| {
        writeln!(w, "{line}").map_err(|e| DataError::io(path, e))
    };

    let vocab_path = out.join("vocab.txt");
    let mut vocab = file(&vocab_path)?;
    for word in vocabulary(spec) {
        write(&mut vocab, &vocab_path, word)?;
    }
    vocab.commit()?;

    let mut draws = Draws::new(spec.seed, 0);
    let train = collection(spec, &mut draws);
    let triples_path = out.join("train/triples.tsv");
    let mut triples = file(&triples_path)?;
    let mut examples = Vec::with_capacity(spec.train_triples);
    for _ in 0..spec.train_triples {
        let positive_index = draws.below(train.len());
        let positive = &train[positive_index];
        // The hard negative: the same entity on another topic (the entity's documents are
        // consecutive).
        let first = 3 * positive.entity;
        let negative = loop {
            let candidate = &train[first + draws.below(3)];
            if candidate.topic != positive.topic {
                break candidate;
            }
        };
        let query = query(spec, positive, &mut draws);
        let line = format!("{query}\t{}\t{}", positive.text, negative.text);
        write(&mut triples, &triples_path, line)?;
        examples.push((query, positive_index));
    }
    triples.commit()?;
    write_teacher(spec, &train, &examples, &out.join("train"))?;

    for (set, (name, queries)) in spec.test_sets.iter().enumerate() {
        let mut draws = Draws::new(spec.seed, set as u64 + 1);
        let docs = collection(spec, &mut draws);
        let dir = out.join("beir").join(name);
        let corpus_path = dir.join("corpus.jsonl");
        let mut corpus = file(&corpus_path)?;
        for (i, doc) in docs.iter().enumerate() {
            let line = serde_json::json!({"_id": format!("d{i}"), "title": "", "text": doc.text});
            write(&mut corpus, &corpus_path, line.to_string())?;
        }
        let (queries_path, qrels_path) = (dir.join("queries.jsonl"), dir.join("qrels/test.tsv"));
        let (mut query_file, mut qrels) = (file(&queries_path)?, file(&qrels_path)?);
        write(&mut qrels, &qrels_path, "query-id\tcorpus-id\tscore".into())?;
        for q in 0..*queries {
            let target = draws.below(docs.len());
            let line = serde_json::json!({"_id": format!("q{q}"), "text": query(spec, &docs[target], &mut draws)});
            write(&mut query_file, &queries_path, line.to_string())?;
            write(&mut qrels, &qrels_path, format!("q{q}\td{target}\t1"))?;
        }
        for written in [corpus, query_file, qrels] {
            written.commit()?;
        }
    }
    Ok(())
}

/// The training documents and queries by id, the qrels and the teacher's pickle (module
/// documentation). `examples` are each triple's query and its positive's index in `train`.
fn write_teacher(
    spec: &SynthSpec,
    train: &[Doc],
    examples: &[(String, usize)],
    dir: &Path,
) -> Result<()> {
    let lines = |name: &str, rows: &mut dyn Iterator<Item = String>| -> Result<()> {
        let path = dir.join(name);
        let mut out = AtomicFile::create(&path)?;
        for row in rows {
            writeln!(out, "{row}").map_err(|e| DataError::io(&path, e))?;
        }
        Ok(out.commit()?)
    };
    lines(
        "collection.tsv",
        &mut train
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{i}\t{}", d.text)),
    )?;
    lines(
        "queries.tsv",
        &mut examples
            .iter()
            .enumerate()
            .map(|(q, (text, _))| format!("{q}\t{text}")),
    )?;
    lines(
        "qrels.tsv",
        &mut examples
            .iter()
            .enumerate()
            .map(|(q, (_, p))| format!("{q}\t0\t{p}\t1")),
    )?;
    let mut by_topic: Vec<Vec<usize>> = vec![Vec::new(); spec.topics];
    for (i, doc) in train.iter().enumerate() {
        by_topic[doc.topic].push(i);
    }
    let mut draws = Draws::new(spec.seed, TEACHER_STREAM);
    let mut scores = BTreeMap::new();
    for (q, &(_, positive)) in examples.iter().enumerate() {
        let target = &train[positive];
        let same_entity = (0..3).map(|i| 3 * target.entity + i);
        let same_topic: Vec<usize> = (0..TOPIC_CANDIDATES)
            .map(|_| by_topic[target.topic][draws.below(by_topic[target.topic].len())])
            .collect();
        let random: Vec<usize> = (0..RANDOM_CANDIDATES)
            .map(|_| draws.below(train.len()))
            .collect();
        let mut candidates = BTreeMap::new();
        for doc in same_entity.chain(same_topic).chain(random) {
            let d = &train[doc];
            let relevance = TEACHER_ENTITY * f64::from(d.entity == target.entity)
                + TEACHER_TOPIC * f64::from(d.topic == target.topic);
            candidates.insert(doc as u64, relevance + TEACHER_NOISE * draws.signed_unit());
        }
        scores.insert(q as u64, candidates);
    }
    crate::teacher::write_pickle(&dir.join("scores.pkl.gz"), &scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::Dataset;

    #[test]
    fn writes_a_deterministic_task_the_readers_accept() {
        let spec = SynthSpec {
            entities: 20,
            train_triples: 50,
            test_sets: vec![("synth-a".into(), 10)],
            ..SynthSpec::default()
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write_synthetic(&spec, a.path()).unwrap();
        write_synthetic(&spec, b.path()).unwrap();
        for file in [
            "train/triples.tsv",
            "beir/synth-a/corpus.jsonl",
            "beir/synth-a/queries.jsonl",
            "vocab.txt",
        ] {
            assert_eq!(
                std::fs::read(a.path().join(file)).unwrap(),
                std::fs::read(b.path().join(file)).unwrap(),
                "{file}"
            );
        }
        let datasets = Dataset::resolve("beir/synth-a", a.path()).unwrap();
        let (queries, qrels) = datasets[0].queries_and_qrels().unwrap();
        assert_eq!(queries.len(), 10);
        assert_eq!(qrels.queries.len(), 10);
        for file in [
            "train/queries.tsv",
            "train/collection.tsv",
            "train/qrels.tsv",
            "train/scores.pkl.gz",
        ] {
            assert_eq!(
                std::fs::read(a.path().join(file)).unwrap(),
                std::fs::read(b.path().join(file)).unwrap(),
                "{file}"
            );
        }
        // The teacher scores each query's positive highest of its entity's documents, above
        // every candidate that matches less, whatever the noise.
        let qrels = crate::Qrels::read(&a.path().join("train/qrels.tsv")).unwrap();
        let teacher =
            crate::teacher::read_pickle(&a.path().join("train/scores.pkl.gz"), &qrels).unwrap();
        assert_eq!(teacher.queries.len(), 50);
        for query in &teacher.queries {
            let (_, positive) = teacher.positives(query).next().unwrap();
            assert!(positive >= (TEACHER_ENTITY + TEACHER_TOPIC - TEACHER_NOISE) as f32);
            let best_negative = teacher
                .negatives(query)
                .map(|(_, s)| s)
                .fold(f32::MIN, f32::max);
            assert!(best_negative < positive, "query {}", query.id);
        }
        let triples = std::fs::read_to_string(a.path().join("train/triples.tsv")).unwrap();
        let vocab = std::fs::read_to_string(a.path().join("vocab.txt")).unwrap();
        let words: std::collections::HashSet<&str> = vocab.lines().collect();
        for line in triples.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 3);
            // The query's entity is in the positive and the negative; its topic words never in
            // a document.
            let entity = fields[0].split(' ').find(|w| w.starts_with('e')).unwrap();
            assert!(fields[1].contains(entity) && fields[2].contains(entity));
            assert!(!fields[1].contains(" q") && !fields[1].starts_with('q'));
            assert!(line.split(['\t', ' ']).all(|w| words.contains(w)), "{line}");
        }
    }
}
