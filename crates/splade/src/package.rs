//! An exported SPLADE model as sentence-transformers loads it: `SparseEncoder(path)` reads the
//! folder's masked LM as its first module and `SpladePooling("max")` (log(1 + ReLU), the pooling
//! of `encoder.rs`) as its second, with dot-product similarity and no prompts. The files are the
//! layout sentence-transformers 5 writes, which 5.x and 6.x both load (6.x's own layout does not
//! load in 5.x). Also the model card, `README.md`, that says what was trained and how it scored.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;

/// Beside `README.md`: the card's data, so that evaluation can add its measures.
pub const CARD: &str = "lsr-card.json";

/// Writes `modules.json`, `config_sentence_transformers.json`, `sentence_bert_config.json` and
/// `1_SpladePooling/config.json` into the model folder `dir`.
pub fn write_sentence_transformers(
    dir: &Path,
    vocab_size: usize,
    max_length: usize,
) -> lsr_files::Result<()> {
    let modules = json!([
        {"idx": 0, "name": "0", "path": "",
         "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
        {"idx": 1, "name": "1", "path": "1_SpladePooling",
         "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}
    ]);
    // The versions it was checked with: a newer one would make an older library warn.
    let config = json!({
        "model_type": "SparseEncoder",
        "__version__": {"sentence_transformers": "5.1.2", "transformers": "4.57.6", "pytorch": "2.6.0"},
        "prompts": {"query": "", "document": ""},
        "default_prompt_name": null,
        "similarity_fn_name": "dot"
    });
    let transformer = json!({"max_seq_length": max_length, "do_lower_case": false});
    let pooling = json!({
        "pooling_strategy": "max",
        "activation_function": "relu",
        "word_embedding_dimension": vocab_size
    });
    let write = |name: &str, value: &serde_json::Value| {
        let text = serde_json::to_string_pretty(value).expect("JSON values serialise");
        lsr_files::write_bytes(&dir.join(name), (text + "\n").as_bytes())
    };
    write("modules.json", &modules)?;
    write("config_sentence_transformers.json", &config)?;
    write("sentence_bert_config.json", &transformer)?;
    write("1_SpladePooling/config.json", &pooling)
}

/// What the model card of an exported model records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// The checkpoint training started from, as named (an HF id or a path).
    pub base_model: String,
    /// The hub commit it resolved to, if it came from the hub.
    pub base_revision: Option<String>,
    /// The family (`model_type`).
    pub family: String,
    pub k: f64,
    /// What was divided: `shared matrix` (a tied decoder with its embeddings) or `untied copy`.
    pub rescale: String,
    pub steps: usize,
    /// The training data, as the config names it.
    pub training_data: String,
    /// The recipe as TOML.
    pub recipe: String,
    pub max_length: usize,
    /// The matrix cell, when the matrix trained it.
    pub cell: Option<String>,
    pub lsr_version: String,
    /// The commit lsr was built from (`lsr_files::provenance`), if built in its git checkout.
    pub git_commit: Option<String>,
    /// Whether the sources built differed from `git_commit`.
    #[serde(default)]
    pub git_dirty: Option<bool>,
    /// Data set → measure → value, once evaluated.
    #[serde(default)]
    pub metrics: BTreeMap<String, BTreeMap<String, f64>>,
}

impl ModelCard {
    /// The card of the model folder `dir`, if it has one.
    pub fn read(dir: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::read(dir.join(CARD)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", dir.join(CARD).display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `README.md` and `lsr-card.json` into `dir`, each atomically.
    pub fn write(&self, dir: &Path) -> lsr_files::Result<()> {
        lsr_files::write_json(&dir.join(CARD), self)?;
        lsr_files::write_bytes(&dir.join("README.md"), self.render().as_bytes())
    }

    /// The card as `README.md`: the metadata the Hub indexes, then what was trained.
    pub fn render(&self) -> String {
        let quoted = |s: &str| serde_json::to_string(s).expect("strings serialise");
        let mut card = String::from("---\n");
        // The Hub's `base_model` is a repository id, without the commit it was pinned at.
        if let Some(id) = lsr_backbone::hub_id(&self.base_model) {
            card += &format!("base_model: {}\n", quoted(id));
        }
        card += "library_name: sentence-transformers\npipeline_tag: feature-extraction\ntags:\n";
        for tag in [
            "sentence-transformers",
            "sparse-encoder",
            "sparse",
            "splade",
            "lsr",
        ] {
            card += &format!("- {tag}\n");
        }
        card += "---\n\n";
        card += &format!(
            "# SPLADE on {}, MLM head divided by k = {}\n\n",
            self.base_model, self.k
        );
        card += &format!(
            "A SPLADE model trained with [lsr](https://arxiv.org/abs/2606.18811) (\"Rescaling \
             MLM-Head for Neural Sparse Retrieval\"): the {} checkpoint's masked-LM head was \
             divided by k = {} (on the {}) before training; the weights here hold the divided \
             head, so encode with k = 1.\n\n",
            self.family, self.k, self.rescale
        );
        card += "| | |\n|---|---|\n";
        let base = match &self.base_revision {
            Some(revision) => format!(
                "`{}` at commit `{revision}`",
                lsr_backbone::hub_id(&self.base_model).unwrap_or(&self.base_model)
            ),
            None => format!("`{}` (a local directory)", self.base_model),
        };
        let rows = [
            ("base checkpoint", base),
            ("family", format!("`{}`", self.family)),
            ("k", format!("{} (on the {})", self.k, self.rescale)),
            ("steps", self.steps.to_string()),
            ("training data", self.training_data.clone()),
            ("max length", format!("{} tokens", self.max_length)),
            ("matrix cell", self.cell.clone().unwrap_or("–".into())),
            ("lsr", self.lsr_version.clone()),
            (
                "lsr commit",
                lsr_files::provenance::describe(self.git_commit.as_deref(), self.git_dirty),
            ),
        ];
        for (name, value) in rows {
            card += &format!("| {name} | {value} |\n");
        }
        card += &self.metrics_section();
        card += "\n## Use\n\n```python\nfrom sentence_transformers import SparseEncoder\n\n";
        card += "model = SparseEncoder(\"path/to/this/folder\")\n";
        card += "queries = model.encode_query([\"what is splade\"])\n";
        card += "documents = model.encode_document([\"SPLADE is a sparse retriever\"])\n";
        card += "print(model.similarity(queries, documents))\n```\n\n";
        card +=
            "or `lsr encode --checkpoint path/to/this/folder --k 1 --text \"what is splade\"`.\n";
        card += &format!("\n## Recipe\n\n```toml\n{}\n```\n", self.recipe.trim_end());
        card
    }

    fn metrics_section(&self) -> String {
        if self.metrics.is_empty() {
            return "\nNot evaluated here: `lsr matrix run` adds its cell's measures to this \
                    card; `lsr eval --checkpoint <this folder> --dataset NAME --output DIR` \
                    writes them to `DIR/<data set>/metrics.json`, not here.\n"
                .into();
        }
        let mut section =
            String::from("\n## Measured\n\n| data set | measure | value |\n|---|---|---|\n");
        for (dataset, measures) in &self.metrics {
            for (measure, value) in measures {
                section += &format!("| {dataset} | {measure} | {value:.4} |\n");
            }
        }
        section
    }
}
