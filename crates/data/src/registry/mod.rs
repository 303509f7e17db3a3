//! The registry of data sets: one entry per set lsr evaluates on or fetches, answering its
//! files under the data root and how they are read, its downloads with their published digests,
//! its ids (lsr's, ir_datasets'), its published number of evaluated queries and the groups
//! (`beir-13`, `nanobeir-13`) it belongs to. Names, groups, fetch plans, digests and query
//! checks are all read from here: a new data set is one line in [`REGISTRY`] (and a constructor
//! beside the others if it comes from a collection lsr does not read yet).
//!
//! The published md5 and size of every download are copied, never computed here, from:
//! - allenai/ir_datasets, ir_datasets/etc/downloads.json at
//!   ae24b5302c5659fc71b1d2bb3dc97e9bb58550fb (MS MARCO, TREC DL 2019/2020, the BEIR zips with
//!   their sizes, the NanoBEIR parquet files);
//! - beir-cellar/beir, README.md (dataset table) at ef83d29307061c65d04b035b4f4e7c18bd8374af,
//!   whose md5 column agrees with ir_datasets for the BEIR zips (webis-touche2020: the v2 zip,
//!   which the UKP URL serves; ir_datasets' v1 entry is an older mirror);
//! - castorini/anserini, docs/experiments-msmarco-passage.md, the same md5 for
//!   collectionandqueries.
//!
//! The NanoBEIR md5s are over the files at `main` when ir_datasets recorded them (2025-03-06); no
//! source records their sizes or sha256 (the hub's LFS ids), so a file that differs is refused
//! with both digests named. The files are fetched at the commit of each repository that MTEB
//! pins (embeddings-benchmark/mteb, `mteb/tasks/retrieval/eng/nano_*_retrieval.py`, at
//! a905523d0111f999360b312bd4a601a0a97a0e1c; pinned there 2024-12-18), not at `main`.
//!
//! MS MARCO's training queries and qrels are pinned from ir_datasets' downloads.json too
//! (`msmarco-passage` `queries`, `train/qrels`). The teachers' scores for distillation could not be
//! pinned: neither sentence-transformers' hub repositories nor naver/splade's README publish a
//! digest of them that lsr could copy, so those sets say why in `unpinned` and `lsr data fetch`
//! refuses them, naming the file to download by hand and where it goes.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use crate::error::{DataError, Result};

/// One data set: everything lsr asks of it.
#[derive(Clone, Debug)]
pub struct DataSet {
    /// lsr's name, in results, tables and matrices.
    pub name: String,
    /// ir_datasets' ids of the same set.
    pub ir_datasets: Vec<String>,
    /// Other names it is known by, matched in any case (NanoBEIR's `nanobeir/scifact`).
    pub aliases: Vec<String>,
    /// How it is evaluated; `None` for training data, which is only fetched.
    pub evaluation: Option<Evaluation>,
    /// What `lsr data fetch` downloads for it, each with its published digest.
    pub downloads: Vec<Download>,
    /// The groups it is a member of, in which it counts towards their mean.
    pub groups: Vec<&'static str>,
    /// The collection it belongs to, if any.
    pub collection: Option<&'static Collection>,
    /// Why its downloads carry no published digest, if they do not (then fetching them is
    /// refused, and the error says what to put where).
    pub unpinned: Option<&'static str>,
}

/// A set's files, relative to the data root, and its evaluation conventions. Each file may also
/// be gzipped (`.gz` appended); in the parquet format each names the directory that holds the
/// split's one `.parquet` file (the HF layout).
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub format: CorpusFormat,
    pub corpus: String,
    pub queries: String,
    pub qrels: String,
    /// The queries FLOPs are measured over when they are not the evaluated ones, if present.
    pub flops_queries: Option<String>,
    /// The lowest grade counted relevant by the binary measures.
    pub relevance_level: i32,
    /// Drop hits whose document id equals the query id (BEIR).
    pub ignore_identical_ids: bool,
    /// Keep only queries that have judgements.
    pub judged_queries_only: bool,
    /// Evaluated queries of the published set (`lsr data verify` checks them); `None` for a
    /// set that is not registered.
    pub published_queries: Option<usize>,
    /// Queries in `flops_queries`, as published (MS MARCO's full dev set: 101,093).
    pub published_flops_queries: Option<usize>,
}

/// Sets sharing a name prefix, a layout and an origin.
#[derive(Debug)]
pub struct Collection {
    /// `beir/`: its sets are `beir/<name>`.
    pub prefix: &'static str,
    /// The collection's name in messages.
    pub title: &'static str,
    /// ir_datasets' ids of its sets, as a pattern for messages.
    pub ir_datasets: &'static str,
    /// The suffix ir_datasets adds to the sets it splits (`/test`), read as the set itself.
    pub split: Option<&'static str>,
    /// How a set under the prefix that is not registered is read, if it may be (a set of
    /// BEIR's layout copied by hand, the miniature's `beir/synth-a`): no pinned download, no
    /// published query count.
    pub unregistered: Option<fn(&str) -> DataSet>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CorpusFormat {
    /// `id<TAB>text` (MS MARCO).
    Tsv,
    /// `{"_id", "title", "text"}` per line (BEIR).
    Jsonl,
    /// Columns `_id`, `text` (NanoBEIR); qrels `query-id`, `corpus-id`.
    Parquet,
}

/// How a downloaded file becomes files under the data root (destinations relative to it).
#[derive(Clone, Debug)]
pub enum Payload {
    /// Members of a `.tar.gz`, matched by path suffix, and where each goes.
    TarGz(Vec<(String, PathBuf)>),
    /// Members of a `.zip`, matched by path suffix, and where each goes.
    Zip(Vec<(String, PathBuf)>),
    /// The download is the file.
    File(PathBuf),
}

/// One download of a data set, with the digest its publisher records (`None`: none is, and
/// the download is refused).
#[derive(Clone, Debug)]
pub enum Download {
    Url {
        url: String,
        payload: Payload,
        pinned: Option<Pinned>,
    },
    /// A file of a Hugging Face dataset repository at a commit, through the hub cache.
    HubDataset {
        repo: String,
        /// The repository's commit the file is fetched at.
        commit: String,
        file: String,
        dest: PathBuf,
        pinned: Option<Pinned>,
    },
}

impl Download {
    /// Files (relative to the data root) this download provides.
    pub fn destinations(&self) -> Vec<&Path> {
        match self {
            Self::Url { payload, .. } => match payload {
                Payload::TarGz(m) | Payload::Zip(m) => m.iter().map(|(_, d)| d.as_path()).collect(),
                Payload::File(d) => vec![d.as_path()],
            },
            Self::HubDataset { dest, .. } => vec![dest.as_path()],
        }
    }

    pub fn origin(&self) -> String {
        match self {
            Self::Url { url, .. } => url.clone(),
            Self::HubDataset {
                repo, commit, file, ..
            } => format!("https://huggingface.co/datasets/{repo}/resolve/{commit}/{file}"),
        }
    }

    pub fn pinned(&self) -> Option<&Pinned> {
        match self {
            Self::Url { pinned, .. } | Self::HubDataset { pinned, .. } => pinned.as_ref(),
        }
    }
}

/// The training data `lsr data fetch` also installs: MS MARCO's `triples.train.small.tsv`
/// (query, positive, BM25 negative), which `table1.toml` trains on.
pub const MSMARCO_TRAIN: &str = "msmarco-train";

/// MS MARCO's training queries and judgements with the collection: the texts and positives of
/// a teacher's scores (`table1-distil.toml`).
pub const MSMARCO_TRAIN_QUERIES: &str = "msmarco-train-queries";

/// The cross-encoder scores naver/splade's SPLADE++ configs distil from (its
/// `data/msmarco/hard_negatives_scores/`): `{qid: {pid: score}}`, 160 million scores of
/// `cross-encoder/ms-marco-MiniLM-L-6-v2`, from sentence-transformers' hub repository.
pub const MSMARCO_CE_SCORES: &str = "msmarco-ce-scores";

/// sentence-transformers' MS MARCO margins of the BERT_CAT ensemble (Hofstätter et al.):
/// `query_id, positive_id, negative_id, score` rows, 39,780,704 of them.
pub const MSMARCO_ENSEMBLE_MARGINS: &str = "msmarco-ensemble-margins";

/// What a publisher records of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    pub md5: String,
    pub size: Option<u64>,
}

const MSMARCO: &str = "https://msmarco.z22.web.core.windows.net/msmarcoranking";
const NIST_DEEP: &str = "https://trec.nist.gov/data/deep";
const BEIR_ZIPS: &str = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets";
/// The HF hub user whose dataset repositories hold NanoBEIR.
const NANOBEIR_USER: &str = "zeta-alpha-ai";

/// The BEIR-13 data sets of the SPLADE papers (BEIR minus the non-public four and
/// CQADupStack).
pub const BEIR_13: &str = "beir-13";
/// The thirteen NanoBEIR data sets (`zeta-alpha-ai/Nano<Name>` on the HF hub), 50 queries each.
pub const NANOBEIR_13: &str = "nanobeir-13";

/// BEIR in its own layout: `beir/<name>/corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv`.
pub static BEIR: Collection = Collection {
    prefix: "beir/",
    title: "BEIR",
    ir_datasets: "beir/<name>/test",
    split: Some("/test"),
    unregistered: Some(|set| beir(set, &[], None, None)),
};

/// NanoBEIR in the HF layout: `nanobeir/Nano<Name>/{corpus,queries,qrels}/*.parquet`.
pub static NANOBEIR: Collection = Collection {
    prefix: "nanobeir/",
    title: "NanoBEIR",
    ir_datasets: "nano-beir/<name>",
    split: None,
    unregistered: None,
};

pub static COLLECTIONS: [&Collection; 2] = [&BEIR, &NANOBEIR];

/// Every data set lsr knows, one line each; groups list their members in this order.
#[rustfmt::skip]
pub static REGISTRY: LazyLock<Vec<DataSet>> = LazyLock::new(|| {
    vec![
        msmarco_dev(),
        trec_dl(2019, 43, pin("eda71eccbe4d251af83150abe065368c", 4276), pin("2f4be390198da108f6845c822e5ada14", 187092)),
        trec_dl(2020, 54, pin("00a406fb0d14ed3752d70d1e4eb98600", 4131), pin("0355ccee7509ac0463e8278186cdd8d1", 218617)),
        msmarco_train(),
        msmarco_train_queries(),
        msmarco_ce_scores(),
        msmarco_ensemble_margins(),
        beir("arguana", &["beir/arguana"], Some(1406), pin("8ad3e3c2a5867cdced806d6503f29b99", 3773617)).in_group(BEIR_13),
        beir("climate-fever", &["beir/climate-fever"], Some(1535), pin("8b66f0a9126c521bae2bde127b4dc99d", 1228666652)).in_group(BEIR_13),
        beir("dbpedia-entity", &["beir/dbpedia-entity/test"], Some(400), pin("c2a39eb420a3164af735795df012ac2c", 639285131)).in_group(BEIR_13),
        beir("fever", &["beir/fever/test"], Some(6666), pin("5a818580227bfb4b35bb6fa46d9b6c03", 1236988269)).in_group(BEIR_13),
        beir("fiqa", &["beir/fiqa/test"], Some(648), pin("17918ed23cd04fb15047f73e6c3bd9d9", 17948027)).in_group(BEIR_13),
        beir("hotpotqa", &["beir/hotpotqa/test"], Some(7405), pin("f412724f78b0d91183a0e86805e16114", 654025350)).in_group(BEIR_13),
        beir("nfcorpus", &["beir/nfcorpus/test"], Some(323), pin("a89dba18a62ef92f7d323ec890a0d38d", 2448432)).in_group(BEIR_13),
        beir("nq", &["beir/nq"], Some(3452), pin("d4d3d2e48787a744b6f6e691ff534307", 498307926)).in_group(BEIR_13),
        beir("quora", &["beir/quora/test"], Some(10000), pin("18fb154900ba42a600f84b839c173167", 15853968)).in_group(BEIR_13),
        beir("scidocs", &["beir/scidocs"], Some(1000), pin("38121350fc3a4d2f48850f6aff52e4a9", 142471588)).in_group(BEIR_13),
        beir("scifact", &["beir/scifact/test"], Some(300), pin("5f7d1de60b170fc8027bb7898e2efca1", 2816079)).in_group(BEIR_13),
        beir("trec-covid", &["beir/trec-covid"], Some(50), pin("ce62140cb23feb9becf6270d0d1fe6d1", 73876720)).in_group(BEIR_13),
        // Touché is ir_datasets' `v2`, the zip BEIR serves now.
        beir("webis-touche2020", &["beir/webis-touche2020/v2"], Some(49), pin("46f650ba5a527fc69e0a6521c5a23563", 227132363)).in_group(BEIR_13),
        nanobeir("NanoArguAna", "arguana", 50, "8f4a982d470a32c45817738b9d29042ca55d75ad", ["ee563dc09a91032b494f469b6c807a9c", "5ad0a26fad750dc74eae00ab753731b8", "5fab96653b0455879606e82071ef4b21"]).in_group(NANOBEIR_13),
        nanobeir("NanoClimateFEVER", "climate-fever", 50, "96741bfa30b9f56db8c9eb7d08e775ed6474f206", ["97a57296bbb7e48ffc8b763c4b2a188b", "0f4d43544ae8755e0557f89be3ae7e74", "3042ccd6054266951ac1338c57a2bb85"]).in_group(NANOBEIR_13),
        nanobeir("NanoDBPedia", "dbpedia-entity", 50, "438f1c25129f05db6238699b5afdc9c6b58d2096", ["cee2bc11f2b84fe636b5f219246221e0", "ec7d771ba38310699a5b323aa693febe", "8a9fa7e95c276d810ddbb53b8054801d"]).in_group(NANOBEIR_13),
        nanobeir("NanoFEVER", "fever", 50, "a8bfdf1bf15181167a7e22e69cf8754bdea9b4c8", ["0b052fca4b4c975088bc2f01d7f2b749", "43122d82b3df866afad1f37a28e6ba60", "a25763bbae313d39668c37dbadb70cd3"]).in_group(NANOBEIR_13),
        nanobeir("NanoFiQA2018", "fiqa", 50, "4163ba032953d5044a7a6244261413f609c14342", ["873e5dcf7920fc8c0ff210cf06907607", "8b25da8b2d2e40a483d7a782a048a950", "f22d89ef6658379498bc92e92cf92d26"]).in_group(NANOBEIR_13),
        nanobeir("NanoHotpotQA", "hotpotqa", 50, "d79c0cdda980aba54842756770928035e1b61a51", ["da3d14375223d0e5dad172acdbb1c332", "c1f13d4ed9f88a89285e39d9e13f5c38", "3ed8424185156af1fe4c55aac84bce92"]).in_group(NANOBEIR_13),
        nanobeir("NanoMSMARCO", "msmarco", 50, "7b8ff22f2771dc65ac5b439f222eb19a1f56abda", ["15ab2a1d3674e562d088e64dc5781373", "9ab46c94f88bfed1e338dc0887568f03", "c72caacf4bc04efa8af6b2ac2944ea92"]).in_group(NANOBEIR_13),
        nanobeir("NanoNFCorpus", "nfcorpus", 50, "dd542a7efb9ad2136b9e00768b60fca9038f8156", ["deb02538a3b030843a8ccca212dc6a3c", "6578fc992124bb997e32bd1192c1b475", "402762544651e0fc6df10cd76e2cbfae"]).in_group(NANOBEIR_13),
        nanobeir("NanoNQ", "nq", 50, "77540146379abf95df8326a3c5bb9eb21c7146c3", ["aaf73189d2b8d0de039dc2619d7a29ef", "87de29b17a669fc61d1f192bd5099887", "fc2b183187c4f99e0939b55dc11b1908"]).in_group(NANOBEIR_13),
        nanobeir("NanoQuoraRetrieval", "quora", 50, "2ab2d73e6c862026282808b913a34f4136928545", ["a8cd6d41cbeb6bda2a3ed90526de4521", "590ed67697e12f21fafe436c07e6f772", "650ca21cef9a73b83e3845c93e3a230a"]).in_group(NANOBEIR_13),
        nanobeir("NanoSCIDOCS", "scidocs", 50, "484eb90549fc3f0b9c42b3551e80ceb999515537", ["60f9f2a7206f0e8a0fc185df2b7ab00b", "940e2220bc9667138774a36f6c771c97", "e21c1514761b06ac6bba5a8f958d8803"]).in_group(NANOBEIR_13),
        nanobeir("NanoSciFact", "scifact", 50, "309f1d1ae3ae2e092444a8a0c25bed59b82318bc", ["9f82bfc70f9b7d7f0275fb6b8ee38876", "0218d8ad9c0bd8671002f16edb497ff3", "1155d79cf3854fa43c72c8458f34f744"]).in_group(NANOBEIR_13),
        nanobeir("NanoTouche2020", "webis-touche2020", 49, "0d2f26ed8c5ad309f95c7f9499c70a40e140fccd", ["fdea27196d1234ab4aa2c49c9a849840", "0ba668cdae413f411644871f544a9d1b", "4b3de9c60d59be85ae4483e1210caff9"]).in_group(NANOBEIR_13),
    ]
});

fn pin(md5: &str, size: u64) -> Option<Pinned> {
    Some(Pinned {
        md5: md5.into(),
        size: Some(size),
    })
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl DataSet {
    fn in_group(mut self, group: &'static str) -> Self {
        self.groups.push(group);
        self
    }

    /// Whether `name` is this set's name, one of its aliases (in any case) or ir_datasets ids.
    fn is_called(&self, name: &str) -> bool {
        self.name == name
            || self.ir_datasets.iter().any(|id| id == name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }
}

/// A download whose payload is the file itself.
fn file_download(url: String, dest: String, pinned: Option<Pinned>) -> Download {
    Download::Url {
        url,
        payload: Payload::File(dest.into()),
        pinned,
    }
}

/// Members of an archive (matched by path suffix) and where each goes under the data root.
fn members(pairs: &[(&str, &str)]) -> Vec<(String, PathBuf)> {
    pairs
        .iter()
        .map(|(m, d)| (m.to_string(), PathBuf::from(d)))
        .collect()
}

/// MS MARCO's passages with its dev queries and judgements, which TREC DL shares.
fn collection_and_queries() -> Download {
    Download::Url {
        url: format!("{MSMARCO}/collectionandqueries.tar.gz"),
        payload: Payload::TarGz(members(&[
            ("collection.tsv", "msmarco/collection.tsv"),
            ("queries.dev.small.tsv", "msmarco/queries.dev.small.tsv"),
            ("qrels.dev.small.tsv", "msmarco/qrels.dev.small.tsv"),
            // The full dev set, for FLOPs as naver/splade measures them.
            ("queries.dev.tsv", "msmarco/queries.dev.tsv"),
        ])),
        pinned: pin("31644046b18952c1386cd4564ba2ae69", 1057717952),
    }
}

/// MS MARCO passage dev (small), MRR@10's set.
fn msmarco_dev() -> DataSet {
    DataSet {
        name: "msmarco-dev".into(),
        ir_datasets: strings(&["msmarco-passage/dev/small"]),
        aliases: Vec::new(),
        evaluation: Some(Evaluation {
            format: CorpusFormat::Tsv,
            corpus: "msmarco/collection.tsv".into(),
            queries: "msmarco/queries.dev.small.tsv".into(),
            qrels: "msmarco/qrels.dev.small.tsv".into(),
            // naver/splade's conf/flops/msmarco.yaml: p_q over all ~101k dev queries.
            flops_queries: Some("msmarco/queries.dev.tsv".into()),
            relevance_level: 1,
            ignore_identical_ids: false,
            judged_queries_only: false,
            published_queries: Some(6980),
            published_flops_queries: Some(101_093),
        }),
        downloads: vec![collection_and_queries()],
        groups: Vec::new(),
        collection: None,
        unpinned: None,
    }
}

/// TREC Deep Learning passage ranking of `year` over MS MARCO's passages: graded judgements,
/// relevant from grade 2; of the 200 test queries only the `queries` judged are evaluated.
fn trec_dl(
    year: u16,
    queries: usize,
    queries_md5: Option<Pinned>,
    qrels_md5: Option<Pinned>,
) -> DataSet {
    let name = format!("trec-dl-{year}");
    let queries_file = format!("msmarco-test{year}-queries.tsv");
    let qrels_file = format!("{year}qrels-pass.txt");
    let id = format!("msmarco-passage/trec-dl-{year}");
    DataSet {
        ir_datasets: vec![format!("{id}/judged"), id],
        aliases: Vec::new(),
        evaluation: Some(Evaluation {
            format: CorpusFormat::Tsv,
            corpus: "msmarco/collection.tsv".into(),
            queries: format!("{name}/{queries_file}"),
            qrels: format!("{name}/{qrels_file}"),
            flops_queries: None,
            relevance_level: 2,
            ignore_identical_ids: false,
            judged_queries_only: true,
            published_queries: Some(queries),
            published_flops_queries: None,
        }),
        downloads: vec![
            collection_and_queries(),
            file_download(
                format!("{MSMARCO}/{queries_file}.gz"),
                format!("{name}/{queries_file}.gz"),
                queries_md5,
            ),
            file_download(
                format!("{NIST_DEEP}/{qrels_file}"),
                format!("{name}/{qrels_file}"),
                qrels_md5,
            ),
        ],
        groups: Vec::new(),
        collection: None,
        unpinned: None,
        name,
    }
}

/// MS MARCO's `triples.train.small.tsv` (query, positive, BM25 negative), which `table1.toml`
/// trains on: fetched, never evaluated.
fn msmarco_train() -> DataSet {
    let download = Download::Url {
        url: format!("{MSMARCO}/triples.train.small.tar.gz"),
        payload: Payload::TarGz(members(&[(
            "triples.train.small.tsv",
            "msmarco/triples.train.small.tsv",
        )])),
        pinned: pin("c13bf99ff23ca691105ad12eab837f84", 7930881353),
    };
    training_data(MSMARCO_TRAIN, vec![download], None)
}

/// MS MARCO's `queries.train.tsv` and `qrels.train.tsv` with `collection.tsv`.
fn msmarco_train_queries() -> DataSet {
    training_data(
        MSMARCO_TRAIN_QUERIES,
        vec![
            collection_and_queries(),
            Download::Url {
                url: format!("{MSMARCO}/queries.tar.gz"),
                payload: Payload::TarGz(members(&[(
                    "queries.train.tsv",
                    "msmarco/queries.train.tsv",
                )])),
                pinned: pin("c177b2795d5f2dcc524cf00fcd973be1", 18882551),
            },
            file_download(
                format!("{MSMARCO}/qrels.train.tsv"),
                "msmarco/qrels.train.tsv".into(),
                pin("733fb9fe12d93e497f7289409316eccf", 10589532),
            ),
        ],
        None,
    )
}

/// The hub's files publish no digest lsr could copy (the LFS sha256 the hub shows was not
/// reachable where this registry was written), so a teacher's scores are installed by hand.
const HUB_SCORES_UNPINNED: &str = "sentence-transformers publishes no checksum of it";

/// The revision of a hub file no commit could be found for (the teachers' scores): the
/// repository's `main` on the day it is fetched by hand, which `pins` counts as not at a commit.
const UNPINNED_REVISION: &str = "main";

fn msmarco_ce_scores() -> DataSet {
    let file = "cross-encoder-ms-marco-MiniLM-L-6-v2-scores.pkl.gz";
    let download = Download::HubDataset {
        repo: "sentence-transformers/msmarco-hard-negatives".into(),
        commit: UNPINNED_REVISION.into(),
        file: file.into(),
        dest: format!("msmarco/{file}").into(),
        pinned: None,
    };
    training_data(MSMARCO_CE_SCORES, vec![download], Some(HUB_SCORES_UNPINNED))
}

/// The `bert-ensemble-margin-mse` subset of `sentence-transformers/msmarco`: four parquet
/// shards (its card's 1,581,481,699 bytes cut at the `datasets` library's 500 MB, the rule its
/// `labeled-list` subset's fifteen shards follow).
fn msmarco_ensemble_margins() -> DataSet {
    let downloads = (0..4)
        .map(|shard| {
            let file = format!("bert-ensemble-margin-mse/train-{shard:05}-of-00004.parquet");
            Download::HubDataset {
                repo: "sentence-transformers/msmarco".into(),
                commit: UNPINNED_REVISION.into(),
                dest: format!("msmarco/{file}").into(),
                file,
                pinned: None,
            }
        })
        .collect();
    training_data(
        MSMARCO_ENSEMBLE_MARGINS,
        downloads,
        Some(HUB_SCORES_UNPINNED),
    )
}

/// A set that is only fetched, for training.
fn training_data(name: &str, downloads: Vec<Download>, unpinned: Option<&'static str>) -> DataSet {
    DataSet {
        name: name.into(),
        ir_datasets: Vec::new(),
        aliases: Vec::new(),
        evaluation: None,
        downloads,
        groups: Vec::new(),
        collection: None,
        unpinned,
    }
}

/// BEIR set `set` (`beir/<set>`, from BEIR's zip of that name): documents are
/// `title + " " + text`, only judged queries are evaluated, and a hit that is the query itself
/// is dropped, as BEIR's `EvaluateRetrieval` does by default.
fn beir(set: &str, ir_datasets: &[&str], queries: Option<usize>, zip: Option<Pinned>) -> DataSet {
    let name = format!("{}{set}", BEIR.prefix);
    let path = |file: &str| format!("{name}/{file}");
    let files = ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"];
    let members = files.map(|file| (format!("{set}/{file}"), PathBuf::from(path(file))));
    DataSet {
        ir_datasets: strings(ir_datasets),
        aliases: Vec::new(),
        evaluation: Some(Evaluation {
            format: CorpusFormat::Jsonl,
            corpus: path(files[0]),
            queries: path(files[1]),
            qrels: path(files[2]),
            flops_queries: None,
            relevance_level: 1,
            ignore_identical_ids: true,
            judged_queries_only: true,
            published_queries: queries,
            published_flops_queries: None,
        }),
        downloads: vec![Download::Url {
            url: format!("{BEIR_ZIPS}/{set}.zip"),
            payload: Payload::Zip(members.into()),
            pinned: zip,
        }],
        groups: Vec::new(),
        collection: Some(&BEIR),
        unpinned: None,
        name,
    }
}

/// NanoBEIR set `hf_name` (`nanobeir/<hf_name>`, the HF dataset `zeta-alpha-ai/<hf_name>` at
/// `commit`), also called by its name without `Nano` in any case and `nano-beir/<id>` by
/// ir_datasets; `md5s` are those of its corpus, queries and qrels files. Every judged pair is
/// relevant.
fn nanobeir(hf_name: &str, id: &str, queries: usize, commit: &str, md5s: [&str; 3]) -> DataSet {
    let name = format!("{}{hf_name}", NANOBEIR.prefix);
    let split = |split: &str| format!("{name}/{split}");
    let downloads = ["corpus", "queries", "qrels"]
        .iter()
        .zip(md5s)
        .map(|(split, md5)| {
            let file = format!("{split}/train-00000-of-00001.parquet");
            Download::HubDataset {
                repo: format!("{NANOBEIR_USER}/{hf_name}"),
                commit: commit.into(),
                dest: format!("{name}/{file}").into(),
                file,
                pinned: Some(Pinned {
                    md5: md5.into(),
                    size: None,
                }),
            }
        })
        .collect();
    let short = hf_name.strip_prefix("Nano").unwrap_or(hf_name);
    DataSet {
        ir_datasets: vec![format!("nano-beir/{id}")],
        aliases: vec![name.clone(), format!("{}{short}", NANOBEIR.prefix)],
        evaluation: Some(Evaluation {
            format: CorpusFormat::Parquet,
            corpus: split("corpus"),
            queries: split("queries"),
            qrels: split("qrels"),
            flops_queries: None,
            relevance_level: 1,
            ignore_identical_ids: false,
            judged_queries_only: true,
            published_queries: Some(queries),
            published_flops_queries: None,
        }),
        downloads,
        groups: Vec::new(),
        collection: Some(&NANOBEIR),
        unpinned: None,
        name,
    }
}

/// lsr's name for `name`: itself, or that of the set an ir_datasets id or an alias names.
pub fn canonical(name: &str) -> String {
    if let Some(set) = REGISTRY.iter().find(|set| set.is_called(name)) {
        return set.name.clone();
    }
    for collection in COLLECTIONS {
        let Some(split) = collection.split else {
            continue;
        };
        if let Some(set) = name
            .strip_prefix(collection.prefix)
            .and_then(|rest| rest.strip_suffix(split))
            .filter(|set| !set.contains('/'))
        {
            return format!("{}{set}", collection.prefix);
        }
    }
    name.to_string()
}

/// The set `name` names (see [`canonical`]), registered or read by its collection's rule.
pub fn find(name: &str) -> Option<DataSet> {
    let name = canonical(name);
    if let Some(set) = REGISTRY.iter().find(|set| set.name == name) {
        return Some(set.clone());
    }
    COLLECTIONS.iter().find_map(|collection| {
        let set = name
            .strip_prefix(collection.prefix)
            .filter(|set| !set.is_empty())?;
        Some((collection.unregistered?)(set))
    })
}

/// The registered members of `group`, in registry order.
pub fn group(group: &str) -> Vec<&'static DataSet> {
    REGISTRY
        .iter()
        .filter(|set| set.groups.contains(&group))
        .collect()
}

/// Every group some set is a member of, in registry order.
pub fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&str> = Vec::new();
    for group in REGISTRY.iter().flat_map(|set| &set.groups) {
        if !groups.contains(group) {
            groups.push(group);
        }
    }
    groups
}

/// The evaluation sets a name stands for: a group's members, or the one set it names.
pub fn evaluated(name: &str) -> Result<Vec<DataSet>> {
    named(name, false)
}

/// The sets `lsr data fetch` takes a name for: [`evaluated`]'s, and training data.
pub fn fetched(name: &str) -> Result<Vec<DataSet>> {
    named(name, true)
}

/// How the files `lsr data fetch` installs for a set or group are fixed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pins {
    pub files: usize,
    /// Downloads checked against their publisher's md5.
    pub by_md5: usize,
    /// Files of hub repositories, and those of them fetched at a commit rather than a branch.
    pub hub_files: usize,
    pub hub_at_commit: usize,
}

impl Pins {
    /// Every file is checked by its md5, and every hub file comes from a commit.
    pub fn all_pinned(&self) -> bool {
        self.by_md5 == self.files && self.hub_at_commit == self.hub_files
    }
}

impl std::fmt::Display for Pins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.all_pinned() {
            "pinned"
        } else {
            "not pinned"
        };
        write!(
            f,
            "{state}: {} of {} downloads by md5",
            self.by_md5, self.files
        )?;
        if self.hub_files > 0 {
            write!(
                f,
                ", {} of {} hub files at a commit",
                self.hub_at_commit, self.hub_files
            )?;
        }
        Ok(())
    }
}

/// The pins of what `name` (a set or group lsr can fetch) downloads.
pub fn pins(name: &str) -> Result<Pins> {
    let downloads: Vec<Download> = fetched(name)?
        .into_iter()
        .flat_map(|set| set.downloads)
        .collect();
    let hub: Vec<&String> = downloads
        .iter()
        .filter_map(|d| match d {
            Download::HubDataset { commit, .. } => Some(commit),
            Download::Url { .. } => None,
        })
        .collect();
    Ok(Pins {
        files: downloads.len(),
        by_md5: downloads.iter().filter(|d| d.pinned().is_some()).count(),
        hub_files: hub.len(),
        hub_at_commit: hub
            .iter()
            .filter(|c| lsr_files::provenance::is_commit(c))
            .count(),
    })
}

fn named(name: &str, training: bool) -> Result<Vec<DataSet>> {
    let name = canonical(name);
    if groups().contains(&name.as_str()) {
        return Ok(group(&name).into_iter().cloned().collect());
    }
    match find(&name) {
        Some(set) if training || set.evaluation.is_some() => Ok(vec![set]),
        _ => Err(unknown(&name, training)),
    }
}

/// The error for a name no set has, listing what is known (of its collection, if it is in one).
fn unknown(name: &str, training: bool) -> DataError {
    for collection in COLLECTIONS.iter().filter(|c| c.unregistered.is_none()) {
        if let Some(set) = name.strip_prefix(collection.prefix) {
            let known: Vec<&str> = REGISTRY
                .iter()
                .filter_map(|s| s.name.strip_prefix(collection.prefix))
                .collect();
            return DataError::Invalid(format!(
                "unknown {} set `{set}`; expected one of {}",
                collection.title,
                known.join(", ")
            ));
        }
    }
    DataError::Invalid(format!(
        "unknown data set `{name}`; expected {}",
        known(training)
    ))
}

/// The names lsr takes, for messages and help: the sets outside any collection, each
/// collection's pattern, the groups, and ir_datasets' ids; training data if `training`.
pub fn known(training: bool) -> String {
    let alone = REGISTRY
        .iter()
        .filter(|set| set.collection.is_none() && (training || set.evaluation.is_some()));
    let mut names: Vec<String> = alone.clone().map(|set| set.name.clone()).collect();
    names.extend(COLLECTIONS.iter().map(|c| format!("{}<name>", c.prefix)));
    names.extend(groups().iter().map(|g| g.to_string()));
    let mut ids: Vec<String> = alone.flat_map(|set| set.ir_datasets.clone()).collect();
    ids.extend(COLLECTIONS.iter().map(|c| c.ir_datasets.to_string()));
    format!(
        "{} (or their ir_datasets ids: {})",
        names.join(", "),
        ids.join(", ")
    )
}

/// How the paper's tables show a data set or group: its short name, and the measure reported
/// there with its printed form. Any other set is shown by its name, with nDCG@10.
const TABLE_COLUMNS: [(&str, &str, &str, &str); 5] = [
    ("msmarco-dev", "MS MARCO", "mrr@10", "MRR@10"),
    ("trec-dl-2019", "DL19", "ndcg@10", "nDCG@10"),
    ("trec-dl-2020", "DL20", "ndcg@10", "nDCG@10"),
    (BEIR_13, "BEIR-13", "ndcg@10", "nDCG@10"),
    (NANOBEIR_13, "NanoBEIR", "ndcg@10", "nDCG@10"),
];

/// The measure the paper's tables report for data set (or group) `name`.
pub fn table_measure(name: &str) -> &'static str {
    TABLE_COLUMNS
        .iter()
        .find(|(set, ..)| *set == name)
        .map_or("ndcg@10", |(_, _, measure, _)| measure)
}

/// The header of `name`'s column in the paper's tables (`MS MARCO MRR@10`).
pub fn table_label(name: &str) -> String {
    match TABLE_COLUMNS.iter().find(|(set, ..)| *set == name) {
        Some((_, short, _, printed)) => format!("{short} {printed}"),
        None => format!("{name} nDCG@10"),
    }
}

#[cfg(test)]
mod tests;
