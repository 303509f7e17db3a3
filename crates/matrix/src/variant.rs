//! A variant of a matrix without a copy of its file: `--set KEY=VALUE` and `--results DIR`,
//! applied to the file's TOML before it is validated, so that a variant is checked exactly as
//! the file would be and records what it changed (`matrix.json`'s `set`).

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use lsr_train::settings;

use crate::error::{MatrixError, Result};

/// What `--set` and `--results` change in a matrix file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Variant {
    /// `KEY=VALUE` as given, in order; a later one wins.
    pub set: Vec<String>,
    /// Results (and checkpoints under them) in this folder, the matrix named after it.
    pub results: Option<PathBuf>,
}

impl Variant {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.results.is_none()
    }

    /// The command-line arguments that give this variant again.
    pub fn arguments(&self) -> Vec<String> {
        let mut arguments = Vec::new();
        for set in &self.set {
            arguments.extend(["--set".to_string(), set.clone()]);
        }
        if let Some(results) = &self.results {
            arguments.extend(["--results".to_string(), results.display().to_string()]);
        }
        arguments
    }

    /// The matrix file's `text` with this variant applied, as TOML again.
    pub(crate) fn apply(&self, path: &Path, text: &str) -> Result<String> {
        let fail = |message: String| MatrixError::Spec {
            path: path.to_path_buf(),
            line: None,
            message,
        };
        let mut document: Table = text.parse().map_err(|e: toml::de::Error| {
            fail(format!("{} (before --set and --results)", e.message()))
        })?;
        // Results first, so that a `--set` of the name or the checkpoints wins over them.
        let stranded = match &self.results {
            Some(results) => move_results(&mut document, results).map_err(&fail)?,
            None => None,
        };
        let mut checkpoints_set = false;
        for set in &self.set {
            let before = document.get("checkpoints").cloned();
            settings::set(&mut document, set).map_err(|e| fail(format!("--set {set}: {e}")))?;
            checkpoints_set |= document.get("checkpoints") != before.as_ref();
        }
        match stranded {
            Some(message) if !checkpoints_set => Err(fail(message)),
            _ => Ok(toml::to_string(&document).expect("a TOML table serialises")),
        }
    }
}

/// `results = DIR`, the matrix named after DIR, and checkpoints that lived under the old results
/// moved under DIR. Checkpoints elsewhere would be shared with the original's cells: the message
/// saying so comes back, an error unless a `--set` gives them a folder.
fn move_results(
    document: &mut Table,
    results: &Path,
) -> std::result::Result<Option<String>, String> {
    let name = results
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let name = name.ok_or_else(|| format!("--results {}: not a folder name", results.display()))?;
    let path_of = |key: &str| document.get(key).and_then(Value::as_str).map(PathBuf::from);
    let mut stranded = None;
    if let (Some(old), Some(checkpoints)) = (path_of("results"), path_of("checkpoints")) {
        match checkpoints.strip_prefix(&old) {
            Ok(inside) => {
                let moved = results.join(inside).display().to_string();
                document.insert("checkpoints".into(), Value::String(moved));
            }
            Err(_) => {
                stranded = Some(format!(
                    "--results {}: the checkpoints ({}) are not under the results ({}), so the \
                     variant's cells would write over the original's; give them their own \
                     folder, e.g. --set checkpoints=\"{}/checkpoints\"",
                    results.display(),
                    checkpoints.display(),
                    old.display(),
                    results.display()
                ))
            }
        }
    }
    document.insert(
        "results".into(),
        Value::String(results.display().to_string()),
    );
    document.insert("name".into(), Value::String(name));
    Ok(stranded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
name = "mini"
results = "results/mini"
checkpoints = "results/mini/checkpoints"
k = [1, 4]
backbone = [{ name = "bert", checkpoint = "models/bert" }, { name = "gte", checkpoint = "models/gte" }]
"#;

    fn apply(set: &[&str], results: Option<&str>) -> std::result::Result<Table, String> {
        apply_to(FILE, set, results)
    }

    fn apply_to(
        file: &str,
        set: &[&str],
        results: Option<&str>,
    ) -> std::result::Result<Table, String> {
        let variant = Variant {
            set: set.iter().map(|s| s.to_string()).collect(),
            results: results.map(PathBuf::from),
        };
        let text = variant
            .apply(Path::new("m.toml"), file)
            .map_err(|e| e.to_string())?;
        Ok(text.parse().unwrap())
    }

    #[test]
    fn results_move_the_checkpoints_under_them_and_name_the_matrix() {
        let table = apply(&[], Some("results/mini-bf16")).unwrap();
        assert_eq!(table["results"].as_str(), Some("results/mini-bf16"));
        assert_eq!(
            table["checkpoints"].as_str(),
            Some("results/mini-bf16/checkpoints")
        );
        assert_eq!(table["name"].as_str(), Some("mini-bf16"));
    }

    #[test]
    fn settings_apply_in_order_after_the_results_and_errors_name_them() {
        let table = apply(
            &["recipe.lr=2e-3", "backbone.gte.checkpoint=other/gte"],
            Some("r/v"),
        )
        .unwrap();
        assert_eq!(table["recipe"]["lr"].as_float(), Some(2e-3));
        assert_eq!(
            table["backbone"][1]["checkpoint"].as_str(),
            Some("other/gte")
        );
        assert_eq!(table["name"].as_str(), Some("v"));
        let error = apply(&["backbone.ettin.checkpoint=x"], None).unwrap_err();
        assert!(
            error.starts_with("m.toml: --set backbone.ettin.checkpoint=x: no [[backbone]]"),
            "{error}"
        );
    }

    #[test]
    fn results_refuse_checkpoints_they_would_share_unless_given_a_folder() {
        let file = FILE.replace("results/mini/checkpoints", "/scratch/mini");
        let error = apply_to(&file, &[], Some("results/v")).unwrap_err();
        assert!(error.contains("would write over the original's"), "{error}");
        let table = apply_to(
            &file,
            &["checkpoints=/scratch/v", "name=v2"],
            Some("results/v"),
        )
        .unwrap();
        assert_eq!(table["checkpoints"].as_str(), Some("/scratch/v"));
        assert_eq!(
            table["name"].as_str(),
            Some("v2"),
            "a --set wins over --results"
        );
    }
}
