//! The matrix file: what it may contain, and its validation into cells.

use std::path::{Path, PathBuf};

use lsr_backbone::Precision;
use lsr_train::{DataConfig, ModelSpec, Recipe, TrainConfig, ValidationConfig};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use lsr_report::results::PaperResult;

use crate::cell::Cell;
use crate::error::{MatrixError, Result};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    name: String,
    /// Per-cell results: `<results>/<cell>/`.
    results: PathBuf,
    /// Per-cell training checkpoints: `<checkpoints>/<cell>/` (large; put them on scratch).
    checkpoints: PathBuf,
    #[serde(default)]
    device: Option<String>,
    /// The k grid every backbone runs unless it names its own.
    k: Vec<Spanned<f64>>,
    eval: EvalSpec,
    data: DataConfig,
    /// Recipe fields shared by every cell (the rest take `Recipe`'s defaults).
    #[serde(default)]
    recipe: toml::Table,
    backbone: Vec<BackboneSpec>,
    #[serde(default)]
    paper: Vec<PaperResult>,
    /// Scored during every cell's training (`lsr_train::ValidationConfig`).
    #[serde(default)]
    validation: Option<ValidationConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackboneSpec {
    name: Spanned<String>,
    checkpoint: String,
    #[serde(default)]
    k: Option<Vec<Spanned<f64>>>,
    #[serde(default)]
    untie: bool,
    /// Recipe fields for this backbone only, over the shared ones.
    #[serde(default)]
    recipe: toml::Table,
}

/// How every cell's trained model is evaluated.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvalSpec {
    pub data_root: PathBuf,
    /// Data set names as `lsr eval` takes them (`msmarco-dev`, `beir-13`, `beir/<name>`, ...).
    pub datasets: Vec<String>,
    #[serde(default = "default_measures")]
    pub measures: Vec<String>,
    pub batch_size: usize,
    pub query_max_length: usize,
    pub document_max_length: usize,
    pub top_k: usize,
    /// The data set (or group) whose mean nDCG@10 and FLOPs the trade-off plot shows.
    pub tradeoff: String,
    /// The arithmetic of encoding (`f32` or `bf16-mixed`), whatever the training used.
    #[serde(default)]
    pub precision: Precision,
}

fn default_measures() -> Vec<String> {
    ["mrr@10", "ndcg@10", "recall@100", "recall@1000"]
        .map(String::from)
        .to_vec()
}

/// A validated matrix.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub path: PathBuf,
    pub name: String,
    pub results: PathBuf,
    pub checkpoints: PathBuf,
    pub device: Option<String>,
    pub eval: EvalSpec,
    pub cells: Vec<Cell>,
    pub paper: Vec<PaperResult>,
}

impl Matrix {
    /// Reads and validates `path`: unknown keys, missing backbones, bad k, invalid recipes are
    /// errors naming the file and, where TOML knows it, the line.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| MatrixError::io(path, e))?;
        let source = Source { path, text: &text };
        let file: MatrixFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().and_then(|span| source.line_of(span.start));
            source.fail(line, e.message().to_string())
        })?;
        if file.backbone.is_empty() {
            let message = "no [[backbone]] tables: the matrix has no cells";
            return Err(source.fail(None, message.into()));
        }
        if file.eval.datasets.is_empty() {
            return Err(source.fail(None, "eval.datasets is empty".into()));
        }
        let shared_grid = source.grid(&file.k)?;
        let mut cells = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for backbone in &file.backbone {
            let name = source.backbone_name(backbone, &names)?;
            cells.extend(source.cells(&file, backbone, &shared_grid)?);
            names.push(name);
        }
        if let Some(result) = file.paper.iter().find(|r| !names.contains(&r.backbone)) {
            let message = format!("[[paper]] names unknown backbone `{}`", result.backbone);
            return Err(source.fail(None, message));
        }
        Ok(Self {
            path: path.to_path_buf(),
            name: file.name,
            results: file.results,
            checkpoints: file.checkpoints,
            device: file.device,
            eval: file.eval,
            cells,
            paper: file.paper,
        })
    }

    pub fn cell(&self, id: &str) -> Result<&Cell> {
        self.cells
            .iter()
            .find(|cell| cell.id == id)
            .ok_or_else(|| MatrixError::UnknownCell(id.to_string()))
    }
}

/// `modernbert-k16`, `roberta-k0.5`, `bert-k1e-39`.
pub fn cell_id(backbone: &str, k: f64) -> String {
    let plain = format!("{k}");
    if plain.len() <= 8 {
        format!("{backbone}-k{plain}")
    } else {
        format!("{backbone}-k{k:e}")
    }
}

/// The matrix file's text, for errors that name its path and line.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    fn fail(&self, line: Option<usize>, message: String) -> MatrixError {
        MatrixError::Spec {
            path: self.path.to_path_buf(),
            line,
            message,
        }
    }

    /// The 1-based line of byte `offset`.
    fn line_of(&self, offset: usize) -> Option<usize> {
        Some(
            self.text[..offset.min(self.text.len())]
                .matches('\n')
                .count()
                + 1,
        )
    }

    /// A k grid with every k checked, errors at the k's line.
    fn grid(&self, grid: &[Spanned<f64>]) -> Result<Vec<f64>> {
        if grid.is_empty() {
            return Err(self.fail(None, "a k grid is empty".into()));
        }
        grid.iter()
            .map(|k| {
                let value = *k.get_ref();
                lsr_backbone::check_scale(value)
                    .map(|()| value)
                    .map_err(|e| self.fail(self.line_of(k.span().start), e.to_string()))
            })
            .collect()
    }

    /// The backbone's name, checked to be a usable, unused directory-name part.
    fn backbone_name(&self, backbone: &BackboneSpec, taken: &[String]) -> Result<String> {
        let name = backbone.name.get_ref();
        let line = self.line_of(backbone.name.span().start);
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if name.is_empty() || !name.chars().all(allowed) {
            let message = format!("backbone name `{name}` must be letters, digits, - or _");
            return Err(self.fail(line, message));
        }
        if taken.contains(name) {
            return Err(self.fail(line, format!("backbone `{name}` appears twice")));
        }
        Ok(name.clone())
    }

    /// The backbone's cells, one per k of its grid, each a validated training config with the
    /// shared recipe under the backbone's own.
    fn cells(
        &self,
        file: &MatrixFile,
        backbone: &BackboneSpec,
        shared_grid: &[f64],
    ) -> Result<Vec<Cell>> {
        let name = backbone.name.get_ref();
        let line = self.line_of(backbone.name.span().start);
        let grid = match &backbone.k {
            Some(grid) => self.grid(grid)?,
            None => shared_grid.to_vec(),
        };
        let mut recipe_table = file.recipe.clone();
        recipe_table.extend(backbone.recipe.clone());
        let recipe: Recipe =
            toml::Value::Table(recipe_table)
                .try_into()
                .map_err(|e: toml::de::Error| {
                    self.fail(
                        line,
                        format!("recipe of backbone `{name}`: {}", e.message()),
                    )
                })?;
        grid.into_iter()
            .map(|k| {
                let id = cell_id(name, k);
                let config = TrainConfig {
                    model: ModelSpec {
                        checkpoint: backbone.checkpoint.clone(),
                        k,
                        untie: backbone.untie,
                    },
                    recipe: recipe.clone(),
                    data: file.data.clone(),
                    output: file.results.join(&id),
                    checkpoints: Some(file.checkpoints.join(&id)),
                    device: file.device.clone(),
                    validation: file.validation.clone(),
                }
                .validated(&format!("{} (cell {id})", self.path.display()))?;
                Ok(Cell {
                    id,
                    backbone: name.clone(),
                    k,
                    config,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const MATRIX: &str = r#"name = "test"
results = "results/test"
checkpoints = "checkpoints/test"
k = [1, 4, 16]

[eval]
data_root = "data"
datasets = ["beir/scifact"]
batch_size = 8
query_max_length = 32
document_max_length = 64
top_k = 100
tradeoff = "beir/scifact"

[data]
format = "triples"
triples = "triples.tsv"

[recipe]
steps = 100
batch_size = 4
warmup_steps = 10

[[backbone]]
name = "bert"
checkpoint = "bert-base-uncased"

[[backbone]]
name = "modernbert"
checkpoint = "answerdotai/ModernBERT-base"
k = [8, 16]

[backbone.recipe]
lr = 1e-4
"#;

    fn load(text: &str) -> Result<Matrix> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        Matrix::load(file.path())
    }

    #[test]
    fn expands_cells_in_order_with_overrides() {
        let matrix = load(MATRIX).unwrap();
        let ids: Vec<&str> = matrix.cells.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "bert-k1",
                "bert-k4",
                "bert-k16",
                "modernbert-k8",
                "modernbert-k16"
            ]
        );
        let bert = matrix.cell("bert-k4").unwrap();
        assert_eq!(bert.config.recipe.lr, Recipe::default().lr);
        assert_eq!(bert.config.recipe.steps, 100);
        assert_eq!(bert.config.output, PathBuf::from("results/test/bert-k4"));
        assert_eq!(
            bert.config.checkpoints,
            Some(PathBuf::from("checkpoints/test/bert-k4"))
        );
        let modern = matrix.cell("modernbert-k16").unwrap();
        assert_eq!(
            (
                modern.k,
                modern.config.recipe.lr,
                modern.config.recipe.steps
            ),
            (16.0, 1e-4, 100)
        );
        assert!(matches!(
            matrix.cell("bert-k2"),
            Err(MatrixError::UnknownCell(_))
        ));
        assert_eq!(cell_id("roberta", 0.5), "roberta-k0.5");
        assert_eq!(cell_id("bert", 1e-39), "bert-k1e-39");
    }

    #[test]
    fn validation_errors_name_the_line_or_the_field() {
        for (from, to, expected) in [
            (
                "k = [1, 4, 16]",
                "k = [1, -4, 16]",
                ":4: k must be finite and > 0, got -4",
            ),
            (
                "k = [8, 16]",
                "k = [8, 0]",
                ":31: k must be finite and > 0, got 0",
            ),
            (
                "top_k = 100",
                "top_k = 100\ntop = 3",
                ":13: unknown field `top`",
            ),
            (
                "lr = 1e-4",
                "lr = -1e-4",
                "recipe.lr: must be finite and > 0",
            ),
            (
                "lr = 1e-4",
                "learning_rate = 1e-4",
                "recipe of backbone `modernbert`: unknown field `learning_rate`",
            ),
            (
                "name = \"modernbert\"",
                "name = \"bert\"",
                ":29: backbone `bert` appears twice",
            ),
            ("batch_size = 4", "batch_size = 0", "recipe.batch_size"),
        ] {
            let message = load(&MATRIX.replace(from, to)).unwrap_err().to_string();
            assert!(message.contains(expected), "{to}: {message}");
        }
        let no_backbones = MATRIX.split("[[backbone]]").next().unwrap().to_string();
        let message = load(&no_backbones).unwrap_err().to_string();
        assert!(message.contains("backbone"), "{message}");
    }
}
