//! SPLADE on top of a backbone: max pooling of `log(1 + relu(logits))`, sparse vectors, and
//! the encoder that rescales the head once and encodes texts in batches.

use burn::prelude::*;
use burn::tensor::DType;
use lsr_backbone::{Backbone, MaskedLm, RescaleMode, Result, Scale, TextTokenizer};
use lsr_compute::launches::{self, DeviceLimits, Label, Region, mark};

/// The non-zero terms of one text, sorted by weight descending (ties by term id).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SparseVector {
    pub terms: Vec<(u32, f32)>,
}

impl SparseVector {
    /// From a dense row of vocabulary weights.
    pub fn from_dense(weights: &[f32]) -> Self {
        let mut terms: Vec<(u32, f32)> = weights
            .iter()
            .enumerate()
            .filter(|(_, w)| **w != 0.0)
            .map(|(id, w)| (id as u32, *w))
            .collect();
        terms.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Self { terms }
    }

    pub fn len(&self) -> usize {
        self.terms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// SPLADE max pooling: `max_t mask_t · log(1 + relu(logits_t))`, `[B, L, V]` → `[B, V]`, in f32.
/// `log(1 + relu(·))` is non-decreasing, so it commutes with the max: the max is taken over the
/// raw logits of the text's tokens (pads pushed to −1e30) and only the `[B, V]` result is
/// transformed. Equal to the textbook order, with two fewer passes over the largest tensor of
/// the model, forward and backward.
pub fn splade_pool(logits: Tensor<3>, mask: Tensor<2, Int>) -> Tensor<2> {
    let [batch, len, vocab] = logits.dims();
    let rows = logits.reshape([batch * len, vocab]);
    activate(max_over_tokens(rows, pad_offsets(&mask), batch))
}

/// Bytes of f32 logits a vocabulary tile of the head may hold on a GPU: 1 GiB, 8,192 terms at
/// the recipe's 128 × 256 document tokens (BERT's whole vocabulary would take 4 GB there), the
/// whole vocabulary of an encoding batch of 32 × 128 tokens. A tile is a product, a max and a
/// piece of a concatenation: each tile fewer is a few launches fewer.
pub const GPU_TILE_BYTES: u64 = 1 << 30;

/// Vocabulary terms per tile on the host, where a launch costs nothing: 8,192, as before tiles
/// were sized by bytes. Larger tiles only cost memory there: the whole vocabulary at once took
/// encoding's peak from 732 to 1,430 MiB for 1.017× the wall time, and 16,384 terms a training
/// step's from 3,479 to 3,612 MiB (docs/perf-gpu.md, "The head's tiles").
pub const HOST_TILE: usize = 8192;

/// Vocabulary terms per tile of the head for `tokens` token rows on `device`: on a GPU as many
/// as [`GPU_TILE_BYTES`] of f32 logits hold (within the device's largest buffer), in multiples
/// of 256 (so that a tile's decoder rows start on an aligned offset and are a view); on the
/// host [`HOST_TILE`].
pub fn head_tile(tokens: usize, device: &Device) -> usize {
    let Some(gpu) = DeviceLimits::of(device) else {
        return HOST_TILE;
    };
    let bytes = GPU_TILE_BYTES.min(gpu.max_buffer_bytes);
    let terms = bytes / (tokens.max(1) as u64 * 4);
    (terms as usize / 256 * 256).max(256)
}

/// SPLADE weights `[B, V]` of a batch, in encoding and in training: [`splade_pool`] of the
/// model's logits, computed over vocabulary tiles of [`head_tile`] terms so that the `[B, L, V]`
/// logits never exist at once, forward or backward (`MlmHead::forward_max`).
pub fn encode_pooled(model: &MaskedLm, ids: Tensor<2, Int>, mask: Tensor<2, Int>) -> Tensor<2> {
    let tile = head_tile(mask.dims().iter().product(), &mask.device());
    encode_pooled_tiles(model, ids, mask, tile)
}

/// [`encode_pooled`] with tiles of `tile` terms.
pub fn encode_pooled_tiles(
    model: &MaskedLm,
    ids: Tensor<2, Int>,
    mask: Tensor<2, Int>,
    tile: usize,
) -> Tensor<2> {
    let batch = mask.dims()[0];
    // Made once for every tile, before the encoder (made between a tile's product and the add,
    // it ended the product's fused block), and counted with the embeddings, the mask's region;
    // added to a tile's logits in its product's kernel.
    launches::enter(&mask.device(), Label::forward(Region::Embedding));
    let pads = pad_offsets(&mask);
    let pooled = model.forward_max(ids, mask, tile, |rows| {
        max_over_tokens(rows, pads.clone(), batch)
    });
    // The head's exit: in a backward pass, the next pass's head follows this one's embeddings.
    mark(activate(pooled), Region::Head)
}

/// `[B·L, 1]`, f32: 0 for a text's tokens, −1e30 for its pads, so that a max over the tokens of
/// logits plus offsets is the max over the text's own.
fn pad_offsets(mask: &Tensor<2, Int>) -> Tensor<2> {
    let tokens = mask.dims().iter().product();
    (mask.clone().float() - 1.0)
        .mul_scalar(1e30)
        .reshape([tokens, 1])
}

/// `max_t` of `[B·L, W]` rows of logits plus each token's offset, per text: `[B, W]`, in f32.
/// The max of bf16 logits is one of them, so widening first changes no value, and it keeps the
/// max and its argmax (which a backward pass records) in outputs of one element size. In bf16 on
/// CUDA, burn 0.22.1's max-with-indices gave its bf16 values and i32 indices rows of different
/// pitch and autotune found no kernel that ran (`docs/gpu/2026-12-04.md`). The widening and the
/// offsets come before the reshape, which would end the product's fused block.
fn max_over_tokens(rows: Tensor<2>, offsets: Tensor<2>, batch: usize) -> Tensor<2> {
    lsr_compute::norm::group_max(rows.cast(DType::F32), offsets, batch)
}

/// `log(1 + relu(·))` in f32.
fn activate(pooled: Tensor<2>) -> Tensor<2> {
    pooled.cast(DType::F32).clamp_min(0.0).log1p()
}

/// A backbone whose MLM head has been rescaled by `k` (what it records:
/// `backbone.model.rescaled`), encoding texts into sparse vectors.
pub struct SpladeEncoder {
    pub backbone: Backbone,
}

impl SpladeEncoder {
    /// Applies `rescale_mlm_head(k, mode)`; k = 1 leaves the head as the checkpoint has it.
    pub fn new(mut backbone: Backbone, k: Scale, mode: RescaleMode) -> Result<Self> {
        backbone.model = backbone.model.rescale_mlm_head(k, mode)?;
        Ok(Self { backbone })
    }

    /// Dense `[B, V]` SPLADE weights for one batch of texts.
    pub fn encode_dense(&self, texts: &[&str]) -> Result<Tensor<2>> {
        self.encode_dense_with(&self.backbone.tokenizer, texts)
    }

    /// As [`Self::encode_dense`], tokenising with `tokenizer` (e.g. another max length).
    pub fn encode_dense_with(
        &self,
        tokenizer: &TextTokenizer,
        texts: &[&str],
    ) -> Result<Tensor<2>> {
        let batch = tokenizer.encode_batch(texts)?;
        let device = self.backbone.model.device();
        let (ids, mask) = batch.to_tensors(&device);
        Ok(encode_pooled(&self.backbone.model, ids, mask))
    }

    /// Sparse vectors for `texts`, encoded `batch_size` at a time so that the `[B, L, V]`
    /// logits stay bounded.
    pub fn encode(&self, texts: &[&str], batch_size: usize) -> Result<Vec<SparseVector>> {
        self.encode_with(&self.backbone.tokenizer, texts, batch_size)
    }

    /// As [`Self::encode`], tokenising with `tokenizer`.
    pub fn encode_with(
        &self,
        tokenizer: &TextTokenizer,
        texts: &[&str],
        batch_size: usize,
    ) -> Result<Vec<SparseVector>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(batch_size.max(1)) {
            let dense = self.encode_dense_with(tokenizer, chunk)?;
            let [_, vocab] = dense.dims();
            let values = dense
                .into_data()
                .try_into_vec::<f32>()
                .expect("SPLADE weights are f32");
            vectors.extend(values.chunks(vocab).map(SparseVector::from_dense));
        }
        Ok(vectors)
    }

    /// The token string of a term id, if the tokenizer has one (the embedding matrix can be
    /// larger than the vocabulary).
    pub fn token(&self, id: u32) -> Option<String> {
        self.backbone.tokenizer.token(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use itertools::Itertools;

    #[test]
    fn pooling_ignores_padded_tokens_and_negative_logits() {
        let device = Device::flex();
        // One text of two tokens plus one pad; vocabulary of three terms.
        let logits = Tensor::<3>::from_data(
            TensorData::new(
                vec![1.0f32, -2.0, 0.0, 3.0, -1.0, 0.5, 100.0, 100.0, 100.0],
                [1, 3, 3],
            ),
            &device,
        );
        let mask = Tensor::<2, Int>::from_data(TensorData::new(vec![1i64, 1, 0], [1, 3]), &device);
        let pooled = splade_pool(logits, mask)
            .into_data()
            .try_into_vec::<f32>()
            .unwrap();
        let expected = [4.0f32.ln(), 0.0, 1.5f32.ln()];
        for (got, want) in pooled.iter().zip_eq(expected) {
            assert!((got - want).abs() < 1e-6, "{pooled:?} != {expected:?}");
        }
    }

    /// A family's parity fixture on `device` and two texts tokenised by it.
    fn fixture_batch(family: &str, device: &Device) -> (Backbone, Tensor<2, Int>, Tensor<2, Int>) {
        let dir = lsr_backbone::reference::fixtures_dir().join(family);
        let backbone = Backbone::load(dir.to_str().unwrap(), device, 32).unwrap();
        let batch = backbone
            .tokenizer
            .encode_batch(&["boil an egg", "the capital of france is paris"])
            .unwrap();
        let (ids, mask) = batch.to_tensors(device);
        (backbone, ids, mask)
    }

    /// On a GPU a tile's f32 logits stay within the budget and the largest buffer, in multiples
    /// of 256 terms and at least 256; the host's tiles are of a fixed size.
    #[test]
    fn a_head_tile_holds_its_budget_of_logits() {
        let flex = Device::flex();
        assert_eq!(head_tile(32 * 128, &flex), HOST_TILE);
        assert_eq!(head_tile(128 * 256, &flex), HOST_TILE);
        for device in lsr_compute::test_devices().into_iter().skip(1) {
            let largest = DeviceLimits::of(&device).expect("a GPU").max_buffer_bytes;
            assert_eq!(head_tile(1 << 30, &device), 256);
            for tokens in [8 * 32, 32 * 128, 128 * 256] {
                let tile = head_tile(tokens, &device);
                assert_eq!(tile % 256, 0);
                let bytes = (tile * tokens * 4) as u64;
                assert!(
                    bytes <= GPU_TILE_BYTES.min(largest),
                    "{tokens} tokens: {tile}"
                );
            }
        }
    }

    #[test]
    fn tiled_encoding_equals_pooling_the_whole_logits() {
        let device = Device::flex();
        let (backbone, ids, mask) = fixture_batch("modernbert", &device);
        let model = &backbone.model;
        let whole = splade_pool(model.forward(ids.clone(), mask.clone()), mask.clone());
        // 7 does not divide the vocabulary: the last tile is shorter.
        let tiled = encode_pooled_tiles(model, ids, mask, 7);
        assert_eq!(tiled.dims(), whole.dims());
        let (a, b): (Vec<f32>, Vec<f32>) = (
            whole.into_data().try_into_vec().unwrap(),
            tiled.into_data().try_into_vec().unwrap(),
        );
        for (x, y) in a.iter().zip_eq(&b) {
            assert!((x - y).abs() <= 1e-6, "{x} vs {y}");
        }
    }

    /// Training pools through the tiled head: the same weights and the same gradients (with
    /// respect to the head's transform, its decoder, tied or not, and its vocabulary bias) as
    /// pooling the whole `[B, L, V]` logits, for a family with a vocabulary bias and its own
    /// decoder (BERT) and one with neither (ModernBERT) on flex, and BERT on `LSR_TEST_DEVICE`:
    /// there every family's backward compiles its own kernels (on Mesa's software Vulkan, most of
    /// this test's time), and BERT's head has all three parameters.
    #[test]
    fn tiled_pooling_has_the_gradients_of_pooling_the_whole_logits() {
        use lsr_backbone::EncoderModel;
        let mut devices = lsr_compute::test_devices().into_iter();
        let flex = devices.next().expect("flex comes first");
        let cases = [(flex.clone(), "bert"), (flex, "modernbert")]
            .into_iter()
            .chain(devices.map(|device| (device, "bert")));
        for (device, family) in cases {
            let device = device.autodiff();
            let (backbone, ids, mask) = fixture_batch(family, &device);
            let model = &backbone.model;
            // Dropout acts on a device that records gradients: both passes draw the same masks.
            lsr_compute::dropout::seed(&device, 7);
            let whole = splade_pool(model.forward(ids.clone(), mask.clone()), mask.clone());
            lsr_compute::dropout::seed(&device, 7);
            let tiled = encode_pooled_tiles(model, ids, mask, 7);
            let [rows, vocab] = whole.dims();
            // A loss that weighs every term differently, so that a gradient sent to the wrong
            // term shows.
            let weights: Vec<f32> = (0..rows * vocab).map(|i| (i as f32 * 0.37).sin()).collect();
            let weights = Tensor::<2>::from_data(TensorData::new(weights, [rows, vocab]), &device);
            let grads = [whole, tiled].map(|pooled| {
                let values: Vec<f32> = pooled.clone().into_data().try_into_vec().unwrap();
                (values, (pooled * weights.clone()).sum().backward())
            });
            let close = |a: &[f32], b: &[f32], what: &str| {
                assert_eq!(a.len(), b.len(), "{family} {what}");
                let scale = a.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-6);
                for (x, y) in a.iter().zip(b) {
                    assert!((x - y).abs() <= 1e-5 * scale, "{family} {what}: {x} vs {y}");
                }
            };
            close(&grads[0].0, &grads[1].0, "weights");
            let grad = |param: &burn::module::Param<Tensor<2>>, i: usize| -> Vec<f32> {
                param
                    .grad(&grads[i].1)
                    .unwrap()
                    .into_data()
                    .try_into_vec()
                    .unwrap()
            };
            let decoder = match &model.head.decoder {
                Some(decoder) => decoder,
                None => &model.encoder.word_embeddings().weight,
            };
            close(&grad(decoder, 0), &grad(decoder, 1), "decoder");
            close(
                &grad(&model.head.dense.weight, 0),
                &grad(&model.head.dense.weight, 1),
                "dense",
            );
            if let Some(bias) = &model.head.bias {
                let grad = |i: usize| -> Vec<f32> {
                    bias.grad(&grads[i].1)
                        .unwrap()
                        .into_data()
                        .try_into_vec()
                        .unwrap()
                };
                close(&grad(0), &grad(1), "vocabulary bias");
            }
        }
    }

    #[test]
    fn sparse_vector_from_dense_drops_zeros_and_sorts() {
        let vector = SparseVector::from_dense(&[0.0, 0.5, 2.0, 0.0, 0.5]);
        assert_eq!(vector.terms, vec![(2, 2.0), (1, 0.5), (4, 0.5)]);
    }
}
