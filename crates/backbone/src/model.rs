//! A masked-LM backbone of any supported family: encoder + MLM head, with the paper's
//! rescaling of the decoder projection.

use burn::module::{Param, Parameter};
use burn::prelude::*;

use crate::checkpoint::Checkpoint;
use crate::config::ModelConfig;
use crate::error::{BackboneError, Result};
use crate::family::{Encoder, EncoderModel};
use crate::head::MlmHead;
use crate::hf_names::TensorNames;
use crate::precision::Precision;
use crate::tokenizer::TextTokenizer;
use crate::weights::Weights;

/// How `rescale_mlm_head` treats a decoder tied to the word embeddings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RescaleMode {
    /// Divide the shared matrix, keeping the tie (the paper's reading): the input embeddings
    /// are divided too.
    #[default]
    Shared,
    /// Give the head its own copy of the matrix and divide only that (an ablation).
    Untie,
}

impl RescaleMode {
    /// The mode of an `untie` flag (configs and the command line).
    pub fn untie_if(untie: bool) -> Self {
        if untie { Self::Untie } else { Self::Shared }
    }
}

/// The one rule for a rescale factor: finite and > 0.
pub fn check_scale(k: f64) -> Result<()> {
    if k.is_finite() && k > 0.0 {
        Ok(())
    } else {
        Err(BackboneError::InvalidScale(k))
    }
}

#[derive(Module, Debug)]
pub struct MaskedLm {
    pub encoder: Encoder,
    pub head: MlmHead,
    /// The arithmetic of `forward`; the parameters are f32 either way.
    #[module(skip)]
    pub precision: Precision,
}

impl MaskedLm {
    pub fn load(config: &ModelConfig, weights: &Weights) -> Result<Self> {
        let (encoder, head) = (config.family.load)(config, weights)?;
        Ok(Self {
            encoder,
            head,
            precision: Precision::F32,
        })
    }

    /// The same model computing in `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// MLM logits `[B, L, vocab]` for right-padded ids and their attention mask, in the
    /// compute dtype of the model's precision (bf16 under `bf16-mixed`).
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Int>) -> Tensor<3> {
        let dtype = self.precision.compute();
        let hidden = self.encoder.forward(ids, mask, dtype);
        self.head.forward(hidden, self.tied_embeddings(), dtype)
    }

    /// `reduce` of the MLM logits per vocabulary tile (`MlmHead::forward_reduced`): `[B, vocab]`
    /// without the `[B, L, vocab]` logits ever held at once. For inference.
    pub fn forward_reduced(
        &self,
        ids: Tensor<2, Int>,
        mask: Tensor<2, Int>,
        tile: usize,
        reduce: impl Fn(Tensor<3>) -> Tensor<2>,
    ) -> Tensor<2> {
        let dtype = self.precision.compute();
        let hidden = self.encoder.forward(ids, mask, dtype);
        self.head
            .forward_reduced(hidden, self.tied_embeddings(), dtype, tile, reduce)
    }

    fn tied_embeddings(&self) -> Tensor<2> {
        self.encoder.word_embeddings().weight.val()
    }

    /// The decoder projection `[vocab, dim]` the logits are computed with.
    pub fn decoder_matrix(&self) -> Tensor<2> {
        self.head.decoder_or(self.tied_embeddings())
    }

    pub fn is_tied(&self) -> bool {
        self.head.decoder.is_none()
    }

    /// Divides the decoder projection by `k` (the vocabulary bias and the transform are left
    /// alone). A tied decoder is divided in place, on the shared matrix, unless `mode` unties.
    pub fn rescale_mlm_head(mut self, k: f64, mode: RescaleMode) -> Result<Self> {
        check_scale(k)?;
        if mode == RescaleMode::Untie && self.is_tied() {
            let copy = self.tied_embeddings().div_scalar(k).detach();
            self.head.decoder = Some(Param::from_tensor(copy));
            return Ok(self);
        }
        Ok(self.map_decoder(|w| w.div_scalar(k)))
    }

    /// Replaces the decoder projection by `f` of it, on the shared matrix when tied.
    pub(crate) fn map_decoder(mut self, f: impl FnOnce(Tensor<2>) -> Tensor<2>) -> Self {
        // The result must be a new leaf: on an autodiff device, `f(w)` would be a node of a
        // graph whose gradient flows back to the old tensor, not to the parameter.
        let f = |w: Tensor<2>| Parameter::set_require_grad(f(w).detach(), true);
        match self.head.decoder.take() {
            Some(decoder) => self.head.decoder = Some(decoder.map(f)),
            None => {
                let embeddings = self.encoder.word_embeddings_mut();
                embeddings.weight = embeddings.weight.clone().map(f);
            }
        }
        self
    }
}

/// A checkpoint loaded for use: its files, config, model and tokenizer.
pub struct Backbone {
    pub checkpoint: Checkpoint,
    pub config: ModelConfig,
    pub model: MaskedLm,
    pub tokenizer: TextTokenizer,
    /// The HF name of each parameter, for writing the model back as a checkpoint.
    pub tensor_names: TensorNames,
}

impl Backbone {
    /// Resolves `spec` (directory or HF id), reads config, weights and tokenizer onto `device`.
    /// Texts are truncated to `max_length` tokens (capped by the model's positions).
    pub fn load(spec: &str, device: &Device, max_length: usize) -> Result<Self> {
        let checkpoint = Checkpoint::resolve(spec)?;
        let config = ModelConfig::read(&checkpoint.config)?;
        // The tokenizer first: a vocabulary that does not fit the embeddings says more about a
        // mismatched checkpoint than the weight errors that would follow.
        let tokenizer = TextTokenizer::from_file(
            &checkpoint.tokenizer,
            config.dims.pad_token_id,
            config.dims.vocab_size,
            max_length.min(config.dims.max_positions),
        )?;
        let weights = Weights::open(&checkpoint.weights, device)?;
        let model = MaskedLm::load(&config, &weights)?;
        let tensor_names = TensorNames::collect(&model, &weights.origins());
        Ok(Self {
            checkpoint,
            config,
            model,
            tokenizer,
            tensor_names,
        })
    }
}
