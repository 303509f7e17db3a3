//! `rescale_mlm_head(k)`: the algebra of the logits, the tie, and the reported norms.

use burn::prelude::*;
use itertools::Itertools;
use lsr_backbone::EncoderModel;
use lsr_backbone::reference::{fixture_texts, fixtures_dir};
use lsr_backbone::{Backbone, HeadStats, RescaleMode, Scale};

fn load(name: &str) -> Backbone {
    let (_, max_length) = fixture_texts().unwrap();
    Backbone::load(
        fixtures_dir().join(name).to_str().unwrap(),
        &Device::flex(),
        max_length,
    )
    .unwrap()
}

/// Logits minus the vocabulary bias, on the non-padding tokens of the fixture batch.
fn centred_logits(backbone: &Backbone) -> Vec<f32> {
    let (texts, _) = fixture_texts().unwrap();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batch = backbone.tokenizer.encode_batch(&texts).unwrap();
    let device = Device::flex();
    let (ids, mask) = batch.to_tensors(&device);
    let bias = backbone
        .model
        .head
        .bias
        .as_ref()
        .expect("a vocabulary bias");
    let logits = (backbone.model.forward(ids, mask) - bias.val().unsqueeze::<3>())
        .into_data()
        .try_into_vec::<f32>()
        .unwrap();
    let vocab = logits.len() / batch.mask.len();
    batch
        .mask
        .iter()
        .enumerate()
        .filter(|(_, m)| **m == 1)
        .flat_map(|(t, _)| logits[t * vocab..(t + 1) * vocab].to_vec())
        .collect()
}

fn assert_scaled(name: &str, original: &[f32], rescaled: &[f32], k: f32, tolerance: f32) {
    let scale = original.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let worst = original
        .iter()
        .zip_eq(rescaled)
        .fold(0.0f32, |m, (a, b)| m.max((a / k - b).abs()));
    assert!(
        worst <= tolerance * scale,
        "{name}: max |logit/k − rescaled| = {worst} (scale {scale})"
    );
}

#[test]
fn untied_rescale_divides_the_logits_exactly() {
    for name in lsr_backbone::FAMILIES.iter().map(|f| f.name) {
        let original = centred_logits(&load(name));
        let mut backbone = load(name);
        backbone.model = backbone
            .model
            .rescale_mlm_head(Scale::new(4.0).unwrap(), RescaleMode::Untie)
            .unwrap();
        assert!(
            !backbone.model.is_tied(),
            "{name}: Untie must give the head its own matrix"
        );
        assert_scaled(name, &original, &centred_logits(&backbone), 4.0, 1e-5);
    }
}

#[test]
fn shared_rescale_keeps_the_tie_and_divides_embeddings_too() {
    let mut backbone = load("bert");
    let embeddings = backbone.model.encoder.word_embeddings().weight.val();
    backbone.model = backbone
        .model
        .rescale_mlm_head(Scale::new(8.0).unwrap(), RescaleMode::Shared)
        .unwrap();
    assert!(backbone.model.is_tied());
    let after = backbone.model.encoder.word_embeddings().weight.val();
    let diff = (embeddings.div_scalar(8.0) - after.clone())
        .abs()
        .max()
        .into_scalar::<f32>();
    assert!(diff < 1e-7, "embeddings not divided by k: {diff}");
    let decoder_diff = (backbone.model.decoder_matrix() - after)
        .abs()
        .max()
        .into_scalar::<f32>();
    assert_eq!(
        decoder_diff, 0.0,
        "the decoder must be the embedding matrix itself"
    );
}

/// ModernBERT normalises its embeddings with a LayerNorm before the encoder, so dividing the
/// shared matrix leaves the encoder's input unchanged up to the norm's epsilon (1e-5 against
/// an embedding variance of ~0.01 after division here: ~1e-3 relative) and the logits are
/// divided by k.
#[test]
fn shared_rescale_of_a_layernormed_embedding_divides_the_logits() {
    for name in ["modernbert", "ettin"] {
        let original = centred_logits(&load(name));
        let mut backbone = load(name);
        backbone.model = backbone
            .model
            .rescale_mlm_head(Scale::new(2.0).unwrap(), RescaleMode::Shared)
            .unwrap();
        assert_scaled(name, &original, &centred_logits(&backbone), 2.0, 5e-3);
    }
}

#[test]
fn an_untied_checkpoint_decoder_is_divided_on_its_own() {
    let mut backbone = load("bert");
    backbone.model = backbone
        .model
        .rescale_mlm_head(Scale::new(1.0).unwrap(), RescaleMode::Untie)
        .unwrap();
    let original = centred_logits(&backbone);
    let embeddings = backbone.model.encoder.word_embeddings().weight.val();
    backbone.model = backbone
        .model
        .rescale_mlm_head(Scale::new(16.0).unwrap(), RescaleMode::Shared)
        .unwrap();
    assert_scaled(
        "bert untied",
        &original,
        &centred_logits(&backbone),
        16.0,
        1e-5,
    );
    let unchanged = (embeddings - backbone.model.encoder.word_embeddings().weight.val())
        .abs()
        .max();
    assert_eq!(unchanged.into_scalar::<f32>(), 0.0);
}

#[test]
fn norms_report_one_kth_of_the_row_norms() {
    let before = HeadStats::compute(&load("modernbert")).unwrap();
    let mut backbone = load("modernbert");
    backbone.model = backbone
        .model
        .rescale_mlm_head(Scale::new(16.0).unwrap(), RescaleMode::Shared)
        .unwrap();
    let after = HeadStats::compute(&backbone).unwrap();
    for (b, a) in [
        (before.row_norm_mean, after.row_norm_mean),
        (before.row_norm_min, after.row_norm_min),
        (before.row_norm_max, after.row_norm_max),
        (before.frobenius_norm, after.frobenius_norm),
    ] {
        assert!((b / 16.0 - a).abs() <= 1e-5 * b, "{b} / 16 != {a}");
    }
    assert_eq!(before.bias_mean, after.bias_mean);
    assert!(after.logit_std < before.logit_std);
}

#[test]
fn a_rescaled_head_is_a_trainable_leaf_on_an_autodiff_device() {
    use burn::optim::GradientsParams;
    let device = Device::flex().autodiff();
    for mode in [RescaleMode::Shared, RescaleMode::Untie] {
        let dir = lsr_backbone::reference::fixtures_dir().join("bert");
        let backbone = Backbone::load(dir.to_str().unwrap(), &device, 32).unwrap();
        let model = backbone
            .model
            .rescale_mlm_head(Scale::new(4.0).unwrap(), mode)
            .unwrap();
        let batch = backbone
            .tokenizer
            .encode_batch(&["sparse retrieval"])
            .unwrap();
        let (ids, mask) = batch.to_tensors(&device);
        let gradients =
            GradientsParams::from_grads(model.forward(ids, mask).sum().backward(), &model);
        let decoder = model
            .head
            .decoder
            .as_ref()
            .map_or(model.encoder.word_embeddings().weight.id, |decoder| {
                decoder.id
            });
        assert!(
            gradients.get::<2>(decoder).is_some(),
            "{mode:?}: the decoder has no gradient"
        );
    }
}
