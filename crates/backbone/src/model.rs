//! A masked-LM backbone of any supported family: encoder + MLM head, with the paper's
//! rescaling of the decoder projection.

use std::path::{Path, PathBuf};

use burn::module::{Param, Parameter};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoint;
use crate::error::{BackboneError, Result};
use crate::family::{Encoder, EncoderModel, ModelConfig};
use crate::head::MlmHead;
use crate::hf_names::TensorNames;
use crate::tokenizer::TextTokenizer;
use crate::weights::Weights;
use lsr_compute::launches::{self, Label, Region};
use lsr_compute::matmul::blas::with_bf16_operands;
use lsr_compute::precision::Precision;

/// How `rescale_mlm_head` treats a decoder tied to the word embeddings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

/// A factor k the MLM head is divided by: finite and > 0. It is checked where it is made (a
/// config or a matrix read, the command line parsed), so what takes a `Scale` never checks again.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Scale(f64);

impl Scale {
    /// k = 1: the head as the checkpoint has it.
    pub const ONE: Self = Self(1.0);

    /// `k`, if finite and > 0.
    pub fn new(k: f64) -> Result<Self> {
        if k.is_finite() && k > 0.0 {
            Ok(Self(k))
        } else {
            Err(BackboneError::InvalidScale(k))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Scale {
    type Error = BackboneError;

    fn try_from(k: f64) -> Result<Self> {
        Self::new(k)
    }
}

impl From<Scale> for f64 {
    fn from(k: Scale) -> f64 {
        k.0
    }
}

impl std::str::FromStr for Scale {
    type Err = String;

    /// A k written on the command line.
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let k = text.parse::<f64>().map_err(|e| e.to_string())?;
        Self::new(k).map_err(|e| e.to_string())
    }
}

impl std::fmt::Display for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What lsr's rescaling did to a checkpoint's head, kept beside an exported `config.json`
/// ([`RESCALE_RECORD`], which transformers ignores), so that a second division is not silent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RescaleRecord {
    /// The product of every k the head was divided by.
    pub k: Scale,
    pub mode: RescaleMode,
    /// The lsr version that divided it.
    pub lsr_version: String,
    /// Where it was read from (for messages); not written.
    #[serde(skip)]
    pub source: PathBuf,
}

/// The file beside `config.json` that records a rescaled head.
pub const RESCALE_RECORD: &str = "lsr-rescale.json";

impl RescaleRecord {
    /// The record in checkpoint directory `dir`, if it has one.
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(RESCALE_RECORD);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(BackboneError::io(&path, e)),
        };
        let record: Self = crate::config::parse_json(&path, &text)?;
        Ok(Some(Self {
            source: path,
            ..record
        }))
    }
}

#[derive(Module, Debug)]
pub struct MaskedLm {
    pub encoder: Encoder,
    pub head: MlmHead,
    /// The arithmetic of `forward`; the parameters are f32 either way.
    #[module(skip)]
    pub precision: Precision,
    /// Whether (and by what k) lsr has divided this head, from the checkpoint or since loading.
    #[module(skip)]
    pub rescaled: Option<RescaleRecord>,
}

impl MaskedLm {
    pub fn load(config: &ModelConfig, weights: &Weights) -> Result<Self> {
        let (encoder, head) = (config.family.load)(config, weights)?;
        Ok(Self {
            encoder,
            head,
            precision: Precision::F32,
            rescaled: None,
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
        self.in_precision(|| {
            let hidden = self.encoder.forward(ids, mask, dtype);
            self.head.forward(hidden, self.tied_param(), dtype)
        })
    }

    /// `f` with products from bf16-rounded operands under `bf16` (the CPU BLAS route's scope).
    fn in_precision<R>(&self, f: impl FnOnce() -> R) -> R {
        with_bf16_operands(self.precision == Precision::Bf16, f)
    }

    /// `max` over tokens of the MLM logits per vocabulary tile (`MlmHead::forward_max`, whose
    /// `max` takes a tile's `[B·L, width]` rows): `[B, vocab]` without the `[B, L, vocab]`
    /// logits ever held at once, in inference and in training.
    pub fn forward_max(
        &self,
        ids: Tensor<2, Int>,
        mask: Tensor<2, Int>,
        tile: usize,
        max: impl Fn(Tensor<2>) -> Tensor<2>,
    ) -> Tensor<2> {
        let dtype = self.precision.compute();
        launches::enter(&self.device(), Label::forward(Region::Embedding));
        self.in_precision(|| {
            let hidden = self.encoder.forward(ids, mask, dtype);
            self.head
                .forward_max(hidden, self.tied_param(), dtype, tile, max)
        })
    }

    /// The device the parameters live on.
    pub fn device(&self) -> Device {
        self.head.dense.weight.val().device()
    }

    fn tied_embeddings(&self) -> Tensor<2> {
        self.tied_param().val()
    }

    fn tied_param(&self) -> &Param<Tensor<2>> {
        &self.encoder.word_embeddings().weight
    }

    /// The decoder projection `[vocab, dim]` the logits are computed with.
    pub fn decoder_matrix(&self) -> Tensor<2> {
        self.head.decoder_param(self.tied_param()).val()
    }

    pub fn is_tied(&self) -> bool {
        self.head.decoder.is_none()
    }

    /// Divides the decoder projection by `k` (the vocabulary bias and the transform are left
    /// alone). A tied decoder is divided in place, on the shared matrix, unless `mode` unties.
    /// A head lsr has already divided is refused (k = 1 aside): see
    /// [`MaskedLm::rescale_mlm_head_again`].
    pub fn rescale_mlm_head(self, k: Scale, mode: RescaleMode) -> Result<Self> {
        if let Some(record) = &self.rescaled
            && record.k != Scale::ONE
            && k != Scale::ONE
        {
            return Err(BackboneError::AlreadyRescaled {
                path: record.source.clone(),
                recorded: record.k.get(),
                asked: k.get(),
            });
        }
        self.rescale_mlm_head_again(k, mode)
    }

    /// As [`MaskedLm::rescale_mlm_head`], dividing a head lsr has already divided once more;
    /// the record keeps the product of the two k.
    pub fn rescale_mlm_head_again(mut self, k: Scale, mode: RescaleMode) -> Result<Self> {
        let unties = mode == RescaleMode::Untie && self.is_tied();
        if k == Scale::ONE && !unties {
            return Ok(self);
        }
        let previous = self.rescaled.take();
        let untied = unties
            || previous
                .as_ref()
                .is_some_and(|r| r.mode == RescaleMode::Untie);
        self.rescaled = Some(RescaleRecord {
            k: Scale::new(k.get() * previous.as_ref().map_or(1.0, |r| r.k.get()))?,
            mode: RescaleMode::untie_if(untied),
            lsr_version: env!("CARGO_PKG_VERSION").to_string(),
            source: previous.map(|r| r.source).unwrap_or_default(),
        });
        if mode == RescaleMode::Untie && self.is_tied() {
            let copy = self.tied_embeddings().div_scalar(k.get()).detach();
            self.head.decoder = Some(Param::from_tensor(copy));
            return Ok(self);
        }
        Ok(self.map_decoder(|w| w.div_scalar(k.get())))
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
    /// The files its weights were read from (none for random weights).
    pub weight_files: Vec<PathBuf>,
    /// Their SHA-256, once asked for ([`Backbone::content_id`]): an evaluation of many data
    /// sets asks once per data set.
    weights_sha256: std::sync::OnceLock<String>,
}

impl Backbone {
    /// Resolves `spec` (directory or HF id), reads config, weights and tokenizer onto `device`.
    /// Texts are truncated to `max_length` tokens (capped by the model's positions). The model
    /// drops where its config says, on an autodiff device only (`layers::Dropout`).
    pub fn load(spec: &str, device: &Device, max_length: usize) -> Result<Self> {
        Self::load_with_dropout(spec, device, max_length, true)
    }

    /// As [`Backbone::load`]; `dropout: false` builds the model without any dropout.
    pub fn load_with_dropout(
        spec: &str,
        device: &Device,
        max_length: usize,
        dropout: bool,
    ) -> Result<Self> {
        let checkpoint = Checkpoint::resolve(spec)?;
        let mut config = ModelConfig::read(&checkpoint.config)?;
        config.dropout = dropout;
        // The tokenizer first: a vocabulary that does not fit the embeddings says more about a
        // mismatched checkpoint than the weight errors that would follow.
        let tokenizer = TextTokenizer::from_file(
            &checkpoint.tokenizer,
            config.dims.pad_token_id,
            config.dims.vocab_size,
            max_length.min(config.dims.max_positions),
        )?;
        let weights = Weights::open(&checkpoint.weights, device)?;
        let model = MaskedLm {
            rescaled: RescaleRecord::read(checkpoint.config.parent().unwrap_or(Path::new(".")))?,
            ..MaskedLm::load(&config, &weights)?
        };
        let tensor_names = TensorNames::collect(&model, &weights.origins());
        Ok(Self {
            checkpoint,
            config,
            model,
            tokenizer,
            tensor_names,
            weight_files: weights.files(),
            weights_sha256: std::sync::OnceLock::new(),
        })
    }

    /// The model by its content rather than by where it lies: the SHA-256 of its weight files
    /// (of their digests, in name order, when there are several) and the k its head is divided
    /// by (its own record's and lsr's since loading), as `sha256:<hex> k=<k>[ untied]`. Two
    /// copies of one model in two directories have one identity, and files that record it
    /// (vectors) come out the same.
    pub fn content_id(&self) -> Result<String> {
        let sha256 = match self.weights_sha256.get() {
            Some(sha256) => sha256,
            None => {
                let digest = |path: &PathBuf| Ok(lsr_files::digest::FileDigest::of(path)?.sha256);
                let digests = (self.weight_files.iter().map(digest)).collect::<Result<Vec<_>>>()?;
                let sha256 = match digests.as_slice() {
                    [one] => one.clone(),
                    several => lsr_files::digest::sha256_hex(several.join("\n").as_bytes()),
                };
                self.weights_sha256.get_or_init(|| sha256)
            }
        };
        let rescaled = self.model.rescaled.as_ref();
        let k = rescaled.map_or(1.0, |r| r.k.get());
        let untied = rescaled.is_some_and(|r| r.mode == RescaleMode::Untie);
        Ok(format!(
            "sha256:{sha256} k={k}{}",
            if untied { " untied" } else { "" }
        ))
    }
}
