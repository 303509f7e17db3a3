//! What `lsr data fetch` downloads must be and what it installed, checked with lsr's one
//! checksum system (`lsr_files::digest`): each download against the md5 and size the data-set
//! registry pins for it, and the record of what was installed (`<data root>/.lsr-installed.json`:
//! each file's size and SHA-256 and the verified download it came from), which `lsr data verify`
//! checks the files against.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lsr_files::digest::{Digests, FileDigest};
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::registry::Pinned;

pub const INSTALLED: &str = ".lsr-installed.json";

/// Why the set that downloads `url` has no published digest of it, if the registry says.
pub fn unpinned_reason(url: &str) -> Option<&'static str> {
    crate::registry::REGISTRY
        .iter()
        .find(|set| set.downloads.iter().any(|d| d.origin() == url))
        .and_then(|set| set.unpinned)
}

/// Refuses a download (at `path`) whose size or md5 is not the published one, or whose URL has
/// no pinned digest.
pub fn check(url: &str, pinned: Option<&Pinned>, path: &Path, got: &Digests) -> Result<()> {
    let Some(pinned) = pinned else {
        return Err(unpinned(url, path));
    };
    let size_differs = pinned.size.is_some_and(|size| size != got.file.size);
    if size_differs || pinned.md5 != got.md5 {
        let size = pinned
            .size
            .map(|s| format!(", {s} bytes"))
            .unwrap_or_default();
        return Err(DataError::File {
            path: path.to_path_buf(),
            message: format!(
                "{url} is not the published file: expected md5 {}{size}, got md5 {}, {} bytes \
                 (a truncated, changed or tampered download; nothing was installed)",
                pinned.md5, got.md5, got.file.size
            ),
        });
    }
    Ok(())
}

/// The refusal of a download that the registry pins no digest for.
pub fn unpinned(url: &str, path: &Path) -> DataError {
    DataError::File {
        path: path.to_path_buf(),
        message: format!("no checksum is pinned for {url} (crates/data/src/registry/mod.rs)"),
    }
}

/// One installed file: its size and SHA-256 when installed, and the verified download it came
/// from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    #[serde(flatten)]
    pub file: FileDigest,
    pub source: String,
    pub source_md5: String,
}

/// `<root>/.lsr-installed.json`: data-root-relative path → what was installed there.
pub fn read_installed(root: &Path) -> Result<BTreeMap<PathBuf, Installed>> {
    let path = root.join(INSTALLED);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| DataError::File {
            path: path.clone(),
            message: format!("not a record of installed files: {e}"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(DataError::io(&path, e)),
    }
}

/// Adds `files` to the record (the caller holds the data root's lock).
pub fn record_installed(root: &Path, files: Vec<(PathBuf, Installed)>) -> Result<()> {
    let mut installed = read_installed(root)?;
    installed.extend(files);
    Ok(lsr_files::write_json(&root.join(INSTALLED), &installed)?)
}

/// Re-hashes each recorded file among `files` (data-root-relative); returns how many were
/// recorded and matched. A recorded file that changed is an error naming both digests.
pub fn verify_installed(root: &Path, files: &[&Path]) -> Result<usize> {
    let installed = read_installed(root)?;
    let mut matched = 0;
    for file in files {
        let Some(record) = installed.get(*file) else {
            continue;
        };
        let path = root.join(file);
        if let Some(change) = record.file.damage(&FileDigest::of(&path)?) {
            let message = format!(
                "changed since it was installed from {}: {change}",
                record.source
            );
            return Err(DataError::File { path, message });
        }
        matched += 1;
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned digest of `url`, if a registered data set downloads it.
    fn pinned(url: &str) -> Option<Pinned> {
        crate::registry::REGISTRY
            .iter()
            .flat_map(|set| &set.downloads)
            .find(|download| download.origin() == url)
            .and_then(|download| download.pinned().cloned())
    }

    #[test]
    fn the_table_pins_every_download_of_every_named_set() {
        for name in [
            "msmarco-dev",
            "trec-dl-2019",
            "trec-dl-2020",
            "beir-13",
            "nanobeir-13",
            crate::registry::MSMARCO_TRAIN,
        ] {
            for download in crate::fetch::plan(name).unwrap() {
                let url = download.origin();
                let pinned = pinned(&url).unwrap_or_else(|| panic!("{url} is not pinned"));
                assert_eq!(pinned.md5.len(), 32, "{url}");
            }
        }
    }

    #[test]
    fn a_download_that_is_not_the_published_file_is_refused_with_both_digests() {
        let url = "https://trec.nist.gov/data/deep/2019qrels-pass.txt";
        let truncated = Digests {
            md5: "900150983cd24fb0d6963f7d28e17f72".into(),
            file: FileDigest {
                size: 3,
                sha256: String::new(),
            },
        };
        let error = check(url, pinned(url).as_ref(), Path::new("dl.tmp"), &truncated)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("expected md5 2f4be390198da108f6845c822e5ada14, 187092 bytes")
                && error.contains("got md5 900150983cd24fb0d6963f7d28e17f72, 3 bytes"),
            "{error}"
        );
        let error = check("https://example.org/x", None, Path::new("x"), &truncated).unwrap_err();
        assert!(
            error.to_string().contains("no checksum is pinned"),
            "{error}"
        );
    }

    #[test]
    fn verify_finds_an_installed_file_that_changed_and_skips_unrecorded_ones() {
        let root = tempfile::tempdir().unwrap();
        let file = Path::new("beir/x/corpus.jsonl");
        std::fs::create_dir_all(root.path().join("beir/x")).unwrap();
        std::fs::write(root.path().join(file), "abc").unwrap();
        let entry = Installed {
            file: FileDigest::of(&root.path().join(file)).unwrap(),
            source: "https://example.org/x.zip".into(),
            source_md5: "00".into(),
        };
        record_installed(root.path(), vec![(file.to_path_buf(), entry)]).unwrap();
        let by_hand = Path::new("beir/x/queries.jsonl");
        assert_eq!(verify_installed(root.path(), &[file, by_hand]).unwrap(), 1);
        std::fs::write(root.path().join(file), "abd").unwrap();
        let error = verify_installed(root.path(), &[file])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("changed since it was installed from https://example.org/x.zip")
                && error.contains("its SHA-256 is"),
            "{error}"
        );
        // The record reads as it was written before the digest was one type.
        let before = r#"{"beir/x/corpus.jsonl": {"sha256": "ab", "size": 3, "source": "u", "source_md5": "00"}}"#;
        std::fs::write(root.path().join(INSTALLED), before).unwrap();
        let read = read_installed(root.path()).unwrap();
        assert_eq!(read[file].file.size, 3);
    }
}
