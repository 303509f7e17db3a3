//! Where a checkpoint's files are: a local directory, or a Hugging Face id (`name`, or
//! `name@revision` for a branch, tag or commit) resolved through the standard hub cache
//! (`HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`), downloaded into it
//! when online, with the commit it resolved to. `HF_HUB_OFFLINE=1` forbids the download.
//! Which of the two a name is, and whether a hub name is pinned to a commit, is decided here
//! alone (`CheckpointName`, [`Pinning`]), for every command. A hub id the hub has renamed is
//! found in the cache under its other name too ([`HUB_RENAMES`]), and a name not pinned to a
//! commit is said once per process, with the commit it loaded.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{BackboneError, Result};

/// Weight files, in the order they are preferred.
const WEIGHT_FILES: [&str; 3] = [
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
];

#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// What the user named: a path or an HF id.
    pub name: String,
    pub config: PathBuf,
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
    /// The hub commit a hub checkpoint resolved to (its snapshot); none for a directory.
    pub revision: Option<String>,
}

/// What a checkpoint name stands for: an existing path, or any name that cannot be a Hugging
/// Face id (`./models/bert`, `/data/bert`, `data/synth/models/bert`, `~/bert`), is a local
/// directory; the rest (`bert-base-uncased`, `answerdotai/ModernBERT-base@<commit>`) are hub
/// ids. A mistyped path is therefore "no such directory", never a download.
#[derive(Clone, Copy, Debug, PartialEq)]
enum CheckpointName<'a> {
    Local(&'a Path),
    Hub,
}

impl<'a> CheckpointName<'a> {
    fn of(spec: &'a str) -> Self {
        let path = Path::new(spec);
        if path.exists() || !is_hub_id(spec) {
            Self::Local(path)
        } else {
            Self::Hub
        }
    }
}

/// The hub's rule for a repository id (`name` or `owner/name`, each part letters, digits, `-`,
/// `_` and `.`, neither starting nor ending with `-` or `.`, without `--` or `..`), with an
/// optional non-empty `@revision`.
fn is_hub_id(spec: &str) -> bool {
    let (id, revision) = match spec.split_once('@') {
        Some((id, revision)) => (id, Some(revision)),
        None => (spec, None),
    };
    let part = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !p.starts_with(['-', '.'])
            && !p.ends_with(['-', '.'])
            && !p.contains("--")
            && !p.contains("..")
    };
    let parts: Vec<&str> = id.split('/').collect();
    parts.len() <= 2 && parts.iter().all(|p| part(p)) && revision.is_none_or(|r| !r.is_empty())
}

impl Checkpoint {
    /// Resolves with the hub settings of the environment.
    pub fn resolve(spec: &str) -> Result<Self> {
        Self::resolve_with(spec, &HubSettings::from_env())
    }

    pub fn resolve_with(spec: &str, hub: &HubSettings) -> Result<Self> {
        match CheckpointName::of(spec) {
            CheckpointName::Local(path) => Self::local(spec, path),
            CheckpointName::Hub => from_hub(spec, hub),
        }
    }

    /// Whether `spec` can be loaded, without loading or downloading anything: a local
    /// checkpoint's files are there, a hub id is in the cache or may be downloaded.
    pub fn check(spec: &str) -> Result<()> {
        let hub = HubSettings::from_env();
        match CheckpointName::of(spec) {
            CheckpointName::Local(path) => Self::local(spec, path).map(drop),
            // Offline, resolving reads the cache alone.
            CheckpointName::Hub if hub.offline => from_hub(spec, &hub).map(drop),
            CheckpointName::Hub => Ok(()),
        }
    }

    fn local(spec: &str, path: &Path) -> Result<Self> {
        if path.is_dir() {
            return Self::from_dir(spec, path);
        }
        let message = if path.exists() {
            "expected a checkpoint directory (config.json, model.safetensors, tokenizer.json), \
             found a file"
                .to_string()
        } else {
            let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
            format!(
                "no such directory ({}); a checkpoint is a directory holding config.json, \
                 model.safetensors and tokenizer.json, or a Hugging Face id, which this name \
                 cannot be",
                absolute.display()
            )
        };
        Err(BackboneError::Checkpoint(format!("{spec}: {message}")))
    }

    pub fn from_dir(name: &str, dir: &Path) -> Result<Self> {
        let weights = WEIGHT_FILES
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                BackboneError::Checkpoint(format!(
                    "{}: no weights found (expected one of {})",
                    dir.display(),
                    WEIGHT_FILES.join(", ")
                ))
            })?;
        let required = |file: &str| {
            let p = dir.join(file);
            if p.is_file() {
                Ok(p)
            } else {
                Err(BackboneError::Checkpoint(format!(
                    "{}: `{file}` is missing",
                    dir.display()
                )))
            }
        };
        Ok(Self {
            name: name.to_string(),
            config: required("config.json")?,
            tokenizer: required("tokenizer.json")?,
            weights,
            revision: None,
        })
    }

    /// The directory holding config.json (a snapshot directory for hub checkpoints).
    pub fn dir(&self) -> &Path {
        self.config.parent().unwrap_or(Path::new("."))
    }
}

/// Where the hub cache is and whether downloading is allowed.
#[derive(Clone, Debug)]
pub struct HubSettings {
    pub cache_dir: PathBuf,
    pub offline: bool,
}

impl HubSettings {
    /// The cache the Python libraries use (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
    /// `~/.cache/huggingface/hub`) and `HF_HUB_OFFLINE`.
    pub fn from_env() -> Self {
        let cache_dir = if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
            PathBuf::from(dir)
        } else if let Some(home) = std::env::var_os("HF_HOME") {
            PathBuf::from(home).join("hub")
        } else {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache").join("huggingface").join("hub")
        };
        let offline = std::env::var("HF_HUB_OFFLINE")
            .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
        Self { cache_dir, offline }
    }
}

/// A hub id and the revision it names (`main` if none).
fn split_revision(spec: &str) -> (&str, &str) {
    spec.split_once('@').unwrap_or((spec, "main"))
}

/// The hub's redirects from the legacy names of the paper's backbones to the ids they have
/// had since the hub moved them under their organisations (early 2024). The Python libraries
/// cache a repository under the name it was asked by (`models--bert-base-uncased` or
/// `models--google-bert--bert-base-uncased`), so an offline cache filled under either is
/// looked up under both.
pub const HUB_RENAMES: [(&str, &str); 4] = [
    ("bert-base-uncased", "google-bert/bert-base-uncased"),
    (
        "distilbert-base-uncased",
        "distilbert/distilbert-base-uncased",
    ),
    ("albert-base-v2", "albert/albert-base-v2"),
    ("roberta-base", "FacebookAI/roberta-base"),
];

/// `id`, then the other name of the same hub repository if it has one.
fn hub_names(id: &str) -> Vec<&str> {
    let other = HUB_RENAMES.iter().find_map(|&(legacy, canonical)| {
        (legacy == id)
            .then_some(canonical)
            .or((canonical == id).then_some(legacy))
    });
    std::iter::once(id).chain(other).collect()
}

/// What a checkpoint name fixes of the weights it loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// A local directory: its files, whatever they are.
    Local,
    /// A hub id at a commit.
    Commit { id: String, commit: String },
    /// A hub id at a branch or tag (`main` when none is named), which may move.
    Unpinned { id: String, revision: String },
}

impl Pinning {
    pub fn of(spec: &str) -> Self {
        if let CheckpointName::Local(_) = CheckpointName::of(spec) {
            return Self::Local;
        }
        let (id, revision) = split_revision(spec);
        let (id, revision) = (id.to_string(), revision.to_string());
        match lsr_files::provenance::is_commit(&revision) {
            true => Self::Commit {
                id,
                commit: revision,
            },
            false => Self::Unpinned { id, revision },
        }
    }

    pub fn is_commit(&self) -> bool {
        matches!(self, Self::Commit { .. })
    }
}

/// The hub id a checkpoint name loads, without its revision; none for a local directory.
pub fn hub_id(spec: &str) -> Option<&str> {
    match CheckpointName::of(spec) {
        CheckpointName::Local(_) => None,
        CheckpointName::Hub => Some(split_revision(spec).0),
    }
}

/// Says, once per process and name, that `spec` follows a branch or tag, and which commit it
/// loaded this time.
fn warn_unpinned(spec: &str, commit: Option<&str>) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let Pinning::Unpinned { id, revision } = Pinning::of(spec) else {
        return;
    };
    if !WARNED
        .lock()
        .expect("not poisoned")
        .insert(spec.to_string())
    {
        return;
    }
    let commit = commit.unwrap_or("unknown");
    tracing::warn!(
        "checkpoint `{spec}` is not pinned: it loads the hub's `{revision}`, here commit \
         {commit}; name it `{id}@{commit}` to load these weights again"
    );
}

/// A snapshot directory as a checkpoint: its name is the commit it holds.
fn from_snapshot(spec: &str, dir: &Path) -> Result<Checkpoint> {
    let mut found = Checkpoint::from_dir(spec, dir)?;
    found.revision = dir.file_name().map(|c| c.to_string_lossy().into_owned());
    Ok(found)
}

fn from_hub(spec: &str, hub: &HubSettings) -> Result<Checkpoint> {
    let found = resolve_hub(spec, hub)?;
    warn_unpinned(spec, found.revision.as_deref());
    Ok(found)
}

/// The cached snapshot of `spec` under any name of its repository, else (online) a download.
fn resolve_hub(spec: &str, hub: &HubSettings) -> Result<Checkpoint> {
    let (id, revision) = split_revision(spec);
    let cache_dir = hub.cache_dir.clone();
    let cache = hf_hub::Cache::new(cache_dir.clone());
    let repo = hf_hub::Repo::with_revision(id.into(), hf_hub::RepoType::Model, revision.into());
    for name in hub_names(id) {
        let named =
            hf_hub::Repo::with_revision(name.into(), hf_hub::RepoType::Model, revision.into());
        let cached = cache.repo(named);
        // A commit has no ref file in a cache the Python libraries filled: its snapshot is its
        // name.
        let snapshot = cached
            .get("config.json")
            .and_then(|config| config.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| cached.pointer_path(revision));
        if let Ok(found) = from_snapshot(spec, &snapshot) {
            return Ok(found);
        }
    }
    let missing = || {
        let folders: Vec<String> = hub_names(id)
            .into_iter()
            .map(|name| format!("`{}`", hf_hub::Repo::model(name.to_string()).folder_name()))
            .collect();
        format!(
            "checkpoint `{spec}` is not a local directory and is not in the Hugging Face cache at \
             {cache}. Download it on a machine with network access (`huggingface-cli download \
             {id} --revision {revision} config.json tokenizer.json model.safetensors`, or `lsr` without \
             HF_HUB_OFFLINE), then copy the cache directory {folder} under {cache}, or pass the \
             path of a directory holding config.json, tokenizer.json and model.safetensors",
            cache = cache_dir.display(),
            folder = folders.join(" or "),
        )
    };
    if hub.offline {
        return Err(BackboneError::Checkpoint(format!(
            "{} (HF_HUB_OFFLINE is set)",
            missing()
        )));
    }
    download(spec, repo, cache)
        .map_err(|e| BackboneError::Checkpoint(format!("{}; download failed: {e}", missing())))
}

fn download(
    spec: &str,
    repo: hf_hub::Repo,
    cache: hf_hub::Cache,
) -> std::result::Result<Checkpoint, String> {
    let api = hf_hub::api::sync::ApiBuilder::from_cache(cache)
        .with_progress(true)
        .build()
        .map_err(|e| e.to_string())?;
    let id = repo.url();
    let repo = api.repo(repo);
    let config = repo.get("config.json").map_err(|e| e.to_string())?;
    repo.get("tokenizer.json").map_err(|e| e.to_string())?;
    let mut weights_found = false;
    for file in WEIGHT_FILES {
        if let Ok(path) = repo.get(file) {
            if file.ends_with(".index.json") {
                let index: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(&path).map_err(|e| e.to_string())?,
                )
                .map_err(|e| e.to_string())?;
                let mut shards: Vec<&str> = index["weight_map"]
                    .as_object()
                    .map(|m| m.values().filter_map(|v| v.as_str()).collect())
                    .unwrap_or_default();
                shards.sort_unstable();
                shards.dedup();
                for shard in shards {
                    repo.get(shard).map_err(|e| e.to_string())?;
                }
            }
            weights_found = true;
            break;
        }
    }
    if !weights_found {
        return Err(format!("{id} has none of {}", WEIGHT_FILES.join(", ")));
    }
    from_snapshot(spec, config.parent().unwrap_or(Path::new("."))).map_err(|e| e.to_string())
}
