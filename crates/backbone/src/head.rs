//! The MLM head as one concept across families: a transform (dense, activation, LayerNorm),
//! a decoder matrix `[vocab, dim]` (tied to the word embeddings or held by the head), and a
//! vocabulary bias where the architecture has one. `logits = norm(act(dense(h))) · decoderᵀ +
//! bias`.

use burn::module::Param;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::DType;

use crate::error::{BackboneError, Result};
use crate::layers::Activation;
use crate::weights::{Init, Weights};
use lsr_compute::block::block;
use lsr_compute::launches::{Region, mark};
use lsr_compute::norm::LayerNorm;
use lsr_compute::norm::{RowVector, add_rows, row_vector};
use lsr_compute::precision::{linear, matmul_transposed, param_in};

/// The HF names of one family's head tensors, from the checkpoint root.
pub struct HeadNames {
    pub dense: &'static str,
    pub norm: &'static str,
    /// The bias most files store (`cls.predictions.bias`).
    pub bias: &'static str,
    /// The decoder's own bias; when a file holds it, HF's forward uses it (ALBERT v2 stores a
    /// zero one beside a non-zero `predictions.bias`).
    pub decoder_bias: &'static str,
    /// Only read when the config unties the decoder.
    pub decoder_weight: &'static str,
}

/// Sizes and switches of a head.
#[derive(Clone, Copy, Debug)]
pub struct HeadShape {
    /// Width of the encoder output.
    pub hidden: usize,
    /// Width of the decoder input (ALBERT: the 128-dim embedding size).
    pub embedding: usize,
    pub vocab: usize,
    pub eps: f64,
    pub activation: Activation,
    pub dense_bias: bool,
    pub norm_bias: bool,
    /// ModernBERT's `decoder_bias: false` has no vocabulary bias.
    pub vocab_bias: bool,
    pub tied: bool,
}

impl HeadShape {
    /// A head whose dense, norm and vocabulary bias all have biases (every family but
    /// ModernBERT).
    pub fn biased(
        hidden: usize,
        embedding: usize,
        vocab: usize,
        eps: f64,
        activation: Activation,
        tied: bool,
    ) -> Self {
        Self {
            hidden,
            embedding,
            vocab,
            eps,
            activation,
            dense_bias: true,
            norm_bias: true,
            vocab_bias: true,
            tied,
        }
    }
}

#[derive(Module, Debug)]
pub struct MlmHead {
    pub dense: Linear,
    pub norm: LayerNorm,
    /// `[vocab, dim]`, PyTorch's layout. `None`: tied, the encoder's word embeddings are used.
    pub decoder: Option<Param<Tensor<2>>>,
    /// `None` where the architecture has no vocabulary bias: not a parameter that training
    /// could move and export would drop.
    pub bias: Option<Param<Tensor<1>>>,
    #[module(skip)]
    pub activation: Activation,
    /// Where the family stores an untied decoder (`cls.predictions.decoder.weight`), for
    /// writing back a head that `rescale_mlm_head(k, Untie)` untied.
    #[module(skip)]
    pub untied_decoder_name: String,
}

impl MlmHead {
    pub fn load(w: &Weights, names: &HeadNames, shape: HeadShape) -> Result<Self> {
        if !w.contains(&format!("{}.weight", names.dense)) {
            return Err(BackboneError::NoMlmHead {
                path: w.describe_source(""),
                name: format!("{}.weight", names.dense),
            });
        }
        let bias_name = if w.contains_stored(names.decoder_bias) {
            tracing::debug!("vocabulary bias from `{}`", names.decoder_bias);
            names.decoder_bias
        } else {
            names.bias
        };
        let decoder = if shape.tied {
            None
        } else {
            let value = w.tensor(names.decoder_weight, [shape.vocab, shape.embedding])?;
            Some(w.param(names.decoder_weight, value, false))
        };
        let bias = if shape.vocab_bias {
            let value = w.tensor_init(bias_name, [shape.vocab], Init::Zeros)?;
            Some(w.param(bias_name, value, false))
        } else {
            None
        };
        Ok(Self {
            dense: w.linear(names.dense, shape.hidden, shape.embedding, shape.dense_bias)?,
            norm: w.layer_norm(names.norm, shape.embedding, shape.eps, shape.norm_bias)?,
            decoder,
            bias,
            activation: shape.activation,
            untied_decoder_name: names.decoder_weight.to_string(),
        })
    }

    /// The transform alone: `norm(act(dense(h)))`, `[B, L, dim]`, the dense layer and the
    /// activation in `dtype`, the norm in f32.
    pub fn transform(&self, hidden: Tensor<3>, dtype: DType) -> Tensor<3> {
        self.norm
            .forward(self.activation.forward(linear(&self.dense, hidden, dtype)))
    }

    /// Logits `[B, L, vocab]` in `dtype`; `tied_embeddings` is the encoder's word-embedding
    /// matrix, used when the decoder is tied.
    pub fn forward(
        &self,
        hidden: Tensor<3>,
        tied_embeddings: &Param<Tensor<2>>,
        dtype: DType,
    ) -> Tensor<3> {
        let decoder = param_in(self.decoder_param(tied_embeddings), dtype);
        let vocab = decoder.dims()[0];
        let [batch, len, _] = hidden.dims();
        let flat = self.flat_transform(hidden, dtype);
        let bias = self.bias_row(dtype);
        let logits = matmul_transposed(flat, decoder, dtype);
        add_bias(logits, bias).reshape([batch, len, vocab])
    }

    /// `max` of the logits over each text's tokens, `[B, vocab]`, computed over vocabulary
    /// tiles of at most `tile` terms: the `[B, L, vocab]` logits never exist at once (at 128 ×
    /// 256 tokens they are 4 GB in f32, more than a WGPU buffer holds), in training neither: a
    /// max keeps only its argmax for the backward pass, so each tile's logits are freed once
    /// reduced, and the gradient flows back through the argmax positions alone. `max` takes a
    /// tile's logits as `[B·L, width]` rows, straight from the product (what it does to them
    /// first, such as adding each token's offset, runs in the product's kernel), and must return
    /// their maximum over each text's tokens, `[B, width]` (masked or not). The vocabulary bias,
    /// constant over tokens, is added after the max, once for the whole vocabulary: exact
    /// (`max(x + b) = max(x) + b`, and rounding is monotone), and its gradient a sum over `B`
    /// rows instead of `B · L`.
    pub fn forward_max(
        &self,
        hidden: Tensor<3>,
        tied_embeddings: &Param<Tensor<2>>,
        dtype: DType,
        tile: usize,
        max: impl Fn(Tensor<2>) -> Tensor<2>,
    ) -> Tensor<2> {
        // Cast whole, then sliced: one cast of the decoder, not one per tile.
        let decoder = param_in(self.decoder_param(tied_embeddings), dtype);
        let vocab = decoder.dims()[0];
        let flat = self.flat_transform(hidden, dtype);
        let mut tiles: Vec<Tensor<2>> = (0..vocab)
            .step_by(tile.max(1))
            .map(|start| {
                let rows = block(decoder.clone(), 0, start..(start + tile).min(vocab));
                max(matmul_transposed(flat.clone(), rows, dtype))
            })
            .collect();
        let pooled = match tiles.len() {
            1 => tiles.remove(0),
            _ => Tensor::cat(tiles, 1),
        };
        add_bias(pooled, self.bias_row(dtype))
    }

    /// The transform of `[B, L, H]` hidden states as `[B·L, dim]` rows in `dtype`.
    fn flat_transform(&self, hidden: Tensor<3>, dtype: DType) -> Tensor<2> {
        let hidden = mark(hidden, Region::Head);
        let [batch, len, _] = hidden.dims();
        let transformed = self.transform(hidden, dtype);
        let dim = transformed.dims()[2];
        transformed.reshape([batch * len, dim]).cast(dtype)
    }

    /// The vocabulary bias as a row in `dtype` (in [`Self::forward`] made before the product
    /// it is added to, see [`row_vector`]); `None` where the head has no vocabulary bias.
    fn bias_row(&self, dtype: DType) -> Option<RowVector> {
        let bias = self.bias.as_ref()?;
        Some(row_vector(param_in(bias, dtype), dtype))
    }

    /// The decoder's parameter: its own, or the tied word embeddings.
    pub fn decoder_param<'a>(
        &'a self,
        tied_embeddings: &'a Param<Tensor<2>>,
    ) -> &'a Param<Tensor<2>> {
        self.decoder.as_ref().unwrap_or(tied_embeddings)
    }
}

/// `rows + bias` for rows of logits (or their maxima), in `rows`' dtype.
fn add_bias(rows: Tensor<2>, bias: Option<RowVector>) -> Tensor<2> {
    match bias {
        Some(bias) => add_rows(rows, bias),
        None => rows,
    }
}
