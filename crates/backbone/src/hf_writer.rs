//! A trained model written back as a Hugging Face checkpoint: the family's own
//! `model.safetensors` layout under the names the loader recorded (`hf_names`), its config and
//! tokenizer, so that transformers (and anything built on it) loads a model trained here.

use std::collections::HashMap;
use std::path::Path;

use burn::prelude::*;

use crate::checkpoint::Checkpoint;
use crate::error::{BackboneError, Result};
use crate::hf_names::{TensorNames, parameter_values};
use crate::model::{MaskedLm, RESCALE_RECORD};

/// Writes `model` as a Hugging Face checkpoint in `out`: `model.safetensors` (f32, the
/// family's tensor names; a tied decoder stays implicit, as HF stores it), `config.json` (the
/// source's, with `tie_word_embeddings: false` if the head was untied), the tokenizer files and,
/// for a head lsr divided, its `RescaleRecord`.
/// Everything is written into a sibling temporary directory renamed into place, and an
/// existing non-empty `out` is refused, so a finished export is never half-overwritten.
pub fn write_checkpoint(
    model: &MaskedLm,
    names: &TensorNames,
    source: &Checkpoint,
    out: &Path,
) -> Result<()> {
    write_checkpoint_with(model, names, source, out, |_| Ok(()))
}

/// As [`write_checkpoint`], with `extra` adding files to the folder before it is renamed into
/// place (the packaging of a trained SPLADE model).
pub fn write_checkpoint_with(
    model: &MaskedLm,
    names: &TensorNames,
    source: &Checkpoint,
    out: &Path,
    extra: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let mut config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&source.config).map_err(|e| BackboneError::io(&source.config, e))?,
    )
    .map_err(|e| BackboneError::config(&source.config, e.to_string()))?;
    if !model.is_tied() {
        config["tie_word_embeddings"] = serde_json::Value::Bool(false);
    }
    let tokenizer_dir = source.tokenizer.parent().unwrap_or(Path::new("."));
    write_directory(out, |staging| {
        write_safetensors(model, names, &staging.join("model.safetensors"))?;
        lsr_files::write_json(&staging.join("config.json"), &config)?;
        if let Some(record) = &model.rescaled {
            // Through a JSON value, whose keys are sorted, as every record lsr wrote before.
            let record = serde_json::to_value(record).expect("a record serialises");
            lsr_files::write_json(&staging.join(RESCALE_RECORD), &record)?;
        }
        for file in [
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
        ] {
            let from = tokenizer_dir.join(file);
            if file == "tokenizer.json" || from.exists() {
                // Read and written rather than copied: a copy would take the source's mode.
                let bytes = std::fs::read(&from).map_err(|e| BackboneError::io(&from, e))?;
                lsr_files::write_bytes(&staging.join(file), &bytes)?;
            }
        }
        extra(staging)
    })
}

/// A new checkpoint directory `out`, written whole (`lsr_files::write_directory`); an existing
/// non-empty `out` is refused, never replaced.
pub(crate) fn write_directory(out: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if out
        .read_dir()
        .is_ok_and(|mut entries| entries.next().is_some())
    {
        return Err(BackboneError::Checkpoint(format!(
            "{}: exists and is not empty; choose another output directory",
            out.display()
        )));
    }
    lsr_files::write_directory(out, fill)
}

/// `model.safetensors`: f32 tensors under the family's names, PyTorch layout. The layout
/// `safetensors::serialize_to_file` writes (tensors by name, the header padded to 8 bytes),
/// streamed through `lsr_files` rather than that function's own temporary file, whose mode
/// (0600) would ignore the umask.
pub(crate) fn write_safetensors(model: &MaskedLm, names: &TensorNames, path: &Path) -> Result<()> {
    use safetensors::tensor::{Metadata, TensorInfo};
    let mut tensors = hf_tensors(model, names)?;
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let mut offset = 0;
    let infos = tensors
        .iter()
        .map(|(name, data)| {
            let start = offset;
            offset += data.as_bytes().len();
            let info = TensorInfo {
                dtype: safetensors::Dtype::F32,
                shape: data.shape().to_vec(),
                data_offsets: (start, offset),
            };
            (name.clone(), info)
        })
        .collect();
    let format = HashMap::from([("format".to_string(), "pt".to_string())]);
    let cannot = |what: String| BackboneError::Checkpoint(format!("{}: {what}", path.display()));
    let metadata = Metadata::new(Some(format), infos).map_err(|e| cannot(e.to_string()))?;
    let mut header = serde_json::to_vec(&metadata).map_err(|e| cannot(e.to_string()))?;
    header.resize(header.len().next_multiple_of(8), b' ');
    Ok(lsr_files::write_atomically(path, |out| {
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        for (_, data) in &tensors {
            out.write_all(data.as_bytes())?;
        }
        Ok(())
    })?)
}

/// The model's parameters under their HF names, in PyTorch layout.
fn hf_tensors(model: &MaskedLm, names: &TensorNames) -> Result<Vec<(String, TensorData)>> {
    let mut tensors = Vec::new();
    for (path, data) in parameter_values(model, names) {
        let data = data.convert::<f32>();
        match names.get(&path) {
            Some(origin) => tensors.extend(origin.split(data)),
            // An untied copy made by `rescale_mlm_head(k, Untie)`.
            None if path == "head.decoder" => {
                tensors.push((model.head.untied_decoder_name.clone(), data))
            }
            None => {
                return Err(BackboneError::Checkpoint(format!(
                    "parameter `{path}` has no Hugging Face name; it was not read from the \
                     checkpoint"
                )));
            }
        }
    }
    Ok(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Backbone, RescaleMode, Scale};
    use crate::reference::fixtures_dir;
    use itertools::Itertools;

    fn logits(model: &MaskedLm, backbone: &Backbone) -> Vec<f32> {
        let batch = backbone
            .tokenizer
            .encode_batch(&["sparse retrieval", "the capital of france is paris"])
            .unwrap();
        let (ids, mask) = batch.to_tensors(&Device::flex());
        model
            .forward(ids, mask)
            .into_data()
            .try_into_vec::<f32>()
            .unwrap()
    }

    /// Writes `model` (of `backbone`) into `<out>/exported` and loads it back.
    fn round_trip(
        model: &MaskedLm,
        backbone: &Backbone,
        out: &Path,
    ) -> (std::path::PathBuf, Backbone) {
        let target = out.join("exported");
        write_checkpoint(model, &backbone.tensor_names, &backbone.checkpoint, &target).unwrap();
        let reloaded = Backbone::load(target.to_str().unwrap(), &Device::flex(), 32).unwrap();
        (target, reloaded)
    }

    #[test]
    fn a_written_checkpoint_reloads_to_the_same_logits_tied_or_untied() {
        for (family, mode) in [
            ("bert", RescaleMode::Shared),
            ("bert", RescaleMode::Untie),
            ("modernbert", RescaleMode::Shared),
            ("albert", RescaleMode::Untie),
        ] {
            let dir = fixtures_dir().join(family);
            let backbone = Backbone::load(dir.to_str().unwrap(), &Device::flex(), 32).unwrap();
            let model = backbone
                .model
                .clone()
                .rescale_mlm_head(Scale::new(4.0).unwrap(), mode)
                .unwrap();
            let out = tempfile::tempdir().unwrap();
            let (target, reloaded) = round_trip(&model, &backbone, out.path());
            assert_eq!(
                reloaded.model.is_tied(),
                mode == RescaleMode::Shared,
                "{family}"
            );
            let (want, got) = (
                logits(&model, &backbone),
                logits(&reloaded.model, &reloaded),
            );
            let max_diff = want
                .iter()
                .zip_eq(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(max_diff == 0.0, "{family} {mode:?}: max |Δ| {max_diff}");
            let record = reloaded
                .model
                .rescaled
                .clone()
                .expect("the export records k");
            assert_eq!((record.k.get(), record.mode), (4.0, mode), "{family}");

            let again = write_checkpoint(
                &model,
                &backbone.tensor_names,
                &backbone.checkpoint,
                &target,
            );
            assert!(again.unwrap_err().to_string().contains("not empty"));
        }
    }

    #[test]
    fn a_recorded_rescale_is_not_repeated_silently() {
        let dir = fixtures_dir().join("bert");
        let backbone = Backbone::load(dir.to_str().unwrap(), &Device::flex(), 32).unwrap();
        assert_eq!(backbone.model.rescaled, None);
        let model = backbone
            .model
            .clone()
            .rescale_mlm_head(Scale::new(16.0).unwrap(), RescaleMode::Shared)
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let (_, exported) = round_trip(&model, &backbone, out.path());
        let message = exported
            .model
            .clone()
            .rescale_mlm_head(Scale::new(16.0).unwrap(), RescaleMode::Shared)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(crate::model::RESCALE_RECORD) && message.contains("k = 16"),
            "{message}"
        );
        let same = exported
            .model
            .clone()
            .rescale_mlm_head(Scale::new(1.0).unwrap(), RescaleMode::Shared)
            .unwrap();
        assert_eq!(same.rescaled.map(|r| r.k.get()), Some(16.0));
        let twice = exported
            .model
            .rescale_mlm_head_again(Scale::new(2.0).unwrap(), RescaleMode::Shared)
            .unwrap();
        assert_eq!(twice.rescaled.map(|r| r.k.get()), Some(32.0));
    }
}
