//! Hub checkpoints pinned and not, against an offline hub cache laid out on disk as the Python
//! libraries fill it: a name at a commit resolves to that commit's snapshot whatever `main`
//! is, a name without one to `main`'s; a repository the hub renamed is found under either name.

use std::path::{Path, PathBuf};

use lsr_backbone::reference::fixtures_dir;
use lsr_backbone::{Checkpoint, HUB_RENAMES, HubSettings, Pinning, hub_id};

const OLD: &str = "0123456789abcdef0123456789abcdef01234567";
const NEW: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// `snapshots/<commit>` of `folder` in `cache`, holding the BERT fixture's files.
fn snapshot(cache: &Path, folder: &str, commit: &str) -> PathBuf {
    let dir = cache.join(folder).join("snapshots").join(commit);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(fixtures_dir().join("bert").join(file), dir.join(file)).unwrap();
    }
    dir
}

/// `refs/main` of `folder` in `cache` names `commit`, as a download of `main` leaves it.
fn main_is(cache: &Path, folder: &str, commit: &str) {
    std::fs::create_dir_all(cache.join(folder).join("refs")).unwrap();
    std::fs::write(cache.join(folder).join("refs/main"), commit).unwrap();
}

fn offline(cache: &Path) -> HubSettings {
    HubSettings {
        cache_dir: cache.to_path_buf(),
        offline: true,
    }
}

#[test]
fn a_name_at_a_commit_loads_that_commit_and_one_without_loads_main() {
    let cache = tempfile::tempdir().unwrap();
    let folder = "models--tiny-org--bert";
    snapshot(cache.path(), folder, OLD);
    let newest = snapshot(cache.path(), folder, NEW);
    main_is(cache.path(), folder, NEW);
    let hub = offline(cache.path());

    let pinned = format!("tiny-org/bert@{OLD}");
    let found = Checkpoint::resolve_with(&pinned, &hub).unwrap();
    assert_eq!(found.revision.as_deref(), Some(OLD));
    assert_eq!(
        Pinning::of(&pinned),
        Pinning::Commit {
            id: "tiny-org/bert".into(),
            commit: OLD.into()
        }
    );

    let found = Checkpoint::resolve_with("tiny-org/bert", &hub).unwrap();
    assert_eq!(found.revision.as_deref(), Some(NEW));
    assert_eq!(found.weights, newest.join("model.safetensors"));
    for unpinned in [
        "tiny-org/bert",
        "tiny-org/bert@main",
        "tiny-org/bert@0123abcd",
    ] {
        assert!(
            matches!(Pinning::of(unpinned), Pinning::Unpinned { .. }),
            "{unpinned}"
        );
    }
    let local = fixtures_dir().join("bert");
    assert_eq!(Pinning::of(local.to_str().unwrap()), Pinning::Local);
    assert_eq!(hub_id(&pinned), Some("tiny-org/bert"));
    assert_eq!(hub_id(local.to_str().unwrap()), None);

    // A commit the cache does not hold is not replaced by another.
    let absent = format!("tiny-org/bert@{}", "f".repeat(40));
    let error = Checkpoint::resolve_with(&absent, &hub)
        .unwrap_err()
        .to_string();
    assert!(error.contains("HF_HUB_OFFLINE"), "{error}");
}

#[test]
fn a_renamed_repository_is_found_in_a_cache_filled_under_either_name() {
    let (legacy, canonical) = HUB_RENAMES[0];
    assert_eq!(
        (legacy, canonical),
        ("bert-base-uncased", "google-bert/bert-base-uncased")
    );
    let folder = |id: &str| format!("models--{}", id.replace('/', "--"));
    for (filled, asked) in [(legacy, canonical), (canonical, legacy)] {
        let cache = tempfile::tempdir().unwrap();
        let dir = snapshot(cache.path(), &folder(filled), OLD);
        main_is(cache.path(), &folder(filled), OLD);
        let hub = offline(cache.path());
        for spec in [asked.to_string(), format!("{asked}@{OLD}")] {
            let found = Checkpoint::resolve_with(&spec, &hub).unwrap();
            assert_eq!(
                found.config,
                dir.join("config.json"),
                "{spec} in {filled}'s cache"
            );
            assert_eq!(found.revision.as_deref(), Some(OLD));
            assert_eq!(found.name, spec);
        }
    }
    // Not found under either: the error names both folders it looked in.
    let cache = tempfile::tempdir().unwrap();
    let error = Checkpoint::resolve_with(canonical, &offline(cache.path()))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!("`{}`", folder(canonical)))
            && error.contains(&format!("`{}`", folder(legacy))),
        "{error}"
    );
}
