//! Fuzz targets: one function per reader of untrusted input, feeding it bytes through the real
//! loading code (a file written to a scratch directory where the reader takes a path). An `Err`
//! is a correct answer to a broken input; a panic, a hang or an allocation over
//! [`ALLOCATION_LIMIT`] is a bug. The libFuzzer driver is `libfuzzer/`; the inputs that found
//! bugs are `regressions/<target>/`, which `tests/regressions.rs` runs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::path::{Path, PathBuf};

use burn::prelude::Device;
use lsr_backbone::{MaskedLm, ModelConfig, TextTokenizer, Weights};
use lsr_data::registry::CorpusFormat;
use lsr_data::{DataError, Dataset, Qrels, Run};
use lsr_matrix::Matrix;
use lsr_train::{DataConfig, TrainConfig, data::TripleSource};

/// A fuzz target: bytes in; returning is success, whatever the reader answered.
pub type Target = fn(&[u8]);

/// Every target by name, as the driver and the regression test find them.
pub const TARGETS: &[(&str, Target)] = &[
    ("safetensors", safetensors),
    ("pytorch", pytorch),
    ("config", config),
    ("tokenizer", tokenizer),
    ("trec_run", trec_run),
    ("trec_qrels", trec_qrels),
    ("beir", beir),
    ("triples", triples),
    ("teacher", teacher),
    ("vectors", vectors),
    ("matrix", matrix),
    ("cell", cell),
];

pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The largest single allocation a small input may cause: 1 GiB.
pub const ALLOCATION_LIMIT: usize = 1 << 30;

/// The system allocator, refusing any allocation over [`ALLOCATION_LIMIT`], which Rust turns
/// into an abort ("memory allocation of N bytes failed") that the fuzzer records as a crash.
/// Without it a huge `vec![0; n]` would pass unnoticed: the pages it never touches cost no
/// memory.
pub struct CappedAllocator;

// SAFETY: every call is forwarded unchanged to `System` or refused with a null pointer, which
// the `GlobalAlloc` contract allows.
unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_LIMIT {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_LIMIT {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOCATION_LIMIT {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

thread_local! {
    /// This thread's scratch directory: the regression test runs targets on several threads.
    static SCRATCH: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

/// Writes `data` to `name` in this thread's scratch directory and returns its path. The
/// directory is made in `LSR_FUZZ_SCRATCH` (which `fuzz.sh` removes afterwards: libFuzzer's
/// processes exit without removing theirs), else in memory under /dev/shm where there is one.
fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let dir = scratch.get_or_insert_with(|| {
            let shm = Path::new("/dev/shm");
            let base = match std::env::var_os("LSR_FUZZ_SCRATCH") {
                Some(dir) => PathBuf::from(dir),
                None if shm.is_dir() => shm.to_path_buf(),
                None => std::env::temp_dir(),
            };
            tempfile::Builder::new()
                .prefix("lsr-fuzz")
                .tempdir_in(base)
                .expect("a scratch directory")
        });
        let path = dir.path().join(name);
        std::fs::write(&path, data).expect("the scratch directory is writable");
        path
    })
}

/// `name`, or `name.gz` for gzip data (the readers decompress by file name).
fn gz_name(name: &str, data: &[u8]) -> String {
    if data.starts_with(&[0x1f, 0x8b]) {
        format!("{name}.gz")
    } else {
        name.to_string()
    }
}

/// Reads every tensor a checkpoint declares, as the families would ask for it.
fn read_every_tensor(weights: &Weights) {
    for (name, shape) in weights.stored() {
        let _ = match *shape.as_slice() {
            [a] => weights.tensor(&name, [a]).map(drop),
            [a, b] => weights.tensor(&name, [a, b]).map(drop),
            [a, b, c] => weights.tensor(&name, [a, b, c]).map(drop),
            [a, b, c, d] => weights.tensor(&name, [a, b, c, d]).map(drop),
            _ => Ok(()),
        };
    }
}

/// `model.safetensors`: header, tensor table, data.
pub fn safetensors(data: &[u8]) {
    let path = scratch_file("model.safetensors", data);
    if let Ok(weights) = Weights::open(&path, &Device::flex()) {
        read_every_tensor(&weights);
    }
}

/// `pytorch_model.bin` (zip or legacy pickle).
pub fn pytorch(data: &[u8]) {
    let path = scratch_file("pytorch_model.bin", data);
    if let Ok(weights) = Weights::open(&path, &Device::flex()) {
        read_every_tensor(&weights);
    }
}

/// `config.json` → its family's config, and that family loading against a checkpoint without
/// tensors: everything a config alone makes the loader do before the first tensor is read.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = ModelConfig::parse(Path::new("config.json"), text) else {
        return;
    };
    // A safetensors file with an empty header: 8-byte length, then `{}`.
    let empty = scratch_file("empty.safetensors", b"\x02\0\0\0\0\0\0\0{}");
    let weights = Weights::open(&empty, &Device::flex()).expect("an empty checkpoint opens");
    let _ = MaskedLm::load(&config, &weights);
}

/// `tokenizer.json`, then one batch through it, whose ids must all have an embedding row.
pub fn tokenizer(data: &[u8]) {
    const ROWS: usize = 1 << 20;
    let path = scratch_file("tokenizer.json", data);
    let Ok(tokenizer) = TextTokenizer::from_file(&path, 0, ROWS, 16) else {
        return;
    };
    let texts = [
        "what is rust?",
        "",
        "Ünïcödé 東京 text, with ... punctuation!",
    ];
    if let Ok(batch) = tokenizer.encode_batch(&texts) {
        let beyond = batch.ids.iter().find(|&&id| id as usize >= ROWS);
        assert!(
            beyond.is_none(),
            "id {beyond:?} of {ROWS} embedding rows was accepted"
        );
    }
}

/// A TREC run (gzipped if the data is).
pub fn trec_run(data: &[u8]) {
    let _ = Run::read(&scratch_file(&gz_name("run.trec", data), data));
}

/// TREC or BEIR qrels (gzipped if the data is).
pub fn trec_qrels(data: &[u8]) {
    let _ = Qrels::read(&scratch_file(&gz_name("qrels.txt", data), data));
}

/// A teacher's pickle `{qid: {pid: score}}` (gzipped if the data is), against qrels judging
/// passage q − 100 of each query q < 200 as the fixtures' qrels do, so that the scores are read
/// through to the queries they make.
pub fn teacher(data: &[u8]) {
    let judged = (100..200).map(|q: u32| {
        let positive = std::collections::HashMap::from([((q - 100).to_string(), 1)]);
        (q.to_string(), positive)
    });
    let qrels = Qrels {
        queries: judged.collect(),
    };
    let path = scratch_file(&gz_name("scores.pkl", data), data);
    let _ = lsr_data::teacher::read_pickle(&path, &qrels);
}

/// A data set's corpus, queries and qrels: the data split at its first two NUL bytes. A part
/// that starts with `{` is BEIR JSONL, otherwise TSV; a gzip part is named `.gz`.
pub fn beir(data: &[u8]) {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (corpus, queries, qrels) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let jsonl = |part: &[u8]| part.trim_ascii_start().starts_with(b"{");
    let (corpus_name, corpus_format) = if jsonl(corpus) {
        ("corpus.jsonl", CorpusFormat::Jsonl)
    } else {
        ("collection.tsv", CorpusFormat::Tsv)
    };
    let queries_name = if jsonl(queries) {
        "queries.jsonl"
    } else {
        "queries.tsv"
    };
    let dataset = Dataset {
        name: "beir/fuzz".into(),
        corpus: scratch_file(&gz_name(corpus_name, corpus), corpus),
        corpus_format,
        queries: scratch_file(&gz_name(queries_name, queries), queries),
        qrels: scratch_file(&gz_name("test.tsv", qrels), qrels),
        relevance_level: 1,
        ignore_identical_ids: true,
        judged_queries_only: true,
        flops_queries: None,
    };
    let _ = dataset.for_each_document(|_, _| Ok::<_, DataError>(()));
    let _ = dataset.queries_and_qrels();
}

/// Training examples. The first byte picks the format (0: text triples, 1: JSON lines, 2: id
/// triples, 3: distillation triples with scores, modulo 4); for id triples the rest is split at
/// its first two NUL bytes into triples, queries and collection.
pub fn triples(data: &[u8]) {
    let Some((&format, rest)) = data.split_first() else {
        return;
    };
    let config = match format % 4 {
        0 => DataConfig::Triples {
            triples: scratch_file("triples.tsv", rest),
        },
        1 => DataConfig::Jsonl {
            triples: scratch_file("triples.jsonl", rest),
        },
        3 => DataConfig::DistilTriples {
            triples: scratch_file("distil.tsv", rest),
        },
        _ => {
            let mut parts = rest.splitn(3, |&b| b == 0);
            let mut next = |name: &str| scratch_file(name, parts.next().unwrap_or_default());
            DataConfig::IdTriples {
                triples: next("qidpidtriples.tsv"),
                queries: next("queries.tsv"),
                collection: next("collection.tsv"),
            }
        }
    };
    let Ok(source) = TripleSource::open(&config) else {
        return;
    };
    // The first lines are enough: every line goes through the same code.
    for index in 0..source.len().min(64) {
        let _ = source.example(index, 1, index as u64);
    }
}

/// A sparse-vector file (`LSRVEC3`, or the older `LSRVEC2` and `LSRVEC1`): its checksum checked
/// alone, then read.
pub fn vectors(data: &[u8]) {
    let path = scratch_file("corpus.vectors", data);
    let _ = lsr_eval::vectors::verify(&path);
    let _ = lsr_eval::vectors::read_vectors(&path, |_, _| Ok(()));
}

/// A matrix TOML file (`experiments/*.toml`).
pub fn matrix(data: &[u8]) {
    let _ = Matrix::load(&scratch_file("matrix.toml", data));
}

/// A cell's training config TOML.
pub fn cell(data: &[u8]) {
    let _ = TrainConfig::load(&scratch_file("cell.toml", data), &[]);
}
