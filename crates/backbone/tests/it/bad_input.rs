//! Broken checkpoints give errors that name the file and the field or tensor, never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use lsr_backbone::reference::fixtures_dir;
use lsr_backbone::{Backbone, BackboneError, Checkpoint, HubSettings, Scale};
use safetensors::{Dtype, SafeTensors};

/// A writable copy of a fixture checkpoint.
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir(&dir).unwrap();
    for entry in std::fs::read_dir(fixtures_dir().join(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    (tmp, dir)
}

fn load(dir: &Path) -> Result<Backbone, BackboneError> {
    Backbone::load(dir.to_str().unwrap(), &Device::flex(), 32)
}

fn error_of(dir: &Path) -> String {
    match load(dir) {
        Ok(_) => panic!("{} loaded although it is broken", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(config.as_object_mut().unwrap());
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

type RawTensors = BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>;

fn edit_weights(dir: &Path, edit: impl FnOnce(&mut RawTensors)) {
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: RawTensors = file
        .iter()
        .map(|(name, view)| {
            (
                name.to_string(),
                (view.dtype(), view.shape().to_vec(), view.data().to_vec()),
            )
        })
        .collect();
    edit(&mut tensors);
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(name, (dtype, shape, data))| {
            let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap();
            (name.clone(), view)
        })
        .collect();
    safetensors::serialize_to_file(views, None, &path).unwrap();
}

const TENSOR: &str = "bert.encoder.layer.1.output.dense.weight";

#[test]
fn missing_config_field_names_file_and_field() {
    let (_tmp, dir) = copy_fixture("bert");
    edit_config(&dir, |c| {
        c.remove("hidden_size");
    });
    let error = error_of(&dir);
    assert!(
        error.contains("config.json") && error.contains("hidden_size"),
        "{error}"
    );
}

#[test]
fn non_numeric_config_field_names_the_field() {
    let (_tmp, dir) = copy_fixture("bert");
    edit_config(&dir, |c| {
        c.insert("num_attention_heads".into(), "four".into());
    });
    let error = error_of(&dir);
    assert!(
        error.contains("config.json") && error.contains("num_attention_heads"),
        "{error}"
    );
}

#[test]
fn unknown_model_type_is_refused() {
    let (_tmp, dir) = copy_fixture("bert");
    edit_config(&dir, |c| {
        c.insert("model_type".into(), "gpt2".into());
    });
    let error = error_of(&dir);
    assert!(
        error.contains("config.json") && error.contains("`gpt2`"),
        "{error}"
    );
}

#[test]
fn missing_tensor_is_named() {
    let (_tmp, dir) = copy_fixture("bert");
    edit_weights(&dir, |t| {
        t.remove(TENSOR);
    });
    let error = error_of(&dir);
    assert!(
        error.contains("model.safetensors") && error.contains(TENSOR),
        "{error}"
    );
    assert!(error.contains("missing"), "{error}");
}

#[test]
fn wrong_shape_is_named_with_both_shapes() {
    let (_tmp, dir) = copy_fixture("bert");
    edit_weights(&dir, |t| {
        let entry = t.get_mut(TENSOR).unwrap();
        entry.1 = vec![entry.1[1], entry.1[0]];
    });
    let error = error_of(&dir);
    assert!(
        error.contains(TENSOR) && error.contains("[64, 32]") && error.contains("[32, 64]"),
        "{error}"
    );
}

#[test]
fn wrong_dtype_is_named() {
    let (_tmp, dir) = copy_fixture("bert");
    edit_weights(&dir, |t| {
        t.get_mut(TENSOR).unwrap().0 = Dtype::I32;
    });
    let error = error_of(&dir);
    assert!(error.contains(TENSOR) && error.contains("I32"), "{error}");
}

#[test]
fn truncated_safetensors_is_reported() {
    let (_tmp, dir) = copy_fixture("bert");
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let error = error_of(&dir);
    assert!(
        error.contains("model.safetensors") && error.contains("not a readable"),
        "{error}"
    );
}

#[test]
fn garbage_safetensors_is_reported() {
    let (_tmp, dir) = copy_fixture("bert");
    std::fs::write(
        dir.join("model.safetensors"),
        b"\xff\xff\xff\xff\xff\xff\xff\x7fnot json",
    )
    .unwrap();
    let error = error_of(&dir);
    assert!(
        error.contains("model.safetensors") && error.contains("not a readable"),
        "{error}"
    );
}

#[test]
fn tokenizer_larger_than_embeddings_is_refused() {
    let (_tmp, dir) = copy_fixture("bert");
    std::fs::copy(
        fixtures_dir().join("roberta/tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    let error = error_of(&dir);
    assert!(
        error.contains("tokenizer.json") && error.contains("exceeds"),
        "{error}"
    );
}

#[test]
fn bare_encoder_without_mlm_head_is_refused() {
    let error = error_of(&fixtures_dir().join("bert-no-head"));
    assert!(
        error.contains("no masked-LM head") && error.contains("cls.predictions"),
        "{error}"
    );
}

/// A k is checked where it is made, from a number or from text; nothing that takes a `Scale`
/// checks it again.
#[test]
fn a_scale_is_finite_and_positive() {
    for k in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        let error = Scale::new(k).unwrap_err();
        assert!(
            matches!(error, BackboneError::InvalidScale(_)),
            "k = {k}: {error}"
        );
        let message = k.to_string().parse::<Scale>().unwrap_err();
        assert!(message.contains("finite and > 0"), "k = {k}: {message}");
    }
    assert_eq!("16".parse::<Scale>().unwrap().get(), 16.0);
    assert!("sixteen".parse::<Scale>().is_err());
}

#[test]
fn offline_hub_id_not_in_cache_says_what_to_download() {
    let cache = tempfile::tempdir().unwrap();
    let hub = HubSettings {
        cache_dir: cache.path().to_path_buf(),
        offline: true,
    };
    let error = Checkpoint::resolve_with("answerdotai/ModernBERT-base", &hub)
        .unwrap_err()
        .to_string();
    assert!(error.contains("HF_HUB_OFFLINE"), "{error}");
    assert!(
        error.contains("models--answerdotai--ModernBERT-base"),
        "{error}"
    );
    assert!(error.contains(cache.path().to_str().unwrap()), "{error}");
}

/// One rule for every command: a name that cannot be a hub id is a local path, and a missing
/// one is "no such directory"; a name that can be one is looked up on the hub.
#[test]
fn a_name_that_cannot_be_a_hub_id_is_a_local_directory() {
    let cache = tempfile::tempdir().unwrap();
    let hub = HubSettings {
        cache_dir: cache.path().to_path_buf(),
        offline: true,
    };
    let error = |spec: &str| {
        Checkpoint::resolve_with(spec, &hub)
            .unwrap_err()
            .to_string()
    };
    for spec in [
        "./models/bert",
        "/nonexistent/bert",
        "data/synth/models/bert",
        "../bert",
        "~/bert",
        "models/bert/",
        "-bert",
        "bert..base",
        "org/bert@",
    ] {
        let message = error(spec);
        assert!(
            message.contains(&format!("{spec}: no such directory"))
                && !message.contains("HF_HUB_OFFLINE"),
            "{spec}: {message}"
        );
    }
    for spec in [
        "bert-base-uncased",
        "answerdotai/ModernBERT-base@main",
        "a.b/c_d",
    ] {
        let message = error(spec);
        assert!(message.contains("HF_HUB_OFFLINE"), "{spec}: {message}");
    }
    let file = fixtures_dir().join("bert/config.json");
    let message = error(file.to_str().unwrap());
    assert!(message.contains("found a file"), "{message}");
}

#[test]
fn hub_id_resolves_from_the_standard_cache_layout_offline() {
    let cache = tempfile::tempdir().unwrap();
    let repo = cache.path().join("models--tiny--bert");
    let snapshot = repo.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), "0123abcd").unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(fixtures_dir().join("bert").join(file), snapshot.join(file)).unwrap();
    }
    let hub = HubSettings {
        cache_dir: cache.path().to_path_buf(),
        offline: true,
    };
    let checkpoint = Checkpoint::resolve_with("tiny/bert", &hub).unwrap();
    assert_eq!(checkpoint.weights, snapshot.join("model.safetensors"));
    assert_eq!(checkpoint.revision.as_deref(), Some("0123abcd"));

    // A commit, as the Python libraries cache it (no ref file), and a tag with a ref file.
    let pinned = Checkpoint::resolve_with("tiny/bert@0123abcd", &hub).unwrap();
    assert_eq!(pinned.revision.as_deref(), Some("0123abcd"));
    assert_eq!(pinned.name, "tiny/bert@0123abcd");
    std::fs::write(repo.join("refs").join("v1"), "0123abcd").unwrap();
    let tagged = Checkpoint::resolve_with("tiny/bert@v1", &hub).unwrap();
    assert_eq!(tagged.weights, snapshot.join("model.safetensors"));
    let error = Checkpoint::resolve_with("tiny/bert@fedcba98", &hub)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`tiny/bert@fedcba98`") && error.contains("--revision fedcba98"),
        "{error}"
    );
}
