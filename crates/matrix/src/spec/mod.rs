//! The matrix file: what it may contain, and its validation into cells.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lsr_backbone::Scale;
use lsr_compute::Precision;
use lsr_data::Dataset;
use lsr_eval::Measure;
use lsr_eval::pipeline::{DEFAULT_MAX_LENGTH, EvalSettings};
use lsr_train::{DataConfig, ModelSpec, Recipe, TrainConfig, ValidationConfig};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use lsr_data::registry::table_measure;
use lsr_files::PaperResult;

use crate::cell::Cell;
use crate::error::{MatrixError, Result};
use crate::variant::Variant;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    name: String,
    /// Printed above the report's Table 1: what the matrix can and cannot show.
    #[serde(default)]
    note: Option<String>,
    /// Per-cell results: `<results>/<cell>/`.
    results: PathBuf,
    /// Per-cell training checkpoints: `<checkpoints>/<cell>/` (large; put them on scratch).
    checkpoints: PathBuf,
    #[serde(default)]
    device: Option<String>,
    /// The k grid every backbone runs unless it names its own (each k checked as it is read).
    k: Vec<Scale>,
    eval: EvalSpec,
    data: DataConfig,
    /// Recipe fields shared by every cell (the rest take `Recipe`'s defaults).
    #[serde(default)]
    recipe: RecipeFields,
    backbone: Vec<BackboneSpec>,
    #[serde(default)]
    paper: Vec<PaperResult>,
    /// Scored during every cell's training (`lsr_train::ValidationConfig`).
    #[serde(default)]
    validation: Option<ValidationConfig>,
    #[serde(default)]
    probe: Option<ProbeSpec>,
    /// Another matrix file whose cells these are read beside (relative to this file's folder):
    /// the pre-flight refuses the two unless they train the same backbones from the same
    /// checkpoints.
    #[serde(default)]
    compare_with: Option<PathBuf>,
}

/// The probe's share of the recipe's steps unless the matrix's `[probe]` says otherwise.
pub const DEFAULT_PROBE_FRACTION: f64 = 0.05;

/// `[probe]`: how `lsr matrix probe` shortens the recipe.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeSpec {
    /// The share of each cell's steps after which the probe stops and scores it, in (0, 1].
    fraction: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackboneSpec {
    name: Spanned<String>,
    checkpoint: String,
    #[serde(default)]
    k: Option<Vec<Scale>>,
    #[serde(default)]
    untie: bool,
    /// Recipe fields for this backbone only, over the shared ones.
    #[serde(default)]
    recipe: RecipeFields,
}

/// Recipe fields as the file writes them, each with where its value is, so that an error about
/// a field names the line of its value, in `[recipe]` or in a backbone's own.
type RecipeFields = BTreeMap<String, Spanned<toml::Value>>;

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
    /// Tokens per query and per document of every data set without its own `lengths`;
    /// naver/splade's 256 unless set, whatever the training used.
    #[serde(default = "default_max_length")]
    pub query_max_length: usize,
    #[serde(default = "default_max_length")]
    pub document_max_length: usize,
    /// A data set's (or group's) own lengths: `[eval.lengths."beir/arguana"]`.
    #[serde(default)]
    pub lengths: BTreeMap<String, Lengths>,
    pub top_k: usize,
    /// The data set (or group) whose mean nDCG@10 and FLOPs the trade-off plot shows.
    pub tradeoff: String,
    /// The arithmetic of encoding (`f32`, `bf16-mixed`, or `bf16` on a CPU through a BLAS),
    /// whatever the training used.
    #[serde(default)]
    pub precision: Precision,
    /// Means over every judged query, those that retrieve nothing counting 0 (trec_eval `-c`,
    /// MS MARCO's official evaluation); `false`: over the queries with results.
    #[serde(default = "complete_by_default")]
    pub complete: bool,
    /// Documents per corpus shard: a preemption during encoding loses at most one shard.
    #[serde(default = "default_shard_documents")]
    pub shard_documents: usize,
}

/// Lengths of one data set (or group) over the `[eval]` ones; either may be left out.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lengths {
    pub query_max_length: Option<usize>,
    pub document_max_length: Option<usize>,
}

fn default_measures() -> Vec<String> {
    ["mrr@10", "ndcg@10", "recall@100", "recall@1000"]
        .map(String::from)
        .to_vec()
}

fn default_max_length() -> usize {
    DEFAULT_MAX_LENGTH
}

fn default_shard_documents() -> usize {
    lsr_eval::shards::DEFAULT_SHARD_DOCUMENTS
}

fn complete_by_default() -> bool {
    true
}

impl EvalSpec {
    /// The settings `dataset` (a canonical name, as [`Dataset::members`] gives it) is
    /// evaluated with: the shared ones, with its own lengths where `lengths` has them.
    pub fn settings(&self, dataset: &str, measures: &[Measure]) -> EvalSettings {
        let own = self.lengths_of(dataset);
        EvalSettings {
            batch_size: self.batch_size,
            query_max_length: own
                .and_then(|l| l.query_max_length)
                .unwrap_or(self.query_max_length),
            document_max_length: own
                .and_then(|l| l.document_max_length)
                .unwrap_or(self.document_max_length),
            top_k: self.top_k,
            measures: measures.to_vec(),
            complete: self.complete,
            quantize: None,
            shard_documents: Some(self.shard_documents),
        }
    }

    /// The longest query or document length any data set is given.
    pub fn longest(&self) -> usize {
        self.lengths
            .values()
            .flat_map(|l| [l.query_max_length, l.document_max_length])
            .flatten()
            .chain([self.query_max_length, self.document_max_length])
            .max()
            .unwrap_or(DEFAULT_MAX_LENGTH)
    }

    /// The `lengths` entry naming `dataset` or a group it belongs to (validation leaves at
    /// most one).
    fn lengths_of(&self, dataset: &str) -> Option<&Lengths> {
        self.lengths
            .iter()
            .find(|(key, _)| {
                Dataset::members(key).is_ok_and(|members| members.iter().any(|m| m == dataset))
            })
            .map(|(_, lengths)| lengths)
    }
}

/// A validated matrix.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub path: PathBuf,
    pub name: String,
    pub note: Option<String>,
    pub results: PathBuf,
    pub checkpoints: PathBuf,
    pub device: Option<String>,
    pub eval: EvalSpec,
    pub cells: Vec<Cell>,
    pub paper: Vec<PaperResult>,
    /// The probe's share of the recipe's steps (`crate::probe`).
    pub probe_fraction: f64,
    /// What `--set` and `--results` changed in the file.
    pub variant: Variant,
    /// The matrix file these cells are compared with, resolved against this file's folder.
    pub compare_with: Option<PathBuf>,
}

impl Matrix {
    /// Reads and validates `path`: unknown keys, missing backbones, bad k, invalid recipes are
    /// errors naming the file and, where TOML knows it, the line.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_variant(path, &Variant::default())
    }

    /// [`Matrix::load`] of the file as `variant` changes it. Its errors name no line: the
    /// lines are the variant's, not the file's.
    pub fn load_variant(path: &Path, variant: &Variant) -> Result<Self> {
        let mut text = std::fs::read_to_string(path).map_err(|e| MatrixError::io(path, e))?;
        if !variant.is_empty() {
            text = variant.apply(path, &text)?;
        }
        let source = Source {
            path,
            text: &text,
            variant,
        };
        let file: MatrixFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().and_then(|span| source.line_of(span.start));
            source.fail(line, e.message().to_string())
        })?;
        if file.backbone.is_empty() {
            let message = "no [[backbone]] tables: the matrix has no cells";
            return Err(source.fail(None, message.into()));
        }
        source.check_eval(&file.eval)?;
        let shared_grid = source.grid(&file.k)?;
        let mut cells = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for backbone in &file.backbone {
            let name = source.backbone_name(backbone, &names)?;
            cells.extend(source.cells(&file, backbone, &shared_grid)?);
            names.push(name);
        }
        let probe_fraction = source.probe_fraction(file.probe.as_ref())?;
        for result in &file.paper {
            source.check_paper(result, &cells, &file.eval)?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            name: file.name,
            note: file.note,
            results: file.results,
            checkpoints: file.checkpoints,
            device: file.device,
            eval: file.eval,
            cells,
            paper: file.paper,
            probe_fraction,
            variant: variant.clone(),
            compare_with: (file.compare_with)
                .map(|other| path.parent().unwrap_or(Path::new("")).join(other)),
        })
    }

    /// The file and the variant's arguments, as another `lsr matrix` command takes them to read
    /// the same matrix (a Slurm task, a device's worker).
    pub fn arguments(&self) -> Vec<String> {
        let mut arguments = vec![self.path.display().to_string()];
        arguments.extend(self.variant.arguments());
        arguments
    }

    /// Runs every cell on `device` instead of the file's (`lsr matrix run --device`): not a
    /// variant, since the results are the same matrix's, wherever they were computed.
    pub fn on_device(&mut self, device: &str) {
        self.device = Some(device.to_string());
        for cell in &mut self.cells {
            cell.config.device = Some(device.to_string());
        }
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
    variant: &'a Variant,
}

impl Source<'_> {
    fn fail(&self, line: Option<usize>, message: String) -> MatrixError {
        let (line, message) = match self.variant.is_empty() {
            true => (line, message),
            false => (
                None,
                format!("{message} (with {})", self.variant.arguments().join(" ")),
            ),
        };
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

    /// The evaluation section: known data set names, lengths of at least one token, and
    /// `lengths` entries that name evaluated data sets, each data set at most once.
    fn check_eval(&self, eval: &EvalSpec) -> Result<()> {
        if eval.datasets.is_empty() {
            return Err(self.fail(None, "eval.datasets is empty".into()));
        }
        let members = |field: &str, name: &str| {
            Dataset::members(name).map_err(|e| self.fail(None, format!("{field}: {e}")))
        };
        let mut evaluated = Vec::new();
        for name in &eval.datasets {
            evaluated.extend(members("eval.datasets", name)?);
        }
        self.check_measures(eval)?;
        self.check_tradeoff(eval, &evaluated)?;
        self.check_at_least_one("eval.query_max_length", Some(eval.query_max_length))?;
        self.check_at_least_one("eval.document_max_length", Some(eval.document_max_length))?;
        self.check_at_least_one("eval.shard_documents", Some(eval.shard_documents))?;
        let mut covered: BTreeMap<String, &str> = BTreeMap::new();
        for (key, lengths) in &eval.lengths {
            let field = format!("eval.lengths.\"{key}\"");
            for member in members(&field, key)? {
                if !evaluated.contains(&member) {
                    let message = format!("{field}: `{member}` is not among eval.datasets");
                    return Err(self.fail(None, message));
                }
                if let Some(other) = covered.insert(member.clone(), key) {
                    let message = format!(
                        "{field}: `{member}` already has its lengths from eval.lengths.\"{other}\""
                    );
                    return Err(self.fail(None, message));
                }
            }
            self.check_at_least_one(
                &format!("{field}.query_max_length"),
                lengths.query_max_length,
            )?;
            let document = lengths.document_max_length;
            self.check_at_least_one(&format!("{field}.document_max_length"), document)?;
        }
        Ok(())
    }

    /// Measures lsr computes, among them each one the report shows: the primary measure of
    /// every evaluated name and of the trade-off set (`lsr_data::registry::table_measure`).
    fn check_measures(&self, eval: &EvalSpec) -> Result<()> {
        let measures = Measure::parse_all(&eval.measures)
            .map_err(|e| self.fail(None, format!("eval.measures: {e}")))?;
        let names: Vec<String> = measures.iter().map(Measure::name).collect();
        for dataset in eval.datasets.iter().chain([&eval.tradeoff]) {
            let measure = table_measure(dataset);
            if !names.iter().any(|name| name == measure) {
                let message = format!(
                    "eval.measures: the report shows {measure} for `{dataset}` (Table 1, the \
                     trade-off figure), which the list lacks"
                );
                return Err(self.fail(None, message));
            }
        }
        Ok(())
    }

    /// The trade-off set is evaluated: a name of `eval.datasets`, or one of their data sets by
    /// its canonical name, as the report looks it up in `metrics.json`.
    fn check_tradeoff(&self, eval: &EvalSpec, evaluated: &[String]) -> Result<()> {
        let tradeoff = &eval.tradeoff;
        if eval.datasets.contains(tradeoff) || evaluated.contains(tradeoff) {
            return Ok(());
        }
        let message = format!(
            "eval.tradeoff `{tradeoff}` is not evaluated: name one of eval.datasets ({}) or one \
             of their data sets ({})",
            eval.datasets.join(", "),
            evaluated.join(", ")
        );
        Err(self.fail(None, message))
    }

    /// A `[[paper]]` number Table 1 can show: a backbone and a k among the cells, a column of
    /// `eval.datasets`, and that column's measure.
    fn check_paper(&self, result: &PaperResult, cells: &[Cell], eval: &EvalSpec) -> Result<()> {
        let PaperResult {
            backbone,
            k,
            dataset,
            measure,
            ..
        } = result;
        let what = format!("[[paper]] {backbone} k = {k} on `{dataset}`");
        let problem = if !cells.iter().any(|c| &c.backbone == backbone) {
            format!("[[paper]] names unknown backbone `{backbone}`")
        } else if !cells.iter().any(|c| &c.backbone == backbone && c.k() == *k) {
            format!("{what}: k = {k} is not in {backbone}'s grid")
        } else if !eval.datasets.contains(dataset) {
            format!("{what}: Table 1 has a column for each of eval.datasets only")
        } else if Measure::parse(measure).map(|m| m.name()).ok().as_deref()
            != Some(table_measure(dataset))
        {
            let shown = table_measure(dataset);
            format!("{what}: measure `{measure}`, but Table 1 shows {shown} there")
        } else {
            return Ok(());
        };
        Err(self.fail(None, problem))
    }

    /// `[probe] fraction`, in (0, 1].
    fn probe_fraction(&self, probe: Option<&ProbeSpec>) -> Result<f64> {
        let Some(spec) = probe else {
            return Ok(DEFAULT_PROBE_FRACTION);
        };
        let fraction = *spec.fraction.get_ref();
        if fraction > 0.0 && fraction <= 1.0 {
            return Ok(fraction);
        }
        let line = self.line_of(spec.fraction.span().start);
        let message = format!("probe.fraction must be in (0, 1], got {fraction}");
        Err(self.fail(line, message))
    }

    /// A length, when given, keeps at least one token (as the recipe's lengths).
    fn check_at_least_one(&self, field: &str, value: Option<usize>) -> Result<()> {
        match value {
            Some(0) => Err(self.fail(None, format!("{field}: must be at least 1, got 0"))),
            _ => Ok(()),
        }
    }

    /// A k grid, not empty (each k was checked where it was read, with its line).
    fn grid(&self, grid: &[Scale]) -> Result<Vec<Scale>> {
        if grid.is_empty() {
            return Err(self.fail(None, "a k grid is empty".into()));
        }
        Ok(grid.to_vec())
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
        shared_grid: &[Scale],
    ) -> Result<Vec<Cell>> {
        let name = backbone.name.get_ref();
        let line = self.line_of(backbone.name.span().start);
        let grid = match &backbone.k {
            Some(grid) => self.grid(grid)?,
            None => shared_grid.to_vec(),
        };
        // Each field with the part of the file it comes from, the backbone's over the shared.
        let own = format!("backbone `{name}`: ");
        let mut fields: BTreeMap<&str, (&Spanned<toml::Value>, &str)> = BTreeMap::new();
        fields.extend(file.recipe.iter().map(|(k, v)| (k.as_str(), (v, ""))));
        fields.extend(
            backbone
                .recipe
                .iter()
                .map(|(k, v)| (k.as_str(), (v, own.as_str()))),
        );
        // A field within a table (`distillation.temperature`) is at its table's line.
        let at_field = |key: &str, message: &str| {
            let (value, part) = fields.get(key.split('.').next()?)?;
            let line = self.line_of(value.span().start);
            Some(self.fail(line, format!("{part}recipe.{key}: {message}")))
        };
        let recipe =
            recipe_of(fields.iter().map(|(k, (v, _))| (*k, v.get_ref()))).map_err(|e| {
                // The field at fault: the first that fails on its own.
                fields
                    .iter()
                    .find_map(|(key, (value, _))| {
                        let alone = recipe_of([(*key, value.get_ref())]).err()?;
                        at_field(key, alone.message())
                    })
                    .unwrap_or_else(|| self.fail(line, format!("{own}recipe: {}", e.message())))
            })?;
        grid.into_iter()
            .map(|k| {
                let id = cell_id(name, k.get());
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
                .validated(&format!("{} (cell {id})", self.path.display()))
                .map_err(|e| {
                    let at_its_line = match &e {
                        lsr_train::TrainError::Config {
                            field: Some(field),
                            message,
                            ..
                        } => (field.strip_prefix("recipe.")).and_then(|key| at_field(key, message)),
                        _ => None,
                    };
                    at_its_line.unwrap_or_else(|| e.into())
                })?;
                Ok(Cell {
                    id,
                    backbone: name.clone(),
                    config,
                })
            })
            .collect()
    }
}

/// A recipe from some of its fields, the rest at their defaults.
fn recipe_of<'a>(
    fields: impl IntoIterator<Item = (&'a str, &'a toml::Value)>,
) -> std::result::Result<Recipe, toml::de::Error> {
    let table = fields
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    toml::Value::Table(table).try_into()
}

#[cfg(test)]
mod tests;
